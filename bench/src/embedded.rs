//! The embedded server the tuning benchmarks run on, as `tunehub tune` runs one: a throwaway
//! SQLite file, loopback, a fresh token, measurement on this machine, and no claim loop (a
//! benchmark runs each job itself with `jobs::run_one`).

use anyhow::{Context, Result};
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;
use tokio_stream::StreamExt;
use tunehub_engine::target::{Target, TargetOverrides};
use tunehub_proto::v1 as pb;
use tunehub_server::client::{self, Clients};
use tunehub_server::config::{ClientConfig, Limits, ServerConfig};
use tunehub_server::jobs::{self, DEFAULT_JOBS_PER_POOL, LocalBackend};
use tunehub_server::server::{self, RunningServer};

/// Starts the server on `db`, measuring on `target`, and connects a client to it.
pub async fn start(
    db: &Path,
    target: Target,
    population: usize,
    limits: Limits,
) -> Result<(RunningServer, Clients)> {
    // A fresh secret per server (std's hasher keys are random per process and per call).
    let token = format!(
        "{:016x}",
        std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), 0)
    );
    let cfg = ServerConfig {
        advertise_addr: None,
        listen: "127.0.0.1:0".parse()?,
        metrics_addr: None,
        db: db.to_string_lossy().into_owned(),
        tokens: vec![tunehub_server::auth::ApiToken::admin(0, token.clone())],
        allow_unauthenticated: false,
        tls: None,
        tls_worker_ca: None,
        limits,
        lease_ms: 30_000,
        poll_ms: 200,
        heartbeat_ms: 1000,
        jobs_per_pool: DEFAULT_JOBS_PER_POOL,
        cache_ttl_ms: 0,
        instance: "bench".into(),
        target: TargetOverrides::default(),
        population,
        run_jobs: false,
        tune_transferred: None,
    };
    let running = server::start_with(&cfg, Arc::new(LocalBackend::new(target))).await?;
    let c = client::connect(&ClientConfig {
        server: format!("http://{}", running.addr),
        token: Some(token),
        ca_cert: None,
    })
    .await?;
    Ok((running, c))
}

/// Submits `req` and runs the job on the embedded server to its end; `on_event` sees each of
/// its events before the end, and may stop the job early (`Break`: the job is cancelled after
/// its current batch, as `tunehub cancel` does). The job as it ended.
pub async fn run_job(
    running: &RunningServer,
    c: &mut Clients,
    req: pb::SubmitRequest,
    mut on_event: impl FnMut(pb::job_event::Event) -> ControlFlow<()>,
) -> Result<pb::Job> {
    let job = c
        .jobs
        .submit(req)
        .await?
        .into_inner()
        .job
        .context("no job")?;
    let runner = tokio::spawn(jobs::run_one(running.ctx.clone(), job.id.clone()));
    let mut events = c
        .jobs
        .watch(pb::WatchRequest { id: job.id.clone() })
        .await?
        .into_inner();
    let mut end = None;
    let mut cancelled = false;
    while let Some(ev) = events.next().await {
        match ev?.event {
            Some(pb::job_event::Event::Done(j)) => {
                end = Some(j);
                break;
            }
            Some(e) => {
                let stop = on_event(e).is_break();
                if stop && !cancelled {
                    cancelled = true;
                    c.jobs
                        .cancel(pb::CancelJobRequest { id: job.id.clone() })
                        .await?;
                }
            }
            None => {}
        }
    }
    runner.await??;
    end.context("the watch ended early")
}
