//! Tuning jobs: their tables (`store`), the driver that runs one (`driver`), the cost model it
//! ranks with (`cost_model`) and starts from (`start_model`), what a measurement must be to be stored (`result_check`), a
//! priority's weight (`priority`), why a job waits (`waiting`), each candidate as it is
//! measured (`live`), and
//! the loop that claims queued jobs and runs them: pools at the same time, and on each device
//! pool up to `jobs_per_pool` jobs at once (highest priority claimed first), which share its
//! workers by priority (`crate::fleet::fair`). Measurements are one at a time per machine: the
//! server's own machine runs one job at a time (`MeasureBackend::exclusive`), and every local
//! batch holds its timing lock besides.

pub mod cost_model;
pub mod driver;
pub mod live;
pub mod priority;
pub mod result_check;
pub mod start_model;
pub mod store;
pub mod waiting;

use crate::cache::BestCache;
use crate::metrics::Metrics;
use crate::records::StoreError;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::JobStore;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tunehub_engine::measure::{MeasureBatch, MeasureOptions, Measurer};
use tunehub_engine::search::SearchParams;
use tunehub_engine::target::Target;

/// Jobs a device pool runs at once unless configured: enough that a short job is not stuck
/// behind long ones and that a pool's devices stay busy while a job searches on the server;
/// few enough that the server's cores (each running job's search takes them) are not spread
/// thin.
pub const DEFAULT_JOBS_PER_POOL: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Invalid(String),
}

/// Where candidates are built and run. `LocalBackend` measures on this machine with the
/// engine's `Measurer`; the fleet's backend (`crate::fleet::FleetBackend`) hands batches of
/// other targets to remote workers.
pub trait MeasureBackend: Send + Sync {
    /// This server's own machine: the API's "local" target.
    fn target(&self) -> &Target;
    /// The target of a key this backend measures on (now, or once a device of it is back).
    fn target_for(&self, key: &str) -> Option<Target> {
        (key == self.target().key()).then(|| self.target().clone())
    }
    /// Target keys whose jobs to claim now: those with a device ready.
    fn ready_keys(&self) -> Vec<String> {
        vec![self.target().key()]
    }
    /// Whether this server serves target `key` now: a job of it stops at its batch boundary
    /// (left claimable) once not, e.g. when another server replica took its worker pool.
    fn serves(&self, _key: &str) -> bool {
        true
    }
    /// Whether a job may name a known target with no device online, to wait for one.
    fn waits_for_devices(&self) -> bool {
        false
    }
    /// Why a job of target `key` that has not ended is not measuring now (the job's `waiting`
    /// message), or `None` when a device can serve it.
    fn waiting(&self, key: &str) -> Option<String> {
        (!self.ready_keys().iter().any(|k| k == key))
            .then(|| format!("no worker of target {key} is online"))
    }
    /// A measurer for one job's batches (`job_id` goes with remote pieces, for the logs).
    fn measurer(
        &self,
        target: &Target,
        options: MeasureOptions,
        job_id: &str,
    ) -> Box<dyn MeasureBatch>;
    /// A measurer for a job of `priority` (-10..10): a pool that several jobs share hands its
    /// devices to them in proportion to their priorities' weights (`crate::fleet::fair`). Where
    /// jobs share no device, `measurer`.
    fn job_measurer(
        &self,
        target: &Target,
        options: MeasureOptions,
        job_id: &str,
        _priority: i32,
    ) -> Box<dyn MeasureBatch> {
        self.measurer(target, options, job_id)
    }
    /// Whether jobs of target `key` run one at a time (else up to the server's jobs per pool at
    /// once): the server's own machine, where another job's search and builds would take the
    /// cores a kernel is being timed on.
    fn exclusive(&self, key: &str) -> bool {
        key == self.target().key()
    }
}

/// This machine's compiler and an isolated local runner.
pub struct LocalBackend {
    target: Target,
    /// Held for each local batch, by every measurer this backend makes (jobs' batches, and
    /// `measure_transfer` in a query): this machine never times two kernels at once.
    timing: Arc<Mutex<()>>,
}

impl LocalBackend {
    pub fn new(target: Target) -> Self {
        LocalBackend {
            target,
            timing: Arc::default(),
        }
    }
}

impl MeasureBackend for LocalBackend {
    fn target(&self) -> &Target {
        &self.target
    }

    fn measurer(
        &self,
        target: &Target,
        options: MeasureOptions,
        _job_id: &str,
    ) -> Box<dyn MeasureBatch> {
        Box::new(Exclusive {
            inner: Measurer::new(target, options),
            timing: Arc::clone(&self.timing),
        })
    }
}

/// A local measurer whose batches take this machine's timing lock.
struct Exclusive {
    inner: Measurer,
    timing: Arc<Mutex<()>>,
}

impl MeasureBatch for Exclusive {
    fn target(&self) -> &Target {
        self.inner.target()
    }

    fn measure(
        &mut self,
        task: &tunehub_engine::task::Task,
        schedules: &[tunehub_engine::schedule::Schedule],
    ) -> Vec<tunehub_engine::measure::MeasureResult> {
        // A batch that panicked while holding it measured nothing more: the lock stays usable.
        let _machine = self.timing.lock().unwrap_or_else(|p| p.into_inner());
        self.inner.measure(task, schedules)
    }

    fn set_on_result(&mut self, on_result: tunehub_engine::measure::OnResult) {
        self.inner.set_on_result(on_result);
    }

    fn set_on_built(&mut self, on_built: tunehub_engine::measure::OnBuilt) {
        self.inner.set_on_built(on_built);
    }
}

/// What the driver and the API share.
#[derive(Clone)]
pub struct JobContext {
    pub jobs: JobStore,
    pub cache: Arc<BestCache>,
    pub backend: Arc<dyn MeasureBackend>,
    pub metrics: Arc<Metrics>,
    /// This server's name in `jobs.claimed_by` and in the records it measures.
    pub instance: String,
    pub lease_ms: u64,
    /// How often an idle server looks for a job (another server may have queued it).
    pub poll: Duration,
    /// The search's knobs for every task this server tunes.
    pub search: SearchParams,
    /// Most jobs a device pool runs at once (its workers shared by priority); the server's own
    /// machine runs one (`MeasureBackend::exclusive`).
    pub jobs_per_pool: usize,
    /// Each candidate of a running job as it is measured, for Watch.
    pub live: Arc<live::Live>,
    /// Bumped whenever a job's progress changes here: wakes watchers and the claim loop.
    changes: Arc<watch::Sender<u64>>,
    shutdown: Arc<AtomicBool>,
}

impl JobContext {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        jobs: JobStore,
        cache: Arc<BestCache>,
        backend: Arc<dyn MeasureBackend>,
        metrics: Arc<Metrics>,
        instance: String,
        lease_ms: u64,
        poll: Duration,
        search: SearchParams,
    ) -> Self {
        JobContext {
            jobs,
            cache,
            backend,
            metrics,
            instance,
            lease_ms: lease_ms.max(300),
            poll,
            search,
            jobs_per_pool: DEFAULT_JOBS_PER_POOL,
            live: Arc::default(),
            changes: Arc::new(watch::channel(0).0),
            shutdown: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The same context running up to `n` jobs per device pool at once (at least one).
    pub fn with_jobs_per_pool(mut self, n: usize) -> Self {
        self.jobs_per_pool = n.max(1);
        self
    }

    /// Most jobs of target `key` that run at once.
    pub fn pool_limit(&self, key: &str) -> usize {
        if self.backend.exclusive(key) {
            1
        } else {
            self.jobs_per_pool
        }
    }

    pub fn changed(&self) {
        self.changes.send_modify(|v| *v = v.wrapping_add(1));
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Asks the claim loop and a running job to stop after the current batch, submits to be
    /// refused and watchers to end.
    pub fn shut_down(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        self.changed();
    }

    pub fn shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }
}

/// Claims jobs for the targets the backend has a device for (this server's, a fleet's pools)
/// and runs them, up to `JobContext::pool_limit` per target pool at once (highest priority
/// first) and the pools concurrently, until shutdown (then waits for the running jobs to reach
/// their batch boundary). A job for a target with no device ready stays queued.
pub async fn run_loop(ctx: JobContext) {
    let mut changes = ctx.subscribe();
    let mut running: JoinSet<()> = JoinSet::new();
    // The target pool each runner serves, by task id (a panicked runner frees its slot too).
    let mut busy: HashMap<tokio::task::Id, String> = HashMap::new();
    while !ctx.shutting_down() {
        while let Some(done) = running.try_join_next_with_id() {
            let id = match done {
                Ok((id, ())) => id,
                Err(e) => {
                    tracing::error!("a job runner panicked: {e}");
                    e.id()
                }
            };
            busy.remove(&id);
        }
        for target_key in ctx.backend.ready_keys() {
            let limit = ctx.pool_limit(&target_key);
            while busy.values().filter(|k| **k == target_key).count() < limit {
                let claimed = ctx
                    .jobs
                    .claim_next(&ctx.instance, &target_key, ctx.lease_ms, None)
                    .await;
                let job = match claimed {
                    Ok(Some(job)) => job,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!("claiming a job: {e}");
                        break;
                    }
                };
                ctx.changed();
                let runner_ctx = ctx.clone();
                let handle = running.spawn(async move {
                    if let Err(e) = driver::run_job(&runner_ctx, job).await {
                        tracing::error!("job driver: {e}");
                    }
                    // Wakes this loop: the pool has room for its next job.
                    runner_ctx.changed();
                });
                busy.insert(handle.id(), target_key.clone());
            }
        }
        // Wait for a submit or a job's end here, or poll (a job queued through another server,
        // a lease that ran out, a device that came online).
        let _ = tokio::time::timeout(ctx.poll, changes.changed()).await;
    }
    while running.join_next().await.is_some() {}
}

/// Runs one given job (claiming it) to its end: the embedded server of `tunehub tune`, which
/// runs only the job it submitted.
pub async fn run_one(ctx: JobContext, job_id: String) -> Result<(), JobError> {
    let target_key = ctx.backend.target().key();
    let mut changes = ctx.subscribe();
    while !ctx.shutting_down() {
        if let Some(job) = ctx
            .jobs
            .claim_next(&ctx.instance, &target_key, ctx.lease_ms, Some(&job_id))
            .await?
        {
            ctx.changed();
            return driver::run_job(&ctx, job).await;
        }
        match ctx.jobs.get(&job_id).await? {
            Some(j) if !j.state.is_final() => {}
            _ => return Ok(()),
        }
        let _ = tokio::time::timeout(ctx.poll, changes.changed()).await;
    }
    Ok(())
}
