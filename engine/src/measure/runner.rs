//! The Runner seam: runs built executables, one at a time, and turns what they print and write
//! into [`MeasureResult`]s.
//!
//! Each executable runs as an isolated child process: its own process group (a timeout kills
//! it with all its OpenMP threads and any children), no core dumps, stdin closed, output
//! captured up to a bound, a wall-clock limit. Its output tensors are checked against the
//! reference before its times count; the calibration around the timing decides whether the
//! machine was quiet (see [`super::noise`]).

use std::collections::VecDeque;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tempfile::TempDir;
use tracing::{debug, warn};

use super::builder::{Builder, Built, truncate};
use super::harness::{HarnessArgs, HarnessReport};
use super::noise::Calibration;
use super::{ArgSpec, BuildInput, ErrorCode, MeasureOptions, MeasureResult, check};
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
    pub expected: &'a [Vec<f32>],
    /// OpenMP threads for the kernel and its calibration.
    pub threads: usize,
}

/// Runners block (child processes, sleeps between retries): call them off async executors.
pub trait Runner: Send {
    /// Runs every input; results in input order, each with `build_s` copied from its build.
    fn run(&mut self, inputs: &[RunInput]) -> Vec<MeasureResult>;
}

/// Runs executables on this machine (or under `run_prefix`, e.g. an emulator).
pub struct LocalRunner {
    options: MeasureOptions,
    run_prefix: Vec<String>,
    calibration: Calibration,
    /// Cache-flush buffer size: twice the last-level cache.
    flush_bytes: u64,
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
            flush_bytes: (2 * target.last_level_cache_bytes()).clamp(8 << 20, 1 << 30),
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
            flush_bytes: self.flush_bytes,
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
        inputs.iter().map(|i| self.run_one(i)).collect()
    }
}

/// Reads the harness's output file and compares each output tensor with its reference.
fn check_outputs(path: &Path, args: &[ArgSpec], expected: &[Vec<f32>]) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("no output file: {e}"))?;
    let outputs: Vec<&ArgSpec> = args.iter().filter(|a| a.is_output).collect();
    let total: usize = outputs
        .iter()
        .map(|a| a.num_elements().max(0) as usize)
        .sum();
    if bytes.len() != total * 4 {
        return Err(format!(
            "output file holds {} bytes, expected {}",
            bytes.len(),
            total * 4
        ));
    }
    // The harness writes native-endian f32; every supported target is little-endian.
    let values: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let mut at = 0;
    for (arg, exp) in outputs.iter().zip(expected) {
        let n = arg.num_elements().max(0) as usize;
        check::compare(&values[at..at + n], exp)
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
    inputs: &[(BuildInput, &[Vec<f32>])],
) -> Vec<MeasureResult> {
    let build_inputs: Vec<BuildInput> = inputs.iter().map(|(b, _)| b.clone()).collect();
    let built = builder.build(&build_inputs);
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
            Err(e) => results[i] = Some(e.clone()),
        }
    }
    for (i, r) in ran_idx.into_iter().zip(runner.run(&run_inputs)) {
        results[i] = Some(r);
    }
    results
        .into_iter()
        .map(|r| {
            r.unwrap_or_else(|| {
                MeasureResult::error(
                    ErrorCode::UnknownError,
                    "no result from the builder or runner",
                )
            })
        })
        .collect()
}

/// What a bounded child process did.
pub(crate) struct ProcOutput {
    pub status: Option<ExitStatus>,
    pub timed_out: bool,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Wall seconds from spawn to exit (or to the timeout).
    pub wall_s: f64,
}

/// Runs `cmd` in its own process group with stdin closed, core dumps off, stdout/stderr
/// captured (head and tail, `cap` bytes each at most), and kills the whole group when it runs
/// past `timeout`. Waits without polling: a helper thread blocks in `waitid`.
pub(crate) fn run_bounded(
    cmd: &mut Command,
    timeout: Duration,
    cap: usize,
) -> std::io::Result<ProcOutput> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
    unsafe {
        cmd.pre_exec(|| {
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            Ok(())
        });
    }
    let start = Instant::now();
    let mut child = cmd.spawn()?;
    let pid = child.id() as libc::pid_t;
    let stdout = read_bounded(child.stdout.take(), cap);
    let stderr = read_bounded(child.stderr.take(), cap);

    // WNOWAIT: learn of the exit without reaping, so the pid (= the group id) stays ours until
    // the group is killed below and `child.wait()` reaps it.
    let (tx, exited) = mpsc::channel();
    std::thread::spawn(move || {
        loop {
            // SAFETY: zeroed siginfo_t is a valid out-parameter.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            let r = unsafe {
                libc::waitid(
                    libc::P_PID,
                    pid as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOWAIT,
                )
            };
            if r == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                break;
            }
        }
        let _ = tx.send(());
    });
    let timed_out = matches!(
        exited.recv_timeout(timeout),
        Err(mpsc::RecvTimeoutError::Timeout)
    );
    let wall_s = start.elapsed().as_secs_f64();
    // On timeout this stops the run; after a normal exit it removes anything the process left
    // behind in its group.
    // SAFETY: plain syscall; the group id is the unreaped child's pid.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    if timed_out {
        let _ = exited.recv();
    }
    let status = child.wait().ok();
    let collect =
        |rx: mpsc::Receiver<Vec<u8>>| rx.recv_timeout(Duration::from_secs(2)).unwrap_or_default();
    Ok(ProcOutput {
        status,
        timed_out,
        stdout: collect(stdout),
        stderr: collect(stderr),
        wall_s,
    })
}

/// Reads a pipe to its end on a thread, keeping the first and the last `cap / 2` bytes.
fn read_bounded<R: Read + Send + 'static>(pipe: Option<R>, cap: usize) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    let Some(mut pipe) = pipe else {
        let _ = tx.send(vec![]);
        return rx;
    };
    std::thread::spawn(move || {
        let half = (cap / 2).max(1);
        let mut head = Vec::new();
        let mut tail = VecDeque::new();
        let mut dropped = 0usize;
        let mut chunk = [0u8; 8192];
        loop {
            match pipe.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    let mut data = &chunk[..n];
                    let room = half.saturating_sub(head.len());
                    let take = room.min(data.len());
                    head.extend_from_slice(&data[..take]);
                    data = &data[take..];
                    tail.extend(data.iter().copied());
                    while tail.len() > half {
                        tail.pop_front();
                        dropped += 1;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        if dropped > 0 {
            head.extend_from_slice(format!("\n... ({dropped} bytes omitted) ...\n").as_bytes());
        }
        head.extend(tail);
        let _ = tx.send(head);
    });
    rx
}

/// The name of a signal, e.g. "SIGSEGV".
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        _ => "unknown signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_process_captures_and_times_out() {
        let mut c = Command::new("sh");
        c.args(["-c", "echo out; echo err >&2; exit 3"]);
        let o = run_bounded(&mut c, Duration::from_secs(5), 1024).unwrap();
        assert!(!o.timed_out);
        assert_eq!(o.status.unwrap().code(), Some(3));
        assert_eq!(o.stdout, b"out\n");
        assert_eq!(o.stderr, b"err\n");

        // A child of the child keeps the pipes open: the group kill must end it too.
        let mut c = Command::new("sh");
        c.args(["-c", "sleep 30 & sleep 30"]);
        let t = Instant::now();
        let o = run_bounded(&mut c, Duration::from_millis(300), 1024).unwrap();
        assert!(o.timed_out);
        // Had the background sleep survived, it would hold stdout open and the readers would
        // give up only after 2 s.
        assert!(
            t.elapsed() < Duration::from_millis(1500),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(o.status.unwrap().signal(), Some(libc::SIGKILL));
    }

    #[test]
    fn bounded_output_keeps_head_and_tail() {
        let mut c = Command::new("sh");
        c.args([
            "-c",
            "echo HEAD; head -c 100000 /dev/zero | tr '\\0' x; echo; echo TAIL",
        ]);
        let o = run_bounded(&mut c, Duration::from_secs(5), 1000).unwrap();
        let s = String::from_utf8(o.stdout).unwrap();
        assert!(
            s.starts_with("HEAD\n") && s.ends_with("TAIL\n") && s.contains("bytes omitted"),
            "{s}"
        );
        assert!(s.len() < 1200);
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(libc::SIGSEGV), "SIGSEGV");
        assert_eq!(signal_name(libc::SIGKILL), "SIGKILL");
    }
}
