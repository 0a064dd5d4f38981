//! The job driver: runs one claimed job to its end, round by round.
//!
//! The round itself is the engine's (`Tuner::round`: the task scheduler picks a task, its
//! search proposes a batch ranked by the cost model, the measure backend builds and runs it, a
//! new best is measured twice, search and model learn). The driver wraps it with what a service
//! needs and nothing else: the job's lease (renewed by a heartbeat, checked before each round
//! and in the transaction that stores a batch), persistence (each batch is one transaction),
//! the fleet's measurer, metrics and progress events. A resumed job first feeds each search
//! every record of its (workload, target), so nothing is proposed twice and no budget is spent
//! twice (a task's progress is its rows in `job_records`); a task with no record on its target
//! starts warm instead, its first candidates the adapted best schedules of the nearest tuned
//! workloads of its structure (`warm_start`). A target with no saved cost model starts from
//! the nearest other target's (`start_model`); a job submitted with the random model ranks
//! with none (`job_model`). Each stored round's timings (the engine's `RoundReport`) are added
//! to its task's row with the task's progress, so a job shows where its time went.
//!
//! Layout: `tasks` (the tuner rebuilt from the job's tasks), `heartbeat` (the lease kept alive),
//! `metered` (the measurer in the metrics), `progress` (each candidate told to watchers as it
//! is measured), `batch` (a round's results stored), `retry` (the database's outages waited
//! out).

mod batch;
mod heartbeat;
mod metered;
mod progress;
mod retry;
mod tasks;

use super::start_model::{MODEL_KIND, job_model};
use super::store::{Holder, JobRow, JobState, Lease, TaskRow, TaskTimes};
use super::{JobContext, JobError};
use batch::Batch;
use heartbeat::{Heartbeat, LeaseState};
use metered::Metered;
use progress::Progress;
use retry::until_back;
use std::sync::Arc;
use tracing::Instrument;
use tunehub_engine::measure::MeasureBatch;
use tunehub_engine::search::{CostModel, Round, Tuner};
use tunehub_engine::target::Target;

/// What a round on a blocking thread takes along and gives back: the tuner, the model and the
/// measurer move in and out.
struct Parts {
    tuner: Tuner,
    model: Box<dyn CostModel>,
    measurer: Metered,
}

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
    // A batch never stored (an error, a shutdown) is not in progress any more.
    ctx.live.batch_over(&job.id);
    let end = match &result {
        Ok(Some(end)) => Some(*end),
        // Shutdown or a lost lease: leave the job to whoever claims it next.
        Ok(None) => None,
        // The database went away (a restart): not the job's fault. Left claimable, it resumes
        // from its stored batches once the database is back and its lease runs out.
        Err(JobError::Store(e)) if e.is_unavailable() => {
            tracing::warn!("the database is unavailable, job left claimable: {e}");
            None
        }
        Err(e) => {
            tracing::error!("job failed: {e}");
            Some(JobState::Failed)
        }
    };
    let msg = match &result {
        Err(e) => with_causes(e),
        _ => String::new(),
    };
    let end_msg = end.map(|s| (s, msg.as_str()));
    until_back(ctx, &job.id, "releasing the job", || {
        jobs.release(&job.id, holder(ctx, &job), end_msg)
    })
    .await?;
    match end {
        Some(state) => tracing::info!(state = state.as_str(), "job ended"),
        None => {
            tracing::info!("job left claimable (server stopping, its lease lost, or its pool gone)")
        }
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
    if job.target_key != target.key() {
        return Err(JobError::Invalid(format!(
            "this server measures on target {}, not {}",
            target.key(),
            job.target_key
        )));
    }
    let (tuner, rows) = tasks::tuner(ctx, job, target).await?;
    // The XGBoost model, warm-started from the one saved for this target, else from the
    // nearest other target's (`start_model`), or none for a random-model job; the job says
    // which.
    let (model, start) = job_model(&ctx.jobs, target, job).await;
    tracing::info!(model = %start, "cost model");
    ctx.jobs
        .set_model_start(&job.id, &start.to_string())
        .await?;
    let lease = LeaseState::default();
    let _heartbeat = Heartbeat::start(ctx, job, lease.clone());
    let mut measurer = Metered {
        inner: ctx
            .backend
            .job_measurer(target, job.measure.clone(), &job.id, job.priority),
        metrics: Arc::clone(&ctx.metrics),
    };
    // A remote batch waiting on devices gives up when the job is cancelled or lost.
    {
        let lease = lease.clone();
        measurer.set_abort(Arc::new(move || !lease.held()));
    }
    let job_trials = rows.iter().map(|r| r.trials).sum();
    let progress = Progress::new(Arc::clone(&ctx.live), &job.id, job_trials);
    measurer.set_on_result(progress.on_result());
    measurer.set_on_built(progress.on_built());
    let mut parts = Parts {
        tuner,
        model,
        measurer,
    };
    loop {
        if let Some(end) = still_ours(ctx, job).await? {
            return Ok(end);
        }
        let Some(i) = parts.tuner.next_task() else {
            let trained_on = parts.tuner.tasks().iter().map(|t| t.done as u64).sum();
            if let Some(bytes) = parts.model.save_bytes() {
                save_model(ctx, job, bytes, trained_on).await;
            }
            warn_all_noisy(ctx, job).await;
            return Ok(Some(JobState::Done));
        };
        let row = &rows[i];
        let tasks = parts.tuner.tasks();
        let job_done = tasks.iter().map(|t| t.done as u32).sum();
        let t = &tasks[i];
        progress.begin_round(
            row.idx,
            (t.done as u32, row.trials),
            job_done,
            parts.tuner.round_size(i),
        );
        let (p, round) = round(parts, i, row).await?;
        parts = p;
        if round.exhausted() {
            progress.end_round();
            // Retried as every other write of a job: an outage is not the job's failure.
            let times = TaskTimes::default();
            until_back(ctx, &job.id, "marking the task exhausted", || {
                ctx.jobs
                    .update_task(&job.id, row.idx, true, None, 0, &times)
            })
            .await?;
            ctx.changed();
            continue;
        }
        // A remote batch cut short by a cancel or a shutdown: nothing of it is stored; the
        // next claim proposes it again.
        if !round.complete() {
            progress.end_round();
            return cut_short(ctx, job, &lease, &round);
        }
        let cancelled = lease.cancelled()
            || until_back(ctx, &job.id, "renewing the lease", || {
                ctx.jobs.renew(&job.id, holder(ctx, job), ctx.lease_ms)
            })
            .await?
                == Lease::Cancelled;
        let task = parts.tuner.tasks()[i].search.task();
        let (workload, flops) = (task.key.clone(), task.flops);
        let batch = Batch::of(ctx, job, target, (&workload, flops), &round, cancelled);
        let stored = batch.store(ctx, job, row, &workload).await?;
        // Its candidates are in the stored counts now (a watcher re-reads them on `changed`).
        progress.end_round();
        if !stored {
            tracing::warn!("lease lost: another server runs the job now");
            ctx.metrics.job_leases_lost.inc();
            return Ok(None);
        }
        let t = &parts.tuner.tasks()[i];
        tracing::info!(
            task = row.idx,
            done = t.done,
            trials = row.trials,
            best_s = t.search.best().map_or(f64::NAN, |(_, c)| c),
            "round done"
        );
        ctx.changed();
        if cancelled {
            return Ok(Some(JobState::Cancelled));
        }
    }
}

/// Before a round: `None` while the job is still this server's to run; else how it stops
/// (cancelled; or left to another: its lease lost, this server stopping, its pool moved).
async fn still_ours(ctx: &JobContext, job: &JobRow) -> Result<Option<Option<JobState>>, JobError> {
    match until_back(ctx, &job.id, "renewing the lease", || {
        ctx.jobs.renew(&job.id, holder(ctx, job), ctx.lease_ms)
    })
    .await?
    {
        Lease::Held => {}
        Lease::Cancelled => return Ok(Some(Some(JobState::Cancelled))),
        Lease::Lost => {
            ctx.metrics.job_leases_lost.inc();
            return Ok(Some(None));
        }
    }
    if ctx.shutting_down() {
        return Ok(Some(None));
    }
    if !ctx.backend.serves(&job.target_key) {
        tracing::info!(
            "this server no longer owns the job's worker pool (another replica took it, or it \
             lapsed with no worker online): the job is left to the pool's owner"
        );
        return Ok(Some(None));
    }
    Ok(None)
}

/// The engine's round for task `i`, off the async threads: it lowers thousands of candidates
/// and waits on compilers and kernels. The parts come back with it.
async fn round(mut p: Parts, i: usize, row: &TaskRow) -> Result<(Parts, Round), JobError> {
    let workload = p.tuner.tasks()[i].search.task().key.clone();
    let span = tracing::info_span!("task", task = row.idx, workload = %workload);
    let (p, round) = tokio::task::spawn_blocking(move || {
        let _in = span.enter();
        let round = p.tuner.round(i, p.model.as_mut(), &mut p.measurer);
        (p, round)
    })
    .await
    .map_err(|e| JobError::Invalid(format!("the search or the measurer panicked: {e}")))?;
    let round = round.map_err(|e| JobError::Invalid(format!("the cost model failed: {e}")))?;
    Ok((p, round))
}

/// How the job stops after a batch the measurer abandoned.
fn cut_short(
    ctx: &JobContext,
    job: &JobRow,
    lease: &LeaseState,
    round: &Round,
) -> Result<Option<JobState>, JobError> {
    if lease.cancelled() {
        return Ok(Some(JobState::Cancelled));
    }
    if lease.lost() {
        ctx.metrics.job_leases_lost.inc();
        return Ok(None);
    }
    if ctx.shutting_down() || !ctx.backend.serves(&job.target_key) {
        return Ok(None);
    }
    Err(JobError::Invalid(format!(
        "the measurer returned {} results for {} candidates",
        round.results.len(),
        round.batch.len()
    )))
}

/// Logs each task of a finished job whose successes were all timed on a slowed machine: it
/// has records but no best (best-effort: a log line never fails a job).
async fn warn_all_noisy(ctx: &JobContext, job: &JobRow) {
    let stats = match ctx.jobs.task_stats(&job.id).await {
        Ok(s) => s,
        Err(e) => return tracing::warn!("reading the job's counts: {e}"),
    };
    for (task, s) in stats {
        if s.ok > 0 && s.noisy == s.ok {
            tracing::warn!(
                task,
                noisy = s.noisy,
                "every success of the task was timed while the machine was slowed: it has no \
                 best; tune again on a quieter machine, or with a lower --noise-threshold"
            );
        }
    }
}

/// A finished job's cost model, trained on `trained_on` measurements, saved for the target's
/// next job (a failure only logged).
async fn save_model(ctx: &JobContext, job: &JobRow, bytes: Vec<u8>, trained_on: u64) {
    if let Err(e) = ctx
        .jobs
        .save_cost_model(&job.target_key, MODEL_KIND, &bytes, trained_on)
        .await
    {
        tracing::warn!("saving the cost model: {e}");
    }
}

/// An error and its causes on one line: the job's error says what the database refused, not
/// just "database error".
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        msg.push_str(": ");
        msg.push_str(&c.to_string());
        cause = c.source();
    }
    msg
}

/// This server as the holder of the job's current claim.
fn holder<'a>(ctx: &'a JobContext, job: &JobRow) -> Holder<'a> {
    Holder {
        instance: &ctx.instance,
        claim: job.claims,
    }
}
