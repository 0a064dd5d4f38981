//! The shared library: `NAME.c` built as the kernels were measured (the manifest's compiler and
//! flags) plus `-fPIC -shared -Wall -Werror`, into `libNAME.so`; the manifest then names it.

use crate::emit::manifest::Manifest;
use crate::error::CompileError;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The flags besides the kernels' own: a shared library, and no warning let through.
pub const EXTRA_FLAGS: &[&str] = &["-fPIC", "-shared", "-Wall", "-Werror"];

/// Builds `dir`'s model with `compiler` (None: the manifest's) and records the library in the
/// manifest.
pub fn build(
    dir: &Path,
    manifest: &mut Manifest,
    compiler: Option<&str>,
) -> Result<PathBuf, CompileError> {
    let cc = compiler.unwrap_or(&manifest.compiler).to_string();
    let lib = format!("lib{}.so", manifest.name);
    let out = dir.join(&lib);
    let mut tmp = out.clone();
    tmp.as_mut_os_string().push(".tmp");
    let mut cmd = Command::new(&cc);
    cmd.current_dir(dir)
        .args(&manifest.cflags)
        .args(EXTRA_FLAGS)
        .arg("-o")
        .arg(tmp.file_name().expect("a file name"))
        .arg(format!("{}.c", manifest.name))
        .args(&manifest.ldflags);
    let shown = format!("{cmd:?}").replace('"', "");
    let o = cmd.output().map_err(|source| CompileError::Io {
        what: "running the C compiler",
        path: cc.clone(),
        source,
    })?;
    if !o.status.success() {
        let stderr = String::from_utf8_lossy(&o.stderr);
        let lines: Vec<&str> = stderr.lines().take(30).collect();
        return Err(CompileError::Cc {
            path: dir
                .join(format!("{}.c", manifest.name))
                .display()
                .to_string(),
            command: shown,
            stderr: lines.join("\n"),
        });
    }
    std::fs::rename(&tmp, &out).map_err(|source| CompileError::Io {
        what: "writing",
        path: out.display().to_string(),
        source,
    })?;
    manifest.library = Some(lib);
    manifest.write(dir)?;
    Ok(out)
}
