//! A stage left untiled: computed at a consumer's loop or at root, then annotated.

use super::decision::{Decider, DecisionKind};
use super::row_step::row_step;
use super::selectors::{selector_axes_through, skip_with_selectors};
use super::steps::{AnnotateContext, Gen, parallel, pick_parallel, pick_unroll, vectorize};
use crate::ir::ComputeDag;
use crate::schedule::Step;
use rand::Rng;

pub(super) fn skip<R: Rng>(
    g: &mut Gen,
    dag: &ComputeDag,
    s: usize,
    is_output: bool,
    ctx: &AnnotateContext,
    d: &mut Decider<R>,
) -> Result<(), String> {
    let stage = &dag.stages[s];
    let t = g.cur[s];
    let space: Vec<i64> = stage.space().iter().map(|a| a.extent).collect();
    let reduction = stage.is_reduction();
    // A stage with selector axes is computed at root, where they are unrolled next to the
    // vector loop; inside a consumer's loop they would be plain loops around it.
    let sel = selector_axes_through(dag, s, &g.inlined);
    if !is_output && sel.is_empty() {
        // Root, inside one loop of the single consumer, or where the consumers are computed.
        let cons = g.consumers(t);
        let mut spots = vec![];
        if let [c] = cons[..] {
            spots.extend(g.attach_spots(c).into_iter().map(|k| (c, k)));
        }
        if let Some(spot) = g.shared_spot(&cons)
            && !spots.contains(&spot)
        {
            spots.push(spot);
        }
        let i = d.pick(DecisionKind::ComputeLocation, spots.len() + 1, |r| {
            r.gen_range(0..=spots.len())
        });
        if i > 0 {
            let (c, k) = spots[i - 1];
            g.apply(Step::ComputeAt {
                stage: t,
                target: c,
                target_iter: k,
            })?;
            let n = g.leaves(t);
            if n > 0 {
                let e = *stage.axis_extents().last().unwrap_or(&1);
                vectorize(g, t, n - 1, e)?;
            }
            if reduction {
                pick_unroll(g, t, d)?;
            }
            return Ok(());
        }
    }
    if !sel.is_empty() {
        return skip_with_selectors(g, t, &space, &sel, ctx, d);
    }
    let mut k = pick_parallel(d, &space, ctx);
    let mut outer = space.clone();
    if is_output && !reduction {
        let rows = row_step(g, d, s, &space, k)?;
        if rows > 1 {
            (k, outer) = (1, vec![space[0] / rows]);
        }
    }
    parallel(g, t, k, &outer)?;
    let n = g.leaves(t);
    if n > 0 {
        let e = *stage.axis_extents().last().unwrap_or(&1);
        vectorize(g, t, n - 1, e)?;
    }
    if reduction {
        pick_unroll(g, t, d)?;
    }
    Ok(())
}
