//! A window reduction (pooling) as register tiles of output rows: `outer.. ro xo | window |
//! ri xi`, the columns `xi` vectorized. The code generator keeps the tile's `ri` rows of
//! `xi` running results in vector registers across the window loops (`codegen/regtile`),
//! reading the input's stride-2 columns as two loads and a shuffle and an inlined padding
//! under a mask of the lanes in range. Left as plain loops (the window inside the columns),
//! GCC vectorized a max pool's window or gathered its strided columns lane by lane.

use super::decision::Decider;
use super::factor::{at_least_one_vector, prime_factors, whole_vectors};
use super::steps::{AnnotateContext, Gen, parallel, pick_parallel, pick_unroll, vectorize};
use crate::codegen::max_tile_vectors;
use crate::ir::ComputeDag;
use crate::schedule::Step;
use rand::Rng;

/// Accumulators a row tile may hold: what a 16-register file leaves for them (AVX2, SSE; an
/// AVX-512 tile of more rows measured no faster on a depthwise convolution, 4 rows slower than 2).
const MAX_VECTORS: i64 = max_tile_vectors(16);

/// Moves factors of the tile's rows out to the outer loop until its vectors fit
/// [`MAX_VECTORS`]: a larger tile is not a register tile (the generator keeps the plain
/// loops). Deterministic in the drawn factors, so replays agree.
fn fit_rows(rows: &mut [i64], cols: i64, lanes: i64) {
    let vectors = (cols + lanes - 1) / lanes.max(1);
    while rows[1] > 1 && rows[1] * vectors > MAX_VECTORS {
        let p = prime_factors(rows[1])[0];
        rows[1] /= p;
        rows[0] *= p;
    }
}

pub(super) fn row_tile<R: Rng>(
    g: &mut Gen,
    dag: &ComputeDag,
    s: usize,
    ctx: &AnnotateContext,
    d: &mut Decider<R>,
) -> Result<(), String> {
    let stage = &dag.stages[s];
    let space: Vec<i64> = stage.space().iter().map(|a| a.extent).collect();
    let (ns, nr) = (space.len(), stage.reduce_axes().len());
    if ns < 2 {
        return Err(format!(
            "row tile of {}: two space axes expected",
            stage.name
        ));
    }
    let lanes = ctx.vector_lanes.max(1);
    // Columns: at least one whole vector per tile row where the row is that wide.
    let mut cols = d.tile(space[ns - 1], 2);
    whole_vectors(&mut cols, lanes);
    at_least_one_vector(&mut cols, lanes);
    let mut rows = d.tile(space[ns - 2], 2);
    fit_rows(&mut rows, cols[1], lanes);
    let t = g.cur[s];
    for (iter, len) in [(ns - 1, cols[1]), (ns - 2, rows[1])] {
        g.apply(Step::Split {
            stage: t,
            iter,
            extent: Some(space[iter]),
            lengths: vec![len],
            inner_to_outer: true,
        })?;
    }
    // Leaves: outer.. ro ri xo xi window..; wanted: outer.. ro xo window.. ri xi.
    let (ro, ri, xo, xi) = (ns - 2, ns - 1, ns, ns + 1);
    let mut order: Vec<usize> = (0..ns - 2).chain([ro, xo]).collect();
    order.extend((0..nr).map(|b| ns + 2 + b));
    order.extend([ri, xi]);
    g.apply(Step::Reorder { stage: t, order })?;
    let outer: Vec<i64> = space[..ns - 2]
        .iter()
        .copied()
        .chain([rows[0], cols[0]])
        .collect();
    let k = pick_parallel(d, &outer, ctx);
    parallel(g, t, k, &outer)?;
    let last = g.leaves(t) - 1;
    vectorize(g, t, last, cols[1])?;
    pick_unroll(g, t, d)
}
