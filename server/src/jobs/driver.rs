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
//! the nearest other target's (`start_model`).

use super::result_check::{check_result, check_speed};
use super::start_model::{MODEL_KIND, start_model};
use super::store::{Holder, JobRow, JobState, JobStore, Lease};
use super::{JobContext, JobError};
use crate::metrics::Metrics;
use crate::records::{self, NewRecord, Record, RecordStore};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;
use tracing::Instrument;
use tunehub_engine::measure::{ErrorCode, MeasureBatch, MeasureResult};
use tunehub_engine::schedule::Schedule;
use tunehub_engine::search::{CostModel, SchedulerKind, TaskSearch, Tuner, TunerTask};
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;

/// Tuned workloads of the same structure whose best schedule seeds a task new to a target.
const WARM_START_NEIGHBOURS: usize = 5;

/// The neighbours' best schedules adapted to `task`, nearest first; those that do not adapt
/// are left out.
fn warm_start(task: &Task, neighbours: &[records::Neighbor]) -> Vec<Schedule> {
    neighbours
        .iter()
        .filter_map(|n| Some(n.adapted_to(task)?.schedule))
        .collect()
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

/// The job's measurer, counted in the metrics' queue gauge while it measures.
struct Metered {
    inner: Box<dyn MeasureBatch>,
    metrics: Arc<Metrics>,
}

impl MeasureBatch for Metered {
    fn target(&self) -> &Target {
        self.inner.target()
    }

    fn measure(&mut self, task: &Task, schedules: &[Schedule]) -> Vec<MeasureResult> {
        let _queued = self
            .metrics
            .queued(&self.inner.target().key(), schedules.len());
        self.inner.measure(task, schedules)
    }

    fn devices(&self) -> Vec<Option<String>> {
        self.inner.devices()
    }

    fn set_abort(&mut self, abort: Arc<dyn Fn() -> bool + Send + Sync>) {
        self.inner.set_abort(abort);
    }
}

/// What a round on a blocking thread takes along and gives back: the tuner, the model and the
/// measurer move in and out.
struct Parts {
    tuner: Tuner,
    model: Box<dyn CostModel>,
    measurer: Metered,
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
    let mut rows = vec![];
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
        // A task new to this target starts warm: the best schedules of the nearest tuned
        // workloads of its structure, adapted to it, are its first candidates.
        let neighbours = if known.is_empty() {
            store
                .nearest(&task, &job.target_key, WARM_START_NEIGHBOURS)
                .await?
        } else {
            vec![]
        };
        // Sketch generation and re-adding old records lower programs: off the async threads.
        let (tg, params) = (target.clone(), ctx.search.clone());
        let search = tokio::task::spawn_blocking(move || {
            let mut search = TaskSearch::new(Arc::clone(&task), &tg, params, seed);
            for r in &known {
                if let Ok(s) = Schedule::from_json(&r.steps_json) {
                    search.add_measured(&s, &result_of(r));
                }
            }
            let seeds = warm_start(&task, &neighbours);
            if !seeds.is_empty() {
                tracing::info!(
                    task = %task.key,
                    seeds = seeds.len(),
                    neighbours = neighbours.len(),
                    "warm start from tuned workloads of the same structure"
                );
            }
            search.seed(seeds);
            search
        })
        .await
        .map_err(|e| JobError::Invalid(format!("building the search panicked: {e}")))?;
        tasks.push(TunerTask {
            search,
            weight: row.weight,
            trials: row.trials as usize,
            done: stats.get(&row.idx).map_or(0, |s| s.trials_done as usize),
            exhausted: row.exhausted,
        });
        rows.push(row);
    }
    let kind = if job.scheduler == "gradient" {
        SchedulerKind::Gradient
    } else {
        SchedulerKind::RoundRobin
    };
    let tuner = Tuner::new(tasks, kind, job.batch_size as usize, job.seed);

    // The XGBoost model, warm-started from the one saved for this target, else from the
    // nearest other target's (`start_model`); the job says which.
    let (model, start) = start_model(jobs, target, job.seed).await;
    tracing::info!(model = %start, "cost model");
    jobs.set_model_start(&job.id, &start.to_string()).await?;
    let model: Box<dyn CostModel> = Box::new(model);

    // Heartbeat: renew the lease while batches build and run.
    let lease = Arc::new(AtomicU8::new(HELD));
    let heartbeat = {
        let (jobs, lease, id, instance, claim, lease_ms) = (
            jobs.clone(),
            Arc::clone(&lease),
            job.id.clone(),
            ctx.instance.clone(),
            job.claims,
            ctx.lease_ms,
        );
        tokio::spawn(
            async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(lease_ms / 3)).await;
                    let holder = Holder {
                        instance: &instance,
                        claim,
                    };
                    match jobs.renew(&id, holder, lease_ms).await {
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

    let mut measurer = Metered {
        inner: ctx
            .backend
            .job_measurer(target, job.measure.clone(), &job.id, job.priority),
        metrics: Arc::clone(&ctx.metrics),
    };
    // A remote batch waiting on devices gives up when the job is cancelled or lost.
    {
        let lease = Arc::clone(&lease);
        measurer.set_abort(Arc::new(move || lease.load(Ordering::SeqCst) != HELD));
    }
    let mut parts = Some(Parts {
        tuner,
        model,
        measurer,
    });
    loop {
        match until_back(ctx, &job.id, "renewing the lease", || {
            jobs.renew(&job.id, holder(ctx, job), ctx.lease_ms)
        })
        .await?
        {
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
        if !ctx.backend.serves(&job.target_key) {
            tracing::info!(
                "this server no longer owns the job's worker pool (another replica took it, or \
                 it lapsed with no worker online): the job is left to the pool's owner"
            );
            return Ok(None);
        }
        let mut p = parts.take().expect("the parts are back after each round");
        let Some(i) = p.tuner.next_task() else {
            if let Some(bytes) = p.model.save_bytes() {
                let trained_on = p.tuner.tasks().iter().map(|t| t.done as u64).sum();
                if let Err(e) = jobs
                    .save_cost_model(&job.target_key, MODEL_KIND, &bytes, trained_on)
                    .await
                {
                    tracing::warn!("saving the cost model: {e}");
                }
            }
            return Ok(Some(JobState::Done));
        };
        let row = &rows[i];
        let workload = p.tuner.tasks()[i].search.task().key.clone();
        let flops = p.tuner.tasks()[i].search.task().flops;
        // The engine's round, off the async threads: it lowers thousands of candidates and
        // waits on compilers and kernels.
        let span = tracing::info_span!("task", task = row.idx, workload = %workload);
        let (p, round) = tokio::task::spawn_blocking(move || {
            let _in = span.enter();
            let round = p.tuner.round(i, p.model.as_mut(), &mut p.measurer);
            (p, round)
        })
        .await
        .map_err(|e| JobError::Invalid(format!("the search or the measurer panicked: {e}")))?;
        let round = round.map_err(|e| JobError::Invalid(format!("the cost model failed: {e}")))?;
        let done = p.tuner.tasks()[i].done;
        let best = p.tuner.tasks()[i].search.best().map(|(_, c)| c);
        parts = Some(p);
        if round.exhausted() {
            jobs.update_task(&job.id, row.idx, true, None, 0).await?;
            ctx.changed();
            continue;
        }
        // A remote batch cut short by a cancel or a shutdown: nothing of it is stored; the
        // next claim proposes it again.
        if !round.complete() {
            return match lease.load(Ordering::SeqCst) {
                CANCELLED => Ok(Some(JobState::Cancelled)),
                LOST => {
                    ctx.metrics.job_leases_lost.inc();
                    Ok(None)
                }
                _ if ctx.shutting_down() || !ctx.backend.serves(&job.target_key) => Ok(None),
                _ => Err(JobError::Invalid(format!(
                    "the measurer returned {} results for {} candidates",
                    round.results.len(),
                    round.batch.len()
                ))),
            };
        }
        let cancelled = lease.load(Ordering::SeqCst) == CANCELLED
            || until_back(ctx, &job.id, "renewing the lease", || {
                jobs.renew(&job.id, holder(ctx, job), ctx.lease_ms)
            })
            .await?
                == Lease::Cancelled;
        let (mut kept, mut dropped) = (vec![], 0);
        let mut new = vec![];
        for (k, (s, r)) in round.batch.iter().zip(&round.results).enumerate() {
            if cancelled && maybe_interrupt_casualty(r) {
                dropped += 1;
                continue;
            }
            let device = round.devices.get(k).cloned().flatten();
            // The fleet refuses such a report on arrival; this is the last line: a measurement
            // the records table would refuse is dropped (the candidate is proposed again on a
            // later claim), never a failed job.
            // A failure has no costs (`check_result`), so only a success's times are bounded.
            let checked = check_result(r).and_then(|()| check_speed(&r.costs, flops, target));
            if let Err(why) = checked {
                tracing::warn!(
                    candidate = k,
                    device = device.as_deref().unwrap_or("local"),
                    "measurement dropped, not stored: {why}"
                );
                dropped += 1;
                continue;
            }
            let steps = records::canonical_steps(&s.to_json()).expect("valid steps JSON");
            new.push(NewRecord::from_measure(
                &workload,
                &job.target_key,
                steps,
                r,
                Some(device.as_deref().unwrap_or(ctx.instance.as_str())),
            ));
            kept.push(r.clone());
        }
        // Retrying is safe: a record already stored is a duplicate, its job_records row kept.
        let Some(outcomes) = until_back(ctx, &job.id, "storing the batch", || {
            jobs.commit_batch(&job.id, holder(ctx, job), ctx.lease_ms, row.idx, &new)
        })
        .await?
        else {
            tracing::warn!("lease lost: another server runs the job now");
            ctx.metrics.job_leases_lost.inc();
            return Ok(None);
        };
        ctx.metrics.record_measured(&job.target_key, &kept);
        // New records move the cached counts, and maybe the best.
        if outcomes
            .iter()
            .any(|o| matches!(o, records::CommitOutcome::Inserted { .. }))
        {
            ctx.cache.invalidate(&workload, &job.target_key);
        }
        tracing::info!(
            task = row.idx,
            stored = new.len(),
            done,
            trials = row.trials,
            best_s = best.unwrap_or(f64::NAN),
            "batch stored"
        );
        let last_error = kept
            .iter()
            .rev()
            .find(|r| !r.is_ok())
            .map(|r| format!("{}: {}", r.error.name(), one_line(&r.error_msg)));
        until_back(ctx, &job.id, "updating the task", || {
            jobs.update_task(&job.id, row.idx, false, last_error.as_deref(), dropped)
        })
        .await?;
        ctx.changed();
        if cancelled {
            return Ok(Some(JobState::Cancelled));
        }
    }
}

/// Runs a database step, again and again while the database is unavailable (a PostgreSQL
/// restart), with a growing pause, until it answers or this server stops; any other error at
/// once.
async fn until_back<T, F, Fut>(
    ctx: &JobContext,
    job_id: &str,
    what: &str,
    mut step: F,
) -> Result<T, JobError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, records::StoreError>>,
{
    let mut pause = Duration::from_millis(100);
    loop {
        match step().await {
            Err(e) if e.is_unavailable() && !ctx.shutting_down() => {
                tracing::warn!(job_id, "{what}: the database is unavailable, retrying: {e}");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            r => return r.map_err(JobError::from),
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

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// This server as the holder of the job's current claim.
fn holder<'a>(ctx: &'a JobContext, job: &JobRow) -> Holder<'a> {
    Holder {
        instance: &ctx.instance,
        claim: job.claims,
    }
}
