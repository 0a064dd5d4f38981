//! Serving: the database, the job loop and the gRPC services (with health, reflection, the token
//! interceptor, and TLS when configured) on one listener; metrics and the web dashboard each on
//! another when asked for.
//!
//! Shutdown is graceful (`RunningServer::shutdown`): no new jobs, the batch in hand is stored,
//! leases are handed back, the database is closed; `run_until_signal` exits at once on a second
//! signal.

use crate::api::Api;
use crate::auth::{Auth, AuthLayer};
use crate::cache::BestCache;
use crate::config::ServerConfig;
use crate::fleet::service::REPORT_DECODE_FACTOR;
use crate::fleet::{Fleet, FleetBackend, FleetConfig, OwnerStore, PoolOwners, WorkersService};
use crate::jobs::store::{JobState, JobStore};
use crate::jobs::{JobContext, MeasureBackend, run_loop};
use crate::metrics::{FleetStates, Metrics, StateSource, States};
use crate::records::{SqlStore, StoreError};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
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

/// A started server: its addresses, and handles to stop it.
pub struct RunningServer {
    pub addr: SocketAddr,
    /// Where metrics are served (`--metrics-addr`), if anywhere.
    pub metrics_addr: Option<SocketAddr>,
    /// Where the web dashboard is served (`--http`), if anywhere.
    pub http_addr: Option<SocketAddr>,
    pub ctx: JobContext,
    health: tonic_health::server::HealthReporter,
    /// Sets the health service from the database's probes (`health`).
    health_probe: JoinHandle<()>,
    shutdown: tokio::sync::watch::Sender<bool>,
    serve: JoinHandle<Result<(), tonic::transport::Error>>,
    jobs: Option<JoinHandle<()>>,
    /// The worker fleet, when this server has one (`start`), and its lease reaper.
    pub fleet: Option<Arc<Fleet>>,
    reaper: Option<JoinHandle<()>>,
    /// The fleet's pool ownership among replicas, and its renewals.
    owners: Option<(Arc<PoolOwners>, JoinHandle<()>)>,
    metrics: Option<JoinHandle<()>>,
    dashboard: Option<JoinHandle<()>>,
}

impl RunningServer {
    /// Stops gracefully, in this order:
    /// 1. no new work: Submit answers UNAVAILABLE, watch streams end, the health service says
    ///    NOT_SERVING (overall and for Jobs) so that probes and balancers drain this server;
    ///    queries and workers' calls are still answered;
    /// 2. the fleet's leases are handed back: a batch waiting on workers is abandoned (nothing
    ///    of it stored; the job's next claim proposes it again) and late reports are ignored;
    /// 3. the job loop stops at a batch boundary: a local batch in hand is measured and stored
    ///    with its job records, then the job's lease is released (the job stays running and is
    ///    claimable at once by another server or this one restarted); the worker pools are let
    ///    go, for another replica to take as their workers come to it;
    /// 4. gRPC and metrics stop, the database pool is closed (SQLite checkpoints its log).
    pub async fn shutdown(self) -> Result<(), ServeError> {
        self.ctx.shut_down();
        self.health_probe.abort();
        self.health
            .set_service_status("", tonic_health::ServingStatus::NotServing)
            .await;
        self.health.set_not_serving::<JobsServer<Api>>().await;
        if let Some(f) = &self.fleet {
            f.shut_down();
        }
        if let Some(j) = self.jobs {
            let _ = j.await;
        }
        tracing::info!("job loop stopped; leases handed back");
        if let Some(r) = &self.reaper {
            r.abort();
        }
        if let Some((owners, renewals)) = &self.owners {
            renewals.abort();
            owners.release_all().await;
        }
        let _ = self.shutdown.send(true);
        let served = self.serve.await;
        if let Some(m) = self.metrics {
            let _ = m.await;
        }
        if let Some(d) = self.dashboard {
            let _ = d.await;
        }
        self.ctx.jobs.records().close().await;
        tracing::info!("stopped");
        match served {
            Ok(r) => Ok(r?),
            Err(e) => {
                tracing::error!("server task: {e}");
                Ok(())
            }
        }
    }

    /// Runs until SIGTERM or Ctrl-C, then shuts down gracefully; a second signal exits at once
    /// (status 128 + the signal's number, as a shell reports a killed process).
    pub async fn run_until_signal(self) -> Result<(), ServeError> {
        let first = wait_for_signal().await;
        tracing::info!(
            signal = first,
            "shutting down: no new jobs, the batch in hand is stored, leases are handed back \
             (a second signal exits at once)"
        );
        tokio::spawn(async {
            let second = wait_for_signal().await;
            tracing::warn!(signal = second, "second signal: exiting at once");
            std::process::exit(128 + second);
        });
        self.shutdown().await
    }
}

/// Waits for SIGTERM or SIGINT; gives its number.
async fn wait_for_signal() -> i32 {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => 2,
            _ = term.recv() => 15,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        2
    }
}

/// Opens the database (applying migrations), binds the listener, and starts serving and
/// running jobs: "local" jobs measured on this machine's target (with the configured
/// overrides), every other target's on the worker fleet that registers with this server.
pub async fn start(cfg: &ServerConfig) -> Result<RunningServer, ServeError> {
    let target = Target::detect().with_overrides(&cfg.target);
    let fleet = Arc::new(Fleet::new(FleetConfig::with_heartbeat(
        Duration::from_millis(cfg.heartbeat_ms),
    )));
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
    // Zero-shot answers and warm starts look up neighbours: read before the first asks.
    store.keep_neighbours_warm();
    let cache = Arc::new(BestCache::new(Duration::from_millis(cfg.cache_ttl_ms)));
    let metrics = Arc::new(Metrics::new(
        &cache,
        fleet.as_deref().map(|f| &f.lease_expiries),
    ));
    let ctx = JobContext::new(
        JobStore::new(store),
        cache,
        backend,
        Arc::clone(&metrics),
        cfg.instance.clone(),
        cfg.lease_ms,
        Duration::from_millis(cfg.poll_ms),
        SearchParams {
            population: cfg.population,
            ..SearchParams::default()
        },
    )
    .with_jobs_per_pool(cfg.jobs_per_pool);
    let api = Api {
        ctx: ctx.clone(),
        limits: cfg.limits,
        kernels: Arc::default(),
        models: Arc::default(),
        tune_transferred: cfg.tune_transferred,
        queued_transfers: Arc::default(),
        feeds: Arc::default(),
        watch_slots: Arc::default(),
    };
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
    // Replicas on one database share the fleet by pools, each owned by one of them.
    let owners = fleet.as_ref().map(|f| {
        f.share_pools();
        Arc::new(PoolOwners::new(
            OwnerStore::new(ctx.jobs.records().clone()),
            Arc::clone(f),
            cfg.instance.clone(),
            advertised(cfg, addr),
            Duration::from_millis(ctx.lease_ms),
        ))
    });
    let workers_service = fleet.as_ref().map(|f| WorkersService {
        fleet: Arc::clone(f),
        store: ctx.jobs.records().clone(),
        owners: owners.clone(),
        max_report_bytes: max_of(cfg),
    });
    let workers = workers_service.clone().map(|w| {
        WorkersServer::new(w)
            // Past the limit a report is refused by `report` itself, logged (`service`).
            .max_decoding_message_size(max_of(cfg).saturating_mul(REPORT_DECODE_FACTOR))
            .max_encoding_message_size(max_of(cfg))
    });
    let max = cfg.limits.max_message_bytes;

    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<JobsServer<Api>>().await;
    health.set_serving::<QueryServer<Api>>().await;
    health.set_serving::<RecordsServer<Api>>().await;
    if fleet.is_some() {
        health
            .set_serving::<WorkersServer<crate::fleet::WorkersService>>()
            .await;
    }
    let (health_probe, database_health) = {
        use tonic::server::NamedService;
        let mut services = vec![
            "",
            JobsServer::<Api>::NAME,
            QueryServer::<Api>::NAME,
            RecordsServer::<Api>::NAME,
        ];
        if fleet.is_some() {
            services.push(WorkersServer::<crate::fleet::WorkersService>::NAME);
        }
        let c = ctx.clone();
        crate::health::follow_database(
            ctx.jobs.records().clone(),
            health.clone(),
            services,
            move || c.shutting_down(),
        )
    };
    // Reflection in both versions: grpcurl and tonic ask v1, grpcio-reflection's Python client
    // still asks v1alpha. The descriptors carry the proto's comments (source info).
    let reflection_of = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let reflection = reflection_of()
        .build_v1()
        .map_err(|e| ServeError::Reflection(e.to_string()))?;
    let reflection_v1alpha = reflection_of()
        .build_v1alpha()
        .map_err(|e| ServeError::Reflection(e.to_string()))?;

    // Outermost, the hooks on a call's status, so that they see the token and role check's
    // answers too (which admits the health check untouched: load balancers and probes have no
    // token): the decode-failure rewrite, then the count of every call by service, method and
    // the code the caller gets, then the log of reports refused for their size.
    let tokens = Auth::new(cfg.tokens.clone());
    let auth = AuthLayer::new(tokens.clone(), Some(Arc::clone(&metrics)))
        .with_worker_certificates(cfg.tls_worker_ca.is_some());
    let count = crate::metrics::grpc::hook(Arc::clone(&metrics));
    let status_hook: crate::status_hook::Hook = Arc::new(move |call, headers| {
        crate::undecodable::rewrite(call, headers);
        count(call, headers);
        crate::fleet::oversized::log_refused_report(call, headers);
    });
    let mut builder = Server::builder()
        .layer(crate::status_hook::StatusHookLayer(status_hook))
        .layer(auth);
    if let Some((cert, key)) = &cfg.tls {
        let read = |p: &std::path::PathBuf| {
            std::fs::read(p).map_err(|source| ServeError::TlsFile {
                path: p.display().to_string(),
                source,
            })
        };
        let identity = Identity::from_pem(read(cert)?, read(key)?);
        let mut tls = ServerTlsConfig::new().identity(identity);
        if let Some(ca) = &cfg.tls_worker_ca {
            // Optional at the handshake (clients and compilers come without one), verified when
            // presented; the auth layer requires one for the worker calls.
            tls = tls
                .client_ca_root(Certificate::from_pem(read(ca)?))
                .client_auth_optional(true);
        }
        builder = builder.tls_config(tls)?;
    }
    let router = builder
        .add_service(health_service)
        .add_service(reflection)
        .add_service(reflection_v1alpha)
        .add_service(
            JobsServer::new(api.clone())
                .max_decoding_message_size(max)
                .max_encoding_message_size(max),
        )
        .add_service(
            QueryServer::new(api.clone())
                .max_decoding_message_size(max)
                .max_encoding_message_size(max),
        )
        .add_service(
            RecordsServer::new(api.clone())
                .max_decoding_message_size(max)
                .max_encoding_message_size(max),
        )
        .add_optional_service(workers);

    // Bound before anything runs: a taken metrics or dashboard port fails the start, not a
    // later scrape or page.
    let (metrics_listener, metrics_addr) = bind_optional(cfg.metrics_addr).await?;
    let (http_listener, http_addr) = bind_optional(cfg.http).await?;
    let (shutdown, mut stop) = tokio::sync::watch::channel(false);
    let dashboard_task = http_listener.map(|l| {
        crate::dashboard::spawn(
            l,
            crate::dashboard::Dashboard {
                api,
                workers: workers_service,
                auth: tokens,
                database: database_health,
                started: std::time::Instant::now(),
            },
            shutdown.subscribe(),
        )
    });
    let metrics_task = metrics_listener.map(|l| {
        crate::metrics::http::spawn(
            l,
            crate::metrics::http::Scrape {
                metrics: Arc::clone(&metrics),
                source: Arc::new(ScrapedStates {
                    jobs: ctx.jobs.clone(),
                    fleet: fleet.clone(),
                }),
            },
            shutdown.subscribe(),
        )
    });
    let serve = tokio::spawn(router.serve_with_incoming_shutdown(
        // Without TCP_NODELAY a response written in two segments waits for the client's delayed
        // ACK: every unary call took ~44 ms on loopback (measured by `tunehub-bench query`).
        TcpIncoming::from(listener).with_nodelay(Some(true)),
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
    let owners = owners.map(|o| {
        let renewals = tokio::spawn(Arc::clone(&o).renew_loop());
        (o, renewals)
    });
    tracing::info!(%addr, metrics = %metrics_addr.map_or("off".into(), |a| a.to_string()),
        dashboard = %http_addr.map_or("off".into(), |a| a.to_string()), instance = %cfg.instance,
        target_key = %ctx.backend.target().key(), "serving");
    Ok(RunningServer {
        addr,
        metrics_addr,
        http_addr,
        ctx,
        health,
        health_probe,
        shutdown,
        serve,
        jobs,
        fleet,
        reaper,
        owners,
        metrics: metrics_task,
        dashboard: dashboard_task,
    })
}

/// Where workers reach this server: `--advertise-addr` (with the listener's port when it
/// names none: a pod's IP from the downward API), else the bound address, or for a wildcard one
/// this host's name and the port (what other hosts can resolve).
fn advertised(cfg: &ServerConfig, addr: SocketAddr) -> String {
    if let Some(a) = &cfg.advertise_addr {
        if let Ok(ip) = a.parse::<std::net::IpAddr>() {
            return SocketAddr::new(ip, addr.port()).to_string();
        }
        let has_port = a
            .rsplit_once(':')
            .is_some_and(|(_, p)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        return if has_port {
            a.clone()
        } else {
            format!("{a}:{}", addr.port())
        };
    }
    if !addr.ip().is_unspecified() {
        return addr.to_string();
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let host = if host.is_empty() {
        "localhost".into()
    } else {
        host
    };
    format!("{host}:{}", addr.port())
}

/// A listener on `addr` when one is asked for, and the address it got (port 0 picks one).
async fn bind_optional(
    addr: Option<SocketAddr>,
) -> Result<(Option<TcpListener>, Option<SocketAddr>), ServeError> {
    let Some(addr) = addr else {
        return Ok((None, None));
    };
    let bind = |source| ServeError::Bind { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(bind)?;
    let bound = listener.local_addr().map_err(bind)?;
    Ok((Some(listener), Some(bound)))
}

fn max_of(cfg: &ServerConfig) -> usize {
    cfg.limits.max_message_bytes
}

/// What a metrics scrape reads: jobs by state from the database, workers from the fleet.
struct ScrapedStates {
    jobs: JobStore,
    fleet: Option<Arc<Fleet>>,
}

impl StateSource for ScrapedStates {
    fn states(&self) -> Pin<Box<dyn Future<Output = Result<States, StoreError>> + Send + '_>> {
        Box::pin(async move {
            let counts = self.jobs.count_by_state().await?;
            let jobs = JobState::ALL
                .iter()
                .map(|s| (s.as_str(), counts.get(s).copied().unwrap_or(0)))
                .collect();
            let fleet = self.fleet.as_ref().map(|f| {
                let (workers, queued) = f.list();
                FleetStates {
                    workers: workers
                        .into_iter()
                        .map(|w| (w.target_key, w.status.to_string()))
                        .collect(),
                    queued: queued.into_iter().collect(),
                }
            });
            Ok(States { jobs, fleet })
        })
    }
}
