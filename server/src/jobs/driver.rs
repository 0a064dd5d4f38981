//! The job driver: runs one claimed job to its end, round by round.
//!
//! Each round the task picker chooses a task, its `Proposer` proposes a batch of candidates not
//! measured before, the measure backend builds and runs them, and the results are stored in one
//! transaction that also checks the lease. A resumed job first feeds its proposers every record
//! of their (workload, target), so nothing is proposed twice and no budget is spent twice (the
//! task's progress is its rows in `job_records`).
//!
//! The search seam is `Proposer` (`propose` / `add_measured` / `record`), shaped like the engine's
//! planned `TaskSearch`; `SamplerProposer` implements it with the random sampler until the
//! search lands. The cost model rides along as `&mut dyn CostModel` (a `RandomModel` for now).

use super::store::{JobRow, JobState, JobStore, Lease, TaskRow};
use super::{JobContext, JobError};
use crate::records::{self, NewRecord, Record, RecordStore};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;
use tunehub_engine::ir::ComputeDag;
use tunehub_engine::measure::{ErrorCode, MeasureResult};
use tunehub_engine::sample::RandomSampler;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::search::{CostModel, RandomModel};
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;

/// Consecutive already-seen samples after which the sampler is taken to have run out of new
/// candidates (small spaces, such as an elementwise chain's, are exhausted quickly).
const MAX_DUPLICATE_STREAK: usize = 1000;

/// Proposes candidates for one task: the search seam.
pub trait Proposer: Send {
    /// A candidate measured before (by any job): never propose it, and learn from it.
    fn add_measured(&mut self, schedule: &Schedule, result: &MeasureResult);
    /// Up to `n` candidates not measured before; fewer (or none) when the space runs dry.
    fn propose(&mut self, model: &mut dyn CostModel, n: usize) -> Vec<Schedule>;
    /// What measuring a proposed batch gave.
    fn record(&mut self, model: &mut dyn CostModel, batch: &[Schedule], results: &[MeasureResult]);
}

/// The random sampler as a proposer (the stand-in for the engine's `TaskSearch`).
pub struct SamplerProposer {
    sampler: RandomSampler,
    seen: HashSet<String>,
}

impl SamplerProposer {
    pub fn new(dag: &ComputeDag, target: &Target, seed: u64) -> Self {
        SamplerProposer {
            sampler: RandomSampler::new(dag, target, seed),
            seen: HashSet::new(),
        }
    }
}

/// The store's hash of a schedule, so that candidates recorded earlier count as seen.
fn hash_of(schedule: &Schedule) -> String {
    let json = records::canonical_steps(&schedule.to_json()).expect("steps JSON is valid");
    records::schedule_hash(&json)
}

impl Proposer for SamplerProposer {
    fn add_measured(&mut self, schedule: &Schedule, _result: &MeasureResult) {
        self.seen.insert(hash_of(schedule));
    }

    fn propose(&mut self, _model: &mut dyn CostModel, n: usize) -> Vec<Schedule> {
        let mut out = Vec::with_capacity(n);
        let mut streak = 0;
        while out.len() < n && streak < MAX_DUPLICATE_STREAK {
            let s = self.sampler.sample();
            if self.seen.insert(hash_of(&s)) {
                out.push(s);
                streak = 0;
            } else {
                streak += 1;
            }
        }
        out
    }

    fn record(&mut self, _model: &mut dyn CostModel, _b: &[Schedule], _r: &[MeasureResult]) {}
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

/// One task of the running job.
struct TaskRun {
    row: TaskRow,
    task: Arc<Task>,
    proposer: Box<dyn Proposer>,
    done: u32,
    rounds: u32,
    exhausted: bool,
}

impl TaskRun {
    fn open(&self) -> bool {
        !self.exhausted && self.done < self.row.trials
    }
}

/// Which task gets the next round: the open task with the fewest rounds per unit of weight
/// (weighted round robin); ties go to the lower index. The gradient scheduler of the engine's
/// search replaces this for `gradient` jobs when it lands.
fn pick(tasks: &[TaskRun]) -> Option<usize> {
    tasks
        .iter()
        .enumerate()
        .filter(|(_, t)| t.open())
        .min_by(|(_, a), (_, b)| {
            let ka = f64::from(a.rounds) / a.row.weight.max(1e-9);
            let kb = f64::from(b.rounds) / b.row.weight.max(1e-9);
            ka.total_cmp(&kb)
        })
        .map(|(i, _)| i)
}

/// Lease states shared with the heartbeat task.
const HELD: u8 = 0;
const CANCELLED: u8 = 1;
const LOST: u8 = 2;

/// Runs a claimed job until it is done, failed, cancelled, its lease is lost, or the server
/// shuts down (then the job is left claimable for the next server).
pub async fn run_job(ctx: &JobContext, job: JobRow) -> Result<(), JobError> {
    let jobs = &ctx.jobs;
    let target = ctx.backend.target().clone();
    tracing::info!(job = %job.id, claims = job.claims, "running job");
    let result = drive(ctx, &job, &target).await;
    let end = match &result {
        Ok(Some(end)) => Some(*end),
        // Shutdown or a lost lease: leave the job to whoever claims it next.
        Ok(None) => None,
        Err(e) => {
            tracing::error!(job = %job.id, "job failed: {e}");
            Some(JobState::Failed)
        }
    };
    let msg = match &result {
        Err(e) => e.to_string(),
        _ => String::new(),
    };
    jobs.release(&job.id, &ctx.instance, end.map(|s| (s, msg.as_str())))
        .await?;
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
        let dag: ComputeDag = serde_json::from_str(&w.dag_json)
            .map_err(|e| JobError::Invalid(format!("workload {}: {e}", w.key)))?;
        let task = Arc::new(Task::new(dag, w.description.unwrap_or_default()));
        let seed = job
            .seed
            .wrapping_add(u64::from(row.idx))
            .wrapping_add(u64::from(job.claims) << 32);
        let mut proposer: Box<dyn Proposer> =
            Box::new(SamplerProposer::new(&task.dag, target, seed));
        for r in store.records(&task.key, &job.target_key).await? {
            if let Ok(s) = Schedule::from_json(&r.steps_json) {
                proposer.add_measured(&s, &result_of(&r));
            }
        }
        let done = stats.get(&row.idx).map_or(0, |s| s.trials_done);
        tasks.push(TaskRun {
            exhausted: row.exhausted,
            row,
            task,
            proposer,
            done,
            rounds: 0,
        });
    }
    // The cost model slot: the XGBoost model (saved per target in `cost_models`) replaces this.
    let mut model: Box<dyn CostModel> = Box::new(RandomModel::new(job.seed));

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
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(lease_ms / 3)).await;
                match jobs.renew(&id, &instance, lease_ms).await {
                    Ok(Lease::Held) => {}
                    Ok(Lease::Cancelled) => lease.store(CANCELLED, Ordering::SeqCst),
                    Ok(Lease::Lost) => {
                        lease.store(LOST, Ordering::SeqCst);
                        return;
                    }
                    Err(e) => tracing::warn!(job = %id, "renewing the lease: {e}"),
                }
            }
        })
    };
    let _stop_heartbeat = AbortOnDrop(heartbeat);

    let mut measurer = Some(ctx.backend.measurer(job.measure.clone()));
    loop {
        match jobs.renew(&job.id, &ctx.instance, ctx.lease_ms).await? {
            Lease::Held => {}
            Lease::Cancelled => return Ok(Some(JobState::Cancelled)),
            Lease::Lost => return Ok(None),
        }
        if ctx.shutting_down() {
            return Ok(None);
        }
        let Some(i) = pick(&tasks) else {
            return Ok(Some(JobState::Done));
        };
        let t = &mut tasks[i];
        t.rounds += 1;
        let want = (t.row.trials - t.done).min(job.batch_size) as usize;
        let batch = t.proposer.propose(model.as_mut(), want);
        if batch.is_empty() {
            t.exhausted = true;
            jobs.update_task(&job.id, t.row.idx, true, None, 0).await?;
            ctx.changed();
            continue;
        }
        // Building and running block (compilers, child processes): off the async threads.
        let (task, schedules, m) = (Arc::clone(&t.task), batch.clone(), measurer.take());
        let (m, results) = tokio::task::spawn_blocking(move || {
            let mut m = m.expect("the measurer is back after each batch");
            let results = m.measure(&task, &schedules);
            (m, results)
        })
        .await
        .map_err(|e| JobError::Invalid(format!("the measurer panicked: {e}")))?;
        measurer = Some(m);
        if results.len() != batch.len() {
            return Err(JobError::Invalid(format!(
                "the measurer returned {} results for {} candidates",
                results.len(),
                batch.len()
            )));
        }
        let cancelled = lease.load(Ordering::SeqCst) == CANCELLED
            || jobs.renew(&job.id, &ctx.instance, ctx.lease_ms).await? == Lease::Cancelled;
        let (mut keep_s, mut keep_r, mut dropped) = (vec![], vec![], 0);
        for (s, r) in batch.into_iter().zip(results) {
            if cancelled && maybe_interrupt_casualty(&r) {
                dropped += 1;
            } else {
                keep_s.push(s);
                keep_r.push(r);
            }
        }
        let new: Vec<NewRecord> = keep_s
            .iter()
            .zip(&keep_r)
            .map(|(s, r)| {
                let steps = records::canonical_steps(&s.to_json()).expect("valid steps JSON");
                NewRecord::from_measure(
                    &t.task.key,
                    &job.target_key,
                    steps,
                    r,
                    Some(ctx.instance.as_str()),
                )
            })
            .collect();
        let Some(outcomes) = jobs
            .commit_batch(&job.id, &ctx.instance, ctx.lease_ms, t.row.idx, &new)
            .await?
        else {
            tracing::warn!(job = %job.id, "lease lost: another server runs the job now");
            return Ok(None);
        };
        if outcomes
            .iter()
            .any(|o| matches!(o, records::CommitOutcome::Inserted { is_new_best: true }))
        {
            ctx.cache.invalidate(&t.task.key, &job.target_key);
        }
        t.proposer.record(model.as_mut(), &keep_s, &keep_r);
        t.done += new.len() as u32;
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
