//! The Runner seam: runs built executables, one at a time, and turns what they print and write
//! into [`MeasureResult`]s.
//!
//! Each executable runs as an isolated child process: its own process group (a timeout kills
//! it with all its OpenMP threads and any children), no core dumps, stdin closed, output
//! captured up to a bound, a wall-clock limit. Its output tensors are checked against the
//! reference before its times count; the calibration around the timing decides whether the
//! machine was quiet (see [`super::noise`]).

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use tempfile::TempDir;
use tracing::{debug, warn};

use super::builder::{Builder, Built};
use super::child::{run_bounded, signal_name, truncate};
use super::harness::{HarnessArgs, HarnessReport};
use super::noise::Calibration;
use super::{BuildInput, ErrorCode, MeasureOptions, MeasureResult, check};
use crate::codegen::ArgSpec;
use crate::target::Target;

/// Captured stdout/stderr per stream: the harness prints a few lines; more is a runaway kernel.
const OUTPUT_CAP: usize = 64 << 10;
/// Stderr kept in a runtime error message (its tail: the last words say what went wrong).
const STDERR_TAIL: usize = 2048;
/// Pause before re-measuring a kernel timed on a slowed machine: lets a burst pass.
const NOISE_RETRY_SLEEP: Duration = Duration::from_millis(200);

/// One executable to run, with what its outputs must be.
pub struct RunInput<'a> {
    pub built: &'a Built,
    pub args: &'a [ArgSpec],
    /// The reference value of each output argument, in argument order.
    pub expected: &'a [Vec<f64>],
    /// OpenMP threads for the kernel and its calibration.
    pub threads: usize,
}

/// Runners block (child processes, sleeps between retries): call them off async executors.
pub trait Runner: Send {
    /// Runs every input; results in input order, each with `build_s` copied from its build.
    fn run(&mut self, inputs: &[RunInput]) -> Vec<MeasureResult>;

    /// [`Runner::run`], telling `each` of every result (its input's index) as soon as it is
    /// known, so that progress shows per candidate rather than per batch. A runner that only
    /// has its results at the end tells them all then.
    fn run_each(
        &mut self,
        inputs: &[RunInput],
        each: &mut dyn FnMut(usize, &MeasureResult),
    ) -> Vec<MeasureResult> {
        let results = self.run(inputs);
        for (i, r) in results.iter().enumerate() {
            each(i, r);
        }
        results
    }
}

/// Runs executables on this machine (or under `run_prefix`, e.g. an emulator).
pub struct LocalRunner {
    options: MeasureOptions,
    run_prefix: Vec<String>,
    calibration: Calibration,
    /// Extra environment for the executables (e.g. OMP_PROC_BIND), empty by default.
    env: Vec<(String, String)>,
    /// Holds the output file of the run in progress.
    scratch: Option<TempDir>,
    /// The best mean cost seen per task (keyed by its arguments and reference values): a
    /// slowed kernel far slower than it is not re-measured (see `run_one`).
    best_quiet: std::collections::HashMap<u64, f64>,
}

/// A slowed measurement is re-measured only when it might be within this factor of its task's
/// best quiet one: a neighbour slows a kernel by about 2x on this kind of machine (one of two
/// cores taken), so a kernel this much slower than the task's best so far (quiet or not: a
/// slowed run only overstates) cannot be the best, and retrying it would only triple the cost
/// of measuring on a busy machine. It is kept flagged noisy, so never taken as the best.
const NOISY_RETRY_WITHIN: f64 = 3.0;

/// Identifies a task within one runner: its arguments and a sample of its reference.
fn task_id(input: &RunInput) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for a in input.args {
        a.name.hash(&mut h);
        a.shape.hash(&mut h);
        a.packed_len.hash(&mut h);
        a.dtype.hash(&mut h);
    }
    for e in input.expected {
        e.len().hash(&mut h);
        for v in e.iter().step_by((e.len() / 64).max(1)) {
            v.to_bits().hash(&mut h);
        }
    }
    h.finish()
}

impl LocalRunner {
    pub fn new(target: &Target, options: MeasureOptions) -> Self {
        LocalRunner {
            options,
            run_prefix: target.run_prefix.clone(),
            calibration: Calibration::new(target),
            env: vec![],
            scratch: None,
            best_quiet: std::collections::HashMap::new(),
        }
    }

    /// Adds an environment variable to every run.
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn options(&self) -> &MeasureOptions {
        &self.options
    }

    pub fn calibration(&self) -> &Calibration {
        &self.calibration
    }

    pub fn calibration_mut(&mut self) -> &mut Calibration {
        &mut self.calibration
    }

    /// Measures one input, re-measuring while the machine looks slowed, unless it is far
    /// slower than its task's best quiet result ([`NOISY_RETRY_WITHIN`]).
    fn run_one(&mut self, input: &RunInput) -> MeasureResult {
        let threads = input.threads.max(1);
        let threshold = self.options.noise_threshold;
        if self.options.calib_ms > 0 && threshold > 0.0 {
            // Seeds the reference for this thread count on first use.
            self.calibration.reference(threads);
        }
        let mut run_s = 0.0;
        // The least disturbed of the slowed attempts, by its lower calibration.
        let mut best: Option<(f64, MeasureResult, HarnessReport)> = None;
        let mut attempts = 0;
        for attempt in 0..=self.options.noise_retries {
            attempts += 1;
            let (mut res, report) = self.run_once(input, threads);
            run_s += res.run_s;
            res.run_s = run_s;
            let Some(report) = report else { return res };
            // Both windows count: each is one sample of the machine's speed.
            self.calibration.observe(threads, report.calib_before);
            self.calibration.observe(threads, report.calib_after);
            let id = task_id(input);
            // A slowed run only overstates a cost: every result bounds its task's best.
            let b = self.best_quiet.entry(id).or_insert(f64::INFINITY);
            let prior_best = *b;
            *b = b.min(res.mean_cost());
            if !self.calibration.is_slow(
                threads,
                report.calib_before,
                report.calib_after,
                threshold,
            ) {
                return res;
            }
            let low = report.calib_before.min(report.calib_after);
            let hopeless = res.mean_cost() > NOISY_RETRY_WITHIN * prior_best;
            if best.as_ref().is_none_or(|(l, _, _)| low > *l) {
                best = Some((low, res, report));
            }
            if hopeless {
                break;
            }
            if attempt < self.options.noise_retries {
                std::thread::sleep(NOISE_RETRY_SLEEP);
            }
        }
        let (_, mut res, report) = best.expect("at least one attempt ran");
        res.run_s = run_s;
        res.noisy = true;
        warn!(
            exe = %input.built.exe.display(),
            threads,
            calib_before = report.calib_before,
            calib_after = report.calib_after,
            reference = self.calibration.current(threads).unwrap_or(0.0),
            attempts,
            "machine slowed while timing: result flagged noisy"
        );
        res
    }

    /// One run of the executable: the result, and the harness's report when it ran to the end
    /// and its outputs were right.
    fn run_once(
        &mut self,
        input: &RunInput,
        threads: usize,
    ) -> (MeasureResult, Option<HarnessReport>) {
        let build_s = input.built.build_s;
        let err = |code, msg: String, run_s: f64| {
            (
                MeasureResult {
                    build_s,
                    run_s,
                    ..MeasureResult::error(code, msg)
                },
                None,
            )
        };

        let n_outputs = input.args.iter().filter(|a| a.is_output).count();
        if input.expected.len() != n_outputs {
            return err(
                ErrorCode::UnknownError,
                format!(
                    "{} reference tensors for {n_outputs} output arguments",
                    input.expected.len()
                ),
                0.0,
            );
        }
        if self.scratch.is_none() {
            match tempfile::Builder::new().prefix("tunehub-run-").tempdir() {
                Ok(d) => self.scratch = Some(d),
                Err(e) => {
                    return err(
                        ErrorCode::UnknownError,
                        format!("cannot create a scratch directory: {e}"),
                        0.0,
                    );
                }
            }
        }
        let out_path = self
            .scratch
            .as_ref()
            .expect("just created")
            .path()
            .join("out.bin");
        let _ = std::fs::remove_file(&out_path);

        let o = &self.options;
        let hargs = HarnessArgs {
            number: o.number.max(1),
            repeat: o.repeat.max(1),
            min_repeat_ms: o.min_repeat_ms,
            warmup: o.warmup,
            flush: o.flush_cache,
            out_path: out_path.clone(),
            calib_ms: o.calib_ms,
        };
        let mut cmd = match self.run_prefix.split_first() {
            Some((p, rest)) => {
                let mut c = Command::new(p);
                c.args(rest).arg(&input.built.exe);
                c
            }
            None => Command::new(&input.built.exe),
        };
        cmd.args(hargs.to_argv())
            .env("OMP_NUM_THREADS", threads.to_string());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let timeout = Duration::from_secs_f64(o.run_timeout_s.max(0.001));
        let out = match run_bounded(&mut cmd, timeout, OUTPUT_CAP) {
            Ok(out) => out,
            Err(e) => {
                return err(
                    ErrorCode::RuntimeError,
                    format!("cannot start {}: {e}", input.built.exe.display()),
                    0.0,
                );
            }
        };
        let run_s = out.wall_s;
        let stderr_tail = || {
            let s = String::from_utf8_lossy(&out.stderr);
            let s = s.trim();
            let start = s.len().saturating_sub(STDERR_TAIL);
            let start = (start..=s.len())
                .find(|&i| s.is_char_boundary(i))
                .unwrap_or(s.len());
            if s.is_empty() {
                String::new()
            } else {
                format!(": {}", &s[start..])
            }
        };
        if out.timed_out {
            return err(
                ErrorCode::RunTimeout,
                format!("ran past the {} s limit and was killed", o.run_timeout_s),
                run_s,
            );
        }
        match out.status.map(|s| (s.code(), s.signal())) {
            Some((Some(0), _)) => {}
            Some((_, Some(sig))) => {
                return err(
                    ErrorCode::RuntimeError,
                    format!(
                        "killed by signal {} ({sig}){}",
                        signal_name(sig),
                        stderr_tail()
                    ),
                    run_s,
                );
            }
            Some((Some(code), _)) => {
                return err(
                    ErrorCode::RuntimeError,
                    format!("exited with status {code}{}", stderr_tail()),
                    run_s,
                );
            }
            _ => return err(ErrorCode::RuntimeError, "no exit status".into(), run_s),
        }
        let report = match HarnessReport::parse(&String::from_utf8_lossy(&out.stdout), hargs.repeat)
        {
            Ok(r) => r,
            Err(e) => {
                let stdout = truncate(&String::from_utf8_lossy(&out.stdout), 512);
                return err(
                    ErrorCode::RuntimeError,
                    format!("unparsable harness output ({e}): {stdout:?}"),
                    run_s,
                );
            }
        };
        if let Err(msg) = check_outputs(&out_path, input.args, input.expected) {
            return err(ErrorCode::WrongAnswer, msg, run_s);
        }
        debug!(
            exe = %input.built.exe.display(),
            threads,
            number = report.number,
            calib_before = report.calib_before,
            calib_after = report.calib_after,
            "measured"
        );
        let res = MeasureResult {
            costs: report.costs.clone(),
            error: ErrorCode::NoError,
            error_msg: String::new(),
            build_s,
            run_s,
            noisy: false,
        };
        (res, Some(report))
    }
}

impl Runner for LocalRunner {
    fn run(&mut self, inputs: &[RunInput]) -> Vec<MeasureResult> {
        self.run_each(inputs, &mut |_, _| {})
    }

    fn run_each(
        &mut self,
        inputs: &[RunInput],
        each: &mut dyn FnMut(usize, &MeasureResult),
    ) -> Vec<MeasureResult> {
        inputs
            .iter()
            .enumerate()
            .map(|(k, i)| {
                let r = self.run_one(i);
                each(k, &r);
                r
            })
            .collect()
    }
}

/// Reads the harness's output file and compares each output tensor with its reference.
fn check_outputs(path: &Path, args: &[ArgSpec], expected: &[Vec<f64>]) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("no output file: {e}"))?;
    let outputs: Vec<&ArgSpec> = args.iter().filter(|a| a.is_output).collect();
    let total: usize = outputs
        .iter()
        .map(|a| a.num_elements().max(0) as usize)
        .sum();
    if bytes.len() != total * 8 {
        return Err(format!(
            "output file holds {} bytes, expected {}",
            bytes.len(),
            total * 8
        ));
    }
    // The harness writes native-endian f64; every supported target is little-endian.
    let values: Vec<f64> = bytes
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().expect("chunks of 8")))
        .collect();
    let mut at = 0;
    for (arg, exp) in outputs.iter().zip(expected) {
        let n = arg.num_elements().max(0) as usize;
        check::compare_typed(&values[at..at + n], exp, arg.dtype)
            .map_err(|m| format!("output `{}`: {m}", arg.name))?;
        at += n;
    }
    Ok(())
}

/// Builds all inputs (in parallel), runs the built ones (one at a time), and returns one
/// result per input, in input order; a build error stands in for its run.
pub fn measure_batch(
    builder: &dyn Builder,
    runner: &mut dyn Runner,
    inputs: &[(BuildInput, &[Vec<f64>])],
) -> Vec<MeasureResult> {
    measure_batch_each(builder, runner, inputs, &|_| {}, &mut |_, _| {})
}

/// [`measure_batch`], telling `built` of every input (its index) as its build ends, and `each`
/// of its result as soon as it is known: a build error once the builds are done, a run as it
/// ends.
pub fn measure_batch_each(
    builder: &dyn Builder,
    runner: &mut dyn Runner,
    inputs: &[(BuildInput, &[Vec<f64>])],
    built: &(dyn Fn(usize) + Sync),
    each: &mut dyn FnMut(usize, &MeasureResult),
) -> Vec<MeasureResult> {
    let build_inputs: Vec<BuildInput> = inputs.iter().map(|(b, _)| b.clone()).collect();
    let built = builder.build_each(&build_inputs, built);
    let mut results: Vec<Option<MeasureResult>> = vec![None; inputs.len()];
    let mut ran_idx = Vec::new();
    let mut run_inputs = Vec::new();
    for (i, b) in built.iter().enumerate().take(inputs.len()) {
        match b {
            Ok(built) => {
                let (bi, expected) = &inputs[i];
                ran_idx.push(i);
                run_inputs.push(RunInput {
                    built,
                    args: &bi.args,
                    expected,
                    threads: bi.threads,
                });
            }
            Err(e) => {
                each(i, e);
                results[i] = Some(e.clone());
            }
        }
    }
    let ran = runner.run_each(&run_inputs, &mut |k, r| each(ran_idx[k], r));
    for (i, r) in ran_idx.iter().zip(ran) {
        results[*i] = Some(r);
    }
    results
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            r.unwrap_or_else(|| {
                let r = MeasureResult::error(
                    ErrorCode::UnknownError,
                    "no result from the builder or runner",
                );
                each(i, &r);
                r
            })
        })
        .collect()
}
