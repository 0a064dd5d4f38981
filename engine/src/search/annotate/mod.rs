//! Random annotation: turns a [`Sketch`] into a complete schedule by drawing its numbers (tile
//! sizes, the order of the outer tile loops, compute locations, the parallel degree, the
//! auto-unroll step) and writing the steps that apply them.
//!
//! Every draw goes through a [`Decider`], which records it as a [`Decision`]. The same sketch
//! with the same decisions gives the same steps, so a mutation is a change of one decision and
//! a replay (MetaSchedule's trace-and-decisions idea): the split of a fused consumer and the
//! split of its producer come from one decision and always agree.
//!
//! Schedules are valid by construction for the shapes the rules admit; the caller still
//! lowers each one and counts the rare rejection with its reason.

//!
//! One module per idea: `decision` (recorded draws), `factor` (tile sizes), `steps` (the steps
//! under construction and the annotations every plan ends with), one per stage plan: `tile`,
//! `skip`, `rfactor`, `row_tile`, and `row_step` (a row-wise output a few rows at a time);
//! `selectors` (short axes whose value picks an expression, unrolled: Winograd transforms).

mod decision;
mod factor;
mod rfactor;
mod row_step;
mod row_tile;
mod selectors;
mod skip;
mod steps;
#[cfg(test)]
mod tests;
mod tile;

pub use decision::{Decider, Decision, DecisionKind};
pub use factor::{MAX_INNERMOST, factorizations, prime_factors, sample_factorization};
pub use selectors::{selector_axes, selector_axes_through};
pub use steps::{AUTO_UNROLL_STEPS, AnnotateContext};

use super::sketch::{Sketch, StagePlan};
use crate::ir::ComputeDag;
use crate::schedule::{Schedule, State, Step};
use rand::Rng;
use rfactor::rfactor;
use row_tile::{row_tile, row_tile_fused};
use skip::skip;
use steps::Gen;
use tile::tile;

/// Annotates `sketch` of `dag` into steps and the state they give.
pub fn annotate<R: Rng>(
    dag: &ComputeDag,
    sketch: &Sketch,
    ctx: &AnnotateContext,
    d: &mut Decider<R>,
) -> Result<(Schedule, State), String> {
    let mut g = Gen {
        state: State::new(dag),
        steps: vec![],
        cur: (0..dag.stages.len()).collect(),
        rows_hosted: sketch.plans.contains(&StagePlan::Rfactor),
        row_step: None,
        inlined: sketch
            .plans
            .iter()
            .map(|p| *p == StagePlan::Inline)
            .collect(),
    };
    let outputs = dag.outputs();
    for s in (0..dag.stages.len()).rev() {
        match &sketch.plans[s] {
            StagePlan::Placeholder | StagePlan::Unset | StagePlan::FusedConsumer { .. } => {}
            StagePlan::Inline => g.apply(Step::ComputeInline { stage: g.cur[s] })?,
            StagePlan::Tile(f) => tile(&mut g, dag, s, *f, ctx, d)?,
            StagePlan::Skip => skip(&mut g, dag, s, outputs.contains(&s), ctx, d)?,
            StagePlan::Rfactor => rfactor(&mut g, dag, s, outputs.contains(&s), ctx, d)?,
            StagePlan::RowTile => row_tile(&mut g, dag, s, ctx, d)?,
            StagePlan::RowTileFused { consumer } => {
                row_tile_fused(&mut g, dag, s, *consumer, ctx, d)?
            }
        }
    }
    Ok((Schedule::new(g.steps), g.state))
}
