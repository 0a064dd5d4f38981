//! Sharing a job's trials among its tasks (the operators of a network, each with a weight: how
//! often it occurs). The objective is the weighted sum of the tasks' best latencies.
//!
//! `Gradient` is Ansor's task scheduler: after one warm-up round per task, the next round goes
//! to the task whose tuning is expected to lower the objective most, estimated from its recent
//! progress (a backward window) and an optimistic forward guess (latency falling like 1/rounds),
//! with an eps-greedy random pick. `RoundRobin` cycles. Whether the tasks' trials are one pool
//! the scheduler shares out, or each task's own, is the tuner's (`Tuner::shares`).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedulerKind {
    Gradient,
    RoundRobin,
}

impl std::str::FromStr for SchedulerKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "gradient" => Ok(SchedulerKind::Gradient),
            "round-robin" => Ok(SchedulerKind::RoundRobin),
            _ => Err(format!(
                "unknown task scheduler {s:?} (gradient, round-robin)"
            )),
        }
    }
}

pub struct TaskScheduler {
    kind: SchedulerKind,
    weights: Vec<f64>,
    /// Best latency per task after each of its rounds (infinity until one is valid).
    history: Vec<Vec<f64>>,
    done: Vec<bool>,
    next_rr: usize,
    rng: ChaCha8Rng,
    /// Ansor's parameters: weight of the backward estimate, window in rounds, random share.
    alpha: f64,
    window: usize,
    eps: f64,
}

impl TaskScheduler {
    pub fn new(weights: Vec<f64>, kind: SchedulerKind, seed: u64) -> Self {
        let n = weights.len();
        TaskScheduler {
            kind,
            weights,
            history: vec![vec![]; n],
            done: vec![false; n],
            next_rr: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            alpha: 0.2,
            window: 3,
            eps: 0.05,
        }
    }

    /// The task that gets the next round; `None` when every task is done.
    pub fn next_task(&mut self) -> Option<usize> {
        let alive: Vec<usize> = (0..self.weights.len()).filter(|&i| !self.done[i]).collect();
        if alive.is_empty() {
            return None;
        }
        if let Some(&i) = alive.iter().find(|&&i| self.history[i].is_empty()) {
            return Some(i);
        }
        match self.kind {
            SchedulerKind::RoundRobin => {
                let i = alive
                    .iter()
                    .copied()
                    .find(|&i| i >= self.next_rr)
                    .unwrap_or(alive[0]);
                self.next_rr = i + 1;
                Some(i)
            }
            SchedulerKind::Gradient => {
                if self.rng.gen_bool(self.eps) {
                    return Some(alive[self.rng.gen_range(0..alive.len())]);
                }
                // Tasks with no valid kernel yet come first: their latency is unbounded.
                if let Some(&i) = alive.iter().find(|&&i| !self.best(i).is_finite()) {
                    return Some(i);
                }
                let grads: Vec<f64> = alive.iter().map(|&i| self.gradient(i)).collect();
                let (lo, hi) = grads
                    .iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &g| {
                        (a.min(g), b.max(g))
                    });
                if lo == hi {
                    return Some(alive[self.rng.gen_range(0..alive.len())]);
                }
                let k = grads
                    .iter()
                    .enumerate()
                    .min_by(|a, b| a.1.total_cmp(b.1))
                    .map(|(k, _)| k)
                    .expect("non-empty");
                Some(alive[k])
            }
        }
    }

    fn best(&self, i: usize) -> f64 {
        self.history[i].last().copied().unwrap_or(f64::INFINITY)
    }

    /// d(objective)/d(round) of tuning task `i` once more (negative: the objective falls).
    fn gradient(&self, i: usize) -> f64 {
        let h = &self.history[i];
        let rounds = h.len();
        let best = self.best(i);
        let backward = if rounds > self.window && h[rounds - 1 - self.window].is_finite() {
            (h[rounds - 1] - h[rounds - 1 - self.window]) / self.window as f64
        } else {
            0.0
        };
        // If latency fell like 1/t, one more round would save best / t.
        let forward = -best / rounds as f64;
        self.weights[i] * (self.alpha * backward + (1.0 - self.alpha) * forward)
    }

    /// After a round of task `i`: its best latency so far (seconds; `None` if none is valid).
    pub fn observe(&mut self, i: usize, best: Option<f64>) {
        self.history[i].push(best.unwrap_or(f64::INFINITY));
    }

    /// Task `i` gets no more rounds (its space is exhausted or it failed).
    pub fn finish(&mut self, i: usize) {
        self.done[i] = true;
    }

    /// The weighted sum of best latencies (infinite while a task has none).
    pub fn objective(&self) -> f64 {
        (0..self.weights.len())
            .map(|i| self.weights[i] * self.best(i))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warm_up_visits_every_task_first() {
        let mut s = TaskScheduler::new(vec![1.0, 1.0, 1.0], SchedulerKind::Gradient, 0);
        let mut seen = vec![];
        for _ in 0..3 {
            let i = s.next_task().unwrap();
            seen.push(i);
            s.observe(i, Some(1.0));
        }
        seen.sort();
        assert_eq!(seen, vec![0, 1, 2]);
    }

    #[test]
    fn gradient_favours_the_heavy_slow_task() {
        // Task 1 occurs 10 times and is 10x slower: it dominates the objective.
        let mut s = TaskScheduler::new(vec![1.0, 10.0], SchedulerKind::Gradient, 1);
        s.observe(0, Some(1e-3));
        s.observe(1, Some(1e-2));
        let mut counts = [0, 0];
        for _ in 0..100 {
            let i = s.next_task().unwrap();
            counts[i] += 1;
            let b = s.best(i);
            s.observe(i, Some(b * 0.99));
        }
        assert!(counts[1] > 80, "{counts:?}");
    }

    #[test]
    fn round_robin_cycles_and_skips_finished() {
        let mut s = TaskScheduler::new(vec![1.0; 3], SchedulerKind::RoundRobin, 0);
        for i in 0..3 {
            assert_eq!(s.next_task(), Some(i));
            s.observe(i, Some(1.0));
        }
        s.finish(1);
        let order: Vec<usize> = (0..4)
            .map(|_| {
                let i = s.next_task().unwrap();
                s.observe(i, Some(1.0));
                i
            })
            .collect();
        assert_eq!(order, vec![0, 2, 0, 2]);
        s.finish(0);
        s.finish(2);
        assert_eq!(s.next_task(), None);
    }
}
