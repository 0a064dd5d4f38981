//! A new best is measured twice before it counts.
//!
//! On a shared machine one short measurement can read 30% fast (the same matmul kernel read
//! 125, 202 and 124 GFLOP/s in three runs a minute apart), and the best of a few hundred such
//! readings is biased towards the lucky ones: the search's best-so-far read ~20% above the
//! same kernel re-measured at length. A batch's best that beats the best so far is therefore
//! measured once more; its record keeps both runs' repeats, so its mean (what the search and
//! the database rank by) is the mean of both. One extra measurement per improving round.
//!
//! A remote device's time is its word: a device reporting a third of its kernels' real times,
//! still under the peak bound, would make its lies the bests (issue 64). So the second run of a
//! remote new best goes to another device of the pool when there is one, and the slower of the
//! two runs is kept; two times further apart than [`DISAGREEMENT`] keep the slower flagged
//! (never a best) and go to a tie-break on a third device, else the slower one again
//! ([`settle_dispute`]): the faster device is named to the measurer, which counts it against
//! it, only when the slower side cannot come near its time on two runs. One run of an honest
//! device stalled by its machine is not a charge against the other.

use crate::measure::MeasureResult;
use crate::schedule::Schedule;

/// Two devices' times of one kernel further apart than this factor disagree: one of them is
/// not the kernel's speed. Honest runs on a shared machine read up to 1.6x apart (above); a lie
/// worth telling (a best several times too fast, still under the peak bound) is further out.
pub const DISAGREEMENT: f64 = 2.0;

/// A new best's second run.
#[derive(Debug, Clone)]
pub struct Second {
    pub result: MeasureResult,
    /// Another device took it: the first device's word is checked, not repeated.
    pub other_device: bool,
}

/// What a new best's second run showed.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The same device measured it again: both runs' repeats folded together.
    Folded,
    /// Another device's time agreed within [`DISAGREEMENT`]: the slower run kept, so that no
    /// one device can make a kernel look faster than another timed it.
    Agreed { second_kept: bool },
    /// Another device's time disagreed beyond [`DISAGREEMENT`]: the slower run kept, flagged
    /// noisy (stored, never a best). The two mean times, first and second, and the faster run
    /// set aside (for the tie-break).
    Disagreed {
        first_s: f64,
        second_s: f64,
        faster: MeasureResult,
    },
    /// Another device's run was noisy: the slower run kept, flagged noisy; no one is blamed.
    Unsettled { second_kept: bool },
    /// The second run failed: the kernel takes its error.
    Failed,
}

/// Re-measures the batch's best result through `measure` (given its index and schedule; `None`
/// when no second run can be had) when it beats `best_so_far` (or when there is none yet).
/// Run again on the same device, the second run is folded into it: repeats appended, times
/// added, noisy if either run was. Run on another device, the slower run is kept (`Verdict`).
/// A kernel that fails the second run takes that error: a kernel is recorded only if every run
/// of it was correct. Returns the index confirmed, if any, and how.
pub fn confirm_new_best(
    best_so_far: Option<f64>,
    batch: &[Schedule],
    results: &mut [MeasureResult],
    measure: impl FnOnce(usize, &Schedule) -> Option<Second>,
) -> Option<(usize, Verdict)> {
    let (k, cost) = results
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_ok() && !r.noisy)
        .map(|(k, r)| (k, r.mean_cost()))
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    if best_so_far.is_some_and(|b| cost >= b) {
        return None;
    }
    let Second {
        result: again,
        other_device,
    } = measure(k, &batch[k])?;
    let first = &mut results[k];
    let (build_s, run_s) = (first.build_s + again.build_s, first.run_s + again.run_s);
    if !again.is_ok() {
        *first = MeasureResult {
            error_msg: format!("second measurement of a new best: {}", again.error_msg),
            build_s,
            run_s,
            ..again
        };
        return Some((k, Verdict::Failed));
    }
    if !other_device {
        first.costs.extend(again.costs);
        first.noisy |= again.noisy;
        first.build_s = build_s;
        first.run_s = run_s;
        return Some((k, Verdict::Folded));
    }
    let (first_s, second_s) = (cost, again.mean_cost());
    let second_kept = second_s > first_s;
    let noisy = again.noisy;
    let faster = if second_kept {
        std::mem::replace(first, again)
    } else {
        again
    };
    first.build_s = build_s;
    first.run_s = run_s;
    let verdict = if noisy {
        Verdict::Unsettled { second_kept }
    } else if first_s.max(second_s) > DISAGREEMENT * first_s.min(second_s) {
        Verdict::Disagreed {
            first_s,
            second_s,
            faster,
        }
    } else {
        Verdict::Agreed { second_kept }
    };
    // Either way the slower run stands; one that another device contradicts, or that was
    // timed on a slowed machine, is not to be served as the kernel's speed.
    first.noisy |= !matches!(verdict, Verdict::Agreed { .. });
    Some((k, verdict))
}

/// What a dispute's tie-break showed: the kernel measured once more, by another device than the
/// faster one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TieBreak {
    /// Clean and within [`DISAGREEMENT`] of the faster time: the slower run was its machine's
    /// hiccup. The slower of the faster run and the tie-break is kept, trusted; no one is
    /// charged.
    Reproduced { tie_kept: bool },
    /// Clean, and even the best repeat of the slower side's two runs is further than
    /// [`DISAGREEMENT`] from the faster time: the faster device is charged. The slower run
    /// stays, flagged.
    Upheld,
    /// Noisy, or near the faster time on some repeats only: nothing settled; the slower run
    /// stays, flagged; no one is charged.
    Open,
    /// The tie-break failed: the kernel takes its error.
    Failed,
}

/// Settles a dispute (`kept`: the slower run, flagged; `faster`: the run set aside) with a
/// tie-break run `tie` of another device than the faster one.
pub fn settle_dispute(
    kept: &mut MeasureResult,
    faster: MeasureResult,
    tie: MeasureResult,
) -> TieBreak {
    let (build_s, run_s) = (kept.build_s + tie.build_s, kept.run_s + tie.run_s);
    if !tie.is_ok() {
        *kept = MeasureResult {
            error_msg: format!("tie-break measurement of a new best: {}", tie.error_msg),
            build_s,
            run_s,
            ..tie
        };
        return TieBreak::Failed;
    }
    let fast_s = faster.mean_cost();
    let tie_s = tie.mean_cost();
    let verdict = if tie.noisy {
        TieBreak::Open
    } else if tie_s <= DISAGREEMENT * fast_s {
        TieBreak::Reproduced {
            tie_kept: tie_s > fast_s,
        }
    } else {
        // Load only adds time: the slower side's best repeats are its device's truest word.
        let best_repeat = kept
            .costs
            .iter()
            .chain(&tie.costs)
            .copied()
            .fold(f64::INFINITY, f64::min);
        if best_repeat > DISAGREEMENT * fast_s {
            TieBreak::Upheld
        } else {
            TieBreak::Open
        }
    };
    if let TieBreak::Reproduced { tie_kept } = verdict {
        *kept = if tie_kept { tie } else { faster };
        kept.noisy = false;
        kept.error_msg.clear();
    }
    kept.build_s = build_s;
    kept.run_s = run_s;
    verdict
}

/// After a new best was checked on another device: every other success measured remotely
/// (`devices`) faster than `bar` (the best trusted time so far, or the one just confirmed) is
/// flagged noisy with why: only one candidate per batch is confirmed, and an unconfirmed remote
/// time that would beat every confirmed one is a device's word alone, never a best. Returns
/// how many were flagged.
pub fn hold_unconfirmed(
    bar: Option<f64>,
    results: &mut [MeasureResult],
    devices: &[Option<String>],
    confirmed: usize,
) -> usize {
    let mut held = 0;
    for (k, (r, d)) in results.iter_mut().zip(devices).enumerate() {
        if k != confirmed
            && d.is_some()
            && r.is_ok()
            && !r.noisy
            && bar.is_none_or(|b| r.mean_cost() < b)
        {
            r.noisy = true;
            r.error_msg = "unconfirmed: faster than every time another device confirmed".into();
            held += 1;
        }
    }
    held
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
            Some(Second {
                result: ok(2.0),
                other_device: false,
            })
        });
        assert_eq!(k, Some((1, Verdict::Folded)));
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
            Some(Second {
                result: MeasureResult::error(ErrorCode::WrongAnswer, "mismatch at 7"),
                other_device: false,
            })
        });
        assert_eq!(k, Some((0, Verdict::Failed)));
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

    fn elsewhere(cost: f64) -> Option<Second> {
        Some(Second {
            result: ok(cost),
            other_device: true,
        })
    }

    #[test]
    fn another_device_agreeing_keeps_the_slower_run() {
        let mut results = vec![ok(1.0), ok(3.0)];
        let k = confirm_new_best(None, &batch(2), &mut results, |_, _| elsewhere(1.5));
        assert_eq!(k, Some((0, Verdict::Agreed { second_kept: true })));
        assert_eq!(results[0].costs, vec![1.5]);
        assert!(!results[0].noisy);
        let mut results = vec![ok(1.0)];
        let k = confirm_new_best(None, &batch(1), &mut results, |_, _| elsewhere(0.8));
        assert_eq!(k, Some((0, Verdict::Agreed { second_kept: false })));
        assert_eq!(results[0].costs, vec![1.0]);
    }

    #[test]
    fn another_device_disagreeing_keeps_the_slower_run_never_a_best() {
        let mut results = vec![ok(0.5), ok(3.0)];
        let k = confirm_new_best(None, &batch(2), &mut results, |_, _| elsewhere(1.5));
        assert_eq!(
            k,
            Some((
                0,
                Verdict::Disagreed {
                    first_s: 0.5,
                    second_s: 1.5,
                    faster: ok(0.5),
                }
            ))
        );
        assert_eq!(results[0].costs, vec![1.5]);
        assert!(results[0].noisy, "never a best");
    }

    fn disputed(costs: &[f64]) -> MeasureResult {
        MeasureResult {
            costs: costs.to_vec(),
            noisy: true,
            error_msg: "disputed".into(),
            ..ok(0.0)
        }
    }

    #[test]
    fn a_tie_break_near_the_faster_time_clears_the_dispute_keeping_the_slower() {
        let mut kept = disputed(&[3.0]);
        let t = settle_dispute(&mut kept, ok(1.0), ok(1.4));
        assert_eq!(t, TieBreak::Reproduced { tie_kept: true });
        assert_eq!(kept.costs, vec![1.4]);
        assert!(!kept.noisy && kept.error_msg.is_empty());
        let mut kept = disputed(&[3.0]);
        let t = settle_dispute(&mut kept, ok(1.0), ok(0.9));
        assert_eq!(t, TieBreak::Reproduced { tie_kept: false });
        assert_eq!(kept.costs, vec![1.0]);
        assert!((kept.run_s - 0.4).abs() < 1e-12, "both runs' time counted");
    }

    #[test]
    fn a_tie_break_far_from_the_faster_time_on_every_repeat_upholds_the_dispute() {
        let mut kept = disputed(&[3.0, 2.9]);
        let t = settle_dispute(&mut kept, ok(1.0), ok(3.1));
        assert_eq!(t, TieBreak::Upheld);
        assert_eq!(kept.costs, vec![3.0, 2.9]);
        assert!(kept.noisy, "never a best");
        // One repeat of the slower side near the faster time: nothing settled.
        let mut kept = disputed(&[3.0, 1.9]);
        assert_eq!(settle_dispute(&mut kept, ok(1.0), ok(3.1)), TieBreak::Open);
        assert!(kept.noisy);
    }

    #[test]
    fn a_noisy_tie_break_settles_nothing_and_a_failed_one_is_an_error() {
        let mut kept = disputed(&[3.0]);
        let mut tie = ok(1.0);
        tie.noisy = true;
        assert_eq!(settle_dispute(&mut kept, ok(1.0), tie), TieBreak::Open);
        assert!(kept.noisy);
        let mut kept = disputed(&[3.0]);
        let t = settle_dispute(
            &mut kept,
            ok(1.0),
            MeasureResult::error(ErrorCode::WrongAnswer, "mismatch at 3"),
        );
        assert_eq!(t, TieBreak::Failed);
        assert_eq!(kept.error, ErrorCode::WrongAnswer);
        assert!(kept.error_msg.contains("mismatch at 3"));
    }

    #[test]
    fn unconfirmed_remote_times_faster_than_the_bar_are_held() {
        let mut results = vec![ok(1.5), ok(0.5), ok(2.0), ok(0.4)];
        let devices = vec![Some("a".into()), Some("b".into()), Some("b".into()), None];
        let held = hold_unconfirmed(Some(1.5), &mut results, &devices, 0);
        assert_eq!(held, 1);
        assert!(!results[0].noisy && results[1].noisy && !results[2].noisy);
        assert!(!results[3].noisy, "this machine's own times are not held");
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
