//! A reduction split by rfactor into a partial stage and a final one.

use super::decision::{Decider, DecisionKind};
use super::factor::whole_vectors;
use super::row_step::is_row_step;
use super::skip::skip;
use super::steps::{AnnotateContext, Gen, parallel, pick_parallel, pick_unroll, vectorize};
use crate::ir::ComputeDag;
use crate::schedule::Step;
use rand::Rng;

/// A one-axis reduction factored into partial results: the reduction axis splits into
/// `ko * factor + ki` (the factorization is a tile decision, so mutation moves factors between
/// the two), `<stage>.rf` reduces `ko` for each `ki` with `ki` innermost and vectorized, and the
/// stage combines the `factor` partials. A factor of 1 leaves the stage as [`skip`] does.
pub(super) fn rfactor<R: Rng>(
    g: &mut Gen,
    dag: &ComputeDag,
    s: usize,
    is_output: bool,
    ctx: &AnnotateContext,
    d: &mut Decider<R>,
) -> Result<(), String> {
    let stage = &dag.stages[s];
    let ns = stage.space().len();
    let [k] = stage.reduce_axes() else {
        return Err(format!(
            "rfactor of {}: one reduction axis expected",
            stage.name
        ));
    };
    let mut f = d.tile(k.extent, 2);
    // Partials in whole vectors: a factor of 2 or 4 leaves most lanes of each load idle (a
    // streamed matrix-vector product then reads a quarter of the bandwidth). Deterministic in
    // the drawn factors, so replays agree.
    whole_vectors(&mut f, ctx.vector_lanes);
    if f[1] < 2 {
        return skip(g, dag, s, is_output, ctx, d);
    }
    let rf = g.cur[s];
    g.apply(Step::Rfactor {
        stage: rf,
        axis: ns,
        factor: f[1],
    })?;
    for c in g.cur.iter_mut().skip(s) {
        *c += 1;
    }
    // The combination first (it is the partials' consumer), placed as any skipped stage.
    skip(g, dag, s, is_output, ctx, d)?;
    let comb = g.cur[s];
    // Partials: `space.. ki ko` becomes `space.. ko ki`.
    g.apply(Step::Reorder {
        stage: rf,
        order: (0..ns).chain([ns + 1, ns]).collect(),
    })?;
    // Root, inside a space loop of the combination where a producer may go, or (last, so
    // that the options before keep their numbers) the loop the combination itself is computed
    // at. There the partials of a row go beside its other producers: layer norm's variance,
    // computed at the output's row loop, then has its partials in that row's pass instead of a
    // pass of their own over memory, and the kernel one parallel region instead of two
    // (`docs/experiments/2026-11-29-layer-norm-zen4.md`).
    let mut spots: Vec<(usize, usize)> = g
        .attach_spots(comb)
        .into_iter()
        .filter(|&j| {
            let st = &g.state.stages[comb];
            st.nodes[st.leaves[j]].kind == crate::schedule::IterKind::Space
        })
        .map(|j| (comb, j))
        .collect();
    if let Some(spot) = g.shared_spot(&[comb]) {
        spots.push(spot);
    }
    let i = d.pick(DecisionKind::ComputeLocation, spots.len() + 1, |r| {
        r.gen_range(0..=spots.len())
    });
    if i > 0 {
        let (target, target_iter) = spots[i - 1];
        g.apply(Step::ComputeAt {
            stage: rf,
            target,
            target_iter,
        })?;
        // At a step of several rows: `ko rows.. ki`, the rows' partials one register tile.
        if is_row_step(g, target, target_iter) {
            g.apply(Step::Reorder {
                stage: rf,
                order: [ns].into_iter().chain(0..ns).chain([ns + 1]).collect(),
            })?;
        }
    } else {
        let space: Vec<i64> = stage.space().iter().map(|a| a.extent).collect();
        let p = pick_parallel(d, &space, ctx);
        parallel(g, rf, p, &space)?;
    }
    let n = g.leaves(rf);
    vectorize(g, rf, n - 1, f[1])?;
    pick_unroll(g, rf, d)
}
