//! The embedded server the tuning benchmarks run on, as `tunehub tune` runs one: a throwaway
//! SQLite file, loopback, a fresh token, measurement on this machine, and no claim loop (a
//! benchmark runs each job itself with `jobs::run_one`).

use anyhow::Result;
use std::path::Path;
use std::sync::Arc;
use tunehub_engine::target::{Target, TargetOverrides};
use tunehub_server::client::{self, Clients};
use tunehub_server::config::{ClientConfig, Limits, ServerConfig};
use tunehub_server::jobs::{DEFAULT_JOBS_PER_POOL, LocalBackend};
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
