//! The service embedded in one process: `tunehub tune`, the offline `--db` commands and the
//! benchmarks talk to it through the API, on loopback, as any client talks to a server.
//!
//! It listens on a free loopback port, accepts one fresh admin token, measures on this machine,
//! and claims no queued job by itself: the process runs the jobs it submitted (`run_job`), so
//! a database file shared with a `tunehub server` never has its other jobs run here.

use crate::auth::ApiToken;
use crate::config::{Limits, ServerConfig};
use crate::jobs::{self, DEFAULT_JOBS_PER_POOL, JobError, LocalBackend};
use crate::server::{self, RunningServer, ServeError};
use std::sync::Arc;
use tokio::task::JoinHandle;
use tunehub_engine::search::DEFAULT_POPULATION;
use tunehub_engine::target::{Target, TargetOverrides};

/// What an embedded service is started with.
#[derive(Debug, Clone)]
pub struct EmbeddedOptions {
    /// The database: a SQLite file (created if missing) or a URL.
    pub db: String,
    /// The machine measured on: this one, as detected, with the caller's overrides.
    pub target: Target,
    /// Evolutionary search population per round.
    pub population: usize,
    pub limits: Limits,
    /// The name its records and job claims carry.
    pub instance: String,
}

impl EmbeddedOptions {
    /// The defaults of a served job, on `db`, measuring on `target`.
    pub fn new(db: impl Into<String>, target: Target) -> Self {
        EmbeddedOptions {
            db: db.into(),
            target,
            population: DEFAULT_POPULATION,
            limits: Limits {
                // Its one client is this process: a model of any size a model file may have is
                // sent whole (`Query.BuildModel`), as `tunehub build --db` reads it.
                max_message_bytes: crate::api::model::max_message_for_models(),
                ..Limits::default()
            },
            instance: "local".into(),
        }
    }
}

/// A running embedded service: its address and the one token it accepts.
pub struct Embedded {
    pub running: RunningServer,
    pub token: String,
}

impl Embedded {
    pub async fn start(o: EmbeddedOptions) -> Result<Embedded, ServeError> {
        let token = format!("{:032x}", rand::random::<u128>());
        let cfg = ServerConfig {
            advertise_addr: None,
            listen: "127.0.0.1:0".parse().expect("a valid address"),
            metrics_addr: None,
            http: None,
            db: o.db,
            tokens: vec![ApiToken::admin(0, token.clone())],
            allow_unauthenticated: false,
            tls: None,
            tls_worker_ca: None,
            limits: o.limits,
            lease_ms: 30_000,
            poll_ms: 200,
            heartbeat_ms: 1000,
            // Its own writes are the only ones a one-process service reads back.
            cache_ttl_ms: 0,
            jobs_per_pool: DEFAULT_JOBS_PER_POOL,
            instance: o.instance,
            target: TargetOverrides::default(),
            population: o.population,
            run_jobs: false,
            tune_transferred: None,
        };
        let running = server::start_with(&cfg, Arc::new(LocalBackend::new(o.target))).await?;
        Ok(Embedded { running, token })
    }

    /// The URL a client connects to.
    pub fn url(&self) -> String {
        format!("http://{}", self.running.addr)
    }

    /// Runs the submitted job `id` here to its end (claiming it as any server would), in the
    /// background: follow it through the API's Watch.
    pub fn run_job(&self, id: &str) -> JoinHandle<Result<(), JobError>> {
        tokio::spawn(jobs::run_one(self.running.ctx.clone(), id.to_string()))
    }

    /// Stops the service: every batch stored in full or not at all, no lease held.
    pub async fn shutdown(self) -> Result<(), ServeError> {
        self.running.shutdown().await
    }
}
