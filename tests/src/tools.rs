//! Tools outside the workspace some tests need (the aarch64 cross compiler, qemu-user, a
//! PostgreSQL cluster): where one is missing a test is skipped, with a note, on a developer's
//! machine, and FAILS under CI=true, where `.ci/run` installs them all.

use std::process::{Command, Stdio};

/// Whether the tests run in CI (CI=true): nothing may be skipped there.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Whether `cmd --version` runs and succeeds.
pub fn have(cmd: &str) -> bool {
    Command::new(cmd)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `true` when every one of `cmds` is installed. Otherwise: under CI=true the test fails;
/// elsewhere `false`, with a note that `test` is skipped.
pub fn require(test: &str, cmds: &[&str]) -> bool {
    let missing: Vec<&str> = cmds.iter().copied().filter(|c| !have(c)).collect();
    if missing.is_empty() {
        return true;
    }
    skip_or_fail(test, &format!("{} not installed", missing.join(", ")));
    false
}

/// A test cannot run here because of `why`: under CI=true it fails, elsewhere it says it is
/// skipped.
pub fn skip_or_fail(test: &str, why: &str) {
    assert!(
        !in_ci(),
        "{test}: {why}, and CI must run it (.ci/run installs it)"
    );
    eprintln!("note: {test} skipped: {why}");
}
