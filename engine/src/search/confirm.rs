//! A new best is measured twice before it counts.
//!
//! On a shared machine one short measurement can read 30% fast (the same matmul kernel read
//! 125, 202 and 124 GFLOP/s in three runs a minute apart), and the best of a few hundred such
//! readings is biased towards the lucky ones: the search's best-so-far read ~20% above the
//! same kernel re-measured at length. A batch's best that beats the best so far is therefore
//! measured once more; its record keeps both runs' repeats, so its mean (what the search and
//! the database rank by) is the mean of both. One extra measurement per improving round.

use crate::measure::MeasureResult;
use crate::schedule::Schedule;

/// Re-measures the batch's best result through `measure` (given its index and schedule; `None`
/// when no comparable second run can be had) when it beats `best_so_far` (or when there is none
/// yet), folding the second run into it: repeats appended, times added, noisy if either run
/// was. A kernel that fails the second run takes that error: a kernel is recorded only if
/// every run of it was correct. Returns the index confirmed, if any.
pub fn confirm_new_best(
    best_so_far: Option<f64>,
    batch: &[Schedule],
    results: &mut [MeasureResult],
    measure: impl FnOnce(usize, &Schedule) -> Option<MeasureResult>,
) -> Option<usize> {
    let (k, cost) = results
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_ok() && !r.noisy)
        .map(|(k, r)| (k, r.mean_cost()))
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    if best_so_far.is_some_and(|b| cost >= b) {
        return None;
    }
    let again = measure(k, &batch[k])?;
    let first = &mut results[k];
    if again.is_ok() {
        first.costs.extend(again.costs);
        first.noisy |= again.noisy;
        first.build_s += again.build_s;
        first.run_s += again.run_s;
    } else {
        *first = MeasureResult {
            error_msg: format!("second measurement of a new best: {}", again.error_msg),
            build_s: first.build_s + again.build_s,
            run_s: first.run_s + again.run_s,
            ..again
        };
    }
    Some(k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::ErrorCode;

    fn ok(cost: f64) -> MeasureResult {
        MeasureResult {
            costs: vec![cost],
            error: ErrorCode::NoError,
            error_msg: String::new(),
            build_s: 0.1,
            run_s: 0.2,
            noisy: false,
        }
    }

    fn batch(n: usize) -> Vec<Schedule> {
        (0..n).map(|_| Schedule::default()).collect()
    }

    #[test]
    fn a_new_best_is_measured_again_and_averaged() {
        let mut results = vec![ok(3.0), ok(1.0), ok(2.0)];
        let mut asked = 0;
        let k = confirm_new_best(Some(1.5), &batch(3), &mut results, |k, _| {
            asked = k;
            Some(ok(2.0))
        });
        assert_eq!(k, Some(1));
        assert_eq!(asked, 1);
        assert_eq!(results[1].costs, vec![1.0, 2.0]);
        assert_eq!(results[1].mean_cost(), 1.5);
        assert!((results[1].run_s - 0.4).abs() < 1e-12);
        assert_eq!(results[0].costs, vec![3.0]);
    }

    #[test]
    fn no_improvement_measures_nothing() {
        let mut results = vec![ok(3.0), ok(2.0)];
        let k = confirm_new_best(Some(1.0), &batch(2), &mut results, |_, _| {
            panic!("measured without a new best")
        });
        assert_eq!(k, None);
        assert_eq!(results[1].costs, vec![2.0]);
    }

    #[test]
    fn a_kernel_failing_its_second_run_is_an_error() {
        let mut results = vec![ok(1.0)];
        let k = confirm_new_best(None, &batch(1), &mut results, |_, _| {
            Some(MeasureResult::error(
                ErrorCode::WrongAnswer,
                "mismatch at 7",
            ))
        });
        assert_eq!(k, Some(0));
        assert_eq!(results[0].error, ErrorCode::WrongAnswer);
        assert!(results[0].costs.is_empty());
        assert!(results[0].error_msg.contains("mismatch at 7"));
    }

    #[test]
    fn without_a_second_run_the_first_stands() {
        let mut results = vec![ok(1.0)];
        let k = confirm_new_best(None, &batch(1), &mut results, |_, _| None);
        assert_eq!(k, None);
        assert_eq!(results[0].costs, vec![1.0]);
    }

    #[test]
    fn noisy_and_failed_results_are_not_candidates() {
        let mut noisy = ok(0.5);
        noisy.noisy = true;
        let mut results = vec![noisy, MeasureResult::error(ErrorCode::RuntimeError, "x")];
        let k = confirm_new_best(None, &batch(2), &mut results, |_, _| {
            panic!("nothing to confirm")
        });
        assert_eq!(k, None);
    }
}
