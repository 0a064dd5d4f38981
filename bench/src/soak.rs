//! `tunehub-bench soak`: the service under faults for a long while (issue 64).
//!
//! Real `tunehub server` processes (one on a SQLite file, or `--replicas` on one PostgreSQL
//! database) and `--workers` real `tunehub-worker` processes on one pool run tuning jobs, kept
//! at `--jobs` in flight, while `--sim-workers` simulated workers (as `swarm`'s: register,
//! heartbeat, long-poll; on other pools, so that they load the server and measure nothing)
//! come and go with the servers. Every `--fault-every-s` one fault, drawn in turn from:
//! - kill -9 of a real worker (started again 5 s later);
//! - kill -9 of a server (started again 5 s later on its address);
//! - a PostgreSQL restart (`--pg-restart CMD`, run by `sh -c`);
//! - SQLite's write lock held for 20 s by this process (`BEGIN IMMEDIATE`: a backup, an
//!   operator's `sqlite3`);
//! - a lying worker for 60 s: it reports every candidate at 1.2x the target's peak bound;
//! - 200 idle Watch streams on a running job for 60 s.
//!
//! Figures: jobs done, failed (must be 0) and cancelled; records lost (a job's record seen
//! once and gone later) and each done job's records against its trials (must match: a record
//! is content-addressed, so a duplicate is a second job_records row or a count over the
//! budget); Query.Best latency (p50, p99, errors) over the run and during faults; the liar's
//! state at the end of its minute, and at the end of the run what its word bought: records
//! attributed to it and trusted (not noisy, no error), and workloads whose Best it measured
//! (both must be 0 while honest workers share its pool).
//!
//! `tunehub-bench soak [--minutes 30] [--pg URL --replicas 2 --pg-restart CMD]`

use crate::procs::{self, TOKEN};
use anyhow::{Context, Result, bail};
use sqlx::{Connection, Row};
use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tunehub::client::{self, ClientConfig};
use tunehub_engine::target::Target;
use tunehub_proto::v1 as pb;

/// Keeps the real workers' pool apart from the servers' own machine ("local").
const SOAK_CFLAGS: &str = "-DTUNEHUB_SOAK";

/// The jobs' workloads, in turn (each job also gets its own seed).
const SPECS: [&str; 4] = [
    "matmul(64,64,64)",
    "matmul(96,80,72)",
    "conv2d_nchw(n=1,c=16,h=14,w=14,f=16,pad=1)",
    "matmul(1,256,128)",
];

#[derive(clap::Args)]
pub struct SoakArgs {
    /// How long faults are injected; the jobs in flight then finish (up to 10 minutes more).
    #[arg(long, default_value_t = 30.0)]
    minutes: f64,
    /// A PostgreSQL URL: `--replicas` servers share it [default: one server on a SQLite file].
    #[arg(long)]
    pg: Option<String>,
    /// Server replicas on `--pg`.
    #[arg(long, default_value_t = 2)]
    replicas: usize,
    /// A shell command that restarts the PostgreSQL server (a fault); none: no such fault.
    #[arg(long)]
    pg_restart: Option<String>,
    /// Real `tunehub-worker` processes.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Simulated workers on other pools.
    #[arg(long, default_value_t = 200)]
    sim_workers: usize,
    /// Jobs kept in flight.
    #[arg(long, default_value_t = 8)]
    jobs: usize,
    /// Trials per job.
    #[arg(long, default_value_t = 32)]
    trials: u32,
    /// Seconds between faults.
    #[arg(long, default_value_t = 60.0)]
    fault_every_s: f64,
    /// Where the databases and logs go [default: a temporary directory].
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// A fault the soak injects.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    KillWorker,
    KillServer,
    PgRestart,
    SqliteLock,
    Liar,
    WatchStreams,
}

/// A child process that can be killed and started again the same way.
struct Restartable {
    cmd: Box<dyn Fn() -> Command + Send>,
    child: Option<Child>,
}

impl Restartable {
    fn start(cmd: Box<dyn Fn() -> Command + Send>) -> Result<Restartable> {
        let mut r = Restartable { cmd, child: None };
        r.restart()?;
        Ok(r)
    }

    fn restart(&mut self) -> Result<()> {
        self.child = Some((self.cmd)().spawn().context("starting a child")?);
        Ok(())
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Restartable {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = procs::terminate(c, Duration::from_secs(10));
        }
    }
}

/// A Query.Best probe: when (s since start), how long (ms), and whether it answered.
#[derive(Clone, Copy)]
struct Probe {
    at_s: f64,
    ms: f64,
    ok: bool,
}

pub async fn run(a: SoakArgs) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = a.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir)?;
    let sqlite = dir.join("soak.db");
    let db = match &a.pg {
        Some(url) => url.clone(),
        None => sqlite.display().to_string(),
    };
    let replicas = if a.pg.is_some() { a.replicas.max(1) } else { 1 };
    let tunehub = procs::sibling_bin("tunehub")?;
    let worker_bin = procs::sibling_bin("tunehub-worker")?;

    // Servers on fixed loopback ports, so that a restarted one is where its clients look.
    let mut addrs = vec![];
    for _ in 0..replicas {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        addrs.push(l.local_addr()?.to_string());
    }
    let mut servers = vec![];
    for (i, addr) in addrs.iter().enumerate() {
        let url = addr_url(addr);
        let (bin, db, addr) = (tunehub.clone(), db.clone(), addr.clone());
        let log = dir.join(format!("server-{i}.log"));
        servers.push(Restartable::start(Box::new(move || {
            let mut c = Command::new(&bin);
            c.args(["server", "--listen", &addr, "--db", &db, "--token", TOKEN])
                .args(["--instance", &format!("soak-{i}")])
                .env_remove("TUNEHUB_TOKENS")
                .env_remove("TUNEHUB_CONFIG")
                .env("RUST_LOG", "warn")
                .stdout(Stdio::null())
                .stderr(append(&log));
            c
        }))?);
        // One at a time: the first applies the migrations.
        wait_serving(&url).await?;
    }
    let urls: Vec<String> = addrs.iter().map(|a| addr_url(a)).collect();
    let mut workers = vec![];
    for i in 0..a.workers {
        let (bin, servers) = (worker_bin.clone(), urls.join(","));
        let log = dir.join(format!("worker-{i}.log"));
        workers.push(Restartable::start(Box::new(move || {
            let mut c = Command::new(&bin);
            c.args(["--server", &servers, "--token", TOKEN])
                .args(["--device-id", &format!("soak-{i}")])
                .arg(format!("--cflags={SOAK_CFLAGS}"))
                .env("RUST_LOG", "warn")
                .stdout(Stdio::null())
                .stderr(append(&log));
            c
        }))?);
    }
    let target_key = worker_target_key(&worker_bin)?;
    let mut target = Target::detect();
    target.cflags.push(SOAK_CFLAGS.into());
    let cfg = |url: &str| ClientConfig {
        server: url.to_string(),
        token: Some(TOKEN.into()),
        ca_cert: None,
    };
    let mut c = client::connect(&cfg(&urls[0])).await?;
    for i in 0..a.sim_workers {
        let url = urls[i % urls.len()].clone();
        let mut t = Target::detect();
        t.cflags.push(format!("-DTUNEHUB_SWARM_POOL={}", i % 4));
        let json = serde_json::to_string(&t)?;
        let conn = client::connect(&cfg(&url)).await?;
        tokio::spawn(simulate(conn.workers, i, json));
    }
    println!(
        "soak: {} server(s) on {}, {} real workers on pool {target_key}, {} simulated workers, \
         {} jobs in flight of {} trials, a fault every {} s for {} min; logs in {}",
        replicas,
        if a.pg.is_some() {
            "PostgreSQL"
        } else {
            "SQLite"
        },
        a.workers,
        a.sim_workers,
        a.jobs,
        a.trials,
        a.fault_every_s,
        a.minutes,
        dir.display()
    );

    let t0 = Instant::now();
    let probes: Arc<Mutex<Vec<Probe>>> = Arc::default();
    let faults_at: Arc<Mutex<Vec<(f64, f64, Fault)>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let submitted: Arc<Mutex<Vec<String>>> = Arc::default();
    // Jobs kept in flight until the faults end.
    let feeder = {
        let (mut c, submitted, stop) = (c.clone(), submitted.clone(), stop.clone());
        let (target_key, jobs, trials) = (target_key.clone(), a.jobs, a.trials);
        tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let ids = submitted.lock().unwrap().clone();
                let mut open = 0;
                for id in &ids {
                    if let Ok(j) = c.jobs.get(pb::GetJobRequest { id: id.clone() }).await
                        && matches!(
                            j.into_inner().state(),
                            pb::JobState::Queued | pb::JobState::Running
                        )
                    {
                        open += 1;
                    }
                }
                for _ in open..jobs {
                    let spec = SPECS[n as usize % SPECS.len()];
                    if let Ok(r) = c.jobs.submit(job(spec, trials, &target_key, n)).await
                        && let Some(j) = r.into_inner().job
                    {
                        submitted.lock().unwrap().push(j.id);
                        n += 1;
                    }
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        })
    };
    // Best probes every 100 ms on the first workload, once it has a record.
    let prober = {
        let (mut c, probes, stop) = (c.clone(), probes.clone(), stop.clone());
        let target_key = target_key.clone();
        tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let t = Instant::now();
                let r = tokio::time::timeout(
                    Duration::from_secs(30),
                    c.query.best(pb::BestRequest {
                        workload: Some(op(SPECS[0])),
                        target: target_key.clone(),
                        omit_kernel: true,
                        ..Default::default()
                    }),
                )
                .await;
                let ok = match r {
                    Ok(Ok(_)) => true,
                    // Not tuned yet: no figure.
                    Ok(Err(s)) if s.code() == tonic::Code::NotFound => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                    _ => false,
                };
                probes.lock().unwrap().push(Probe {
                    at_s: t0.elapsed().as_secs_f64(),
                    ms: t.elapsed().as_secs_f64() * 1e3,
                    ok,
                });
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    let mut kinds = vec![Fault::KillWorker, Fault::KillServer];
    if a.pg_restart.is_some() {
        kinds.push(Fault::PgRestart);
    }
    if a.pg.is_none() {
        kinds.push(Fault::SqliteLock);
    }
    kinds.extend([Fault::Liar, Fault::WatchStreams]);
    let mut seen_records: BTreeSet<(String, String)> = BTreeSet::new();
    let mut lost = 0usize;
    let mut liars = vec![];
    let mut k = 0usize;
    let end = Duration::from_secs_f64(a.minutes * 60.0);
    while t0.elapsed() < end {
        tokio::time::sleep(Duration::from_secs_f64(a.fault_every_s)).await;
        // What the database held a minute ago must still be there.
        let now = job_records(&db).await.unwrap_or_default();
        lost += seen_records.difference(&now).count();
        seen_records = now;
        let fault = kinds[k % kinds.len()];
        let start = t0.elapsed().as_secs_f64();
        let what = match fault {
            Fault::KillWorker => {
                let w = k / kinds.len() % workers.len().max(1);
                workers[w].kill9();
                tokio::time::sleep(Duration::from_secs(5)).await;
                workers[w].restart()?;
                format!("kill -9 worker soak-{w}, started again 5 s later")
            }
            Fault::KillServer => {
                let s = k / kinds.len() % servers.len();
                servers[s].kill9();
                tokio::time::sleep(Duration::from_secs(5)).await;
                servers[s].restart()?;
                wait_serving(&urls[s]).await?;
                format!("kill -9 server {s}, started again 5 s later")
            }
            Fault::PgRestart => {
                let cmd = a.pg_restart.as_deref().unwrap_or_default();
                let ok = Command::new("sh").args(["-c", cmd]).status()?.success();
                format!(
                    "PostgreSQL restarted ({})",
                    if ok { "ok" } else { "FAILED" }
                )
            }
            Fault::SqliteLock => {
                let url = format!("sqlite://{}", sqlite.display());
                let mut conn = sqlx::SqliteConnection::connect(&url).await?;
                sqlx::query("BEGIN IMMEDIATE").execute(&mut conn).await?;
                tokio::time::sleep(Duration::from_secs(20)).await;
                sqlx::query("ROLLBACK").execute(&mut conn).await?;
                conn.close().await?;
                "SQLite write lock held 20 s".into()
            }
            Fault::Liar => {
                let (id, state) = lie(&cfg(&urls[0]), &target, k).await?;
                liars.push(id);
                format!("a lying worker for 60 s: {state}")
            }
            Fault::WatchStreams => {
                let n = watch_idle(&cfg(&urls[0]), &submitted, 200).await?;
                format!("{n} idle Watch streams for 60 s")
            }
        };
        let stop_s = t0.elapsed().as_secs_f64();
        faults_at.lock().unwrap().push((start, stop_s, fault));
        println!(
            "{:>7.1} s  {what} (load {})",
            t0.elapsed().as_secs_f64(),
            procs::load()
        );
        k += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    feeder.await?;
    prober.await?;
    println!("faults over; waiting for the jobs in flight to end (10 min at most)");
    let ids = submitted.lock().unwrap().clone();
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut jobs = vec![];
    for id in &ids {
        loop {
            let j = c.jobs.get(pb::GetJobRequest { id: id.clone() }).await;
            if let Ok(j) = j {
                let j = j.into_inner();
                if !matches!(j.state(), pb::JobState::Queued | pb::JobState::Running)
                    || Instant::now() > deadline
                {
                    jobs.push(j);
                    break;
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    let now = job_records(&db).await?;
    lost += seen_records.difference(&now).count();
    let trusted = trusted_lies(&db, &liars).await?;
    let mut bests = 0;
    for spec in SPECS {
        if let Ok(b) = c
            .query
            .best(pb::BestRequest {
                workload: Some(op(spec)),
                target: target_key.clone(),
                omit_kernel: true,
                ..Default::default()
            })
            .await
            && b.into_inner()
                .record
                .is_some_and(|r| liars.contains(&r.worker))
        {
            bests += 1;
        }
    }
    println!(
        "a liar's word ({} liars): {trusted} records trusted, {bests} of {} workloads' Best",
        liars.len(),
        SPECS.len()
    );
    report(
        &jobs,
        &now,
        lost,
        &probes.lock().unwrap(),
        &faults_at.lock().unwrap(),
    );
    drop(workers);
    drop(servers);
    Ok(())
}

fn addr_url(addr: &str) -> String {
    format!("http://{addr}")
}

fn append(path: &Path) -> Stdio {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(Stdio::from)
        .unwrap_or_else(|_| Stdio::null())
}

/// Waits until a server answers the health service's check (60 s at most).
async fn wait_serving(url: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Ok(ch) = tonic::transport::Endpoint::from_shared(url.to_string())?
            .connect()
            .await
        {
            let mut h = tonic_health::pb::health_client::HealthClient::new(ch);
            if let Ok(r) = h
                .check(tonic_health::pb::HealthCheckRequest::default())
                .await
                && r.into_inner().status == 1
            {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!("the server at {url} did not come up in 60 s")
}

/// The real workers' target key, as `tunehub-worker --print-target` says.
fn worker_target_key(bin: &Path) -> Result<String> {
    let out = Command::new(bin)
        .args(["--print-target", &format!("--cflags={SOAK_CFLAGS}")])
        .output()?;
    let s = String::from_utf8_lossy(&out.stdout);
    s.lines()
        .find_map(|l| l.strip_prefix("key: "))
        .map(str::to_string)
        .context("no `key:` line from tunehub-worker --print-target")
}

fn op(spec: &str) -> pb::Workload {
    pb::Workload {
        kind: Some(pb::workload::Kind::OpSpec(spec.into())),
        options: None,
    }
}

fn job(spec: &str, trials: u32, target: &str, n: u64) -> pb::SubmitRequest {
    pb::SubmitRequest {
        tasks: vec![pb::TaskSpec {
            workload: Some(op(spec)),
            trials,
            weight: 1.0,
            alternative: false,
        }],
        target: target.into(),
        // Short timing; the noise guard on but lenient (four workers share two cores).
        measure: Some(pb::MeasureOptions {
            number: Some(1),
            repeat: Some(3),
            min_repeat_ms: Some(1),
            warmup: Some(1),
            flush_cache: Some(false),
            timeout_s: Some(10.0),
            noise_threshold: Some(0.3),
        }),
        batch_size: 8,
        seed: 1000 + n,
        name: format!("soak-{n}"),
        ..Default::default()
    }
}

/// A connection to the servers' database for reading (read-only on SQLite: the servers write).
async fn read_only(db: &str) -> Result<sqlx::AnyConnection> {
    sqlx::any::install_default_drivers();
    let url = if db.starts_with("postgres") {
        db.to_string()
    } else {
        format!("sqlite://{db}?mode=ro")
    };
    Ok(sqlx::AnyConnection::connect(&url).await?)
}

/// Every (job, record) pair the database holds.
async fn job_records(db: &str) -> Result<BTreeSet<(String, String)>> {
    let mut c = read_only(db).await?;
    let rows = sqlx::query("SELECT job_id, record_id FROM job_records")
        .fetch_all(&mut c)
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    c.close().await?;
    Ok(rows)
}

/// Records attributed to one of `liars` and trusted: successes not flagged noisy.
async fn trusted_lies(db: &str, liars: &[String]) -> Result<i64> {
    if liars.is_empty() {
        return Ok(0);
    }
    let mut c = read_only(db).await?;
    let mut n = 0i64;
    for id in liars {
        let row = sqlx::query(
            "SELECT COUNT(*) FROM records WHERE worker = $1 AND noisy = 0 AND error_code = 0",
        )
        .bind(id)
        .fetch_one(&mut c)
        .await?;
        n += row.get::<i64, _>(0);
    }
    c.close().await?;
    Ok(n)
}

/// A simulated worker on another pool: registers, heartbeats and long-polls for as long as the
/// process runs, and registers again when its server forgot it (a restart).
async fn simulate(
    mut c: tunehub_proto::v1::workers_client::WorkersClient<client::Authed>,
    i: usize,
    target_json: String,
) {
    loop {
        let Ok(r) = c
            .register(pb::RegisterWorkerRequest {
                device_id: format!("soak-sim-{i}"),
                target_json: target_json.clone(),
            })
            .await
        else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        let r = r.into_inner();
        let period = Duration::from_millis(u64::from(r.heartbeat_ms.max(100)));
        let id = r.worker_id;
        let mut last_hb = Instant::now();
        loop {
            if last_hb.elapsed() >= period {
                last_hb = Instant::now();
                let hb = c
                    .heartbeat(pb::HeartbeatRequest {
                        worker_id: id.clone(),
                        lease_id: String::new(),
                    })
                    .await;
                if hb.is_err() {
                    break;
                }
            }
            match c
                .pull(pb::PullRequest {
                    worker_id: id.clone(),
                    wait_ms: period.as_millis() as u32,
                })
                .await
            {
                Ok(r) => {
                    if let Some(p) = r.into_inner().piece {
                        let _ = c
                            .report(pb::ReportRequest {
                                worker_id: id.clone(),
                                lease_id: p.lease_id,
                                results: vec![],
                                handed_back: true,
                            })
                            .await;
                    }
                }
                Err(_) => {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    break;
                }
            }
        }
    }
}

/// A worker of the real workers' pool that reports every candidate it pulls at 1.2x the
/// target's peak bound for 60 s. Returns its worker id and its state as the server lists it
/// afterwards.
async fn lie(cfg: &ClientConfig, target: &Target, n: usize) -> Result<(String, String)> {
    let mut c = client::connect(cfg).await?.workers;
    let r = c
        .register(pb::RegisterWorkerRequest {
            device_id: format!("soak-liar-{n}"),
            target_json: serde_json::to_string(target)?,
        })
        .await?
        .into_inner();
    let id = r.worker_id;
    let peak = tunehub_server::jobs::result_check::peak_flops(target);
    let until = Instant::now() + Duration::from_secs(60);
    let mut told = 0usize;
    while Instant::now() < until {
        let Ok(p) = c
            .pull(pb::PullRequest {
                worker_id: id.clone(),
                wait_ms: 1000,
            })
            .await
        else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        let Some(p) = p.into_inner().piece else {
            continue;
        };
        // The piece carries the DAG, not its FLOPs: the lie is per workload.
        let flops = serde_json::from_str::<tunehub_engine::ir::ComputeDag>(&p.dag_json)
            .map(|d| d.flop_count() as f64)
            .unwrap_or(1e6);
        let lie = 1.2 * flops / peak;
        let results = vec![
            pb::MeasuredCandidate {
                costs: vec![lie, lie, lie],
                build_s: 0.1,
                run_s: 0.1,
                ..Default::default()
            };
            p.steps_json.len()
        ];
        told += results.len();
        let _ = c
            .report(pb::ReportRequest {
                worker_id: id.clone(),
                lease_id: p.lease_id,
                results,
                handed_back: false,
            })
            .await;
    }
    let listed = c.list(pb::ListWorkersRequest {}).await?.into_inner();
    let me = listed.workers.iter().find(|w| w.id == id);
    let state = format!(
        "{told} candidates lied about; then {}",
        me.map_or("not listed".into(), |w| if w.quarantine_reason.is_empty() {
            w.status.clone()
        } else {
            format!("{} ({})", w.status, w.quarantine_reason)
        })
    );
    Ok((id, state))
}

/// Opens `n` Watch streams on the newest job still running, reads none for 60 s, drops them.
async fn watch_idle(cfg: &ClientConfig, submitted: &Mutex<Vec<String>>, n: usize) -> Result<usize> {
    let c = client::connect(cfg).await?;
    let id = submitted
        .lock()
        .unwrap()
        .last()
        .cloned()
        .unwrap_or_default();
    let mut streams = vec![];
    for _ in 0..n {
        let mut j = c.jobs.clone();
        if let Ok(s) = j.watch(pb::WatchRequest { id: id.clone() }).await {
            streams.push(s.into_inner());
        }
    }
    let opened = streams.len();
    tokio::time::sleep(Duration::from_secs(60)).await;
    drop(streams);
    Ok(opened)
}

fn report(
    jobs: &[pb::Job],
    records: &BTreeSet<(String, String)>,
    lost: usize,
    probes: &[Probe],
    faults: &[(f64, f64, Fault)],
) {
    let count = |s: pb::JobState| jobs.iter().filter(|j| j.state() == s).count();
    let mut mismatched = vec![];
    for j in jobs.iter().filter(|j| j.state() == pb::JobState::Done) {
        let stored = records.iter().filter(|(id, _)| *id == j.id).count();
        let done: u32 = j.tasks.iter().map(|t| t.trials_done).sum();
        let budget: u32 = j.tasks.iter().map(|t| t.trials).sum();
        if stored as u32 != done || done > budget {
            mismatched.push(format!(
                "{}: {stored} records, {done} done of {budget}",
                j.id
            ));
        }
    }
    println!(
        "jobs: {} submitted, {} done, {} failed, {} cancelled, {} still open",
        jobs.len(),
        count(pb::JobState::Done),
        count(pb::JobState::Failed),
        count(pb::JobState::Cancelled),
        count(pb::JobState::Queued) + count(pb::JobState::Running)
    );
    for j in jobs.iter().filter(|j| j.state() == pb::JobState::Failed) {
        println!("  failed {}: {}", j.id, j.error);
    }
    println!(
        "records: {} job records; lost {lost}; done jobs whose records differ from their trials: {} {:?}",
        records.len(),
        mismatched.len(),
        mismatched
    );
    let in_fault = |t: f64| faults.iter().any(|(a, b, _)| t >= *a && t <= *b + 5.0);
    for (label, sel) in [("all", None), ("during faults", Some(true))] {
        let mut ms: Vec<f64> = probes
            .iter()
            .filter(|p| sel.is_none_or(|_| in_fault(p.at_s)))
            .map(|p| p.ms)
            .collect();
        let errors = probes
            .iter()
            .filter(|p| sel.is_none_or(|_| in_fault(p.at_s)) && !p.ok)
            .count();
        ms.sort_by(f64::total_cmp);
        println!(
            "Best latency ({label}): {} probes, p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms, {errors} errors",
            ms.len(),
            procs::quantile(&ms, 0.5),
            procs::quantile(&ms, 0.99),
            ms.last().copied().unwrap_or(f64::NAN)
        );
    }
}
