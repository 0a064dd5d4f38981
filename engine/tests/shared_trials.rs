//! How a job's trials are shared among its tasks, with real kernels measured: with the
//! gradient scheduler the tasks' trials are one pool (a first round of half its share each,
//! then the rounds go where the weighted latency is), with round-robin each task takes its own,
//! and a task whose every candidate fails stops at its own share.

use std::sync::Arc;
use tunehub_engine::measure::{ErrorCode, MeasureBatch, MeasureOptions, MeasureResult, Measurer};
use tunehub_engine::ops;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::search::{
    RandomModel, SchedulerKind, SearchParams, TaskSearch, Tuner, TunerTask,
};
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;

/// Each task's share of the pool, and the candidates of a round.
const SHARE: usize = 8;
const BATCH: usize = 4;

fn measurer(target: &Target) -> Measurer {
    Measurer::new(
        target,
        MeasureOptions {
            min_repeat_ms: 5,
            repeat: 2,
            calib_ms: 0,
            noise_threshold: 0.0,
            run_timeout_s: 60.0,
            ..MeasureOptions::default()
        },
    )
}

/// A heavy task (a 48^3 matmul occurring 8 times) and a light one (a 4^3 matmul, once): the
/// heavy one's weighted latency is larger by orders of magnitude on any machine.
fn tuner(target: &Target, kind: SchedulerKind, batch: usize) -> Tuner {
    let task = |n: i64| {
        let spec = format!("matmul({n},{n},{n})");
        Arc::new(Task::new(ops::matmul(n, n, n).unwrap(), &spec))
    };
    let params = SearchParams {
        population: 64,
        ..SearchParams::default()
    };
    let tasks = [(task(48), 8.0), (task(4), 1.0)]
        .into_iter()
        .enumerate()
        .map(|(i, (t, w))| {
            let search = TaskSearch::new(t, target, params.clone(), 7 + i as u64);
            TunerTask::new(search, w, SHARE)
        })
        .collect();
    Tuner::new(tasks, kind, batch, 11)
}

/// Runs the tuner to its end: the (task, candidates) of each round, in order.
fn rounds(tuner: &mut Tuner, measurer: &mut dyn MeasureBatch) -> Vec<(usize, usize)> {
    let mut model = RandomModel::new(1);
    let mut out = vec![];
    while let Some(i) = tuner.next_task() {
        let round = tuner.round(i, &mut model, measurer).unwrap();
        assert!(round.complete(), "a local measurer answers every candidate");
        out.push((i, round.batch.len()));
    }
    out
}

fn taken(rounds: &[(usize, usize)], task: usize) -> usize {
    rounds.iter().filter(|r| r.0 == task).map(|r| r.1).sum()
}

#[test]
fn the_gradient_scheduler_gives_the_pool_to_the_heavy_slow_task() {
    let target = Target::detect();
    let mut tuner = tuner(&target, SchedulerKind::Gradient, BATCH);
    assert!(tuner.shared());
    let rounds = rounds(&mut tuner, &mut measurer(&target));
    // Each task's first round is half its share; the pool is spent exactly.
    let first = |task: usize| rounds.iter().find(|r| r.0 == task).unwrap().1;
    assert_eq!((first(0), first(1)), (SHARE / 2, SHARE / 2), "{rounds:?}");
    assert_eq!(
        taken(&rounds, 0) + taken(&rounds, 1),
        2 * SHARE,
        "{rounds:?}"
    );
    // The heavy task takes more than its own share, the light one less.
    assert!(taken(&rounds, 0) > SHARE, "{rounds:?}");
    assert!(taken(&rounds, 1) < SHARE, "{rounds:?}");
    assert_eq!(tuner.tasks()[0].done, taken(&rounds, 0));
}

#[test]
fn round_robin_gives_each_task_its_own_trials() {
    let target = Target::detect();
    let mut tuner = tuner(&target, SchedulerKind::RoundRobin, BATCH);
    assert!(!tuner.shared());
    let rounds = rounds(&mut tuner, &mut measurer(&target));
    assert_eq!(
        (taken(&rounds, 0), taken(&rounds, 1)),
        (SHARE, SHARE),
        "{rounds:?}"
    );
    assert!(rounds.iter().all(|r| r.1 == BATCH), "{rounds:?}");
}

/// Fault injection: every candidate of the heavy task fails as a wrong answer would; the
/// light task's are measured for real.
struct FailingHeavyTask(Measurer);

impl MeasureBatch for FailingHeavyTask {
    fn target(&self) -> &Target {
        self.0.target()
    }

    fn measure(&mut self, task: &Task, schedules: &[Schedule]) -> Vec<MeasureResult> {
        if task.desc.starts_with("matmul(48") {
            let wrong = || MeasureResult::error(ErrorCode::WrongAnswer, "injected");
            return schedules.iter().map(|_| wrong()).collect();
        }
        self.0.measure(task, schedules)
    }
}

#[test]
fn a_task_with_no_valid_kernel_stops_at_its_own_share() {
    let target = Target::detect();
    // A batch of a whole share: after its first round (half a share) the failing task's next
    // round must stop at its share, not take a batch.
    let mut tuner = tuner(&target, SchedulerKind::Gradient, SHARE);
    let rounds = rounds(&mut tuner, &mut FailingHeavyTask(measurer(&target)));
    // The scheduler puts the task with no valid kernel first, but it may not drain the pool.
    assert_eq!(taken(&rounds, 0), SHARE, "{rounds:?}");
    assert_eq!(taken(&rounds, 1), SHARE, "{rounds:?}");
    assert!(tuner.tasks()[0].search.best().is_none());
}
