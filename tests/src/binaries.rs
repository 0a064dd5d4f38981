//! The binaries under test, `tunehub` and `tunehub-worker`, built fresh before first use.
//!
//! Cargo hands a package's tests the paths of that package's own binaries only, so these
//! tests build the two themselves, with the very commands CI and the container images use
//! (`cargo build -p tunehub --bin tunehub`, one package at a time: the same feature
//! resolution, hence the same artifacts, fresh and quick under `cargo test --workspace`), in
//! the target directory and profile these tests were built in. A stale binary beside them is
//! never run as it is.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The `tunehub` command line and server.
pub fn tunehub() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| build("tunehub", "tunehub"))
}

/// The measurement worker.
pub fn tunehub_worker() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| build("tunehub-worker", "tunehub-worker"))
}

/// Builds `bin` of `package` beside this test executable (`<target>/<profile>/deps/..`).
fn build(package: &str, bin: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("a test executable in <target>/<profile>/deps");
    let target_dir = profile_dir.parent().expect("a target directory");
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev",
        Some(other) => other,
        None => panic!("no profile directory in {}", exe.display()),
    };
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "--profile",
            profile,
            "-p",
            package,
            "--bin",
            bin,
        ])
        .arg("--manifest-path")
        .arg(workspace.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir)
        .status()
        .expect("cargo runs");
    assert!(
        status.success(),
        "cargo build -p {package} --bin {bin} failed"
    );
    let path = profile_dir.join(bin);
    assert!(
        path.is_file(),
        "{} is missing after the build",
        path.display()
    );
    path
}
