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

/// The tile's rows and columns, each `[outer, inner]`: the columns at least one whole vector
/// where the row is that wide, the whole row (one masked vector) where it is shorter, the rows
/// as many as the register file holds beside them.
fn row_and_col_tiles<R: Rng>(
    d: &mut Decider<R>,
    space: &[i64],
    lanes: i64,
) -> (Vec<i64>, Vec<i64>) {
    let ns = space.len();
    let mut cols = d.tile(space[ns - 1], 2);
    whole_vectors(&mut cols, lanes);
    at_least_one_vector(&mut cols, lanes);
    if space[ns - 1] < lanes {
        cols = vec![1, space[ns - 1]];
    }
    let mut rows = d.tile(space[ns - 2], 2);
    fit_rows(&mut rows, cols[1], lanes);
    (rows, cols)
}

/// Splits the rows and columns of stage `t` (space extents `space`) into the tile's, columns
/// first so that the rows' position stays put: its leaves become `outer.. ro ri xo xi` and
/// whatever followed. Returns the outer loops' extents (`outer.. ro xo`), parallel candidates.
fn split_rows_and_cols(
    g: &mut Gen,
    t: usize,
    space: &[i64],
    rows: &[i64],
    cols: &[i64],
) -> Result<Vec<i64>, String> {
    let ns = space.len();
    for (iter, len) in [(ns - 1, cols[1]), (ns - 2, rows[1])] {
        g.apply(Step::Split {
            stage: t,
            iter,
            extent: Some(space[iter]),
            lengths: vec![len],
            inner_to_outer: true,
        })?;
    }
    Ok(space[..ns - 2]
        .iter()
        .copied()
        .chain([rows[0], cols[0]])
        .collect())
}

/// The space extents of window reduction `s`, at least two.
fn window_space(dag: &ComputeDag, s: usize) -> Result<Vec<i64>, String> {
    let stage = &dag.stages[s];
    let space: Vec<i64> = stage.space().iter().map(|a| a.extent).collect();
    if space.len() < 2 {
        return Err(format!(
            "row tile of {}: two space axes expected",
            stage.name
        ));
    }
    Ok(space)
}

pub(super) fn row_tile<R: Rng>(
    g: &mut Gen,
    dag: &ComputeDag,
    s: usize,
    ctx: &AnnotateContext,
    d: &mut Decider<R>,
) -> Result<(), String> {
    let space = window_space(dag, s)?;
    let (ns, nr) = (space.len(), dag.stages[s].reduce_axes().len());
    let (rows, cols) = row_and_col_tiles(d, &space, ctx.vector_lanes.max(1));
    let t = g.cur[s];
    let outer = split_rows_and_cols(g, t, &space, &rows, &cols)?;
    // Leaves: outer.. ro ri xo xi window..; wanted: outer.. ro xo window.. ri xi.
    let (ro, ri, xo, xi) = (ns - 2, ns - 1, ns, ns + 1);
    let mut order: Vec<usize> = (0..ns - 2).chain([ro, xo]).collect();
    order.extend((0..nr).map(|b| ns + 2 + b));
    order.extend([ri, xi]);
    g.apply(Step::Reorder { stage: t, order })?;
    let k = pick_parallel(d, &outer, ctx);
    parallel(g, t, k, &outer)?;
    let last = g.leaves(t) - 1;
    vectorize(g, t, last, cols[1])?;
    pick_unroll(g, t, d)
}

/// The same tile computed at the column-tile loop of its elementwise consumer (an average
/// pool's division): the consumer's loops are `outer.. ro xo | ri xi`, the window reduction's
/// `window.. ri xi` over its tile's local buffer inside `xo`. One parallel region where the
/// root form has two (a fork and join each, which on a 14x14 map cost as much as the pooling),
/// and the running sums are read back from L1 where the root form writes the whole map out and
/// reads it again.
pub(super) fn row_tile_fused<R: Rng>(
    g: &mut Gen,
    dag: &ComputeDag,
    s: usize,
    consumer: usize,
    ctx: &AnnotateContext,
    d: &mut Decider<R>,
) -> Result<(), String> {
    let space = window_space(dag, s)?;
    let (ns, nr) = (space.len(), dag.stages[s].reduce_axes().len());
    let (rows, cols) = row_and_col_tiles(d, &space, ctx.vector_lanes.max(1));
    let c = g.cur[consumer];
    let outer = split_rows_and_cols(g, c, &space, &rows, &cols)?;
    // The consumer's leaves: outer.. ro ri xo xi; wanted: outer.. ro xo ri xi.
    let (ro, ri, xo, xi) = (ns - 2, ns - 1, ns, ns + 1);
    let order: Vec<usize> = (0..ns - 2).chain([ro, xo, ri, xi]).collect();
    g.apply(Step::Reorder { stage: c, order })?;
    let k = pick_parallel(d, &outer, ctx);
    let fused = parallel(g, c, k, &outer)?;
    let last = g.leaves(c) - 1;
    vectorize(g, c, last, cols[1])?;
    let t = g.cur[s];
    g.apply(Step::ComputeAt {
        stage: t,
        target: c,
        target_iter: ns - 1 - fused,
    })?;
    // Inside, over the tile's region: outer.. (extent 1) window.. ri xi.
    let mut order: Vec<usize> = (0..ns - 2).collect();
    order.extend(ns..ns + nr);
    order.extend([ns - 2, ns - 1]);
    g.apply(Step::Reorder { stage: t, order })?;
    let last = g.leaves(t) - 1;
    vectorize(g, t, last, cols[1])?;
    pick_unroll(g, t, d)
}
