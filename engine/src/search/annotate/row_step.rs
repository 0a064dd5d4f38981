//! Rows per step: a row-wise output (layer norm's, softmax's) whose row reductions are computed
//! at its row loop may take that loop a few rows at a time, and the reductions' partials then
//! run those rows side by side.
//!
//! A row of 768 floats is a few hundred cycles of work, much of it serial: each reduction's
//! chain, its horizontal sum, the reciprocal square root between the passes. Two rows
//! interleaved overlap one row's chains with the other's. The outer row loop `ro` is split off
//! by a recorded pick of 1, 2 or 4 rows; an rfactor computed at `ro` then puts the reduction's
//! outer loop outside the rows (`ko rows ki` instead of `rows ko ki`), so the code generator's
//! register tile holds the partials of all the rows at once. A hand kernel of that form ran
//! layer norm 128x768 in 6.0 us where one row at a time took 7.1 on a Zen 4
//! (docs/experiments/2026-11-29-row-pairs-zen4.md).

use super::decision::{Decider, DecisionKind};
use super::steps::Gen;
use crate::schedule::Step;
use rand::Rng;

/// The rows per step offered, where they divide the row count.
const ROW_STEPS: [i64; 3] = [1, 2, 4];

/// Splits the outermost loop of output stage `s` (space extents `space`) into rows per step,
/// when the sketch computes reductions by rfactor and the parallel loop is the rows alone
/// (`parallel` loops fused: a row count too small to share out otherwise); returns the rows
/// per step. The pick is recorded wherever the sketch has rfactors, with one option where no
/// split is offered, so that a change of the parallel loops leaves the later decisions where
/// they were (a replay reads decisions by position).
pub(super) fn row_step<R: Rng>(
    g: &mut Gen,
    d: &mut Decider<R>,
    s: usize,
    space: &[i64],
    parallel: usize,
) -> Result<i64, String> {
    if !g.rows_hosted || space.len() < 2 {
        return Ok(1);
    }
    let options: Vec<i64> = if parallel == 1 {
        ROW_STEPS
            .into_iter()
            .filter(|r| space[0] % r == 0)
            .collect()
    } else {
        vec![1]
    };
    let i = d.pick(DecisionKind::RowStep, options.len(), |r| {
        r.gen_range(0..options.len())
    });
    let rows = options[i];
    if rows > 1 {
        let t = g.cur[s];
        g.apply(Step::Split {
            stage: t,
            iter: 0,
            extent: Some(space[0]),
            lengths: vec![rows],
            inner_to_outer: true,
        })?;
        let st = &g.state.stages[t];
        g.row_step = Some((s, st.leaves[0]));
    }
    Ok(rows)
}

/// Whether loop `target_iter` of current stage `target` is a step of several rows.
pub(super) fn is_row_step(g: &Gen, target: usize, target_iter: usize) -> bool {
    g.row_step.is_some_and(|(s, node)| {
        g.cur[s] == target && g.state.stages[target].leaves.get(target_iter) == Some(&node)
    })
}
