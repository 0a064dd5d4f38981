//! Progress inside a batch: each candidate's result as the measurer knows it, before the batch
//! is stored. A batch of 64 takes minutes and a job of 64 trials or fewer per task is one
//! batch, so progress told per stored batch stays at 0 until the end; this tells Watch of
//! every candidate.
//!
//! Kept in memory on the server that runs the job (a watcher on another replica of the same
//! database sees the stored batches only): a broadcast for watchers already listening, and the
//! current batch's events so far for one that starts in the middle of it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;

/// Events a slow watcher may fall behind by before it skips some (it then catches up at the
/// next one: counts are totals, not increments).
const CAPACITY: usize = 1024;

/// What a candidate event tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Compiled (or failed to), its run still to come: not in the counts yet.
    Built,
    /// Its result is known: in the counts.
    Measured,
}

/// One candidate of a job built or measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub job_id: String,
    /// Rises with every event of the job on this server: orders a round's builds, which
    /// leave the counts where they were.
    pub seq: u64,
    pub stage: Stage,
    /// The round's candidates built so far, and its size.
    pub round_built: u32,
    pub round_size: u32,
    /// The task's index in the job.
    pub task: u32,
    /// Candidates of the task measured by this job (the stored batches, then this batch's).
    pub task_done: u32,
    /// The task's budget.
    pub task_trials: u32,
    /// Candidates measured over all the job's tasks, and their budget.
    pub job_done: u32,
    pub job_trials: u32,
    /// This candidate's result: a verified success (`noisy` or not), or the error's name.
    pub ok: bool,
    pub noisy: bool,
    pub error: String,
    /// Candidates measured per second since this server claimed the job (search included).
    pub trials_per_s: f64,
    /// Seconds left at that rate; `None` before the first candidate.
    pub eta_s: Option<f64>,
}

/// Every running job's candidates, as they are measured.
pub struct Live {
    tx: broadcast::Sender<Arc<Candidate>>,
    /// Per job, the events of the batch being measured (cleared once it is stored).
    batches: Mutex<HashMap<String, Vec<Arc<Candidate>>>>,
}

impl Default for Live {
    fn default() -> Self {
        Live {
            tx: broadcast::channel(CAPACITY).0,
            batches: Mutex::default(),
        }
    }
}

impl Live {
    /// Tells watchers of `c`, and keeps it for watchers that start before its batch is stored.
    pub fn candidate(&self, c: Candidate) {
        let c = Arc::new(c);
        self.lock()
            .entry(c.job_id.clone())
            .or_default()
            .push(Arc::clone(&c));
        // No watcher listening is not an error.
        let _ = self.tx.send(c);
    }

    /// The job's batch is stored (or abandoned): its events are in the job's counts now.
    pub fn batch_over(&self, job_id: &str) {
        self.lock().remove(job_id);
    }

    /// Events from now on, every job's (a watcher keeps its job's).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Candidate>> {
        self.tx.subscribe()
    }

    /// The events of the job's batch being measured, in order.
    pub fn current(&self, job_id: &str) -> Vec<Arc<Candidate>> {
        self.lock().get(job_id).cloned().unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Arc<Candidate>>>> {
        // A panic while holding it left a map that is still whole.
        self.batches.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(job: &str, done: u32) -> Candidate {
        Candidate {
            job_id: job.into(),
            seq: u64::from(done),
            stage: Stage::Measured,
            round_built: 4,
            round_size: 4,
            task: 0,
            task_done: done,
            task_trials: 4,
            job_done: done,
            job_trials: 4,
            ok: true,
            noisy: false,
            error: String::new(),
            trials_per_s: 1.0,
            eta_s: Some(f64::from(4 - done)),
        }
    }

    #[test]
    fn a_batch_is_kept_until_stored_and_broadcast() {
        let live = Live::default();
        let mut rx = live.subscribe();
        live.candidate(c("a", 1));
        live.candidate(c("b", 1));
        live.candidate(c("a", 2));
        let a: Vec<u32> = live.current("a").iter().map(|c| c.job_done).collect();
        assert_eq!(a, vec![1, 2]);
        live.batch_over("a");
        assert!(live.current("a").is_empty());
        assert_eq!(live.current("b").len(), 1);
        let got: Vec<(String, u32)> = (0..3)
            .map(|_| {
                let c = rx.try_recv().unwrap();
                (c.job_id.clone(), c.job_done)
            })
            .collect();
        assert_eq!(got, vec![("a".into(), 1), ("b".into(), 1), ("a".into(), 2)]);
    }
}
