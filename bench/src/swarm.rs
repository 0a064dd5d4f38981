//! `tunehub-bench swarm`: what holding a large fleet costs the server (issue 31).
//!
//! A real `tunehub server` process holds N simulated workers: light clients in this process
//! that do over real gRPC what `tunehub-worker` does between pieces — register once, send a
//! heartbeat every period the server gives, and keep one long-poll `Pull` open — and measure
//! nothing (no job is queued). The workers are spread over `--pools` target keys (one target
//! description each, told apart by a define in its flags), 100 per HTTP/2 connection
//! (the server's default limit of concurrent streams is 200, and each worker holds a pull and
//! sends heartbeats).
//!
//! Figures per step of N (the workers of earlier steps stay connected):
//! - the server's CPU over a window, in cores, and per 1,000 workers (from /proc: the server is
//!   its own process, so this process's clients do not count);
//! - its resident memory, and its growth per 1,000 workers since before the first worker;
//! - the heartbeat round trip as the workers see it (p50, p99), and heartbeats per second;
//! - the workers the server lists as offline at the end of the window (should be 0: a silent
//!   worker is offline after 3.5 heartbeat periods);
//! - the time the step's registrations took.
//!
//! This process's clients share the machine with the server: their CPU is printed beside it,
//! and on a 2-core machine they compete with it for the cores.
//!
//! `tunehub-bench swarm [--workers 1000,5000,10000] [--heartbeat-ms 1000] [--window-s 20]`

use crate::procs::{self, TOKEN};
use anyhow::{Context, Result, bail};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tunehub::client::ClientConfig;
use tunehub::client::{self, Clients};
use tunehub_engine::target::Target;
use tunehub_proto::v1 as pb;
use tunehub_proto::v1::workers_client::WorkersClient;

/// Simulated workers per gRPC connection.
const PER_CONNECTION: usize = 100;

#[derive(clap::Args)]
pub struct SwarmArgs {
    /// Worker counts, in increasing order; each step adds workers to the last.
    #[arg(long, value_delimiter = ',', default_value = "1000,5000,10000")]
    workers: Vec<usize>,
    /// The server's heartbeat period (`tunehub server --heartbeat-ms`).
    #[arg(long, default_value_t = 1000)]
    heartbeat_ms: u64,
    /// Seconds measured at each step, after the new workers settled.
    #[arg(long, default_value_t = 20.0)]
    window_s: f64,
    /// Target pools the workers are spread over.
    #[arg(long, default_value_t = 4)]
    pools: usize,
    /// Where the server's database and log go [default: a temporary directory].
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// Heartbeat round trips of the current window, in ms.
#[derive(Default)]
struct Window {
    open: bool,
    rtt_ms: Vec<f64>,
}

pub async fn run(a: SwarmArgs) -> Result<()> {
    if a.workers.is_empty() || a.workers.windows(2).any(|w| w[0] >= w[1]) {
        bail!("--workers: give increasing counts, e.g. 1000,5000,10000");
    }
    let tmp = tempfile::tempdir()?;
    let dir = a.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir)?;
    let db = dir.join("swarm.db").display().to_string();
    let server = procs::ServerProc::start(
        &procs::sibling_bin("tunehub")?,
        &db,
        &dir.join("server.log"),
        &["--heartbeat-ms", &a.heartbeat_ms.to_string()],
    )?;
    let pid = server.pid();
    let cfg = ClientConfig {
        server: server.url(),
        token: Some(TOKEN.into()),
        ca_cert: None,
    };
    let pools: Vec<String> = (0..a.pools.max(1))
        .map(|p| {
            let mut t = Target::detect();
            t.cflags.push(format!("-DTUNEHUB_SWARM_POOL={p}"));
            serde_json::to_string(&t).expect("a target serializes")
        })
        .collect();
    // Let the server settle before its baseline memory.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (rss0, _) = procs::rss_mb(pid);
    println!(
        "swarm: server pid {pid}, heartbeat {} ms, {} pools, {} workers per connection; \
         server RSS before any worker {rss0:.1} MB",
        a.heartbeat_ms,
        pools.len(),
        PER_CONNECTION
    );
    println!(
        "| workers | register s | server cores | cores / 1k | server RSS MB | MB / 1k | hb p50 ms | hb p99 ms | hb/s | offline | bench cores | load |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");

    let window = Arc::new(Mutex::new(Window::default()));
    let mut connections: Vec<Clients> = vec![];
    let mut started = 0usize;
    for &n in &a.workers {
        let t0 = Instant::now();
        let mut registering = tokio::task::JoinSet::new();
        for i in started..n {
            if i % PER_CONNECTION == 0 {
                connections.push(client::connect(&cfg).await.context("connecting")?);
            }
            let c = connections[i / PER_CONNECTION].workers.clone();
            let json = pools[i % pools.len()].clone();
            let window = Arc::clone(&window);
            registering.spawn(async move { simulate(c, i, json, window).await });
            // Registrations in flight at most 256: each writes the target row.
            if registering.len() >= 256 {
                registering
                    .join_next()
                    .await
                    .expect("a task")
                    .context("a worker task")??;
            }
        }
        while let Some(r) = registering.join_next().await {
            r.context("a worker task")??;
        }
        let register_s = t0.elapsed().as_secs_f64();
        started = n;
        // Two periods: every new worker's heartbeat loop and pull are under way.
        tokio::time::sleep(Duration::from_millis(2 * a.heartbeat_ms)).await;

        {
            let mut w = window.lock().expect("window lock");
            w.rtt_ms.clear();
            w.open = true;
        }
        let (c0, s0, w0) = (
            procs::cpu_seconds(pid),
            procs::self_cpu_seconds(),
            Instant::now(),
        );
        tokio::time::sleep(Duration::from_secs_f64(a.window_s)).await;
        let (c1, s1, wall) = (
            procs::cpu_seconds(pid),
            procs::self_cpu_seconds(),
            w0.elapsed().as_secs_f64(),
        );
        let mut rtt = {
            let mut w = window.lock().expect("window lock");
            w.open = false;
            std::mem::take(&mut w.rtt_ms)
        };
        rtt.sort_by(f64::total_cmp);
        let (rss, _) = procs::rss_mb(pid);
        let mut c = connections[0].workers.clone();
        let listed = c
            .list(pb::ListWorkersRequest {})
            .await
            .context("listing workers")?
            .into_inner();
        let offline = listed
            .workers
            .iter()
            .filter(|w| w.status == "offline")
            .count();
        let cores = (c1 - c0) / wall;
        println!(
            "| {n} | {register_s:.1} | {cores:.3} | {:.4} | {rss:.1} | {:.2} | {:.2} | {:.2} | {:.0} | {offline} of {} | {:.2} | {} |",
            cores * 1000.0 / n as f64,
            (rss - rss0) * 1000.0 / n as f64,
            procs::quantile(&rtt, 0.5),
            procs::quantile(&rtt, 0.99),
            rtt.len() as f64 / wall,
            listed.workers.len(),
            (s1 - s0) / wall,
            procs::load(),
        );
    }
    server.stop()?;
    Ok(())
}

/// Registers worker `i`, then heartbeats and long-polls in the background for as long as the
/// process runs. Returns once registered.
async fn simulate(
    mut c: WorkersClient<client::Authed>,
    i: usize,
    target_json: String,
    window: Arc<Mutex<Window>>,
) -> Result<()> {
    let r = c
        .register(pb::RegisterWorkerRequest {
            device_id: format!("swarm-{i}"),
            target_json,
        })
        .await
        .with_context(|| format!("registering worker {i}"))?
        .into_inner();
    let period = Duration::from_millis(u64::from(r.heartbeat_ms.max(1)));
    let id = r.worker_id;
    let mut hb = c.clone();
    let hb_id = id.clone();
    tokio::spawn(async move {
        // Spread over the period, as independent devices are.
        let phase = period.mul_f64((i % 997) as f64 / 997.0);
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + phase, period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let t = Instant::now();
            let ok = hb
                .heartbeat(pb::HeartbeatRequest {
                    worker_id: hb_id.clone(),
                    lease_id: String::new(),
                })
                .await
                .is_ok();
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let mut w = window.lock().expect("window lock");
            if ok && w.open {
                w.rtt_ms.push(ms);
            }
        }
    });
    tokio::spawn(async move {
        loop {
            let piece = c
                .pull(pb::PullRequest {
                    worker_id: id.clone(),
                    wait_ms: 10_000,
                })
                .await;
            match piece.map(|r| r.into_inner().piece) {
                // Nothing is queued; hand back anything all the same.
                Ok(Some(p)) => {
                    let _ = c
                        .report(pb::ReportRequest {
                            worker_id: id.clone(),
                            lease_id: p.lease_id,
                            results: vec![],
                            handed_back: true,
                        })
                        .await;
                }
                Ok(None) => {}
                Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
            }
        }
    });
    Ok(())
}
