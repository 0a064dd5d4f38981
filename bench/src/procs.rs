//! What the service benchmarks share: the release binaries beside this one, a `tunehub server`
//! child process, what /proc says about a process (resident memory, CPU time), the machine's
//! load, percentiles, and concurrent clients asking for a fixed time.

use anyhow::{Context, Result, bail};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The API token the benchmarks' servers require (and their clients send).
pub const TOKEN: &str = "bench-token";

/// A binary built beside this one (`cargo build --release -p tunehub -p tunehub-worker`
/// puts `tunehub` and `tunehub-worker` next to `tunehub-bench`).
pub fn sibling_bin(name: &str) -> Result<PathBuf> {
    let me = std::env::current_exe().context("where this executable is")?;
    let p = me.with_file_name(name);
    if !p.is_file() {
        bail!(
            "{} is missing: build it beside this benchmark (cargo build --release -p tunehub-bench \
             -p tunehub -p tunehub-worker)",
            p.display()
        );
    }
    Ok(p)
}

/// A real `tunehub server` process on a free loopback port.
pub struct ServerProc {
    child: Child,
    pub addr: String,
    /// The dashboard's URL, when started with `--http`.
    pub dashboard: Option<String>,
    /// Its stdout, kept open: a server writing to a closed pipe would fail.
    _stdout: BufReader<std::process::ChildStdout>,
}

impl ServerProc {
    /// Starts `tunehub server` on `db` and waits for its `listening on ADDR` line. Its logs go
    /// to `log`.
    pub fn start(bin: &Path, db: &str, log: &Path, extra: &[&str]) -> Result<ServerProc> {
        let log_file =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let mut child = Command::new(bin)
            .args([
                "server",
                "--listen",
                "127.0.0.1:0",
                "--db",
                db,
                "--token",
                TOKEN,
            ])
            .args(extra)
            .env_remove("TUNEHUB_TOKENS")
            .env_remove("TUNEHUB_CONFIG")
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(log_file)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let mut line = String::new();
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        stdout
            .read_line(&mut line)
            .context("reading the server's first line")?;
        let Some(addr) = line.trim().strip_prefix("listening on ") else {
            let _ = child.kill();
            bail!(
                "the server did not start (first line {line:?}); its log: {}",
                log.display()
            );
        };
        let addr = addr.to_string();
        let dashboard = if extra.contains(&"--http") {
            let mut l = String::new();
            stdout
                .read_line(&mut l)
                .context("reading the dashboard's line")?;
            Some(
                l.trim()
                    .strip_prefix("dashboard on ")
                    .with_context(|| format!("expected `dashboard on URL`, got {l:?}"))?
                    .to_string(),
            )
        } else {
            None
        };
        Ok(ServerProc {
            addr,
            dashboard,
            child,
            _stdout: stdout,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// SIGTERM, then waits for the exit (a kill after 30 s).
    pub fn stop(mut self) -> Result<()> {
        terminate(&mut self.child, Duration::from_secs(30))
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// SIGTERM a child and wait for it; SIGKILL once `grace` has passed.
pub fn terminate(child: &mut Child, grace: Duration) -> Result<()> {
    signal(child.id(), libc::SIGTERM);
    let start = std::time::Instant::now();
    while start.elapsed() < grace {
        if child.try_wait()?.is_some() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill()?;
    child.wait()?;
    Ok(())
}

pub fn signal(pid: u32, sig: i32) {
    let pid = libc::pid_t::try_from(pid).expect("a pid fits pid_t");
    // SAFETY: kill(2) has no memory effects; a stale pid at worst signals nothing.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// A line of /proc/PID/status in kB (`VmRSS`, `VmHWM`).
fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Resident memory now and at its peak, in MB (10^6 bytes).
pub fn rss_mb(pid: u32) -> (f64, f64) {
    let mb = |f| status_kb(pid, f).map_or(f64::NAN, |kb| kb as f64 * 1024.0 / 1e6);
    (mb("VmRSS"), mb("VmHWM"))
}

/// CPU seconds (user + system) the process has used, all its threads.
pub fn cpu_seconds(pid: u32) -> f64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return f64::NAN;
    };
    // Fields after the command name, which is in parentheses and may hold spaces.
    let Some(rest) = s.rfind(')').map(|i| &s[i + 2..]) else {
        return f64::NAN;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the state.
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // SAFETY: sysconf reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) as f64 / hz
}

/// CPU seconds (user + system) this process has used, to the nanosecond: /proc's figures come
/// in 10 ms ticks, too coarse for a few hundred microseconds per measurement.
pub fn self_cpu_seconds() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given and nothing else.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    if rc != 0 {
        return f64::NAN;
    }
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// The 1, 5 and 15 minute load averages as /proc/loadavg gives them.
pub fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// The q-quantile (0..=1) of sorted values, by the nearest rank.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `f(i, &items[i])` for every item, on every core (each thread takes the next item), the
/// results in the items' order: the benchmarks' datasets are made this way.
pub fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(usize, &T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let out = std::sync::Mutex::new((0..items.len()).map(|_| None).collect::<Vec<_>>());
    std::thread::scope(|sc| {
        for _ in 0..threads {
            sc.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(item) = items.get(i) else {
                        break;
                    };
                    let r = f(i, item);
                    out.lock().expect("no panic holding it")[i] = Some(r);
                }
            });
        }
    });
    out.into_inner()
        .expect("no panic holding it")
        .into_iter()
        .map(|r| r.expect("every item done"))
        .collect()
}

/// Clients on their own connections asking concurrently for `seconds`: each client `k` calls
/// `ask(connection, i)` for i = k * 7919, k * 7919 + 1, ... (so that clients walk their inputs
/// from different places), one call at a time, until the time is up. The latencies in ms of
/// every call, sorted, and the wall time in s.
pub async fn concurrent<C, F, Fut>(conns: Vec<C>, seconds: f64, ask: F) -> Result<(Vec<f64>, f64)>
where
    C: Send + 'static,
    F: Fn(C, usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<C>> + Send + 'static,
{
    let ask = Arc::new(ask);
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(k, mut c)| {
            let ask = Arc::clone(&ask);
            tokio::spawn(async move {
                let mut lat = vec![];
                let mut i = k * 7919;
                while Instant::now() < deadline {
                    let t0 = Instant::now();
                    c = ask(c, i).await?;
                    lat.push(t0.elapsed().as_secs_f64() * 1e3);
                    i += 1;
                }
                anyhow::Ok(lat)
            })
        })
        .collect();
    let mut all = vec![];
    for t in tasks {
        all.extend(t.await??);
    }
    let wall = start.elapsed().as_secs_f64();
    all.sort_by(f64::total_cmp);
    Ok((all, wall))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&v, 1.0), 100.0);
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert!(quantile(&[], 0.5).is_nan());
    }

    #[test]
    fn this_process_shows_in_proc() {
        let pid = std::process::id();
        let (rss, hwm) = rss_mb(pid);
        assert!(rss > 0.0 && hwm >= rss, "{rss} {hwm}");
        assert!(cpu_seconds(pid) >= 0.0);
        let t = self_cpu_seconds();
        let mut x = 0u64;
        for i in 0..10_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(self_cpu_seconds() > t);
        assert_eq!(load().split(' ').count(), 3);
    }
}
