//! The built `tunehub-worker` binary runs by itself: nothing from the environment but PATH (the
//! compiler is found there), as a systemd unit or a container starts it on a device.

use std::process::{Command, Output};

fn worker_alone(args: &[&str]) -> Output {
    let path = std::env::var_os("PATH").expect("PATH is set");
    Command::new(env!("CARGO_BIN_EXE_tunehub-worker"))
        .args(args)
        .env_clear()
        .env("PATH", path)
        .output()
        .expect("tunehub-worker starts")
}

fn success(out: &Output) -> String {
    assert!(
        out.status.success(),
        "tunehub-worker failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("UTF-8 output")
}

#[test]
fn the_binary_prints_its_version_with_a_clean_environment() {
    let out = success(&worker_alone(&["--version"]));
    assert_eq!(
        out.trim(),
        format!("tunehub-worker {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn the_binary_describes_this_device_with_a_clean_environment() {
    let out = success(&worker_alone(&["--print-target"]));
    let key = out
        .lines()
        .find_map(|l| l.strip_prefix("key: "))
        .unwrap_or_else(|| panic!("no `key:` line in --print-target:\n{out}"));
    assert!(!key.is_empty());
}
