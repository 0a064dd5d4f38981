//! The `tunehub` binary as the command-line tests run it: without the user's configuration,
//! with short timing, and the checks of its two outcomes (success; bad input: exit 2 and one
//! line).

use crate::binaries;
use std::process::{Command, Output};

/// `tunehub ARGS`, without the config file, database or server of the environment.
pub fn tunehub(args: &[&str]) -> Output {
    Command::new(binaries::tunehub())
        .args(args)
        .env_remove("TUNEHUB_CONFIG")
        .env_remove("TUNEHUB_DB")
        .env_remove("TUNEHUB_SERVER")
        .output()
        .expect("tunehub runs")
}

/// Its stdout, after asserting it succeeded (stderr shown if not).
pub fn stdout_ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Exit status 2 and one line on stderr containing every one of `want`.
pub fn bad_input(out: &Output, want: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    for w in want {
        assert!(err.contains(w), "{w:?} not in: {err}");
    }
}

/// Short timing and no noise guard (tests share the machine): they check behaviour, not speed.
pub const MEASURE: [&str; 8] = [
    "--repeat",
    "1",
    "--number",
    "1",
    "--min-repeat-ms",
    "1",
    "--noise-threshold",
    "0",
];

/// `MEASURE` and small batches.
pub const QUICK: [&str; 10] = {
    let m = MEASURE;
    [
        m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], "--batch", "2",
    ]
};
