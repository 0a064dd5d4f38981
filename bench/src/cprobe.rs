//! A C probe compiled as the kernels are (the target's compiler, flags and libraries) and run
//! on the kernels' threads: what the roofs (`bandwidth`, `mathroof`) measure with.

use anyhow::{Context, Result, bail};
use std::path::PathBuf;
use std::process::Command;
use tunehub_engine::target::Target;

pub struct CProbe {
    /// Named in messages (`the bandwidth probe`).
    what: &'static str,
    _dir: tempfile::TempDir,
    bin: PathBuf,
    threads: usize,
}

impl CProbe {
    /// Compiles `source` with the target's compiler and flags, linked as a kernel is.
    pub fn compile(target: &Target, what: &'static str, source: &str) -> Result<CProbe> {
        let dir = tempfile::tempdir()?;
        let (src, bin) = (dir.path().join("probe.c"), dir.path().join("probe"));
        std::fs::write(&src, source)?;
        let out = Command::new(&target.compiler)
            .args(target.compile_flags())
            .arg(&src)
            .arg("-o")
            .arg(&bin)
            .args(target.libraries())
            .arg("-lm")
            .output()
            .with_context(|| format!("compiling {what}"))?;
        if !out.status.success() {
            bail!(
                "{what} did not compile: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(CProbe {
            what,
            _dir: dir,
            bin,
            threads: target.cores.max(1),
        })
    }

    /// Runs the probe with the thread count, then `args`; its standard output.
    pub fn run(&self, args: &[String]) -> Result<String> {
        let out = Command::new(&self.bin)
            .arg(self.threads.to_string())
            .args(args)
            .output()
            .with_context(|| format!("running {}", self.what))?;
        if !out.status.success() {
            bail!("{} failed", self.what);
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}
