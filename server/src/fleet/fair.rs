//! A pool's fair share: which job's piece a pulling worker gets when several jobs of its target
//! pool have pieces waiting.
//!
//! A weighted fair queue (stride scheduling): each job has a pass, the candidates it was handed
//! divided by its weight; the next piece is the one of the waiting job with the lowest pass
//! (ties: the job whose piece was queued first), and that job's pass grows by the piece's
//! candidates over its weight. So jobs with pieces waiting get the pool's devices in proportion
//! to their weights, whatever their batch sizes.
//!
//! A job that had nothing waiting (it was searching on the server, or it just started) comes
//! back at the pool's clock, the pass at which the last piece was handed out: it gets its share
//! from then on, not a burst for the time it asked for nothing. A job whose pass is at or behind
//! its pool's clock would come back there anyway, so it is forgotten: what is remembered is the
//! few jobs served ahead of the clock.
//!
//! A job's weight is its priority's (`crate::jobs::priority::weight`: 2^(priority/5)). Pure: no
//! clock, no I/O; the registry calls it under its lock.

use crate::jobs::priority::weight;
use std::collections::HashMap;

/// A job with pieces waiting in the pool, as the queue shows it to a pulling worker: the piece
/// it would get of this job is `candidates` long.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Waiting<'a> {
    pub job: &'a str,
    pub priority: i32,
    pub candidates: usize,
}

/// The passes of the jobs served ahead of their pool's clock, and each pool's clock.
#[derive(Debug, Default)]
pub struct FairShare {
    /// Job id -> (its pool, its pass).
    passes: HashMap<String, (String, f64)>,
    /// Pool (target key) -> the pass at which its last piece was handed out.
    clocks: HashMap<String, f64>,
}

impl FairShare {
    /// Which of `waiting` (one entry per job, in the order of their first queued piece) gets
    /// the next piece of `pool`; the job is charged for it. `None` when nothing waits.
    pub fn choose(&mut self, pool: &str, waiting: &[Waiting]) -> Option<usize> {
        let clock = self.clock(pool);
        let mut best: Option<(usize, f64)> = None;
        for (i, w) in waiting.iter().enumerate() {
            let start = self.pass(w.job).map_or(clock, |p| p.max(clock));
            // Strictly lower: a tie goes to the piece queued first.
            if best.is_none_or(|(_, b)| start < b) {
                best = Some((i, start));
            }
        }
        let (i, start) = best?;
        let w = &waiting[i];
        self.clocks.insert(pool.to_string(), start);
        self.passes.insert(
            w.job.to_string(),
            (
                pool.to_string(),
                start + w.candidates as f64 / weight(w.priority),
            ),
        );
        let clocks = &self.clocks;
        self.passes
            .retain(|_, (p, pass)| *pass > clocks.get(p.as_str()).copied().unwrap_or(0.0));
        Some(i)
    }

    /// A job's pass, while it is ahead of its pool's clock.
    pub fn pass(&self, job: &str) -> Option<f64> {
        self.passes.get(job).map(|(_, p)| *p)
    }

    /// The pass at which `pool` handed out its last piece.
    pub fn clock(&self, pool: &str) -> f64 {
        self.clocks.get(pool).copied().unwrap_or(0.0)
    }

    /// How many jobs it remembers (bounded by those served ahead of their pool's clock).
    pub fn remembered(&self) -> usize {
        self.passes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(job: &str, priority: i32, candidates: usize) -> Waiting<'_> {
        Waiting {
            job,
            priority,
            candidates,
        }
    }

    /// Serves `n` pieces of the pool to jobs that always have pieces waiting (in the order
    /// given, each piece `candidates` long); the jobs served, in turn.
    fn serve(f: &mut FairShare, jobs: &[(&str, i32, usize)], n: usize) -> String {
        let waiting: Vec<Waiting> = jobs.iter().map(|&(j, p, c)| w(j, p, c)).collect();
        (0..n)
            .map(|_| jobs[f.choose("pool", &waiting).unwrap()].0)
            .collect()
    }

    #[test]
    fn nothing_waiting_gives_nothing() {
        let mut f = FairShare::default();
        assert_eq!(f.choose("pool", &[]), None);
        assert_eq!(f.clock("pool"), 0.0);
    }

    #[test]
    fn equal_priorities_take_turns() {
        let mut f = FairShare::default();
        assert_eq!(serve(&mut f, &[("A", 0, 2), ("B", 0, 2)], 6), "ABABAB");
    }

    #[test]
    fn priority_five_gets_twice_the_pieces_of_priority_zero() {
        let mut f = FairShare::default();
        // A (weight 2) and B (weight 1), pieces of 2: passes A 1,2,3,... B 2,4,6,...
        let order = serve(&mut f, &[("A", 5, 2), ("B", 0, 2)], 12);
        assert_eq!(order, "ABAABAABAABA");
        assert_eq!(order.matches('A').count(), 8);
        assert_eq!(f.pass("A"), Some(16.0 / 2.0));
        assert_eq!(f.pass("B"), Some(8.0));
    }

    #[test]
    fn shares_count_candidates_not_pieces() {
        let mut f = FairShare::default();
        // A's pieces are 4 candidates, B's 1: equal weights give B four pieces per piece of A.
        assert_eq!(serve(&mut f, &[("A", 0, 4), ("B", 0, 1)], 10), "ABBBBABBBB");
    }

    #[test]
    fn three_priorities_share_four_two_one() {
        let mut f = FairShare::default();
        let order = serve(&mut f, &[("H", 10, 1), ("M", 5, 1), ("L", 0, 1)], 28);
        let count = |j: char| order.chars().filter(|&c| c == j).count();
        assert_eq!((count('H'), count('M'), count('L')), (16, 8, 4), "{order}");
    }

    #[test]
    fn a_job_that_comes_back_gets_its_share_not_a_burst() {
        let mut f = FairShare::default();
        // A alone for 10 pieces: its pass 10, the clock 9.
        assert_eq!(serve(&mut f, &[("A", 0, 1)], 10), "AAAAAAAAAA");
        assert_eq!((f.pass("A"), f.clock("pool")), (Some(10.0), 9.0));
        // B arrives: it starts at the clock (9), not at 0, so the two take turns at once.
        assert_eq!(serve(&mut f, &[("A", 0, 1), ("B", 0, 1)], 6), "BABABA");
        // B goes away to search while A runs on; back, it does not get the pieces it missed.
        assert_eq!(serve(&mut f, &[("A", 0, 1)], 5), "AAAAA");
        assert_eq!(serve(&mut f, &[("A", 0, 1), ("B", 0, 1)], 4), "BABA");
    }

    #[test]
    fn a_job_served_ahead_keeps_its_pass_while_away() {
        let mut f = FairShare::default();
        // A takes a piece of 8 candidates, B one of 1: A is 8 ahead.
        assert_eq!(serve(&mut f, &[("A", 0, 8), ("B", 0, 1)], 2), "AB");
        // A has nothing waiting for a while; B gets 6 pieces, A is still ahead when it returns.
        assert_eq!(serve(&mut f, &[("B", 0, 1)], 6), "BBBBBB");
        assert_eq!(f.pass("A"), Some(8.0));
        assert_eq!(serve(&mut f, &[("A", 0, 1), ("B", 0, 1)], 3), "BAB");
    }

    #[test]
    fn jobs_at_the_clock_are_forgotten() {
        let mut f = FairShare::default();
        serve(&mut f, &[("A", 0, 1), ("B", 0, 1)], 4);
        assert_eq!(f.remembered(), 2);
        // A has ended; once B's pieces move the clock past A's pass, A is forgotten.
        serve(&mut f, &[("B", 0, 1)], 3);
        assert_eq!(f.pass("A"), None);
        assert_eq!(f.remembered(), 1);
    }

    #[test]
    fn pools_keep_their_own_clocks() {
        let mut f = FairShare::default();
        for _ in 0..5 {
            f.choose("x", &[w("A", 0, 1)]);
        }
        // A job new to pool y does not start at pool x's clock.
        assert_eq!(f.choose("y", &[w("C", 0, 1), w("D", 0, 1)]), Some(0));
        assert_eq!(f.clock("y"), 0.0);
        assert_eq!(f.clock("x"), 4.0);
        assert_eq!(f.choose("y", &[w("C", 0, 1), w("D", 0, 1)]), Some(1));
    }
}
