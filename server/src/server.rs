//! Serving: the database, the job loop and the gRPC services (with health, reflection, the token
//! interceptor, and TLS when configured) on one listener.

use crate::api::Api;
use crate::auth::Auth;
use crate::cache::BestCache;
use crate::config::ServerConfig;
use crate::fleet::{Fleet, FleetBackend, FleetConfig, WorkersService};
use crate::jobs::store::JobStore;
use crate::jobs::{JobContext, MeasureBackend, run_loop};
use crate::records::{SqlStore, StoreError};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Identity, Server, ServerTlsConfig};
use tunehub_engine::search::SearchParams;
use tunehub_engine::target::Target;
use tunehub_proto::v1 as pb;
use tunehub_proto::v1::jobs_server::JobsServer;
use tunehub_proto::v1::query_server::QueryServer;
use tunehub_proto::v1::records_server::RecordsServer;
use tunehub_proto::v1::workers_server::WorkersServer;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("TLS: cannot read {path}")]
    TlsFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("gRPC transport")]
    Transport(#[from] tonic::transport::Error),
    #[error("reflection service: {0}")]
    Reflection(String),
}

/// A started server: its address, and handles to stop it.
pub struct RunningServer {
    pub addr: SocketAddr,
    pub ctx: JobContext,
    shutdown: tokio::sync::watch::Sender<bool>,
    serve: JoinHandle<Result<(), tonic::transport::Error>>,
    jobs: Option<JoinHandle<()>>,
    /// The worker fleet, when this server has one (`start`), and its lease reaper.
    pub fleet: Option<Arc<Fleet>>,
    reaper: Option<JoinHandle<()>>,
}

impl RunningServer {
    /// Stops taking calls and jobs; a running job stops after its current batch and stays
    /// claimable for the next server.
    pub async fn shutdown(self) -> Result<(), ServeError> {
        self.ctx.shut_down();
        if let Some(f) = &self.fleet {
            // Unblocks a batch waiting on workers: the driver then stores nothing of it.
            f.shut_down();
        }
        if let Some(r) = &self.reaper {
            r.abort();
        }
        let _ = self.shutdown.send(true);
        if let Some(j) = self.jobs {
            let _ = j.await;
        }
        let served = self.serve.await;
        self.ctx.jobs.records().close().await;
        match served {
            Ok(r) => Ok(r?),
            Err(e) => {
                tracing::error!("server task: {e}");
                Ok(())
            }
        }
    }

    /// Runs until Ctrl-C or SIGTERM, then shuts down.
    pub async fn run_until_signal(self) -> Result<(), ServeError> {
        wait_for_signal().await;
        tracing::info!("shutting down");
        self.shutdown().await
    }
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

/// Opens the database (applying migrations), binds the listener, and starts serving and
/// running jobs: "local" jobs measured on this machine's target (with the configured
/// overrides), every other target's on the worker fleet that registers with this server.
pub async fn start(cfg: &ServerConfig) -> Result<RunningServer, ServeError> {
    let target = Target::detect().with_overrides(&cfg.target);
    let fleet = Arc::new(Fleet::new(FleetConfig::default()));
    let backend = Arc::new(FleetBackend::new(target, Arc::clone(&fleet)));
    start_inner(cfg, backend, Some(fleet)).await
}

/// `start` with any measure backend and no fleet.
pub async fn start_with(
    cfg: &ServerConfig,
    backend: Arc<dyn MeasureBackend>,
) -> Result<RunningServer, ServeError> {
    start_inner(cfg, backend, None).await
}

async fn start_inner(
    cfg: &ServerConfig,
    backend: Arc<dyn MeasureBackend>,
    fleet: Option<Arc<Fleet>>,
) -> Result<RunningServer, ServeError> {
    let store = SqlStore::open(&cfg.db).await?;
    let ctx = JobContext::new(
        JobStore::new(store),
        Arc::new(BestCache::new(Duration::from_millis(cfg.cache_ttl_ms))),
        backend,
        cfg.instance.clone(),
        cfg.lease_ms,
        Duration::from_millis(cfg.poll_ms),
        SearchParams {
            population: cfg.population,
            ..SearchParams::default()
        },
    );
    let api = Api {
        ctx: ctx.clone(),
        limits: cfg.limits,
    };
    let workers = fleet.as_ref().map(|f| {
        InterceptedService::new(
            WorkersServer::new(WorkersService {
                fleet: Arc::clone(f),
                store: ctx.jobs.records().clone(),
            })
            .max_decoding_message_size(max_of(cfg))
            .max_encoding_message_size(max_of(cfg)),
            Auth::new(cfg.tokens.clone()),
        )
    });
    let auth = Auth::new(cfg.tokens.clone());
    let max = cfg.limits.max_message_bytes;

    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<JobsServer<Api>>().await;
    health.set_serving::<QueryServer<Api>>().await;
    health.set_serving::<RecordsServer<Api>>().await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(|e| ServeError::Reflection(e.to_string()))?;

    let mut builder = Server::builder();
    if let Some((cert, key)) = &cfg.tls {
        let read = |p: &std::path::PathBuf| {
            std::fs::read(p).map_err(|source| ServeError::TlsFile {
                path: p.display().to_string(),
                source,
            })
        };
        let identity = Identity::from_pem(read(cert)?, read(key)?);
        builder = builder.tls_config(ServerTlsConfig::new().identity(identity))?;
    }
    // Health is the one service served without a token (load balancers and probes have none).
    let router = builder
        .add_service(health_service)
        .add_service(InterceptedService::new(reflection, auth.clone()))
        .add_service(InterceptedService::new(
            JobsServer::new(api.clone())
                .max_decoding_message_size(max)
                .max_encoding_message_size(max),
            auth.clone(),
        ))
        .add_service(InterceptedService::new(
            QueryServer::new(api.clone())
                .max_decoding_message_size(max)
                .max_encoding_message_size(max),
            auth.clone(),
        ))
        .add_service(InterceptedService::new(
            RecordsServer::new(api)
                .max_decoding_message_size(max)
                .max_encoding_message_size(max),
            auth,
        ))
        .add_optional_service(workers);

    let listener = TcpListener::bind(cfg.listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: cfg.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: cfg.listen,
        source,
    })?;
    let (shutdown, mut stop) = tokio::sync::watch::channel(false);
    let serve = tokio::spawn(router.serve_with_incoming_shutdown(
        TcpListenerStream::new(listener),
        async move {
            let _ = stop.wait_for(|s| *s).await;
        },
    ));
    let jobs = cfg.run_jobs.then(|| tokio::spawn(run_loop(ctx.clone())));
    // Leases of silent workers lapse here, not only when someone pulls.
    let reaper = fleet.as_ref().map(|f| {
        let f = Arc::clone(f);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                f.reap();
            }
        })
    });
    tracing::info!(%addr, instance = %cfg.instance, target = %ctx.backend.target().key(), "serving");
    Ok(RunningServer {
        addr,
        ctx,
        shutdown,
        serve,
        jobs,
        fleet,
        reaper,
    })
}

fn max_of(cfg: &ServerConfig) -> usize {
    cfg.limits.max_message_bytes
}
