//! `tunehub-bench dispatch`: the worker fleet's dispatch overhead (issue 6).
//!
//! The server is the real one (`tunehub_server::server::start`: every service, the token
//! interceptor, the fleet and its lease reaper) running in this process, with its job loop off;
//! the workers are real `tunehub-worker` processes on loopback. Batches of a trivial kernel
//! (a small elementwise chain) go through the driver's own fleet path (`FleetBackend`'s
//! `FleetMeasurer`: one piece per ready worker, queued, leased, reported), so that what is
//! timed is dispatch, not search: the candidates are sampled before the clock starts and no
//! search or database write runs meanwhile.
//!
//! Figures, for N = 1, 4, 16 workers:
//! - measurements/s: candidates measured / wall time of the batches;
//! - server CPU per measurement: the CPU time (user + system, CLOCK_PROCESS_CPUTIME_ID) this process,
//!   which hosts only the server, used during the batches, divided by the candidates; beside it
//!   the standing cost of the connected workers (the server's CPU per second over a few idle
//!   seconds: heartbeats, long-polls), which a slow measurement rate spreads over fewer
//!   measurements;
//! - worker time outside build and run per measurement: (N x wall - the sum of the workers'
//!   reported build and run seconds) / candidates: waiting for work, gRPC, the harness build
//!   and the reference of each piece, and, with more workers than cores, waiting for a core.
//!
//! The workers compile on this machine, so with many of them the load average printed is
//! mostly their own compilers'.
//!
//! And the re-dispatch time: a worker holding a lease is killed with SIGKILL; the time from the
//! kill until another worker holds the piece.
//!
//! With `--pools P --jobs J` (issue 31's first figure: `--workers 32 --pools 4 --jobs 8`), the
//! workers form P pools (worker i defines `TUNEHUB_BENCH_POOL_{i mod P}`: another target key
//! each) and J jobs run at once, job j on pool j mod P, each measuring its share of the
//! candidates batch after batch through its own measurer (the pools' fair sharing by job).
//!
//! `tunehub-bench dispatch [--workers 1,4,16] [--measurements 256] [--batch 64] [--kills 3]
//! [--pools 1] [--jobs 1]`

use crate::procs::{self, TOKEN};
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tunehub_engine::measure::{MeasureOptions, MeasureResult};
use tunehub_engine::ops;
use tunehub_engine::sample::RandomSampler;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;
use tunehub_server::config::{ServerArgs, ServerConfig};
use tunehub_server::fleet::Fleet;
use tunehub_server::jobs::MeasureBackend;

/// Keeps the workers' pool apart from the server's own target ("local"), which the server
/// would measure itself.
const WORKER_CFLAGS: &str = "--cflags=-DTUNEHUB_BENCH_FLEET";

#[derive(clap::Args)]
pub struct DispatchArgs {
    /// Worker counts to measure with, in order.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    workers: Vec<usize>,
    /// Candidates measured per worker count (after a warm-up batch).
    #[arg(long, default_value_t = 256)]
    measurements: usize,
    /// Candidates per batch (the driver's round; cut into one piece per worker).
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// The trivial kernel.
    #[arg(long, default_value = "elementwise(m=16,n=16)")]
    spec: String,
    /// Seconds with the workers connected and idle, for the server's standing cost of them
    /// (heartbeats, long-polls).
    #[arg(long, default_value_t = 3.0)]
    idle_s: f64,
    /// Worker kills for the re-dispatch figure (0: none), with the largest worker count.
    #[arg(long, default_value_t = 3)]
    kills: usize,
    /// Where the server's database and the workers' logs go [default: a temporary directory].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Pools the workers form (distinct target keys), worker i in pool i mod P.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pools: u32,
    /// Jobs measuring at once, job j on pool j mod P.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    jobs: u32,
}

/// One timed run.
struct Row {
    workers: usize,
    pools: usize,
    jobs: usize,
    measured: usize,
    errors: usize,
    wall_s: f64,
    server_cpu_s: f64,
    /// Server CPU seconds per second with the workers connected and no work (their heartbeats
    /// and long-polls).
    idle_cpu_rate: f64,
    worker_busy_s: f64,
    load: String,
}

pub async fn run(a: DispatchArgs) -> Result<()> {
    let worker_bin = procs::sibling_bin("tunehub-worker")?;
    let tmp = tempfile::tempdir()?;
    let dir = a.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir)?;
    let mut cfg = ServerConfig::resolve(&ServerArgs {
        listen: Some("127.0.0.1:0".parse()?),
        db: Some(dir.join("dispatch.db").display().to_string()),
        tokens: vec![TOKEN.into()],
        ..ServerArgs::default()
    })?;
    cfg.run_jobs = false;
    let server = tunehub_server::server::start(&cfg).await?;
    let fleet = Arc::clone(server.fleet.as_ref().context("the server has a fleet")?);
    let backend = Arc::clone(&server.ctx.backend);
    let url = format!("http://{}", server.addr);
    let pid = std::process::id();
    println!(
        "server (in this process, pid {pid}) on {}, fleet heartbeat {:?}, grace {:?}; load {}",
        server.addr,
        fleet.cfg.heartbeat,
        fleet.cfg.grace,
        procs::load()
    );

    let dag = ops::build_op(&a.spec)?;
    let task = Arc::new(Task::new(dag, a.spec.clone()));
    let opts = MeasureOptions {
        number: 1,
        repeat: 1,
        min_repeat_ms: 0,
        warmup: 0,
        calib_ms: 0,
        noise_threshold: 0.0,
        ..MeasureOptions::default()
    };
    let most = a.workers.iter().copied().max().unwrap_or(1);
    let mut sampler = RandomSampler::new(&task.dag, &Target::detect(), 7);
    let schedules: Arc<Vec<Schedule>> = Arc::new(
        (0..a.measurements + most)
            .map(|_| sampler.sample())
            .collect(),
    );

    let (pools, jobs) = (a.pools as usize, a.jobs as usize);
    let start = |i: usize| WorkerProc::start(&worker_bin, &url, i, pools, &dir);
    let mut workers: Vec<WorkerProc> = vec![];
    let mut rows = vec![];
    for &n in &a.workers {
        while workers.len() < n {
            workers.push(start(workers.len())?);
        }
        while workers.len() > n {
            workers.pop().expect("non-empty").stop();
        }
        let keys = wait_ready(&fleet, n, pools).await?;
        let targets = keys
            .iter()
            .map(|k| fleet.target(k).context("the pool's target"))
            .collect::<Result<Vec<Target>>>()?;
        // Warm-up: one candidate per worker, not counted (first compiler runs, page cache).
        for t in &targets {
            measure(
                &backend,
                t,
                &opts,
                &task,
                &schedules[..n.div_ceil(pools)],
                "warm-up",
            )
            .await?;
        }
        // What the connected workers cost the server with no work in flight.
        let (c0, t0) = (procs::self_cpu_seconds(), Instant::now());
        tokio::time::sleep(Duration::from_secs_f64(a.idle_s)).await;
        let idle_cpu_rate = (procs::self_cpu_seconds() - c0) / t0.elapsed().as_secs_f64();
        let load = procs::load();
        let cpu0 = procs::self_cpu_seconds();
        let t0 = Instant::now();
        let results = run_jobs(
            &backend,
            &targets,
            &opts,
            &task,
            &schedules[most..],
            jobs,
            a.batch,
        )
        .await?;
        let wall_s = t0.elapsed().as_secs_f64();
        let server_cpu_s = procs::self_cpu_seconds() - cpu0;
        let row = Row {
            workers: n,
            pools,
            jobs,
            measured: results.len(),
            errors: results.iter().filter(|r| !r.is_ok()).count(),
            wall_s,
            server_cpu_s,
            idle_cpu_rate,
            worker_busy_s: results.iter().map(|r| r.build_s + r.run_s).sum(),
            load,
        };
        print_row(&row);
        rows.push(row);
    }

    let mut redispatch = vec![];
    if a.kills > 0 {
        let n = workers.len().max(2 * pools);
        while workers.len() < n {
            workers.push(start(workers.len())?);
        }
        println!(
            "\nre-dispatch: {n} workers; one candidate at a time, its worker killed (SIGKILL) while it holds the lease"
        );
        let keys = wait_ready(&fleet, n, pools).await?;
        let target = fleet.target(&keys[0]).context("the pool's target")?;
        let mut tries = 0;
        while redispatch.len() < a.kills && tries < a.kills * 3 {
            tries += 1;
            wait_ready(&fleet, n, pools).await?;
            let one = schedules[tries % schedules.len()].clone();
            let job = {
                let (backend, target, opts, task) = (
                    Arc::clone(&backend),
                    target.clone(),
                    opts.clone(),
                    Arc::clone(&task),
                );
                tokio::task::spawn_blocking(move || {
                    let mut m = backend.measurer(&target, opts, "bench-dispatch");
                    let r = m.measure(&task, &[one]);
                    (r, m.devices())
                })
            };
            let Some((victim, device)) = wait_busy(&fleet, None, Duration::from_secs(30)).await
            else {
                bail!("no worker took the piece within 30 s");
            };
            let i: usize = device
                .strip_prefix("bench-")
                .and_then(|d| d.parse().ok())
                .context("a bench worker's device id")?;
            workers[i].kill();
            let killed_at = Instant::now();
            let since_beat = fleet
                .list()
                .0
                .iter()
                .find(|w| w.id == victim)
                .map(|w| now_ms() - w.last_heartbeat_ms);
            let got = wait_busy(&fleet, Some(&victim), Duration::from_secs(120)).await;
            let elapsed = killed_at.elapsed().as_secs_f64();
            let (results, devices) = job.await?;
            workers[i] = start(i)?;
            let by_victim = devices.first().and_then(Option::as_deref) == Some(victim.as_str());
            if got.is_none() || by_victim || results.is_empty() {
                println!("  try {tries}: the piece was reported before the kill landed; again");
                continue;
            }
            println!(
                "  kill {}: re-dispatched after {elapsed:.2} s (its last heartbeat was {} ms before the kill; load {})",
                redispatch.len() + 1,
                since_beat.map_or("?".into(), |ms| ms.to_string()),
                procs::load()
            );
            redispatch.push(elapsed);
        }
    }

    println!("\n== summary (target: server overhead < 1 ms per measurement at 16 workers)");
    for r in &rows {
        print_row(r);
    }
    if !redispatch.is_empty() {
        let mean = redispatch.iter().sum::<f64>() / redispatch.len() as f64;
        let max = redispatch.iter().copied().fold(0.0, f64::max);
        let min = redispatch.iter().copied().fold(f64::INFINITY, f64::min);
        println!(
            "re-dispatch after a worker's SIGKILL: mean {mean:.2} s, min {min:.2} s, max {max:.2} s over {} kills \
             (a lease lapses {:?} after the worker's last heartbeat; the reaper looks every 250 ms)",
            redispatch.len(),
            fleet.cfg.grace
        );
    }
    for w in workers {
        w.stop();
    }
    server.shutdown().await?;
    Ok(())
}

fn print_row(r: &Row) {
    let m = r.measured.max(1) as f64;
    println!(
        "{:>2} workers in {} pool(s), {} job(s) at once: {} measurements ({} errors) in {:.1} s = {:.1} measurements/s; server CPU {:.3} ms per measurement \
         (idle, the {} connected workers cost it {:.2} ms CPU per second); \
         worker time outside build+run {:.1} ms per measurement (build+run {:.1} ms); load {}",
        r.workers,
        r.pools,
        r.jobs,
        r.measured,
        r.errors,
        r.wall_s,
        r.measured as f64 / r.wall_s,
        r.server_cpu_s / m * 1e3,
        r.workers,
        r.idle_cpu_rate * 1e3,
        (r.workers as f64 * r.wall_s - r.worker_busy_s).max(0.0) / m * 1e3,
        r.worker_busy_s / m * 1e3,
        r.load
    );
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// One batch through the server's fleet path (blocking: run off the async threads, as the job
/// driver does). The results, and who measured each.
async fn measure(
    backend: &Arc<dyn MeasureBackend>,
    target: &Target,
    opts: &MeasureOptions,
    task: &Arc<Task>,
    schedules: &[Schedule],
    job_id: &str,
) -> Result<(Vec<MeasureResult>, Vec<Option<String>>)> {
    let (backend, target, opts, task) = (
        Arc::clone(backend),
        target.clone(),
        opts.clone(),
        Arc::clone(task),
    );
    let schedules = schedules.to_vec();
    let n = schedules.len();
    let job_id = job_id.to_string();
    let out = tokio::task::spawn_blocking(move || {
        let mut m = backend.measurer(&target, opts, &job_id);
        let r = m.measure(&task, &schedules);
        (r, m.devices())
    })
    .await?;
    if out.0.len() != n {
        bail!("{} results for {n} candidates", out.0.len());
    }
    Ok(out)
}

/// `jobs` jobs at once, job j measuring its share of `schedules` on pool j mod P in batches
/// of `batch`; every result.
async fn run_jobs(
    backend: &Arc<dyn MeasureBackend>,
    targets: &[Target],
    opts: &MeasureOptions,
    task: &Arc<Task>,
    schedules: &[Schedule],
    jobs: usize,
    batch: usize,
) -> Result<Vec<MeasureResult>> {
    let share = schedules.len().div_ceil(jobs);
    let mut running = tokio::task::JoinSet::new();
    for (j, part) in schedules.chunks(share.max(1)).enumerate() {
        let (backend, target, opts, task) = (
            Arc::clone(backend),
            targets[j % targets.len()].clone(),
            opts.clone(),
            Arc::clone(task),
        );
        let part = part.to_vec();
        running.spawn(async move {
            let mut results = vec![];
            for b in part.chunks(batch.max(1)) {
                let job_id = format!("bench-job-{j}");
                results.extend(
                    measure(&backend, &target, &opts, &task, b, &job_id)
                        .await?
                        .0,
                );
            }
            Ok::<_, anyhow::Error>(results)
        });
    }
    let mut all = vec![];
    while let Some(r) = running.join_next().await {
        all.extend(r??);
    }
    Ok(all)
}

/// Waits until `n` workers in `pools` pools are ready; the pools' keys.
async fn wait_ready(fleet: &Fleet, n: usize, pools: usize) -> Result<Vec<String>> {
    let start = Instant::now();
    loop {
        let keys = fleet.ready_keys();
        let ready: usize = keys.iter().map(|k| fleet.ready_workers(k)).sum();
        if keys.len() == pools && ready >= n {
            return Ok(keys);
        }
        if start.elapsed() > Duration::from_secs(60) {
            bail!("{n} workers did not register within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls (every millisecond) until a worker other than `not` holds a lease: its id and device.
async fn wait_busy(fleet: &Fleet, not: Option<&str>, limit: Duration) -> Option<(String, String)> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(w) = fleet
            .list()
            .0
            .into_iter()
            .find(|w| w.status == "busy" && Some(w.id.as_str()) != not)
        {
            return Some((w.id, w.device_id));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    None
}

/// A `tunehub-worker` process, device id `bench-I`.
struct WorkerProc {
    child: Option<Child>,
}

impl WorkerProc {
    fn start(bin: &Path, url: &str, i: usize, pools: usize, dir: &Path) -> Result<WorkerProc> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(format!("worker-{i}.log")))?;
        // One pool alone keeps the key of the single-pool figures.
        let cflags = if pools > 1 {
            format!("{WORKER_CFLAGS} -DTUNEHUB_BENCH_POOL_{}", i % pools)
        } else {
            WORKER_CFLAGS.to_string()
        };
        let child = Command::new(bin)
            .args(["--server", url, "--token", TOKEN])
            .args(["--device-id", &format!("bench-{i}")])
            // One build at a time: the reported build seconds are then the worker's own time.
            .args(["--build-jobs", "1", &cflags])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        Ok(WorkerProc { child: Some(child) })
    }

    /// SIGKILL: the death the re-dispatch figure is about.
    fn kill(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.child = None;
    }

    /// SIGTERM: the worker finishes the piece in hand and exits.
    fn stop(mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = procs::terminate(&mut c, Duration::from_secs(10));
        }
    }
}

impl Drop for WorkerProc {
    fn drop(&mut self) {
        self.kill();
    }
}
