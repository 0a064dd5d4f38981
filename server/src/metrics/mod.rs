//! Prometheus metrics of the server, served as OpenMetrics text on `--metrics-addr` (off by
//! default, its own port: `http`).
//!
//! Events are counted where they happen: measurements and their errors and the measurement
//! queue by the job driver, fleet lease expiries by the registry, cache hits by the best-record
//! cache, calls and their codes (and the Query service's latency) by a hook on every call's
//! status (`grpc`, in `crate::status_hook`'s layer). States are read when scraped, through `StateSource` (the server
//! assembles one): jobs by state from the database (so every server of one database shows the
//! same numbers), workers by target and state from the fleet. The seam keeps this module below
//! the job and fleet modules, which count events here.

pub mod grpc;
pub mod http;

use crate::cache::BestCache;
use crate::records::StoreError;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use tunehub_engine::measure::MeasureResult;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TargetLabel {
    pub target: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub target: String,
    /// The engine's error name (`compile_error`, `wrong_answer`, ...).
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabel {
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WorkerLabels {
    pub target: String,
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GrpcLabels {
    pub service: String,
    pub method: String,
    /// The gRPC status name (`OK`, `INVALID_ARGUMENT`, ...).
    pub code: String,
}

/// A call's token by name (never the secret) and role, and whether its role admitted it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenLabels {
    pub token: String,
    pub role: String,
    /// `allowed`, or `denied` (PERMISSION_DENIED: outside the token's role).
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabel {
    pub method: String,
}

/// The states a scrape reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct States {
    /// Jobs per state name, every state listed (zeros included).
    pub jobs: Vec<(&'static str, u64)>,
    /// The fleet's, when the server has one.
    pub fleet: Option<FleetStates>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct FleetStates {
    /// (target key, state) of each registered worker.
    pub workers: Vec<(String, String)>,
    /// Pieces waiting for a worker, per target key.
    pub queued: Vec<(String, u32)>,
}

/// Where a scrape reads the states kept elsewhere (the database, the fleet).
pub trait StateSource: Send + Sync {
    fn states(&self) -> Pin<Box<dyn Future<Output = Result<States, StoreError>> + Send + '_>>;
}

/// The fleet's worker states, so that each target shows all of them (zeros included).
const WORKER_STATES: [&str; 4] = ["idle", "busy", "offline", "quarantined"];

fn query_histogram() -> Histogram {
    // 0.25 ms to ~4 s: a cached answer is sub-millisecond, one that generates C is not.
    Histogram::new(exponential_buckets(0.000_25, 2.0, 15))
}

/// The server's metrics. One per server; cheap to update from any thread.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Candidates measured and stored, per target.
    pub measurements: Family<TargetLabel, Counter>,
    /// Candidates stored with an error, per target and error code.
    pub measure_errors: Family<ErrorLabels, Counter>,
    /// Successes stored flagged noisy (timed on a slowed machine), per target.
    pub measure_noisy: Family<TargetLabel, Counter>,
    /// Candidates proposed and waiting for their results (queued or being measured).
    pub measure_queue: Family<TargetLabel, Gauge>,
    /// Jobs this server stopped running because its lease ran out (another server took them).
    pub job_leases_lost: Counter,
    pub grpc_requests: Family<GrpcLabels, Counter>,
    /// Authenticated calls by token name and role, admitted or denied.
    pub calls_by_token: Family<TokenLabels, Counter>,
    pub query_duration: Family<MethodLabel, Histogram, fn() -> Histogram>,
    jobs: Family<StateLabel, Gauge>,
    workers: Family<WorkerLabels, Gauge>,
    fleet_queued: Family<TargetLabel, Gauge>,
    cache_hits: Counter,
    cache_misses: Counter,
    cache_hit_ratio: Gauge<f64, AtomicU64>,
    /// One scrape at a time: the scrape-time gauges are cleared and refilled.
    scrape: tokio::sync::Mutex<()>,
}

impl Metrics {
    /// Registers every metric, with the cache's counters and, with a fleet, its lease expiries.
    pub fn new(
        cache: &BestCache,
        fleet_lease_expiries: Option<&Family<TargetLabel, Counter>>,
    ) -> Metrics {
        let mut registry = Registry::with_prefix("tunehub");
        let m = Metrics {
            measurements: Family::default(),
            measure_errors: Family::default(),
            measure_noisy: Family::default(),
            measure_queue: Family::default(),
            job_leases_lost: Counter::default(),
            grpc_requests: Family::default(),
            calls_by_token: Family::default(),
            query_duration: Family::new_with_constructor(query_histogram as fn() -> Histogram),
            jobs: Family::default(),
            workers: Family::default(),
            fleet_queued: Family::default(),
            cache_hits: cache.hits.clone(),
            cache_misses: cache.misses.clone(),
            cache_hit_ratio: Gauge::default(),
            scrape: tokio::sync::Mutex::new(()),
            registry: Registry::default(),
        };
        registry.register(
            "build",
            "The server's version",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        registry.register(
            "jobs",
            "Jobs in the database by state (read at scrape time)",
            m.jobs.clone(),
        );
        registry.register(
            "measurements",
            "Candidates measured and stored, by target (rate() gives measurements per second)",
            m.measurements.clone(),
        );
        registry.register(
            "measurement_errors",
            "Candidates stored with an error, by target and error code",
            m.measure_errors.clone(),
        );
        registry.register(
            "measurements_noisy",
            "Successes stored flagged noisy, by target: timed while the machine was slowed, kept \
             but never a best (a rising rate: a busy machine, or --noise-threshold too high)",
            m.measure_noisy.clone(),
        );
        registry.register(
            "measure_queue_depth",
            "Candidates proposed and waiting for their measurement (queued or being measured), by target",
            m.measure_queue.clone(),
        );
        registry.register(
            "job_leases_lost",
            "Jobs this server stopped because its lease ran out and another server took them",
            m.job_leases_lost.clone(),
        );
        registry.register(
            "grpc_requests",
            "gRPC calls answered, by service, method and status code",
            m.grpc_requests.clone(),
        );
        registry.register(
            "grpc_calls_by_token",
            "Authenticated gRPC calls by token name and role, allowed or denied by the role",
            m.calls_by_token.clone(),
        );
        registry.register_with_unit(
            "query_duration",
            "Latency of the Query service (best schedules) by method",
            Unit::Seconds,
            m.query_duration.clone(),
        );
        registry.register(
            "best_cache_hits",
            "Best-record lookups answered from the cache",
            m.cache_hits.clone(),
        );
        registry.register(
            "best_cache_misses",
            "Best-record lookups that read the database",
            m.cache_misses.clone(),
        );
        registry.register(
            "best_cache_hit_ratio",
            "Hits over lookups of the best-record cache since the start (rate() of the two counters gives a recent ratio)",
            m.cache_hit_ratio.clone(),
        );
        if let Some(expiries) = fleet_lease_expiries {
            registry.register(
                "workers",
                "Registered workers by target and state (idle, busy, offline, quarantined)",
                m.workers.clone(),
            );
            registry.register(
                "fleet_queued_pieces",
                "Pieces of batches waiting for a worker, by target",
                m.fleet_queued.clone(),
            );
            registry.register(
                "fleet_lease_expiries",
                "Pieces taken back from a silent (or too slow) worker and queued again, by target",
                expiries.clone(),
            );
        }
        Metrics { registry, ..m }
    }

    /// A stored batch: its candidates, and its errors by code.
    pub fn record_measured(&self, target: &str, results: &[MeasureResult]) {
        let label = TargetLabel {
            target: target.to_string(),
        };
        self.measurements
            .get_or_create(&label)
            .inc_by(results.len() as u64);
        let noisy = results.iter().filter(|r| r.is_ok() && r.noisy).count();
        if noisy > 0 {
            self.measure_noisy
                .get_or_create(&label)
                .inc_by(noisy as u64);
        }
        for r in results.iter().filter(|r| !r.is_ok()) {
            self.measure_errors
                .get_or_create(&ErrorLabels {
                    target: target.to_string(),
                    code: r.error.name().to_string(),
                })
                .inc();
        }
    }

    /// Counts `n` candidates as waiting for a target until the guard is dropped.
    pub fn queued(&self, target: &str, n: usize) -> QueuedGuard {
        let gauge = self
            .measure_queue
            .get_or_create(&TargetLabel {
                target: target.to_string(),
            })
            .clone();
        gauge.inc_by(n as i64);
        QueuedGuard { gauge, n: n as i64 }
    }

    /// The OpenMetrics text, with the states read now.
    pub async fn render(&self, source: &dyn StateSource) -> Result<String, StoreError> {
        let _one = self.scrape.lock().await;
        let states = source.states().await?;
        for (state, n) in states.jobs {
            self.jobs
                .get_or_create(&StateLabel {
                    state: state.to_string(),
                })
                .set(n as i64);
        }
        if let Some(FleetStates { workers, queued }) = states.fleet {
            self.workers.clear();
            for (target, _) in &workers {
                for state in WORKER_STATES {
                    let _ = self.workers.get_or_create(&WorkerLabels {
                        target: target.clone(),
                        state: state.to_string(),
                    });
                }
            }
            for (target, state) in workers {
                self.workers
                    .get_or_create(&WorkerLabels { target, state })
                    .inc();
            }
            self.fleet_queued.clear();
            for (target, n) in queued {
                self.fleet_queued
                    .get_or_create(&TargetLabel { target })
                    .set(i64::from(n));
            }
        }
        let (hits, misses) = (self.cache_hits.get(), self.cache_misses.get());
        let lookups = hits + misses;
        self.cache_hit_ratio.set(if lookups == 0 {
            0.0
        } else {
            hits as f64 / lookups as f64
        });
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String does not fail");
        Ok(out)
    }
}

/// Takes its candidates off the measurement queue gauge when dropped (the batch is measured,
/// abandoned, or its driver failed).
pub struct QueuedGuard {
    gauge: Gauge,
    n: i64,
}

impl Drop for QueuedGuard {
    fn drop(&mut self) {
        self.gauge.dec_by(self.n);
    }
}
