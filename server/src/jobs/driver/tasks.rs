//! A claimed job's tasks as the engine's tuner: each task's search rebuilt from every record of
//! its (workload, target), or, for a task new to the target, started warm from the nearest
//! tuned workloads of its structure.

use crate::jobs::store::{JobRow, TaskRow};
use crate::jobs::{JobContext, JobError};
use crate::records::{self, Record, RecordStore};
use std::sync::Arc;
use tunehub_engine::measure::{ErrorCode, MeasureResult};
use tunehub_engine::schedule::Schedule;
use tunehub_engine::search::{SchedulerKind, TaskSearch, Tuner, TunerTask};
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;

/// Tuned workloads of the same structure whose best schedule seeds a task new to a target.
const WARM_START_NEIGHBOURS: usize = 5;

/// The job's tuner, and its task rows in the tuner's order.
pub(super) async fn tuner(
    ctx: &JobContext,
    job: &JobRow,
    target: &Target,
) -> Result<(Tuner, Vec<TaskRow>), JobError> {
    let stats = ctx.jobs.task_stats(&job.id).await?;
    let mut tasks = vec![];
    let mut rows = vec![];
    for row in ctx.jobs.tasks(&job.id).await? {
        let search = task_search(ctx, job, target, &row).await?;
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
    Ok((
        Tuner::new(tasks, kind, job.batch_size as usize, job.seed),
        rows,
    ))
}

/// One task's search, fed what is known of its (workload, target).
async fn task_search(
    ctx: &JobContext,
    job: &JobRow,
    target: &Target,
    row: &TaskRow,
) -> Result<TaskSearch, JobError> {
    let store = ctx.jobs.records();
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
    let neighbours = if known.is_empty() {
        store
            .nearest(&task, &job.target_key, WARM_START_NEIGHBOURS)
            .await?
    } else {
        vec![]
    };
    // Sketch generation and re-adding old records lower programs: off the async threads.
    let (tg, params) = (target.clone(), ctx.search.clone());
    tokio::task::spawn_blocking(move || {
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
    .map_err(|e| JobError::Invalid(format!("building the search panicked: {e}")))
}

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
