//! Carrying a schedule to another workload of the same structure: its steps replayed on the new
//! DAG with split factors re-fitted to the new extents. The sketch, the loop order, compute
//! locations and annotations stay; only lengths change.
//!
//! Both DAGs are replayed side by side, so every split knows the extent it was made for and the
//! one it now meets (`lower::loop_extents`, which sees attached stages' regions). A split whose
//! factors divided its loop gets factors that divide the new loop, each the divisor nearest in
//! ratio to the old one, innermost first (the innermost carries the vector width); a split that
//! did not divide keeps its factors, clamped to the loop (lowering guards the tails). An
//! explicit unroll of a loop that grew past what was unrolled before is dropped, not
//! multiplied: a schedule never unrolls more than it was measured unrolling.

use super::structure::structure;
use crate::ir::ComputeDag;
use crate::lower::{loop_extents, lower};
use crate::schedule::{Annotation, Schedule, State, Step};

/// A loop that grew to more iterations than this loses its explicit unroll.
const MAX_UNROLL: i64 = 64;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AdaptError {
    #[error("the workloads differ in structure (another operator, stride, padding or layout)")]
    OtherStructure,
    #[error("step {index}: {msg}")]
    Step { index: usize, msg: String },
    #[error("the adapted schedule does not lower: {0}")]
    Lower(String),
}

/// An adapted schedule and what was left out of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Adapted {
    pub schedule: Schedule,
    /// The steps dropped (by index in the source schedule), each with why.
    pub dropped: Vec<(usize, String)>,
}

/// `schedule`, made for `from`, as a schedule of `to` (same structure).
pub fn adapt(
    schedule: &Schedule,
    from: &ComputeDag,
    to: &ComputeDag,
) -> Result<Adapted, AdaptError> {
    if structure(from) != structure(to) {
        return Err(AdaptError::OtherStructure);
    }
    let mut old = State::new(from);
    let mut new = State::new(to);
    let mut steps = Vec::with_capacity(schedule.steps.len());
    let mut dropped = vec![];
    let err = |index: usize| move |msg: String| AdaptError::Step { index, msg };
    for (index, step) in schedule.steps.iter().enumerate() {
        let fitted = match step {
            Step::Split {
                stage,
                iter,
                lengths,
                inner_to_outer,
                ..
            } => {
                let was = extent_of(&old, *stage, *iter).map_err(err(index))?;
                let now = extent_of(&new, *stage, *iter).map_err(err(index))?;
                Some(Step::Split {
                    stage: *stage,
                    iter: *iter,
                    extent: Some(now),
                    lengths: refit(lengths, *inner_to_outer, was, now),
                    inner_to_outer: *inner_to_outer,
                })
            }
            Step::Rfactor {
                stage,
                axis,
                factor,
            } => {
                let was = axis_extent(&old, *stage, *axis).map_err(err(index))?;
                let now = axis_extent(&new, *stage, *axis).map_err(err(index))?;
                Some(Step::Rfactor {
                    stage: *stage,
                    axis: *axis,
                    factor: refit(&[*factor], true, was, now)[0],
                })
            }
            Step::Annotate {
                stage,
                iter,
                ann: Annotation::Unroll,
            } => {
                let was = extent_of(&old, *stage, *iter).map_err(err(index))?;
                let now = extent_of(&new, *stage, *iter).map_err(err(index))?;
                if now > was.max(MAX_UNROLL) {
                    dropped.push((
                        index,
                        format!("unroll of a loop of {now} iterations (was {was})"),
                    ));
                    None
                } else {
                    Some(step.clone())
                }
            }
            _ => Some(step.clone()),
        };
        old.apply(step).map_err(err(index))?;
        if let Some(s) = fitted {
            new.apply(&s).map_err(err(index))?;
            steps.push(s);
        }
    }
    lower(&new).map_err(|e| AdaptError::Lower(e.to_string()))?;
    Ok(Adapted {
        schedule: Schedule::new(steps),
        dropped,
    })
}

/// The extent of loop `iter` of stage `stage` in a state, as bound inference sees it.
fn extent_of(st: &State, stage: usize, iter: usize) -> Result<i64, String> {
    let ext = loop_extents(st).map_err(|e| e.to_string())?;
    ext.get(stage)
        .and_then(|e| e.get(iter))
        .copied()
        .ok_or_else(|| format!("stage {stage} has no loop {iter}"))
}

/// The extent of axis `axis` (space axes first, then reduction axes) of a stage.
fn axis_extent(st: &State, stage: usize, axis: usize) -> Result<i64, String> {
    let s = st
        .dag
        .stages
        .get(stage)
        .ok_or_else(|| format!("no stage {stage}"))?;
    s.space()
        .iter()
        .chain(s.reduce_axes())
        .nth(axis)
        .map(|a| a.extent)
        .ok_or_else(|| format!("stage {stage} has no axis {axis}"))
}

/// Split factors for a loop of `now` iterations that did for one of `was` (see the module doc).
/// `lengths` are listed outer to inner; `inner_to_outer` says the rest goes outermost (so the
/// last length is the innermost loop), otherwise innermost (the first length is outermost and
/// the rest is innermost: then the factors are fitted in listed order).
fn refit(lengths: &[i64], inner_to_outer: bool, was: i64, now: i64) -> Vec<i64> {
    let product: i64 = lengths.iter().product();
    if was <= 0 || now <= 0 || was % product.max(1) != 0 {
        return lengths.iter().map(|&l| l.clamp(1, now.max(1))).collect();
    }
    let mut out = lengths.to_vec();
    let order: Vec<usize> = if inner_to_outer {
        (0..lengths.len()).rev().collect()
    } else {
        (0..lengths.len()).collect()
    };
    let mut rest = now;
    for i in order {
        let d = nearest_divisor(rest, lengths[i]);
        out[i] = d;
        rest /= d;
    }
    out
}

/// The divisor of `n` nearest to `want` in ratio (ties: the larger).
fn nearest_divisor(n: i64, want: i64) -> i64 {
    let want = want.max(1) as f64;
    let mut best = (f64::INFINITY, 1);
    let mut d = 1;
    while d * d <= n {
        if n % d == 0 {
            for c in [d, n / d] {
                let score = ((c as f64) / want).ln().abs();
                if score < best.0 || (score == best.0 && c > best.1) {
                    best = (score, c);
                }
            }
        }
        d += 1;
    }
    best.1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factors_are_refitted_to_divide_the_new_loop() {
        assert_eq!(nearest_divisor(512, 16), 16);
        assert_eq!(nearest_divisor(768, 64), 64);
        assert_eq!(nearest_divisor(56, 16), 14);
        assert_eq!(nearest_divisor(7, 4), 7);
        assert_eq!(nearest_divisor(1, 8), 1);
        // Innermost first: the vector-width factor is kept where the new loop allows it.
        assert_eq!(refit(&[4, 2, 16], true, 512, 768), vec![4, 2, 16]);
        assert_eq!(refit(&[8, 16], true, 512, 48), vec![3, 16]);
        let r = refit(&[4, 2, 16], true, 512, 56);
        assert_eq!(56 % r.iter().product::<i64>(), 0, "{r:?}");
        // A split that did not divide keeps its factors, within the loop.
        assert_eq!(refit(&[5], true, 512, 3), vec![3]);
        assert_eq!(refit(&[5], true, 512, 100), vec![5]);
    }
}
