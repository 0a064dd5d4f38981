//! Carrying a schedule to another workload of the same structure: its steps replayed on the new
//! DAG with split factors re-fitted to the new extents. The sketch, the loop order, compute
//! locations and annotations stay; only lengths change.
//!
//! Both DAGs are replayed side by side, so every split knows the extent it was made for and the
//! one it now meets (`lower::loop_extents`, which sees attached stages' regions). Bound
//! inference runs once per run of steps on one stage, not once per split (`Extents`): a zero-shot
//! answer adapts a dozen schedules while a compiler waits. A split whose
//! factors divided its loop gets factors that divide the new loop, each the divisor nearest in
//! ratio to the old one, innermost first (the innermost carries the vector width); a split that
//! did not divide keeps its factors, clamped to the loop (lowering guards the tails). An
//! explicit unroll of a loop that grew past what was unrolled before is dropped, not
//! multiplied: a schedule never unrolls more than it was measured unrolling.

use super::structure::structure;
use crate::ir::ComputeDag;
use crate::lower::{LowerOptions, LoweredFunc, loop_extents, lower_with};
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
    /// The schedule lowered on the new DAG (with the options given to `adapt_with`): what a
    /// cost model ranks, so a zero-shot answer lowers each candidate once.
    pub lowered: LoweredFunc,
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
    adapt_with(schedule, from, to, &LowerOptions::default())
}

/// `adapt`, lowering the result with `opts` (the new task's `lower_options`).
pub fn adapt_with(
    schedule: &Schedule,
    from: &ComputeDag,
    to: &ComputeDag,
    opts: &LowerOptions,
) -> Result<Adapted, AdaptError> {
    adapt_tracked(schedule, from, to, opts, Tracking::Incremental)
}

/// How `adapt` learns loop extents: `Exact` runs bound inference before every step that needs
/// one (the reference the incremental way is tested against).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tracking {
    Incremental,
    #[cfg_attr(not(test), allow(dead_code))]
    Exact,
}

fn adapt_tracked(
    schedule: &Schedule,
    from: &ComputeDag,
    to: &ComputeDag,
    opts: &LowerOptions,
    tracking: Tracking,
) -> Result<Adapted, AdaptError> {
    let mut old = State::new(from);
    let mut new = State::new(to);
    let (mut old_ext, mut new_ext) = (Extents::default(), Extents::default());
    let mut steps = Vec::with_capacity(schedule.steps.len());
    let mut dropped = vec![];
    let err = |index: usize| move |msg: String| AdaptError::Step { index, msg };
    for (index, step) in schedule.steps.iter().enumerate() {
        if tracking == Tracking::Exact {
            old_ext = Extents::default();
            new_ext = Extents::default();
        }
        let fitted = match step {
            Step::Split {
                stage,
                iter,
                lengths,
                inner_to_outer,
                ..
            } => {
                let was = old_ext.get(&old, *stage, *iter).map_err(err(index))?;
                let now = new_ext.get(&new, *stage, *iter).map_err(err(index))?;
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
                let was = old_ext.get(&old, *stage, *iter).map_err(err(index))?;
                let now = new_ext.get(&new, *stage, *iter).map_err(err(index))?;
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
        old_ext.after(step);
        if let Some(s) = fitted {
            new.apply(&s).map_err(err(index))?;
            new_ext.after(&s);
            steps.push(s);
        }
    }
    let lowered = lower_with(&new, opts).map_err(|e| AdaptError::Lower(e.to_string()))?;
    Ok(Adapted {
        schedule: Schedule::new(steps),
        dropped,
        lowered,
    })
}

/// The loop extents of one stage of a state as bound inference saw them, carried forward over
/// the steps that keep them computable: a split of that stage (its loop gives way to the
/// split's loops, whose extents the split fixes, as `lower::bounds` does) and annotations
/// (which change no extent). Any other step forgets them, as does a step on another stage; the
/// next question runs bound inference again.
#[derive(Debug, Default)]
struct Extents {
    known: Option<(usize, Vec<i64>)>,
}

impl Extents {
    /// The extent of loop `iter` of stage `stage` of `st`.
    fn get(&mut self, st: &State, stage: usize, iter: usize) -> Result<i64, String> {
        if self.known.as_ref().is_none_or(|(s, _)| *s != stage) {
            let all = loop_extents(st).map_err(|e| e.to_string())?;
            let ext = all.into_iter().nth(stage).unwrap_or_default();
            self.known = Some((stage, ext));
        }
        let (_, ext) = self.known.as_ref().expect("just filled");
        ext.get(iter)
            .copied()
            .ok_or_else(|| format!("stage {stage} has no loop {iter}"))
    }

    /// `step` was applied to the state these extents describe.
    fn after(&mut self, step: &Step) {
        match (step, &mut self.known) {
            (Step::Annotate { .. }, _) => {}
            (
                Step::Split {
                    stage,
                    iter,
                    lengths,
                    inner_to_outer,
                    ..
                },
                Some((known, ext)),
            ) if *stage == *known && *iter < ext.len() => {
                let e = ext[*iter];
                let prod: i64 = lengths.iter().product();
                let rest = (e + prod - 1) / prod.max(1);
                let parts: Vec<i64> = if *inner_to_outer {
                    std::iter::once(rest)
                        .chain(lengths.iter().copied())
                        .collect()
                } else {
                    lengths
                        .iter()
                        .copied()
                        .chain(std::iter::once(rest))
                        .collect()
                };
                ext.splice(*iter..*iter + 1, parts);
            }
            _ => self.known = None,
        }
    }
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
    use crate::ops::{self, Window};
    use crate::search::{RandomModel, SearchParams, TaskSearch};
    use crate::target::Target;
    use crate::task::Task;
    use std::sync::Arc;

    /// Extents carried over splits give what bound inference before every step gives: the same
    /// adapted schedules (or the same error), for the search's own schedules of operators with
    /// fused epilogues, cache stages, attached producers and windows.
    #[test]
    fn incremental_extents_adapt_as_bound_inference_does() {
        let w = Window::square;
        let pairs = [
            (ops::matmul(64, 48, 32), ops::matmul(40, 100, 24)),
            (
                ops::dense(8, 96, 64, true, true),
                ops::dense(3, 200, 80, true, true),
            ),
            (
                ops::conv2d_nchw(1, 8, 14, 14, 16, w(3, 1, 1), true, true),
                ops::conv2d_nchw(1, 12, 9, 11, 20, w(3, 1, 1), true, true),
            ),
            (
                ops::depthwise_conv2d_nchw(1, 16, 28, 28, w(3, 2, 1), false, false),
                ops::depthwise_conv2d_nchw(1, 24, 15, 15, w(3, 2, 1), false, false),
            ),
            (ops::softmax(32, 64), ops::softmax(7, 300)),
            (
                ops::pool2d(ops::PoolKind::Max, 1, 16, 28, 28, w(3, 2, 1)),
                ops::pool2d(ops::PoolKind::Max, 1, 6, 33, 19, w(3, 2, 1)),
            ),
            (
                ops::batch_matmul(4, 32, 32, 16),
                ops::batch_matmul(3, 50, 17, 40),
            ),
        ];
        let target = Target::detect();
        let params = SearchParams {
            population: 32,
            generations: 1,
            threads: 1,
            ..SearchParams::default()
        };
        let opts = LowerOptions::default();
        for (from, to) in pairs {
            let (from, to) = (from.unwrap(), to.unwrap());
            let mut search = TaskSearch::new(
                Arc::new(Task::new(from.clone(), "from")),
                &target,
                params.clone(),
                3,
            );
            let batch = search.next_batch(&mut RandomModel::new(3), 8).unwrap();
            assert!(!batch.is_empty());
            for s in &batch {
                assert_eq!(
                    adapt_tracked(s, &from, &to, &opts, Tracking::Incremental),
                    adapt_tracked(s, &from, &to, &opts, Tracking::Exact),
                    "schedule: {}",
                    s.to_json()
                );
            }
        }
    }

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
