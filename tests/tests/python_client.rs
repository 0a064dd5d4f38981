//! The Python client (clients/python) end to end: its pytest suite, against the `tunehub`
//! binary under test (submit, watch, best, the kernels built and compared with numpy, packs,
//! records, TLS).
//!
//! The interpreter is TUNEHUB_TEST_PYTHON: a virtualenv with `pip install
//! './clients/python[test]'` in it (.ci/run makes one). The suite imports the package from
//! clients/python itself, not from the virtualenv's copy, so it always tests this tree's code;
//! the install gives it the dependencies. Unset: skipped with a note, and a failure under
//! CI=true.

use std::path::Path;
use std::process::Command;
use tunehub_tests::{binaries, tools};

#[test]
fn python_client_suite() {
    let Some(python) = std::env::var_os("TUNEHUB_TEST_PYTHON") else {
        tools::skip_or_fail(
            "the Python client's tests",
            "TUNEHUB_TEST_PYTHON (a Python with `pip install './clients/python[test]'`) is not set",
        );
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root");
    let client = root.join("clients/python");
    let status = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(client.join("tests"))
        .current_dir(&client)
        .env("PYTHONPATH", &client)
        // No __pycache__ directories left in the source tree.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("TUNEHUB_BIN", binaries::tunehub())
        .status()
        .unwrap_or_else(|e| panic!("{} does not run: {e}", Path::new(&python).display()));
    assert!(
        status.success(),
        "the Python client's tests failed (pytest's report is above)"
    );
}
