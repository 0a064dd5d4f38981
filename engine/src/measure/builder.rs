//! The Builder seam: kernel source + harness -> executable.
//!
//! [`LocalBuilder`] compiles with the target's C compiler, several builds at a time, each in a
//! fresh temporary directory that lives as long as the [`Built`] it produced.
//!
//! The harness is the same for every candidate of a task (it depends only on the arguments),
//! so it is compiled once to an object file, cached by its source and flags, and each
//! candidate compiles only its kernel and links (measured in
//! `docs/experiments/2026-11-21-harness-object-per-task.md`). Where the object cannot be
//! built, the kernel and harness are compiled together as one program.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tempfile::TempDir;

use super::child::{describe_status, run_bounded, truncate};
use super::harness::{harness_source, kernel_declarations, program_source};
use super::{BuildInput, ErrorCode, MeasureOptions, MeasureResult};
use crate::target::Target;

/// Compiler messages kept in an error: the first errors say what is wrong.
const MAX_COMPILER_MSG: usize = 4096;

/// A built executable. Dropping it removes its directory.
#[derive(Debug)]
pub struct Built {
    pub exe: PathBuf,
    /// Wall seconds the build took.
    pub build_s: f64,
    /// Keeps the build directory (and so `exe`) alive.
    _dir: Option<TempDir>,
}

impl Built {
    /// An executable built elsewhere (a remote builder's download); `dir`, when given, is
    /// removed with the `Built`.
    pub fn from_parts(exe: PathBuf, build_s: f64, dir: Option<TempDir>) -> Self {
        Built {
            exe,
            build_s,
            _dir: dir,
        }
    }
}

pub trait Builder: Send + Sync {
    /// Builds every input; results in input order. An error is a full `MeasureResult`
    /// (CompileError, CompileTimeout, ...) ready to be recorded.
    fn build(&self, inputs: &[BuildInput]) -> Vec<Result<Built, MeasureResult>>;

    /// [`Builder::build`], telling `built` of each input (its index) as its build ends, in
    /// whatever order builds end: progress while a batch builds. A builder that only has its
    /// results at the end tells them all then.
    fn build_each(
        &self,
        inputs: &[BuildInput],
        built: &(dyn Fn(usize) + Sync),
    ) -> Vec<Result<Built, MeasureResult>> {
        let results = self.build(inputs);
        (0..results.len()).for_each(built);
        results
    }
}

/// Builds with a local C compiler.
#[derive(Debug, Clone)]
pub struct LocalBuilder {
    pub compiler: String,
    pub flags: Vec<String>,
    /// Libraries and link flags, placed after the source (`-lm` always follows).
    pub libs: Vec<String>,
    /// Builds run at once.
    pub jobs: usize,
    pub timeout_s: f64,
    /// Where build directories go; the system temp dir when `None`.
    pub workdir: Option<PathBuf>,
    /// Compiled harness objects by (harness source, compiler, flags), shared by clones; `None`
    /// remembers a harness that did not compile on its own.
    harness_objs: Arc<Mutex<HarnessCache>>,
}

#[derive(Debug, Default)]
struct HarnessCache {
    dir: Option<TempDir>,
    objs: HashMap<String, Option<PathBuf>>,
}

impl LocalBuilder {
    pub fn new(target: &Target, opts: &MeasureOptions) -> Self {
        LocalBuilder {
            compiler: target.compiler.clone(),
            flags: target.compile_flags(),
            libs: target.libraries(),
            jobs: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            timeout_s: opts.build_timeout_s,
            workdir: None,
            harness_objs: Arc::default(),
        }
    }

    /// The harness object for these arguments, compiled on first need (under the cache's
    /// lock: parallel builds of one task wait for it rather than compile it twice).
    fn harness_object(&self, harness: &str) -> Option<PathBuf> {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(harness.as_bytes());
        h.update(self.compiler.as_bytes());
        for f in &self.flags {
            h.update([0]);
            h.update(f.as_bytes());
        }
        let key: String = h.finalize()[..12]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let mut cache = self.harness_objs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(o) = cache.objs.get(&key) {
            return o.clone();
        }
        if cache.dir.is_none() {
            let mut tmp = tempfile::Builder::new();
            tmp.prefix("tunehub-harness-");
            cache.dir = match &self.workdir {
                Some(w) => tmp.tempdir_in(w),
                None => tmp.tempdir(),
            }
            .ok();
        }
        let obj = cache.dir.as_ref().and_then(|d| {
            compile_object(
                &self.compiler,
                &self.flags,
                d.path(),
                &key,
                harness,
                Duration::from_secs_f64(self.timeout_s.max(0.001)),
            )
        });
        cache.objs.insert(key, obj.clone());
        obj
    }

    pub fn with_jobs(mut self, n: usize) -> Self {
        self.jobs = n.max(1);
        self
    }

    pub fn with_workdir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.workdir = Some(dir.into());
        self
    }

    fn build_one(&self, input: &BuildInput) -> Result<Built, MeasureResult> {
        let mut tmp = tempfile::Builder::new();
        tmp.prefix("tunehub-build-");
        let dir = match &self.workdir {
            Some(w) => tmp.tempdir_in(w),
            None => tmp.tempdir(),
        }
        .map_err(|e| {
            MeasureResult::error(
                ErrorCode::UnknownError,
                format!("cannot create a build directory: {e}"),
            )
        })?;
        let harness_obj = self.harness_object(&harness_source(&input.args));
        let source = match harness_obj {
            Some(_) => format!(
                "{}\n{}",
                input.kernel_source,
                kernel_declarations(&input.args)
            ),
            None => program_source(&input.kernel_source, &input.args),
        };
        std::fs::write(dir.path().join("kernel.c"), source).map_err(|e| {
            MeasureResult::error(
                ErrorCode::UnknownError,
                format!("cannot write kernel.c: {e}"),
            )
        })?;

        // The driver places -fopenmp's libgomp at the link; libraries go after the source.
        let mut cmd = Command::new(&self.compiler);
        cmd.args(&self.flags)
            .args(["-o", "kernel", "kernel.c"])
            .args(harness_obj.iter())
            .args(&self.libs)
            .arg("-lm")
            .current_dir(dir.path());
        let timeout = Duration::from_secs_f64(self.timeout_s.max(0.001));
        let fail = |code, msg: String, build_s: f64| MeasureResult {
            build_s,
            ..MeasureResult::error(code, msg)
        };
        let out = match run_bounded(&mut cmd, timeout, 64 << 10) {
            Ok(o) => o,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(fail(
                    ErrorCode::CompileError,
                    format!(
                        "compiler `{}` not found: is it installed and on PATH?",
                        self.compiler
                    ),
                    0.0,
                ));
            }
            Err(e) => {
                return Err(fail(
                    ErrorCode::CompileError,
                    format!("cannot run compiler `{}`: {e}", self.compiler),
                    0.0,
                ));
            }
        };
        if out.timed_out {
            return Err(fail(
                ErrorCode::CompileTimeout,
                format!(
                    "compilation ran past the {} s limit and was killed",
                    self.timeout_s
                ),
                out.wall_s,
            ));
        }
        let exe = dir.path().join("kernel");
        if !out.status.is_some_and(|s| s.success()) || !exe.is_file() {
            let msg = String::from_utf8_lossy(&out.stderr);
            let msg = if msg.trim().is_empty() {
                format!(
                    "compiler `{}` failed ({}) without a message",
                    self.compiler,
                    describe_status(out.status)
                )
            } else {
                truncate(&msg, MAX_COMPILER_MSG)
            };
            return Err(fail(ErrorCode::CompileError, msg, out.wall_s));
        }
        Ok(Built {
            exe,
            build_s: out.wall_s,
            _dir: Some(dir),
        })
    }
}

impl Builder for LocalBuilder {
    fn build(&self, inputs: &[BuildInput]) -> Vec<Result<Built, MeasureResult>> {
        self.build_each(inputs, &|_| {})
    }

    fn build_each(
        &self,
        inputs: &[BuildInput],
        built: &(dyn Fn(usize) + Sync),
    ) -> Vec<Result<Built, MeasureResult>> {
        let slots: Vec<Mutex<Option<Result<Built, MeasureResult>>>> =
            inputs.iter().map(|_| Mutex::new(None)).collect();
        let next = AtomicUsize::new(0);
        let workers = self.jobs.max(1).min(inputs.len());
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(input) = inputs.get(i) else { break };
                        let r = self.build_one(input);
                        *slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
                        built(i);
                    }
                });
            }
        });
        slots
            .into_iter()
            .map(|m| {
                m.into_inner()
                    .unwrap_or_else(|p| p.into_inner())
                    .unwrap_or_else(|| {
                        Err(MeasureResult::error(
                            ErrorCode::UnknownError,
                            "build worker died",
                        ))
                    })
            })
            .collect()
    }
}

/// Compiles `source` to `<dir>/<name>.o`; `None` when that fails.
fn compile_object(
    compiler: &str,
    flags: &[String],
    dir: &Path,
    name: &str,
    source: &str,
    timeout: Duration,
) -> Option<PathBuf> {
    let src = dir.join(format!("{name}.c"));
    let obj = dir.join(format!("{name}.o"));
    std::fs::write(&src, source).ok()?;
    let mut cmd = Command::new(compiler);
    cmd.args(flags).arg("-c").arg(&src).arg("-o").arg(&obj);
    let out = run_bounded(&mut cmd, timeout, 64 << 10).ok()?;
    (!out.timed_out && out.status.is_some_and(|s| s.success()) && obj.is_file()).then_some(obj)
}
