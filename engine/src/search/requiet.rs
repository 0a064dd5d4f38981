//! A task must not end without a kernel because of noise.
//!
//! A time taken while the machine was slowed is kept flagged noisy and never taken as a best.
//! On a busy machine every success of a task can be noisy: the job then ends with records but
//! no best, and every query of the workload fails. So while a task has no trusted time, a batch
//! whose successes are all noisy has its fastest ones measured again, one at a time, until one
//! comes back clean; that one is recorded with its clean times. If none does, the batch stays
//! as it was: the runner already kept each kernel's least disturbed attempt, flagged.

use crate::measure::MeasureResult;
use crate::schedule::Schedule;

/// Noisy successes measured again per batch, at most: each re-measurement may itself retry
/// (the runner's `noise_retries`), so more would triple a round's cost on a busy machine.
pub const REMEASURE_NOISY: usize = 3;

/// When the task has no trusted time (`best_so_far` is `None`) and the batch's successes are
/// all noisy, measures the fastest of them again through `measure` (given its index and
/// schedule; `None`: no comparable run can be had), up to `tries`, until one is clean. The
/// clean run replaces the noisy one (times added); a kernel that fails its run again takes the
/// error, as a new best's confirmation does. Returns the index made clean, if any.
pub fn remeasure_noisy(
    best_so_far: Option<f64>,
    batch: &[Schedule],
    results: &mut [MeasureResult],
    tries: usize,
    mut measure: impl FnMut(usize, &Schedule) -> Option<MeasureResult>,
) -> Option<usize> {
    if best_so_far.is_some() || results.iter().any(|r| r.is_ok() && !r.noisy) {
        return None;
    }
    let mut noisy: Vec<(usize, f64)> = results
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_ok())
        .map(|(k, r)| (k, r.mean_cost()))
        .collect();
    noisy.sort_by(|a, b| a.1.total_cmp(&b.1));
    for &(k, _) in noisy.iter().take(tries) {
        let Some(again) = measure(k, &batch[k]) else {
            continue;
        };
        let first = &mut results[k];
        let (build_s, run_s) = (first.build_s + again.build_s, first.run_s + again.run_s);
        if again.is_ok() && !again.noisy {
            *first = MeasureResult {
                build_s,
                run_s,
                ..again
            };
            return Some(k);
        }
        if !again.is_ok() {
            *first = MeasureResult {
                error_msg: format!("measured again for noise: {}", again.error_msg),
                build_s,
                run_s,
                ..again
            };
        } else {
            first.build_s = build_s;
            first.run_s = run_s;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::ErrorCode;

    fn ok(cost: f64, noisy: bool) -> MeasureResult {
        MeasureResult {
            costs: vec![cost],
            error: ErrorCode::NoError,
            error_msg: String::new(),
            build_s: 0.1,
            run_s: 0.2,
            noisy,
        }
    }

    fn batch(n: usize) -> Vec<Schedule> {
        (0..n).map(|_| Schedule::default()).collect()
    }

    #[test]
    fn the_fastest_noisy_ones_are_measured_again_until_one_is_clean() {
        let mut results = vec![ok(3.0, true), ok(1.0, true), ok(2.0, true)];
        let mut asked = vec![];
        let k = remeasure_noisy(None, &batch(3), &mut results, 3, |k, _| {
            asked.push(k);
            Some(ok(2.5, k == 2))
        });
        // Index 1 (fastest) comes back clean at once.
        assert_eq!((k, asked), (Some(1), vec![1]));
        assert!(!results[1].noisy);
        assert_eq!(results[1].costs, vec![2.5]);
        assert!((results[1].run_s - 0.4).abs() < 1e-12);

        let mut results = vec![ok(3.0, true), ok(1.0, true), ok(2.0, true)];
        let mut asked = vec![];
        let k = remeasure_noisy(None, &batch(3), &mut results, 2, |k, _| {
            asked.push(k);
            Some(ok(2.5, true))
        });
        assert_eq!((k, asked), (None, vec![1, 2]));
        assert!(results.iter().all(|r| r.noisy), "kept, flagged");
    }

    #[test]
    fn nothing_is_measured_with_a_trusted_time() {
        let never = |_: usize, _: &Schedule| -> Option<MeasureResult> { panic!("measured") };
        let mut results = vec![ok(1.0, true)];
        assert_eq!(
            remeasure_noisy(Some(1.0), &batch(1), &mut results, 3, never),
            None
        );
        let mut results = vec![ok(1.0, true), ok(2.0, false)];
        assert_eq!(
            remeasure_noisy(None, &batch(2), &mut results, 3, never),
            None
        );
        let mut results = vec![MeasureResult::error(ErrorCode::CompileError, "x")];
        assert_eq!(
            remeasure_noisy(None, &batch(1), &mut results, 3, never),
            None
        );
    }

    #[test]
    fn a_kernel_failing_its_run_again_takes_the_error() {
        let mut results = vec![ok(1.0, true)];
        let k = remeasure_noisy(None, &batch(1), &mut results, 3, |_, _| {
            Some(MeasureResult::error(ErrorCode::WrongAnswer, "mismatch"))
        });
        assert_eq!(k, None);
        assert_eq!(results[0].error, ErrorCode::WrongAnswer);
        assert!(results[0].error_msg.contains("mismatch"));
    }
}
