//! The measurer's per-candidate results as the job's counts (`crate::jobs::live`): the task's
//! and the job's candidates done, the rate since this claim and the time left at it.

use crate::jobs::live::{Candidate, Live};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tunehub_engine::measure::{MeasureResult, OnResult};

/// The round being measured.
#[derive(Default)]
struct RoundState {
    task: u32,
    /// The task's and the job's candidates before this round.
    task_base: u32,
    task_trials: u32,
    job_base: u32,
    /// Each candidate of the batch told yet: a second run (a new best's confirmation) or a
    /// repeated report is not a new candidate.
    seen: Vec<bool>,
    done: u32,
}

struct State {
    job_id: String,
    job_trials: u32,
    /// Since this server claimed the job: its rate is this claim's.
    started: Instant,
    measured: u32,
    round: RoundState,
}

/// Counts a job's candidates as the measurer tells them.
#[derive(Clone)]
pub(super) struct Progress {
    live: Arc<Live>,
    state: Arc<Mutex<State>>,
}

impl Progress {
    pub fn new(live: Arc<Live>, job_id: &str, job_trials: u32) -> Self {
        Progress {
            live,
            state: Arc::new(Mutex::new(State {
                job_id: job_id.to_string(),
                job_trials,
                started: Instant::now(),
                measured: 0,
                round: RoundState::default(),
            })),
        }
    }

    /// A round of up to `batch` candidates on task `task` starts, after `task_done` of its
    /// `task_trials` and `job_done` of the job's.
    pub fn begin_round(
        &self,
        task: u32,
        (task_done, task_trials): (u32, u32),
        job_done: u32,
        batch: usize,
    ) {
        let mut s = self.lock();
        let batch = batch.min(task_trials.saturating_sub(task_done) as usize);
        s.round = RoundState {
            task,
            task_base: task_done,
            task_trials,
            job_base: job_done,
            seen: vec![false; batch],
            done: 0,
        };
    }

    /// The round's batch is stored or abandoned: its events are in the job's counts.
    pub fn end_round(&self) {
        let s = self.lock();
        self.live.batch_over(&s.job_id);
    }

    /// The callback the measurer calls with each result.
    pub fn on_result(&self) -> OnResult {
        let p = self.clone();
        Arc::new(move |k, r| p.result(k, r))
    }

    fn result(&self, k: usize, r: &MeasureResult) {
        let mut s = self.lock();
        let s = &mut *s;
        match s.round.seen.get_mut(k) {
            Some(seen) if !*seen => *seen = true,
            _ => return,
        }
        s.round.done += 1;
        s.measured += 1;
        let job_done = s.round.job_base + s.round.done;
        let secs = s.started.elapsed().as_secs_f64();
        let rate = if secs > 0.0 {
            f64::from(s.measured) / secs
        } else {
            0.0
        };
        let eta_s = (rate > 0.0).then(|| f64::from(s.job_trials.saturating_sub(job_done)) / rate);
        self.live.candidate(Candidate {
            job_id: s.job_id.clone(),
            task: s.round.task,
            task_done: s.round.task_base + s.round.done,
            task_trials: s.round.task_trials,
            job_done,
            job_trials: s.job_trials,
            ok: r.is_ok(),
            noisy: r.is_ok() && r.noisy,
            error: if r.is_ok() {
                String::new()
            } else {
                r.error.name().to_string()
            },
            trials_per_s: rate,
            eta_s,
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tunehub_engine::measure::ErrorCode;

    #[test]
    fn each_candidate_once_with_the_job_counts() {
        let live = Arc::new(Live::default());
        let p = Progress::new(Arc::clone(&live), "j", 10);
        p.begin_round(1, (4, 7), 6, 64);
        let f = p.on_result();
        let ok = MeasureResult {
            costs: vec![1e-3],
            ..MeasureResult::error(ErrorCode::NoError, "")
        };
        f(2, &ok);
        f(0, &MeasureResult::error(ErrorCode::CompileError, "x"));
        // A confirmation of a new best: the same candidate again.
        f(2, &ok);
        // Past the task's budget: not a candidate of this round.
        f(3, &ok);
        let got = live.current("j");
        let counts: Vec<(u32, u32)> = got.iter().map(|c| (c.task_done, c.job_done)).collect();
        assert_eq!(counts, vec![(5, 7), (6, 8)]);
        assert!(got[0].ok && got[1].error == "compile_error");
        assert_eq!(
            (got[1].task, got[1].task_trials, got[1].job_trials),
            (1, 7, 10)
        );
        p.end_round();
        assert!(live.current("j").is_empty());
    }
}
