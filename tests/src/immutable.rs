//! Files made unwritable under a running process: `chattr +i`, the immutable flag. Root ignores
//! permission bits, and a process keeps writing through a file it opened before a `chmod`;
//! neither ignores this flag. It needs `chattr`, the CAP_LINUX_IMMUTABLE capability (root, and
//! not every container grants it) and a file system that keeps the flag: a test checks
//! `Immutable::available` first (a skip, or a failure under CI=true, as `tools`).

use crate::tools::skip_or_fail;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Files made immutable until `lift` or drop (a failed test's directory can still be removed).
pub struct Immutable {
    paths: Vec<PathBuf>,
}

/// `chattr FLAG` on `paths`: its error output, if it failed.
fn chattr(flag: &str, paths: &[PathBuf]) -> Result<(), String> {
    let out = Command::new("chattr")
        .arg(flag)
        .args(paths)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("chattr does not run: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "chattr {flag} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

impl Immutable {
    /// Whether files in `dir` can be made immutable and writable again here, tried on a scratch
    /// file. If not: under CI=true the test fails; elsewhere `false`, with a note that `test` is
    /// skipped.
    pub fn available(test: &str, dir: &Path) -> bool {
        let scratch = dir.join("chattr-scratch");
        std::fs::write(&scratch, b"x").expect("a scratch file");
        let paths = [scratch.clone()];
        let tried = chattr("+i", &paths).and_then(|()| {
            let refused = std::fs::write(&scratch, b"y").is_err();
            chattr("-i", &paths)?;
            if refused {
                Ok(())
            } else {
                Err("the file stayed writable under chattr +i".into())
            }
        });
        let _ = std::fs::remove_file(&scratch);
        match tried {
            Ok(()) => true,
            Err(why) => {
                skip_or_fail(test, &format!("files cannot be made immutable: {why}"));
                false
            }
        }
    }

    /// Makes `paths` immutable; fails the test if it cannot.
    pub fn set(paths: &[impl AsRef<Path>]) -> Immutable {
        let paths: Vec<PathBuf> = paths.iter().map(|p| p.as_ref().to_path_buf()).collect();
        chattr("+i", &paths).unwrap_or_else(|e| panic!("{e}"));
        Immutable { paths }
    }

    /// Makes them writable again; fails the test if it cannot.
    pub fn lift(mut self) {
        let paths = std::mem::take(&mut self.paths);
        chattr("-i", &paths).unwrap_or_else(|e| panic!("{e}"));
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        if !self.paths.is_empty() {
            let _ = chattr("-i", &self.paths);
        }
    }
}
