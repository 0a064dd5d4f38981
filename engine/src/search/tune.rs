//! The tuning round, owned here and nowhere else: the task scheduler picks a task, its search
//! asks the cost model and proposes a batch, the measurer (the `Builder`/`Runner` pair on this
//! machine, or the server's fleet) builds, runs and checks it, a new best is measured twice
//! (or, while the task has no trusted time, a batch of noisy times has its fastest measured
//! again until one is clean), and the search and the model learn from the results.
//!
//! [`Tuner`] holds a job's searches and its scheduler and runs one [`Tuner::round`] at a time,
//! so that a caller can wrap each round with what it needs: the server's job driver with
//! persistence, leases and events (and it moves the tuner onto a blocking thread per round),
//! the benchmark with its timings. [`tune`] is the plain loop over rounds.

use super::confirm::{
    Second, TieBreak, Verdict, confirm_new_best, hold_unconfirmed, settle_dispute,
};
use super::cost_model::{CostModel, CostModelError};
use super::evolve::{SearchParams, TaskSearch};
use super::requiet::{REMEASURE_NOISY, remeasure_noisy};
use super::scheduler::{SchedulerKind, TaskScheduler};
use crate::measure::{MeasureBatch, MeasureResult};
use crate::schedule::Schedule;
use crate::target::Target;
use crate::task::Task;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

/// Candidates measured per round. Ansor measures 64 a round; so do we: the CLI, the service and
/// the benchmark share this default (docs/experiments/2026-11-25-tuning-defaults.md).
pub const DEFAULT_BATCH: usize = 64;

#[derive(Debug, Clone)]
pub struct TuneOptions {
    /// Measurements in all, over all tasks.
    pub trials: usize,
    /// Candidates measured per round.
    pub batch: usize,
    pub params: SearchParams,
    pub scheduler: SchedulerKind,
    pub seed: u64,
}

impl Default for TuneOptions {
    fn default() -> Self {
        TuneOptions {
            trials: 200,
            batch: DEFAULT_BATCH,
            params: SearchParams::default(),
            scheduler: SchedulerKind::Gradient,
            seed: 0,
        }
    }
}

/// What one round did, for progress output and the benchmark's breakdown.
#[derive(Debug, Clone, Default)]
pub struct RoundReport {
    pub round: usize,
    pub task: usize,
    /// Trials so far, of this task and of the whole tuner.
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

/// One round's candidates and what measuring them gave.
#[derive(Debug)]
pub struct Round {
    pub task: usize,
    pub batch: Vec<Schedule>,
    /// One per candidate, unless the measurer abandoned the batch (see [`Round::complete`]).
    pub results: Vec<MeasureResult>,
    /// The device that measured each result (a fleet worker), where the measurer says.
    pub devices: Vec<Option<String>>,
    pub report: RoundReport,
}

impl Round {
    /// The task's search space ran dry: nothing was proposed, and the task is finished.
    pub fn exhausted(&self) -> bool {
        self.batch.is_empty()
    }

    /// Every candidate has its result. An abandoned batch (a remote one cut short by a cancel
    /// or a shutdown) is not learned from or counted: its candidates are proposed again later.
    pub fn complete(&self) -> bool {
        self.results.len() == self.batch.len()
    }
}

/// One task of a tuner: its search, its share of the scheduler's objective, and its budget.
pub struct TunerTask {
    pub search: TaskSearch,
    pub weight: f64,
    /// Trials this task may take in all (its share of the pool, where the tuner shares its
    /// tasks' trials: [`Tuner::shared`]), and those already taken (by an earlier run of a
    /// resumed job: they count against the budget).
    pub trials: usize,
    pub done: usize,
    /// Its search space ran dry earlier: it gets no round.
    pub exhausted: bool,
}

impl TunerTask {
    /// A fresh task with a budget of `trials`.
    pub fn new(search: TaskSearch, weight: f64, trials: usize) -> Self {
        TunerTask {
            search,
            weight,
            trials,
            done: 0,
            exhausted: false,
        }
    }

    /// Whether it may have another round: within its own budget, or, in a shared pool, while
    /// the pool lasts (the tuner checks that) once it has a valid kernel: a task whose every
    /// candidate fails stops at its own trials instead of draining the pool (the scheduler
    /// puts a task with no valid kernel first).
    fn open(&self, shared: bool) -> bool {
        !self.exhausted && (self.done < self.trials || (shared && self.search.best().is_some()))
    }

    /// Its first round in a shared pool: half its share (at most a batch), so that half of the
    /// pool is left for the scheduler to give where the objective falls most.
    fn first_round(&self, batch: usize) -> usize {
        self.trials.div_ceil(2).clamp(1, batch)
    }
}

/// A job's searches and its task scheduler, advanced one round at a time.
///
/// With Ansor's gradient scheduler and more than one task the tasks' trials are one pool
/// ([`Tuner::shared`]): each task has a first round of half its own trials, then each round (of
/// at most a batch and at most the task's own trials) goes to the task the scheduler expects to
/// lower the weighted sum of latencies most, so a heavy, slow layer takes more than its share
/// and a small one less (Ansor's network tuning; a flat count per task left a model's slowest
/// convolutions with the trials of its pools). With the round-robin scheduler, or one task,
/// each task takes its own trials.
pub struct Tuner {
    tasks: Vec<TunerTask>,
    scheduler: TaskScheduler,
    /// The tasks' trials are one pool, shared by the scheduler.
    shared: bool,
    batch: usize,
    /// Trials over all tasks this tuner may still take (besides each task's own budget).
    remaining: usize,
    total: usize,
    rounds: usize,
}

impl Tuner {
    pub fn new(tasks: Vec<TunerTask>, scheduler: SchedulerKind, batch: usize, seed: u64) -> Self {
        let shared = Self::shares(scheduler, tasks.len());
        let mut sched =
            TaskScheduler::new(tasks.iter().map(|t| t.weight).collect(), scheduler, seed);
        for (i, t) in tasks.iter().enumerate() {
            if !t.open(shared) {
                sched.finish(i);
            }
        }
        // A resumed job's pool is what its tasks have not taken yet.
        let remaining = if shared {
            let all: usize = tasks.iter().map(|t| t.trials).sum();
            all.saturating_sub(tasks.iter().map(|t| t.done).sum())
        } else {
            usize::MAX
        };
        Tuner {
            tasks,
            scheduler: sched,
            shared,
            batch: batch.max(1),
            remaining,
            total: 0,
            rounds: 0,
        }
    }

    /// Whether a tuner of `tasks` tasks with this scheduler shares their trials as one pool:
    /// with the gradient scheduler and more than one task.
    pub fn shares(scheduler: SchedulerKind, tasks: usize) -> bool {
        scheduler == SchedulerKind::Gradient && tasks > 1
    }

    /// Whether this tuner's tasks share their trials ([`Tuner::shares`]).
    pub fn shared(&self) -> bool {
        self.shared
    }

    /// Fresh searches of `tasks` (with their weights) sharing `opts.trials` trials in all; task
    /// `i` searches with seed `opts.seed + i`.
    pub fn with_options(tasks: &[(Arc<Task>, f64)], target: &Target, opts: &TuneOptions) -> Self {
        let tasks = tasks
            .iter()
            .enumerate()
            .map(|(i, (t, w))| {
                let seed = opts.seed.wrapping_add(i as u64);
                let search = TaskSearch::new(t.clone(), target, opts.params.clone(), seed);
                TunerTask::new(search, *w, opts.trials)
            })
            .collect();
        let mut tuner = Tuner::new(tasks, opts.scheduler, opts.batch, opts.seed);
        tuner.remaining = opts.trials;
        tuner
    }

    pub fn tasks(&self) -> &[TunerTask] {
        &self.tasks
    }

    pub fn into_searches(self) -> Vec<TaskSearch> {
        self.tasks.into_iter().map(|t| t.search).collect()
    }

    /// The task that gets the next round, or `None` when every task is finished.
    pub fn next_task(&mut self) -> Option<usize> {
        if self.remaining == 0 {
            return None;
        }
        self.scheduler.next_task()
    }

    /// The candidates the next round of task `i` will have (fewer if its search runs dry).
    pub fn round_size(&self, i: usize) -> usize {
        let t = &self.tasks[i];
        let size = if !self.shared {
            self.batch.min(t.trials.saturating_sub(t.done))
        } else if t.done == 0 {
            t.first_round(self.batch)
        } else if t.search.best().is_none() {
            // No valid kernel yet: no further than its own trials ([`TunerTask::open`]).
            self.batch.min(t.trials.saturating_sub(t.done))
        } else {
            // At most its share a round: a pool of small shares is not taken by one task at once.
            self.batch.min(t.trials.max(1))
        };
        size.min(self.remaining)
    }

    /// One round on task `i` (from [`Tuner::next_task`]): propose, measure, confirm a new
    /// best, learn. Runs the search and the measurement on this thread: the server calls it
    /// off its async threads.
    pub fn round(
        &mut self,
        i: usize,
        model: &mut dyn CostModel,
        measurer: &mut dyn MeasureBatch,
    ) -> Result<Round, CostModelError> {
        let shared = self.shared;
        let want = self.round_size(i);
        let t = &mut self.tasks[i];
        let t0 = Instant::now();
        let model_s0 = t.search.stats.model_s;
        let batch = if want == 0 {
            vec![]
        } else {
            t.search.next_batch(model, want)?
        };
        let mut search_s = t0.elapsed().as_secs_f64();
        let mut round = Round {
            task: i,
            batch,
            results: vec![],
            devices: vec![],
            report: RoundReport {
                task: i,
                ..RoundReport::default()
            },
        };
        if round.exhausted() {
            t.exhausted = true;
            self.scheduler.finish(i);
            return Ok(round);
        }

        let t1 = Instant::now();
        let task = t.search.task().clone();
        round.results = measurer.measure(&task, &round.batch);
        round.devices = measurer.devices();
        if round.complete() {
            // A remote new best is measured again on another device of its pool when there
            // is one (a device's time is its word); the slower run is kept (`confirm`).
            let best_before = t.search.best().map(|(_, c)| c);
            let mut second_device = None;
            let devices = &round.devices;
            let confirmed =
                confirm_new_best(best_before, &round.batch, &mut round.results, |k, s| {
                    let first = devices.get(k).cloned().flatten();
                    let avoid: Vec<&str> = first.as_deref().into_iter().collect();
                    let (result, device) = measurer.measure_elsewhere(&task, s, &avoid)?;
                    let other_device = device != first;
                    second_device = device;
                    Some(Second {
                        result,
                        other_device,
                    })
                });
            let hold = confirmed.and_then(|(k, verdict)| {
                cross_checked(
                    &mut round,
                    &task,
                    k,
                    verdict,
                    second_device,
                    best_before,
                    measurer,
                )
            });
            let devices = &round.devices;
            // No trusted time yet and only noisy ones in the batch: the fastest measured
            // again until one is clean (never both: confirming needs a clean one).
            let clean = remeasure_noisy(
                t.search.best().map(|(_, c)| c),
                &round.batch,
                &mut round.results,
                REMEASURE_NOISY,
                |k, s| {
                    let again = measurer.measure(&task, std::slice::from_ref(s)).pop()?;
                    let first = devices.get(k).cloned().flatten();
                    (measurer.devices().first().cloned().flatten() == first).then_some(again)
                },
            );
            if let Some(k) = clean {
                tracing::info!(candidate = k, "a noisy time measured again came back clean");
            }
            // Last, so that no time made clean above escapes it.
            if let Some((k, bar)) = hold {
                let held = hold_unconfirmed(bar, &mut round.results, &round.devices, k);
                if held > 0 {
                    tracing::info!(
                        held,
                        "remote times faster than every confirmed one kept unconfirmed (never a best)"
                    );
                }
            }
        }
        let measure_s = t1.elapsed().as_secs_f64();
        if !round.complete() {
            round.report.measure_s = measure_s;
            round.report.search_s = search_s;
            return Ok(round);
        }

        let t2 = Instant::now();
        t.search.record(model, &round.batch, &round.results)?;
        search_s += t2.elapsed().as_secs_f64();
        let n = round.batch.len();
        t.done += n;
        self.total += n;
        self.remaining = self.remaining.saturating_sub(n);
        self.rounds += 1;
        let best = t.search.best().map(|(_, c)| c);
        self.scheduler.observe(i, best);
        if !t.open(shared) {
            self.scheduler.finish(i);
        }
        let results = &round.results;
        round.report = RoundReport {
            round: self.rounds,
            task: i,
            task_trials: t.done,
            total_trials: self.total,
            best_cost: best,
            search_s,
            model_s: t.search.stats.model_s - model_s0,
            measure_s,
            build_s: results.iter().map(|r| r.build_s).sum(),
            run_s: results.iter().map(|r| r.run_s).sum(),
            errors: results.iter().filter(|r| !r.is_ok()).count(),
        };
        Ok(round)
    }
}

/// What a new best's second run on another device settles: the device the kept run is
/// from, agreement told to the measurer, and a dispute taken to a tie-break ([`dispute`]).
/// Returns the candidate and the bar above which the batch's other remote times stand
/// (`hold_unconfirmed`: the best trusted time, or the one just confirmed). Nothing for a
/// second run on the same device: a pool of one has no one else to ask.
fn cross_checked(
    round: &mut Round,
    task: &Task,
    k: usize,
    verdict: Verdict,
    second: Option<String>,
    best_before: Option<f64>,
    measurer: &mut dyn MeasureBatch,
) -> Option<(usize, Option<f64>)> {
    let first = round.devices.get(k).cloned().flatten();
    if verdict == Verdict::Folded || second == first {
        return None;
    }
    let (kept_on, trusted) = match verdict {
        Verdict::Agreed { second_kept } => {
            for d in [&first, &second].into_iter().flatten() {
                measurer.agreed(d);
            }
            (if second_kept { second } else { first }, true)
        }
        Verdict::Unsettled { second_kept } => (if second_kept { second } else { first }, false),
        Verdict::Failed | Verdict::Folded => (second, false),
        Verdict::Disagreed {
            first_s,
            second_s,
            faster,
        } => {
            let (fast, slow) = if second_s > first_s {
                (first, second)
            } else {
                (second, first)
            };
            dispute(round, task, k, fast, slow, faster, measurer)
        }
    };
    if let Some(slot) = round.devices.get_mut(k) {
        *slot = kept_on;
    }
    let bar = if trusted {
        let kept = round.results[k].mean_cost();
        Some(best_before.map_or(kept, |b| b.min(kept)))
    } else {
        best_before
    };
    Some((k, bar))
}

/// Two devices' times of candidate `k` disagree (`fast`'s run set aside as `faster`, `slow`'s
/// kept, flagged): a third device, else `slow` again, breaks the tie (`settle_dispute`), and
/// only a dispute it upholds is counted against `fast`. Returns the kept run's device and
/// whether the kept run is trusted.
fn dispute(
    round: &mut Round,
    task: &Task,
    k: usize,
    fast: Option<String>,
    slow: Option<String>,
    faster: MeasureResult,
    measurer: &mut dyn MeasureBatch,
) -> (Option<String>, bool) {
    let name = |d: &Option<String>| d.clone().unwrap_or_else(|| "this machine".into());
    let (fast_s, slow_s) = (faster.mean_cost(), round.results[k].mean_cost());
    let why = format!(
        "timed a kernel at {:.3} us where {} timed it at {:.3} us ({:.1}x apart)",
        fast_s * 1e6,
        name(&slow),
        slow_s * 1e6,
        slow_s / fast_s
    );
    let avoid: Vec<&str> = [&fast, &slow]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect();
    let (tie_break, tie_on) = match measurer.measure_elsewhere(task, &round.batch[k], &avoid) {
        // The faster device alone is left to ask: nothing to settle.
        Some((tie, on)) if on != fast => (settle_dispute(&mut round.results[k], faster, tie), on),
        _ => (TieBreak::Open, None),
    };
    match tie_break {
        TieBreak::Reproduced { tie_kept } => {
            tracing::info!(candidate = k, device = %name(&fast), "a tie-break on {} reproduced a disputed time: {why}", name(&tie_on));
            for d in [&fast, &tie_on].into_iter().flatten() {
                measurer.agreed(d);
            }
            (if tie_kept { tie_on } else { fast }, true)
        }
        TieBreak::Upheld => {
            tracing::warn!(candidate = k, device = %name(&fast), "times disagree, upheld by a tie-break on {}: {why}", name(&tie_on));
            round.results[k].error_msg =
                format!("disputed: {} {why}; the slower time kept", name(&fast));
            if let Some(d) = &fast {
                measurer.disagreed(d, &why);
            }
            (slow, false)
        }
        TieBreak::Open => {
            round.results[k].error_msg = format!(
                "disputed: {} {why}; no clean tie-break, the slower time kept",
                name(&fast)
            );
            (slow, false)
        }
        TieBreak::Failed => (tie_on, false),
    }
}

/// Tunes `tasks` (with their weights) within `opts.trials` measurements. `on_round` sees each
/// round (to store its results) and may stop the loop.
pub fn tune(
    tasks: &[(Arc<Task>, f64)],
    measurer: &mut dyn MeasureBatch,
    model: &mut dyn CostModel,
    opts: &TuneOptions,
    mut on_round: impl FnMut(&Round) -> ControlFlow<()>,
) -> Result<Vec<TaskSearch>, CostModelError> {
    let mut tuner = Tuner::with_options(tasks, measurer.target(), opts);
    while let Some(i) = tuner.next_task() {
        let round = tuner.round(i, model, measurer)?;
        if round.exhausted() {
            continue;
        }
        // A local measurer always answers every candidate; a remote one that gave up has
        // nothing more to give.
        if !round.complete() || on_round(&round).is_break() {
            break;
        }
    }
    Ok(tuner.into_searches())
}
