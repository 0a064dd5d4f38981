//! The built `tunehub` binary runs by itself: no `cargo run`, no library path, nothing from the
//! environment but PATH (XGBoost is linked in statically, see costmodel/xgboost-build.cmake).
//! This is how systemd units and container images start it.

use std::process::{Command, Output};

fn tunehub_alone(args: &[&str]) -> Output {
    let path = std::env::var_os("PATH").expect("PATH is set");
    Command::new(env!("CARGO_BIN_EXE_tunehub"))
        .args(args)
        .env_clear()
        .env("PATH", path)
        .output()
        .expect("tunehub starts")
}

fn success(out: &Output) -> String {
    assert!(
        out.status.success(),
        "tunehub failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("UTF-8 output")
}

#[test]
fn the_binary_prints_its_version_with_a_clean_environment() {
    let out = success(&tunehub_alone(&["--version"]));
    assert_eq!(
        out.trim(),
        format!("tunehub {}", env!("CARGO_PKG_VERSION")),
        "unexpected --version output"
    );
}

#[test]
fn the_binary_lists_the_operator_library_with_a_clean_environment() {
    let out = success(&tunehub_alone(&["ops"]));
    for op in ["matmul", "conv2d_nchw", "softmax"] {
        assert!(out.contains(op), "`tunehub ops` lacks {op}:\n{out}");
    }
}
