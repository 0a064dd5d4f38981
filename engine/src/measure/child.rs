//! Bounded child processes: the compiler, the kernel executables and the calibration loop all
//! run through `run_bounded`, in their own process group with a timeout and capped output.

use std::collections::VecDeque;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

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

pub(crate) fn describe_status(s: Option<std::process::ExitStatus>) -> String {
    match s {
        None => "no exit status".to_string(),
        Some(s) => match (s.code(), s.signal()) {
            (Some(c), _) => format!("exit status {c}"),
            (None, Some(sig)) => format!("killed by signal {} ({sig})", signal_name(sig)),
            _ => format!("{s}"),
        },
    }
}

/// At most `max` bytes of `s`, cut at a character boundary, marked when cut.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n... ({} more bytes)", &s[..end], s.len() - end)
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
