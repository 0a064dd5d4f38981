//! The worker's command line. (The worker at work, with a real server, is tested end to end
//! in `tests/tests/fleet.rs`.)

use std::process::Command;

fn worker() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tunehub-worker"))
}

#[test]
fn help_documents_the_toolchain_flags() {
    let out = worker().arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in ["--compiler", "--run-prefix", "--arch"] {
        assert!(help.contains(flag), "--help lacks {flag}:\n{help}");
    }
}

#[test]
fn an_unknown_flag_is_a_usage_error() {
    let out = worker().arg("--no-such-flag").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--no-such-flag"));
}
