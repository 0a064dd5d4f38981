//! A tuning loop over a job's tasks with one measurer: the task scheduler picks a task, its
//! search proposes a batch, the measurer builds, runs and checks it, the search and the model
//! learn. The CLI's embedded mode and the benchmark use it; the server drives the same parts
//! itself because it measures through its worker fleet.

use super::confirm::confirm_new_best;
use super::cost_model::{CostModel, CostModelError};
use super::evolve::{SearchParams, TaskSearch};
use super::scheduler::{SchedulerKind, TaskScheduler};
use crate::measure::{MeasureResult, Measurer};
use crate::schedule::Schedule;
use crate::task::Task;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

#[derive(Debug, Clone)]
pub struct TuneOptions {
    /// Measurements in all, over all tasks.
    pub trials: usize,
    /// Candidates measured per round (Ansor: 64).
    pub batch: usize,
    pub params: SearchParams,
    pub scheduler: SchedulerKind,
    pub seed: u64,
}

impl Default for TuneOptions {
    fn default() -> Self {
        TuneOptions {
            trials: 200,
            batch: 64,
            params: SearchParams::default(),
            scheduler: SchedulerKind::Gradient,
            seed: 0,
        }
    }
}

/// What one round did, for progress output and the benchmark's breakdown.
#[derive(Debug, Clone)]
pub struct RoundReport {
    pub round: usize,
    pub task: usize,
    /// Trials so far, of this task and of the whole job.
    pub task_trials: usize,
    pub total_trials: usize,
    /// This task's best mean cost so far, in seconds.
    pub best_cost: Option<f64>,
    /// Wall time of the search (sketch, evolution, model) and of the measurement.
    pub search_s: f64,
    /// The part of `search_s` spent in the cost model (predict and update).
    pub model_s: f64,
    pub measure_s: f64,
    /// Summed per-candidate build and run times (builds overlap, so these exceed wall time).
    pub build_s: f64,
    pub run_s: f64,
    pub errors: usize,
}

/// Tunes `tasks` (with their weights) within `opts.trials` measurements. `on_round` sees each
/// round's report, schedules and results (to store them) and may stop the loop.
pub fn tune(
    tasks: &[(Arc<Task>, f64)],
    measurer: &mut Measurer,
    model: &mut dyn CostModel,
    opts: &TuneOptions,
    mut on_round: impl FnMut(&RoundReport, &[Schedule], &[MeasureResult]) -> ControlFlow<()>,
) -> Result<Vec<TaskSearch>, CostModelError> {
    let mut searches: Vec<TaskSearch> = tasks
        .iter()
        .enumerate()
        .map(|(i, (t, _))| {
            TaskSearch::new(
                t.clone(),
                measurer.target(),
                opts.params.clone(),
                opts.seed.wrapping_add(i as u64),
            )
        })
        .collect();
    let mut sched = TaskScheduler::new(
        tasks.iter().map(|(_, w)| *w).collect(),
        opts.scheduler,
        opts.seed,
    );
    let mut total = 0;
    let mut round = 0;
    while total < opts.trials {
        let Some(i) = sched.next_task() else { break };
        let n = opts.batch.min(opts.trials - total);
        let t0 = Instant::now();
        let model_s0 = searches[i].stats.model_s;
        let batch = searches[i].next_batch(model, n)?;
        let search_s = t0.elapsed().as_secs_f64();
        if batch.is_empty() {
            sched.finish(i);
            continue;
        }
        let t1 = Instant::now();
        let task = searches[i].task().clone();
        let mut results = measurer.measure(&task, &batch);
        let best_so_far = searches[i].best().map(|(_, c)| c);
        confirm_new_best(best_so_far, &batch, &mut results, |_, s| {
            measurer.measure(&task, std::slice::from_ref(s)).pop()
        });
        let measure_s = t1.elapsed().as_secs_f64();
        let t2 = Instant::now();
        searches[i].record(model, &batch, &results)?;
        let search_s = search_s + t2.elapsed().as_secs_f64();
        total += batch.len();
        round += 1;
        let best = searches[i].best().map(|(_, c)| c);
        sched.observe(i, best);
        let report = RoundReport {
            round,
            task: i,
            task_trials: searches[i].trials(),
            total_trials: total,
            best_cost: best,
            search_s,
            model_s: searches[i].stats.model_s - model_s0,
            measure_s,
            build_s: results.iter().map(|r| r.build_s).sum(),
            run_s: results.iter().map(|r| r.run_s).sum(),
            errors: results.iter().filter(|r| !r.is_ok()).count(),
        };
        if on_round(&report, &batch, &results).is_break() {
            break;
        }
    }
    Ok(searches)
}
