//! The job driver: runs one claimed job to its end, round by round.
//!
//! Each round the engine's `TaskScheduler` picks a task, its `Proposer` (the engine's
//! `TaskSearch`, ranked by the cost model) proposes a batch of candidates not measured before,
//! the measure backend builds and runs them, and the results are stored in one transaction that
//! also checks the lease. A resumed job first feeds each search every record of its (workload,
//! target), so nothing is proposed twice and no budget is spent twice (a task's progress is its
//! rows in `job_records`).
//!
//! The search runs off the async threads (it lowers thousands of candidates per round), in the
//! same blocking call as the measurement.

use super::store::{JobRow, JobState, JobStore, Lease, TaskRow};
use super::{JobContext, JobError};
use crate::metrics::Metrics;
use crate::records::{self, NewRecord, Record, RecordStore};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;
use tracing::Instrument;
use tunehub_costmodel::{XgbModel, XgbParams};
use tunehub_engine::measure::{ErrorCode, MeasureBatch, MeasureResult};
use tunehub_engine::schedule::Schedule;
use tunehub_engine::search::{
    CostModel, CostModelError, SchedulerKind, TaskScheduler, TaskSearch, confirm_new_best,
};
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;

/// The kind under which the job driver saves its cost model per target.
const MODEL_KIND: &str = "xgb-packsum";

/// Proposes candidates for one task: the search seam (the engine's `TaskSearch` implements it;
/// a test or another strategy may bring its own).
pub trait Proposer: Send {
    /// A candidate measured before (by any job): never propose it, and learn from it.
    fn add_measured(&mut self, schedule: &Schedule, result: &MeasureResult);
    /// Up to `n` candidates not measured before; fewer (or none) when the space runs dry.
    fn propose(
        &mut self,
        model: &mut dyn CostModel,
        n: usize,
    ) -> Result<Vec<Schedule>, CostModelError>;
    /// What measuring a proposed batch gave.
    fn record(
        &mut self,
        model: &mut dyn CostModel,
        batch: &[Schedule],
        results: &[MeasureResult],
    ) -> Result<(), CostModelError>;
    /// The best trusted cost seen (seconds), for the task scheduler.
    fn best_cost(&self) -> Option<f64>;
}

impl Proposer for TaskSearch {
    fn add_measured(&mut self, schedule: &Schedule, result: &MeasureResult) {
        TaskSearch::add_measured(self, schedule, result);
    }

    fn propose(
        &mut self,
        model: &mut dyn CostModel,
        n: usize,
    ) -> Result<Vec<Schedule>, CostModelError> {
        self.next_batch(model, n)
    }

    fn record(
        &mut self,
        model: &mut dyn CostModel,
        batch: &[Schedule],
        results: &[MeasureResult],
    ) -> Result<(), CostModelError> {
        TaskSearch::record(self, model, batch, results)
    }

    fn best_cost(&self) -> Option<f64> {
        self.best().map(|(_, c)| c)
    }
}

/// A stored record as the measurement it was (for `add_measured` on resume).
fn result_of(r: &Record) -> MeasureResult {
    MeasureResult {
        costs: r.costs.clone(),
        error: r.error().unwrap_or(ErrorCode::UnknownError),
        error_msg: r.error_msg.clone(),
        build_s: r.build_s,
        run_s: r.run_s,
        noisy: r.noisy,
    }
}

/// A failure that an interrupt itself may have caused: a Ctrl-C in `tunehub tune`'s terminal
/// also reaches the compilers and kernels it started, which then fail as if the candidate had.
/// Such results of a cancelled batch are dropped rather than recorded against the candidate.
fn maybe_interrupt_casualty(r: &MeasureResult) -> bool {
    !matches!(
        r.error,
        ErrorCode::NoError | ErrorCode::InvalidSchedule | ErrorCode::WrongAnswer
    )
}

/// One task of the running job. The search is `None` while a blocking call has it.
struct TaskRun {
    row: TaskRow,
    task: Arc<Task>,
    search: Option<Box<dyn Proposer>>,
    done: u32,
    exhausted: bool,
}

impl TaskRun {
    fn open(&self) -> bool {
        !self.exhausted && self.done < self.row.trials
    }
}

/// What one blocking round gives back: the search, the model and the measurer (moved in and
/// out), the batch and its results.
struct Round {
    search: Box<dyn Proposer>,
    model: Box<dyn CostModel>,
    measurer: Box<dyn MeasureBatch>,
    batch: Vec<Schedule>,
    results: Vec<MeasureResult>,
    /// Who measured each result (see `MeasureBatch::devices`), taken before a confirmation
    /// run replaced the measurer's own list.
    devices: Vec<Option<String>>,
    error: Option<CostModelError>,
}

/// Proposes, measures and records one batch: CPU and child processes, off the async threads.
fn blocking_round(
    task: &Task,
    mut search: Box<dyn Proposer>,
    mut model: Box<dyn CostModel>,
    mut measurer: Box<dyn MeasureBatch>,
    want: usize,
    metrics: &Metrics,
) -> Round {
    let batch = match search.propose(model.as_mut(), want) {
        Ok(b) => b,
        Err(e) => {
            return Round {
                search,
                model,
                measurer,
                batch: vec![],
                results: vec![],
                devices: vec![],
                error: Some(e),
            };
        }
    };
    let mut devices = vec![];
    let results = if batch.is_empty() {
        vec![]
    } else {
        let _queued = metrics.queued(&measurer.target().key(), batch.len());
        let mut results = measurer.measure(task, &batch);
        devices = measurer.devices();
        if results.len() == batch.len() {
            // The second run counts only from the device that made the first: a record is one
            // device's timings.
            confirm_new_best(search.best_cost(), &batch, &mut results, |k, s| {
                let again = measurer.measure(task, std::slice::from_ref(s)).pop()?;
                let first = devices.get(k).cloned().flatten();
                (measurer.devices().first().cloned().flatten() == first).then_some(again)
            });
        }
        results
    };
    let error = if results.len() == batch.len() {
        search.record(model.as_mut(), &batch, &results).err()
    } else {
        None
    };
    Round {
        search,
        model,
        measurer,
        batch,
        results,
        devices,
        error,
    }
}

/// Lease states shared with the heartbeat task.
const HELD: u8 = 0;
const CANCELLED: u8 = 1;
const LOST: u8 = 2;

/// Runs a claimed job until it is done, failed, cancelled, its lease is lost, or the server
/// shuts down (then the job is left claimable for the next server).
pub async fn run_job(ctx: &JobContext, job: JobRow) -> Result<(), JobError> {
    // Every line logged for the job's work, here and in the engine, names it.
    let span = tracing::info_span!("job", job_id = %job.id);
    run_job_in_span(ctx, job).instrument(span).await
}

async fn run_job_in_span(ctx: &JobContext, job: JobRow) -> Result<(), JobError> {
    let jobs = &ctx.jobs;
    tracing::info!(claims = job.claims, "running job");
    let result = match ctx.backend.target_for(&job.target_key) {
        Some(target) => drive(ctx, &job, &target).await,
        None => Err(JobError::Invalid(format!(
            "this server has no device for target {}",
            job.target_key
        ))),
    };
    let end = match &result {
        Ok(Some(end)) => Some(*end),
        // Shutdown or a lost lease: leave the job to whoever claims it next.
        Ok(None) => None,
        Err(e) => {
            tracing::error!("job failed: {e}");
            Some(JobState::Failed)
        }
    };
    let msg = match &result {
        Err(e) => e.to_string(),
        _ => String::new(),
    };
    jobs.release(&job.id, &ctx.instance, end.map(|s| (s, msg.as_str())))
        .await?;
    match end {
        Some(state) => tracing::info!(state = state.as_str(), "job ended"),
        None => tracing::info!("job left claimable (server stopping, or its lease lost)"),
    }
    ctx.changed();
    Ok(())
}

/// The job's rounds. `Some(state)`: how it ended; `None`: stopped without ending it.
async fn drive(
    ctx: &JobContext,
    job: &JobRow,
    target: &Target,
) -> Result<Option<JobState>, JobError> {
    let jobs: &JobStore = &ctx.jobs;
    let store = jobs.records();
    if job.target_key != target.key() {
        return Err(JobError::Invalid(format!(
            "this server measures on target {}, not {}",
            target.key(),
            job.target_key
        )));
    }

    // Rebuild each task's search from the records of its (workload, target).
    let stats = jobs.task_stats(&job.id).await?;
    let mut tasks = vec![];
    for row in jobs.tasks(&job.id).await? {
        let w = store
            .workload(&row.workload_key)
            .await?
            .ok_or_else(|| JobError::Invalid(format!("workload {} is gone", row.workload_key)))?;
        let task = Arc::new(w.to_task().map_err(JobError::Invalid)?);
        // Another seed per claim: a resumed search does not retrace the first one's steps.
        let seed = job
            .seed
            .wrapping_add(u64::from(row.idx))
            .wrapping_add(u64::from(job.claims) << 32);
        let known = store.records(&task.key, &job.target_key).await?;
        // Sketch generation and re-adding old records lower programs: off the async threads.
        let (t, tg, params) = (Arc::clone(&task), target.clone(), ctx.search.clone());
        let search = tokio::task::spawn_blocking(move || {
            let mut search: Box<dyn Proposer> = Box::new(TaskSearch::new(t, &tg, params, seed));
            for r in &known {
                if let Ok(s) = Schedule::from_json(&r.steps_json) {
                    search.add_measured(&s, &result_of(r));
                }
            }
            search
        })
        .await
        .map_err(|e| JobError::Invalid(format!("building the search panicked: {e}")))?;
        let done = stats.get(&row.idx).map_or(0, |s| s.trials_done);
        tasks.push(TaskRun {
            exhausted: row.exhausted,
            row,
            task,
            search: Some(search),
            done,
        });
    }
    // The XGBoost model, warm-started from the one saved for this target when there is one (a
    // model that does not load is replaced, not fatal: it is only a ranking aid).
    let saved = match jobs.cost_model(&job.target_key).await {
        Ok(Some((kind, bytes, _))) if kind == MODEL_KIND => XgbModel::load(&bytes)
            .inspect_err(|e| tracing::warn!("saved cost model ignored: {e}"))
            .ok(),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!("reading the saved cost model: {e}");
            None
        }
    };
    let fresh = || {
        XgbModel::new(XgbParams {
            seed: job.seed,
            ..XgbParams::default()
        })
    };
    let mut model: Option<Box<dyn CostModel>> = Some(Box::new(saved.unwrap_or_else(fresh)));
    let kind = if job.scheduler == "gradient" {
        SchedulerKind::Gradient
    } else {
        SchedulerKind::RoundRobin
    };
    let mut scheduler =
        TaskScheduler::new(tasks.iter().map(|t| t.row.weight).collect(), kind, job.seed);
    for (i, t) in tasks.iter().enumerate() {
        if !t.open() {
            scheduler.finish(i);
        }
    }

    // Heartbeat: renew the lease while batches build and run.
    let lease = Arc::new(AtomicU8::new(HELD));
    let heartbeat = {
        let (jobs, lease, id, instance, lease_ms) = (
            jobs.clone(),
            Arc::clone(&lease),
            job.id.clone(),
            ctx.instance.clone(),
            ctx.lease_ms,
        );
        tokio::spawn(
            async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(lease_ms / 3)).await;
                    match jobs.renew(&id, &instance, lease_ms).await {
                        Ok(Lease::Held) => {}
                        Ok(Lease::Cancelled) => lease.store(CANCELLED, Ordering::SeqCst),
                        Ok(Lease::Lost) => {
                            lease.store(LOST, Ordering::SeqCst);
                            return;
                        }
                        Err(e) => tracing::warn!("renewing the lease: {e}"),
                    }
                }
            }
            .in_current_span(),
        )
    };
    let _stop_heartbeat = AbortOnDrop(heartbeat);

    let mut measurer = Some(ctx.backend.measurer(target, job.measure.clone(), &job.id));
    // A remote batch waiting on devices gives up when the job is cancelled or lost.
    if let Some(m) = measurer.as_mut() {
        let lease = Arc::clone(&lease);
        m.set_abort(Arc::new(move || lease.load(Ordering::SeqCst) != HELD));
    }
    loop {
        match jobs.renew(&job.id, &ctx.instance, ctx.lease_ms).await? {
            Lease::Held => {}
            Lease::Cancelled => return Ok(Some(JobState::Cancelled)),
            Lease::Lost => {
                ctx.metrics.job_leases_lost.inc();
                return Ok(None);
            }
        }
        if ctx.shutting_down() {
            return Ok(None);
        }
        let Some(i) = scheduler.next_task() else {
            if let Some(bytes) = model.as_ref().and_then(|m| m.save_bytes()) {
                let trained_on = tasks.iter().map(|t| t.done as u64).sum();
                if let Err(e) = jobs
                    .save_cost_model(&job.target_key, MODEL_KIND, &bytes, trained_on)
                    .await
                {
                    tracing::warn!("saving the cost model: {e}");
                }
            }
            return Ok(Some(JobState::Done));
        };
        let t = &mut tasks[i];
        let want = (t.row.trials - t.done).min(job.batch_size) as usize;
        let (task, search, m, mo) = (
            Arc::clone(&t.task),
            t.search
                .take()
                .expect("the search is back after each round"),
            measurer
                .take()
                .expect("the measurer is back after each round"),
            model.take().expect("the model is back after each round"),
        );
        let span = tracing::info_span!("task", task = t.row.idx, workload = %t.task.key);
        let metrics = Arc::clone(&ctx.metrics);
        let round = tokio::task::spawn_blocking(move || {
            let _in = span.enter();
            blocking_round(&task, search, mo, m, want, &metrics)
        })
        .await
        .map_err(|e| JobError::Invalid(format!("the search or the measurer panicked: {e}")))?;
        t.search = Some(round.search);
        // Who measured each result (a fleet worker), for the records; this server otherwise.
        let devices = round.devices;
        measurer = Some(round.measurer);
        model = Some(round.model);
        let (batch, results) = (round.batch, round.results);
        if let Some(e) = round.error {
            return Err(JobError::Invalid(format!("the cost model failed: {e}")));
        }
        if batch.is_empty() {
            t.exhausted = true;
            scheduler.finish(i);
            jobs.update_task(&job.id, t.row.idx, true, None, 0).await?;
            ctx.changed();
            continue;
        }
        // A remote batch cut short by shutdown: nothing of it is stored; the next claim
        // proposes it again.
        if results.len() != batch.len() {
            match lease.load(Ordering::SeqCst) {
                CANCELLED => return Ok(Some(JobState::Cancelled)),
                LOST => {
                    ctx.metrics.job_leases_lost.inc();
                    return Ok(None);
                }
                _ if ctx.shutting_down() => return Ok(None),
                _ => {}
            }
        }
        if results.len() != batch.len() {
            return Err(JobError::Invalid(format!(
                "the measurer returned {} results for {} candidates",
                results.len(),
                batch.len()
            )));
        }
        let cancelled = lease.load(Ordering::SeqCst) == CANCELLED
            || jobs.renew(&job.id, &ctx.instance, ctx.lease_ms).await? == Lease::Cancelled;
        let (mut keep_s, mut keep_r, mut keep_d, mut dropped) = (vec![], vec![], vec![], 0);
        for (i, (s, r)) in batch.into_iter().zip(results).enumerate() {
            if cancelled && maybe_interrupt_casualty(&r) {
                dropped += 1;
            } else {
                keep_s.push(s);
                keep_r.push(r);
                keep_d.push(devices.get(i).cloned().flatten());
            }
        }
        let new: Vec<NewRecord> = keep_s
            .iter()
            .zip(&keep_r)
            .zip(&keep_d)
            .map(|((s, r), d)| {
                let steps = records::canonical_steps(&s.to_json()).expect("valid steps JSON");
                NewRecord::from_measure(
                    &t.task.key,
                    &job.target_key,
                    steps,
                    r,
                    Some(d.as_deref().unwrap_or(ctx.instance.as_str())),
                )
            })
            .collect();
        let Some(outcomes) = jobs
            .commit_batch(&job.id, &ctx.instance, ctx.lease_ms, t.row.idx, &new)
            .await?
        else {
            tracing::warn!("lease lost: another server runs the job now");
            ctx.metrics.job_leases_lost.inc();
            return Ok(None);
        };
        ctx.metrics.record_measured(&job.target_key, &keep_r);
        // New records move the cached counts, and maybe the best.
        if outcomes
            .iter()
            .any(|o| matches!(o, records::CommitOutcome::Inserted { .. }))
        {
            ctx.cache.invalidate(&t.task.key, &job.target_key);
        }
        t.done += new.len() as u32;
        let best = t.search.as_ref().and_then(|s| s.best_cost());
        tracing::info!(
            task = t.row.idx,
            stored = new.len(),
            done = t.done,
            trials = t.row.trials,
            best_s = best.unwrap_or(f64::NAN),
            "batch stored"
        );
        scheduler.observe(i, best);
        if !t.open() {
            scheduler.finish(i);
        }
        let last_error = keep_r
            .iter()
            .rev()
            .find(|r| !r.is_ok())
            .map(|r| format!("{}: {}", r.error.name(), one_line(&r.error_msg)));
        jobs.update_task(&job.id, t.row.idx, false, last_error.as_deref(), dropped)
            .await?;
        ctx.changed();
        if cancelled {
            return Ok(Some(JobState::Cancelled));
        }
    }
}

/// Newlines inside a message (say, from a compiler) joined, and long ones cut.
fn one_line(msg: &str) -> String {
    let line = msg
        .split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" | ");
    match line.char_indices().nth(500) {
        Some((i, _)) => format!("{}...", &line[..i]),
        None => line,
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
