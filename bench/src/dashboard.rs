//! `tunehub-bench dashboard`: what the web dashboard costs (issue 63): the page's weight, its
//! load time on loopback in a real browser, and the server's CPU with N dashboards open on a
//! fleet running M jobs, against none.
//!
//! A real `tunehub server --http` and W real `tunehub-worker` processes (the binaries beside
//! this one) on this machine; M jobs of many trials on the workers' pool, all running at once
//! (`--jobs-per-pool M`). Then windows alternate, R rounds of: none open, then N pages open in
//! headless Chromium (half on a running job's page, half on the jobs list: the views that poll
//! every 2 s), each window's server CPU from /proc (its own process: the workers and the
//! browser, which share the machine, are not in it; they are printed beside it).
//!
//! `tunehub-bench dashboard [--dashboards 10] [--jobs 8] [--workers 2] [--window-s 30]
//! [--rounds 3]`

use crate::procs::{self, TOKEN};
use anyhow::{Context, Result, bail};
use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::page::Page;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio_stream::StreamExt;
use tunehub::client::{self, ClientConfig};
use tunehub_proto::v1 as pb;

/// The workers' own pool, apart from the server's machine.
const POOL_CFLAGS: &str = "--cflags=-DTUNEHUB_DASHBOARD_BENCH";

#[derive(clap::Args)]
pub struct DashboardArgs {
    /// Dashboards open at once in the loaded windows.
    #[arg(long, default_value_t = 10)]
    dashboards: usize,
    /// Jobs running on the fleet.
    #[arg(long, default_value_t = 8)]
    jobs: usize,
    /// `tunehub-worker` processes measuring them.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Seconds of each window.
    #[arg(long, default_value_t = 30.0)]
    window_s: f64,
    /// Rounds of (none, N dashboards).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// The browser [default: `chromium` on PATH].
    #[arg(long)]
    chromium: Option<PathBuf>,
}

fn on_path(cmd: &str) -> Result<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(cmd))
        .find(|p| p.is_file())
        .with_context(|| format!("{cmd} is not on PATH (apt-get install chromium)"))
}

struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn eval(page: &Page, expr: &str) -> Result<serde_json::Value> {
    Ok(page
        .evaluate(expr)
        .await
        .with_context(|| format!("evaluating {expr}"))?
        .into_value()
        .unwrap_or(serde_json::Value::Null))
}

/// Opens the dashboard at `url` + `hash` signed in (the token in the tab's session storage, as
/// the sign-in form leaves it) and waits for its first view; milliseconds from the navigation
/// to that view, as the page measured them.
async fn open(browser: &Browser, url: &str, hash: &str) -> Result<(Page, f64)> {
    // Without a token the page stops at its sign-in form (no view is drawn): the token goes
    // in, then the page loads again at the view.
    let page = browser.new_page(url).await?;
    eval(
        &page,
        &format!(
            "sessionStorage.setItem('tunehub-token', '{TOKEN}'); location.hash = '{hash}'; \
             setTimeout(() => location.reload(), 0); true"
        ),
    )
    .await?;
    let start = Instant::now();
    loop {
        let v = eval(
            &page,
            "document.getElementById('view').dataset.loaded \
             ? Number(document.getElementById('view').dataset.loaded) - performance.timeOrigin \
             : null",
        )
        .await
        // The document in between (reloading) answers nothing.
        .unwrap_or(serde_json::Value::Null);
        if let Some(ms) = v.as_f64() {
            return Ok((page, ms));
        }
        if start.elapsed() > Duration::from_secs(30) {
            bail!("the dashboard did not show {hash} in 30 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Bytes the page loaded: the document, its script and style, and the latest answer of each
/// endpoint it polls (encoded sizes as the browser received them).
async fn weight(page: &Page) -> Result<serde_json::Value> {
    eval(
        page,
        "(() => { const r = {}; \
           const nav = performance.getEntriesByType('navigation')[0]; r.document = nav.encodedBodySize; \
           for (const e of performance.getEntriesByType('resource')) { \
             const p = new URL(e.name).pathname; r[p] = e.encodedBodySize; } \
           return r; })()",
    )
    .await
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    procs::quantile(&v, 0.5)
}

pub async fn run(a: DashboardArgs) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let server = procs::ServerProc::start(
        &procs::sibling_bin("tunehub")?,
        &dir.path().join("dash.db").display().to_string(),
        &dir.path().join("server.log"),
        &[
            "--http",
            "127.0.0.1:0",
            "--jobs-per-pool",
            &a.jobs.to_string(),
        ],
    )?;
    let url = server.dashboard.clone().context("the dashboard's URL")?;
    let pid = server.pid();
    let worker_bin = procs::sibling_bin("tunehub-worker")?;
    let mut workers = vec![];
    for i in 0..a.workers {
        let log = std::fs::File::create(dir.path().join(format!("worker-{i}.log")))?;
        workers.push(Kill(
            Command::new(&worker_bin)
                .args(["--server", &server.url(), "--token", TOKEN])
                .args(["--device-id", &format!("dash-{i}"), POOL_CFLAGS])
                .env("RUST_LOG", "warn")
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()?,
        ));
    }
    let mut c = client::connect(&ClientConfig {
        server: server.url(),
        token: Some(TOKEN.into()),
        ca_cert: None,
    })
    .await?;
    let key = loop {
        let l = c
            .workers
            .list(pb::ListWorkersRequest {})
            .await?
            .into_inner();
        if l.workers.len() >= a.workers {
            break l.workers[0].target_key.clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    // The browser, and the page's weight and load time on a quiet server.
    let chromium = match &a.chromium {
        Some(p) => p.clone(),
        None => on_path("chromium")?,
    };
    let (mut browser, mut handler) = Browser::launch(
        BrowserConfig::builder()
            .chrome_executable(chromium)
            .user_data_dir(dir.path().join("chromium"))
            .no_sandbox()
            .arg("--disable-gpu")
            .arg("--disable-dev-shm-usage")
            .build()
            .map_err(anyhow::Error::msg)?,
    )
    .await?;
    let events = tokio::spawn(async move { while handler.next().await.is_some() {} });
    let mut quiet = vec![];
    for _ in 0..10 {
        let (page, ms) = open(&browser, &url, "#/jobs").await?;
        quiet.push(ms);
        page.close().await?;
    }

    // The jobs: many trials each, so that they run through every window.
    let mut jobs = vec![];
    for j in 0..a.jobs {
        let spec = format!("matmul({},{},64)", 64 + 16 * j, 64);
        let r = c
            .jobs
            .submit(pb::SubmitRequest {
                tasks: vec![pb::TaskSpec {
                    workload: Some(pb::Workload {
                        kind: Some(pb::workload::Kind::OpSpec(spec)),
                        options: None,
                    }),
                    trials: 100_000,
                    weight: 1.0,
                    alternative: false,
                }],
                target: key.clone(),
                batch_size: 8,
                name: format!("dash-bench-{j}"),
                measure: Some(pb::MeasureOptions {
                    number: Some(1),
                    repeat: Some(2),
                    min_repeat_ms: Some(1),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await?
            .into_inner();
        jobs.push(r.job.context("a submitted job")?.id);
    }
    // Every job running and measuring.
    let start = Instant::now();
    loop {
        let l = c
            .jobs
            .list(pb::ListJobsRequest::default())
            .await?
            .into_inner();
        let measuring = l
            .jobs
            .iter()
            .filter(|j| j.tasks.iter().any(|t| t.trials_done > 0))
            .count();
        if measuring >= a.jobs {
            break;
        }
        if start.elapsed() > Duration::from_secs(300) {
            bail!("only {measuring} of {} jobs measured within 300 s", a.jobs);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    println!(
        "dashboard: server pid {pid}, {} workers, {} jobs running, {} dashboards, windows of {} s; load {}",
        a.workers,
        a.jobs,
        a.dashboards,
        a.window_s,
        procs::load()
    );
    println!("| round | dashboards | server cores | server trials/s | load after |");
    println!("|---|---|---|---|---|");
    let trials = async |c: &mut client::Clients| -> Result<u64> {
        let l = c
            .jobs
            .list(pb::ListJobsRequest::default())
            .await?
            .into_inner();
        Ok(l.jobs
            .iter()
            .flat_map(|j| &j.tasks)
            .map(|t| u64::from(t.trials_done))
            .sum())
    };
    let window = Duration::from_secs_f64(a.window_s);
    let mut loaded_ms = vec![];
    let mut sizes = serde_json::Value::Null;
    let mut cores = [vec![], vec![]];
    for round in 1..=a.rounds {
        for open_n in [0, a.dashboards] {
            let mut pages = vec![];
            for i in 0..open_n {
                let hash = if i % 2 == 0 {
                    format!("#/job/{}", jobs[i / 2 % jobs.len()])
                } else {
                    "#/jobs".to_string()
                };
                let (p, ms) = open(&browser, &url, &hash).await?;
                loaded_ms.push(ms);
                pages.push(p);
            }
            // Every page has polled a few times before the window opens.
            tokio::time::sleep(Duration::from_secs(3)).await;
            let cpu0 = procs::cpu_seconds(pid);
            let done0 = trials(&mut c).await?;
            let t0 = Instant::now();
            tokio::time::sleep(window).await;
            let used = (procs::cpu_seconds(pid) - cpu0) / t0.elapsed().as_secs_f64();
            let rate = (trials(&mut c).await? - done0) as f64 / t0.elapsed().as_secs_f64();
            cores[usize::from(open_n > 0)].push(used);
            println!(
                "| {round} | {open_n} | {used:.3} | {rate:.1} | {} |",
                procs::load()
            );
            if let Some(p) = pages.first() {
                sizes = weight(p).await?;
            }
            for p in pages {
                p.close().await?;
            }
        }
    }
    let worst = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    println!(
        "server cores, worst of {} windows: none {:.3}, {} dashboards {:.3} (+{:.3})",
        a.rounds,
        worst(&cores[0]),
        a.dashboards,
        worst(&cores[1]),
        worst(&cores[1]) - worst(&cores[0])
    );
    println!(
        "first view, ms from navigation: quiet server median {:.0} max {:.0}; under load (the \
         {} pages opened in the windows) median {:.0} max {:.0}",
        median(quiet.clone()),
        worst(&quiet),
        loaded_ms.len(),
        median(loaded_ms.clone()),
        worst(&loaded_ms)
    );
    println!("bytes loaded by a job's page (encoded): {sizes}");

    browser.close().await?;
    let _ = browser.wait().await;
    events.abort();
    for j in &jobs {
        let _ = c.jobs.cancel(pb::CancelJobRequest { id: j.clone() }).await;
    }
    drop(workers);
    server.stop()?;
    Ok(())
}
