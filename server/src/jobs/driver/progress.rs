//! The measurer's per-candidate results as the job's counts (`crate::jobs::live`): the task's
//! and the job's candidates done, the rate since this claim and the time left at it.

use crate::jobs::live::{Candidate, Live, Stage};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tunehub_engine::measure::{MeasureResult, OnBuilt, OnResult};

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
    /// The same for builds.
    built_seen: Vec<bool>,
    built: u32,
}

struct State {
    job_id: String,
    job_trials: u32,
    /// Since this server claimed the job: its rate is this claim's.
    started: Instant,
    measured: u32,
    seq: u64,
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
                seq: 0,
                round: RoundState::default(),
            })),
        }
    }

    /// A round of up to `batch` candidates on task `task` starts, after `task_done` of its
    /// `task_trials` (which a task sharing its job's trials may pass) and `job_done` of the
    /// job's.
    pub fn begin_round(
        &self,
        task: u32,
        (task_done, task_trials): (u32, u32),
        job_done: u32,
        batch: usize,
    ) {
        let mut s = self.lock();
        s.round = RoundState {
            task,
            task_base: task_done,
            task_trials,
            job_base: job_done,
            seen: vec![false; batch],
            done: 0,
            built_seen: vec![false; batch],
            built: 0,
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

    /// The callback the measurer calls as each build ends.
    pub fn on_built(&self) -> OnBuilt {
        let p = self.clone();
        Arc::new(move |k| p.built(k))
    }

    fn built(&self, k: usize) {
        let mut s = self.lock();
        let s = &mut *s;
        match s.round.built_seen.get_mut(k) {
            Some(seen) if !*seen => *seen = true,
            _ => return,
        }
        s.round.built += 1;
        let c = event(s, Stage::Built, None);
        self.live.candidate(c);
    }

    fn result(&self, k: usize, r: &MeasureResult) {
        let mut s = self.lock();
        let s = &mut *s;
        match s.round.seen.get_mut(k) {
            Some(seen) if !*seen => *seen = true,
            _ => return,
        }
        // A result whose build was not told (a schedule that did not lower, a remote one)
        // counts as built too.
        if let Some(b) = s.round.built_seen.get_mut(k).filter(|b| !**b) {
            *b = true;
            s.round.built += 1;
        }
        s.round.done += 1;
        s.measured += 1;
        let c = event(s, Stage::Measured, Some(r));
        self.live.candidate(c);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The event of a build or a result (`r`) in the round of `s`.
fn event(s: &mut State, stage: Stage, r: Option<&MeasureResult>) -> Candidate {
    s.seq += 1;
    let job_done = s.round.job_base + s.round.done;
    let secs = s.started.elapsed().as_secs_f64();
    let rate = if secs > 0.0 {
        f64::from(s.measured) / secs
    } else {
        0.0
    };
    let eta_s = (rate > 0.0).then(|| f64::from(s.job_trials.saturating_sub(job_done)) / rate);
    Candidate {
        job_id: s.job_id.clone(),
        seq: s.seq,
        stage,
        round_built: s.round.built,
        round_size: s.round.seen.len() as u32,
        task: s.round.task,
        task_done: s.round.task_base + s.round.done,
        task_trials: s.round.task_trials,
        job_done,
        job_trials: s.job_trials,
        ok: r.is_some_and(MeasureResult::is_ok),
        noisy: r.is_some_and(|r| r.is_ok() && r.noisy),
        error: match r {
            Some(r) if !r.is_ok() => r.error.name().to_string(),
            _ => String::new(),
        },
        trials_per_s: rate,
        eta_s,
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
        p.begin_round(1, (4, 7), 6, 3);
        let f = p.on_result();
        p.on_built()(2);
        let ok = MeasureResult {
            costs: vec![1e-3],
            ..MeasureResult::error(ErrorCode::NoError, "")
        };
        f(2, &ok);
        f(0, &MeasureResult::error(ErrorCode::CompileError, "x"));
        // A confirmation of a new best: the same candidate again.
        f(2, &ok);
        // Past the round's size: not a candidate of this round.
        f(3, &ok);
        let got = live.current("j");
        let counts: Vec<(Stage, u32, u32, u32)> = got
            .iter()
            .map(|c| (c.stage, c.round_built, c.task_done, c.job_done))
            .collect();
        assert_eq!(
            counts,
            vec![
                (Stage::Built, 1, 4, 6),
                (Stage::Measured, 1, 5, 7),
                (Stage::Measured, 2, 6, 8)
            ]
        );
        assert!(got[1].ok && got[2].error == "compile_error");
        assert_eq!(
            (got[2].task, got[2].task_trials, got[2].job_trials),
            (1, 7, 10)
        );
        assert_eq!(got[2].round_size, 3);
        assert!(got.windows(2).all(|w| w[0].seq < w[1].seq));
        p.end_round();
        assert!(live.current("j").is_empty());
    }
}
