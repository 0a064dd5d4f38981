//! The machine's own tail: a fixed amount of work on one thread, timed many times. On a
//! virtual machine a running thread is paused now and then (the host runs something else, a
//! sibling hyperthread competes) without the guest seeing it as steal time, so a latency
//! percentile cannot be read without knowing what the same work gets here. Printed beside the
//! zero-shot answers' percentiles: an answer's p99 cannot beat the machine's p99 for its
//! work.

use crate::procs::quantile;
use std::hint::black_box;
use std::time::Instant;

/// Percentiles of one slice of fixed work, in ms.
pub struct Stalls {
    pub slices: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Slices that took more than twice the median.
    pub over_twice: usize,
}

/// Arithmetic the compiler cannot drop, `n` steps.
fn work(n: u64) -> f64 {
    let mut x = 0.0f64;
    for i in 0..n {
        x += black_box(i) as f64 * 1e-9;
    }
    x
}

/// `slices` slices of about `slice_ms` of work each (calibrated once, then fixed), timed.
pub fn probe(slice_ms: f64, slices: usize) -> Stalls {
    let calib = 20_000_000u64;
    let t = Instant::now();
    black_box(work(calib));
    let per_step = t.elapsed().as_secs_f64() / calib as f64;
    let steps = ((slice_ms * 1e-3 / per_step) as u64).max(1);
    let mut ms: Vec<f64> = (0..slices)
        .map(|_| {
            let t = Instant::now();
            black_box(work(steps));
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    let p50 = quantile(&ms, 0.5);
    Stalls {
        slices,
        p50_ms: p50,
        p99_ms: quantile(&ms, 0.99),
        max_ms: ms.last().copied().unwrap_or(f64::NAN),
        over_twice: ms.iter().filter(|&&m| m > 2.0 * p50).count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_percentiles_are_ordered_and_count_every_slice() {
        let s = probe(0.05, 50);
        assert_eq!(s.slices, 50);
        assert!(s.p50_ms > 0.0 && s.p50_ms <= s.p99_ms && s.p99_ms <= s.max_ms);
        // Over twice the median is over the median: half of the slices at most.
        assert!(s.over_twice <= s.slices / 2);
    }
}
