//! Register tiles written out: an accumulating store whose innermost loops are a small tile of
//! space loops (the vector loop last) under a band of reduction loops gets its accumulators as
//! named vector variables (GCC vector extensions), loaded before the band and stored after it,
//! with the tile unrolled by the generator.
//!
//! Why not leave it to GCC: it keeps a tile in registers across the reduction only when store
//! motion succeeds, and it gave up on conv2d tiles of more than a few vectors (every FMA loaded
//! and stored its accumulator: 14 accumulators ran at 80 GFLOP/s where 4 ran at 110). TVM gets
//! the same effect by unrolling in its IR before LLVM promotes the buffer to registers.
//!
//! A tile qualifies when the nest from the band's outermost loop down to the store is perfect
//! (one statement per body), the innermost loop is the vectorized one (a last, or only, partial
//! vector is loaded and stored under a mask, [`groups`]), the store is a sum, max or min whose
//! index walks the vector loop contiguously, and the value needs nothing but `+`, `-`, `*`,
//! `/`, negation, selects on lane-invariant conditions, and loads: contiguous, lane-invariant,
//! at a stride of 2 along the lanes (two vector loads and a shuffle of their even lanes, where
//! a plain loop gathers), or under a condition that is a range of the lane (inlined padding,
//! loaded under a mask: see `peel`). Anything else keeps the plain emission.

use super::lanes::{cond_uses, lane_coef, uses};
use super::peel::lane_range;
use crate::ir::{BinaryOp, ReduceOp, UnaryOp};
use crate::lower::{Lin, LoopKind, Stmt, VCond, VExpr, Var};
use std::collections::HashMap;

/// At most this many vector accumulators in one tile, for a register file of `registers`:
/// an eighth is left for the operands (a loaded row, broadcasts). A larger tile would spill;
/// a band that would hold one starts further in instead.
pub const fn max_tile_vectors(registers: i64) -> i64 {
    registers - registers / 8
}

/// A register tile, found at the outermost loop of its reduction band.
#[derive(Debug, Clone)]
pub(super) struct RegTile<'s> {
    /// The band's loops, outermost first: (variable, extent, kind).
    pub band: Vec<(Var, i64, LoopKind)>,
    /// The tile's space loops, outermost first, the vector loop excluded.
    pub tile: Vec<(Var, i64)>,
    /// The vectorized loop and its extent (at least the lanes; see [`groups`]).
    pub lane: (Var, i64),
    /// The accumulating store: buffer, index, value and reduction (a sum, or a max or min:
    /// a pooling's running result, see `vminmax`).
    pub op: ReduceOp,
    pub buf: usize,
    pub index: &'s Lin,
    pub value: &'s VExpr,
    /// Whether its accumulators fit the registers written a row per vector (else only with
    /// its rows packed).
    pub plain_fits: bool,
}

/// Every register tile of `body`, keyed by the address of its band's outermost loop, for
/// vectors of `lanes` f32 and `max` accumulators.
pub(super) fn register_tiles(
    body: &[Stmt],
    lanes: i64,
    max: i64,
) -> HashMap<*const Stmt, RegTile<'_>> {
    fn walk<'s>(body: &'s [Stmt], lim: (i64, i64), out: &mut HashMap<*const Stmt, RegTile<'s>>) {
        for st in body {
            match st {
                Stmt::For { body, .. } => match plan(st, lim.0, lim.1) {
                    Some(t) => {
                        // A tile that fits only packed may be dropped (`rows`): the tiles
                        // further in are then the candidates, as when it did not fit.
                        let plain_fits = t.plain_fits;
                        out.insert(st as *const Stmt, t);
                        if !plain_fits {
                            walk(body, lim, out);
                        }
                    }
                    None => walk(body, lim, out),
                },
                Stmt::Alloc { body, .. } | Stmt::Guard { body, .. } => walk(body, lim, out),
                Stmt::Let { .. } | Stmt::Store { .. } => {}
            }
        }
    }
    let mut out = HashMap::new();
    if lanes > 1 {
        walk(body, (lanes, max), &mut out);
    }
    out
}

/// The loops of the perfect nest from `s` down (each body one statement), outermost first, and
/// the statement below them: the first that is not such a loop, or at which `stop` holds.
pub(super) fn perfect_nest(
    s: &Stmt,
    stop: impl Fn(&Stmt) -> bool,
) -> (Vec<(Var, i64, LoopKind)>, &Stmt) {
    let mut loops = vec![];
    let mut s = s;
    while let Stmt::For {
        var,
        extent,
        kind,
        body,
    } = s
        && body.len() == 1
        && !stop(s)
    {
        loops.push((*var, *extent, *kind));
        s = &body[0];
    }
    (loops, s)
}

/// The register tile whose band starts at `top`, if the nest below it is one.
fn plan(top: &Stmt, lanes: i64, max: i64) -> Option<RegTile<'_>> {
    // The perfect nest from `top` down to a store.
    let (loops, inner) = perfect_nest(top, |_| false);
    let Stmt::Store {
        buf,
        index,
        value,
        reduce: Some(op),
    } = inner
    else {
        return None;
    };
    let (buf, op) = (*buf, *op);
    let &(lane, lane_extent, LoopKind::Vectorized) = loops.last()? else {
        return None;
    };
    // A lane loop shorter than a vector (a 6-wide output row on 16 lanes) is one masked
    // vector: the plain loop would keep its running results in memory. Measured on a Zen 4,
    // the same max pool schedule on a 13x13 map (6 output columns) ran in 0.87 us as a tile,
    // 2.49 us plain; depthwise and conv2d tiles on 7x7 maps did not change beyond the noise.
    if lane_extent < 2 || lane_coef(index, lane) != Some(1) {
        return None;
    }
    let mut used = vec![];
    index.vars(&mut used);
    // The band is every loop not in the index (reductions), the tile every loop in it; the
    // band starts at `top`. Space loops may sit between reduction loops: unrolling them inside
    // the innermost one keeps each accumulator's sum in the same order.
    let rest = &loops[..loops.len() - 1];
    if used.contains(&rest.first()?.0) {
        return None;
    }
    let serial = |k: LoopKind| matches!(k, LoopKind::Serial | LoopKind::Unrolled);
    if !rest.iter().all(|l| serial(l.2)) {
        return None;
    }
    let (tile, band): (Vec<&(Var, i64, LoopKind)>, Vec<_>) =
        rest.iter().partition(|l| used.contains(&l.0));
    let vectors =
        tile.iter().map(|l| l.1).product::<i64>() * groups(lane_extent, lanes).len() as i64;
    // Rows shorter than a vector may be packed into its lanes (`rows`), in fewer vectors: such
    // a tile is kept when those fit, and dropped again if it does not pack after all.
    let packed = match tile.last() {
        Some(&&(y, rows, _)) if lane_extent < lanes && lane_coef(index, y) == Some(lane_extent) => {
            vectors / rows / groups(lane_extent, lanes).len() as i64
                * groups(rows * lane_extent, lanes).len() as i64
        }
        _ => vectors,
    };
    if packed > max || vector_form(value, lane).is_none() {
        return None;
    }
    Some(RegTile {
        band: band.into_iter().copied().collect(),
        tile: tile.iter().map(|l| (l.0, l.1)).collect(),
        lane: (lane, lane_extent),
        op,
        buf,
        index,
        value,
        plain_fits: vectors <= max,
    })
}

/// The vectors a lane loop of `extent` is cut into, for `lanes` per vector: (first lane,
/// lanes used), whole vectors first and a last partial one where `extent` is not a multiple.
/// The partial vector's loads and stores are masked (`th_vloadn`, `th_vstoren`): its lanes past
/// the loop's end are never read or written, wherever the buffer ends.
pub(super) fn groups(extent: i64, lanes: i64) -> Vec<(i64, i64)> {
    (0..(extent + lanes - 1) / lanes)
        .map(|g| (g * lanes, lanes.min(extent - g * lanes)))
        .collect()
}

/// `Some(true)` when the value can be computed as one vector per group of lanes, `Some(false)`
/// when it is the same in every lane (a scalar the vector operations broadcast), `None` when it
/// needs what the tile form does not write (gathers, lane-dependent conditions other than a
/// load on a range of the lane, math calls or min/max over lanes).
pub(super) fn vector_form(e: &VExpr, lane: Var) -> Option<bool> {
    if !uses(e, lane) {
        return Some(false);
    }
    match e {
        // Stride 2 (a stride-2 convolution's or pooling's columns): two contiguous loads and
        // a shuffle of their even lanes per vector, where the plain loop gathers lane by lane.
        VExpr::Load { index, .. } => matches!(lane_coef(index, lane)?, 1 | 2).then_some(true),
        VExpr::Unary(UnaryOp::Neg, a) => vector_form(a, lane),
        VExpr::Binary(BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div, a, b) => {
            vector_form(a, lane)?;
            vector_form(b, lane)?;
            Some(true)
        }
        // Padding inlined into the operand: a load on a range of the lane, a constant outside
        // it, read under a mask of the lanes in range (see `peel`).
        VExpr::Select(c, a, b) if cond_uses(c, lane) => {
            lane_range(c, lane)?;
            let (VExpr::Load { index, .. }, VExpr::Const(_)) = (&**a, &**b) else {
                return None;
            };
            matches!(lane_coef(index, lane)?, 1 | 2).then_some(true)
        }
        VExpr::Select(_, a, b) => {
            vector_form(a, lane)?;
            vector_form(b, lane)?;
            Some(true)
        }
        _ => None,
    }
}

/// Whether a tile's value may be computed in `TH_LANEPERM`'s lane order: its vector operands
/// are all stride-2 loads (plain or masked), and everything else it does is lane by lane or a
/// broadcast, so a permutation of the lanes commutes with it. Any other vector load would need
/// its own permutation, which is what the tile saves.
pub(super) fn lanes_permutable(e: &VExpr, lane: Var) -> bool {
    // (vector loads seen, all of them stride 2)
    fn walk(e: &VExpr, lane: Var) -> (usize, bool) {
        if !uses(e, lane) {
            return (0, true);
        }
        match e {
            VExpr::Load { index, .. } => (1, lane_coef(index, lane) == Some(2)),
            VExpr::Select(c, a, _) if cond_uses(c, lane) => match &**a {
                VExpr::Load { index, .. } => (1, lane_coef(index, lane) == Some(2)),
                _ => (0, false),
            },
            VExpr::Unary(_, a) => walk(a, lane),
            VExpr::Binary(_, a, b) | VExpr::Select(_, a, b) => {
                let (na, oa) = walk(a, lane);
                let (nb, ob) = walk(b, lane);
                (na + nb, oa && ob)
            }
            VExpr::Const(_) | VExpr::Index(_) => (0, false),
        }
    }
    let (n, all) = walk(e, lane);
    n > 0 && all
}

/// `e` with every index expression passed through `f`.
pub(super) fn map_lins(e: &VExpr, f: &impl Fn(&Lin) -> Lin) -> VExpr {
    match e {
        VExpr::Const(c) => VExpr::Const(*c),
        VExpr::Load { buf, index } => VExpr::Load {
            buf: *buf,
            index: f(index),
        },
        VExpr::Index(l) => VExpr::Index(f(l)),
        VExpr::Unary(op, a) => VExpr::Unary(*op, Box::new(map_lins(a, f))),
        VExpr::Binary(op, a, b) => {
            VExpr::Binary(*op, Box::new(map_lins(a, f)), Box::new(map_lins(b, f)))
        }
        VExpr::Select(c, a, b) => VExpr::Select(
            Box::new(map_cond(c, f)),
            Box::new(map_lins(a, f)),
            Box::new(map_lins(b, f)),
        ),
    }
}

pub(super) fn map_cond(c: &VCond, f: &impl Fn(&Lin) -> Lin) -> VCond {
    match c {
        VCond::Index(op, a, b) => VCond::Index(*op, f(a), f(b)),
        VCond::Value(op, a, b) => {
            VCond::Value(*op, Box::new(map_lins(a, f)), Box::new(map_lins(b, f)))
        }
        VCond::And(a, b) => VCond::And(Box::new(map_cond(a, f)), Box::new(map_cond(b, f))),
        VCond::Or(a, b) => VCond::Or(Box::new(map_cond(a, f)), Box::new(map_cond(b, f))),
        VCond::Not(a) => VCond::Not(Box::new(map_cond(a, f))),
    }
}

/// Every point of the tile, outermost loop slowest: the value of each tile variable.
pub(super) fn tile_points(tile: &[(Var, i64)]) -> Vec<Vec<(Var, i64)>> {
    let mut points = vec![vec![]];
    for &(v, n) in tile {
        points = points
            .into_iter()
            .flat_map(|p| {
                (0..n).map(move |i| {
                    let mut q = p.clone();
                    q.push((v, i));
                    q
                })
            })
            .collect();
    }
    points
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lp(node: usize) -> Var {
        Var::Loop { stage: 0, node }
    }

    #[test]
    fn lane_inside_a_division_is_not_contiguous() {
        let l = Lin::var(lp(0)).add(&Lin::var(lp(1)).div(4));
        assert_eq!(lane_coef(&l, lp(0)), Some(1));
        assert_eq!(lane_coef(&l, lp(1)), None);
        assert_eq!(lane_coef(&l, lp(2)), Some(0));
    }

    #[test]
    fn gathers_and_lane_dependent_math_keep_the_plain_form() {
        let contiguous = VExpr::Load {
            buf: 0,
            index: Lin::var(lp(0)),
        };
        let strided = VExpr::Load {
            buf: 1,
            index: Lin::var(lp(0)).scale(3),
        };
        let scalar = VExpr::Load {
            buf: 1,
            index: Lin::var(lp(1)),
        };
        let mul = |a: &VExpr, b: &VExpr| {
            VExpr::Binary(BinaryOp::Mul, Box::new(a.clone()), Box::new(b.clone()))
        };
        assert_eq!(vector_form(&mul(&contiguous, &scalar), lp(0)), Some(true));
        assert_eq!(vector_form(&mul(&scalar, &scalar), lp(0)), Some(false));
        assert_eq!(vector_form(&mul(&contiguous, &strided), lp(0)), None);
        let exp = VExpr::Unary(UnaryOp::Exp, Box::new(contiguous.clone()));
        assert_eq!(vector_form(&exp, lp(0)), None);
        let exp_scalar = VExpr::Unary(UnaryOp::Exp, Box::new(scalar));
        assert_eq!(vector_form(&exp_scalar, lp(0)), Some(false));
    }

    #[test]
    fn stride_two_loads_are_vectors_and_lane_loops_end_in_a_partial_group() {
        let even = VExpr::Load {
            buf: 0,
            index: Lin::var(lp(0)).scale(2).add_const(1),
        };
        let scalar = VExpr::Load {
            buf: 1,
            index: Lin::var(lp(1)),
        };
        let mul = VExpr::Binary(BinaryOp::Mul, Box::new(even), Box::new(scalar));
        assert_eq!(vector_form(&mul, lp(0)), Some(true));
        assert_eq!(groups(32, 16), vec![(0, 16), (16, 16)]);
        assert_eq!(groups(28, 16), vec![(0, 16), (16, 12)]);
        assert_eq!(groups(7, 8), vec![(0, 7)]);
    }

    #[test]
    fn only_tiles_of_stride_two_vectors_take_the_shuffles_lane_order() {
        let load = |buf, coef| VExpr::Load {
            buf,
            index: Lin::var(lp(0)).scale(coef).add(&Lin::var(lp(1))),
        };
        let scalar = VExpr::Load {
            buf: 2,
            index: Lin::var(lp(1)),
        };
        let mul = |a: VExpr, b: VExpr| VExpr::Binary(BinaryOp::Mul, Box::new(a), Box::new(b));
        let add = |a: VExpr, b: VExpr| VExpr::Binary(BinaryOp::Add, Box::new(a), Box::new(b));
        assert!(lanes_permutable(&mul(load(0, 2), scalar.clone()), lp(0)));
        assert!(lanes_permutable(&add(load(0, 2), load(1, 2)), lp(0)));
        // A contiguous vector (a bias row, a weight vector) is in the natural order.
        assert!(!lanes_permutable(&add(load(0, 2), load(1, 1)), lp(0)));
        assert!(!lanes_permutable(&mul(scalar.clone(), scalar), lp(0)));
    }

    #[test]
    fn tile_points_run_outermost_slowest() {
        let p = tile_points(&[(lp(0), 2), (lp(1), 3)]);
        assert_eq!(p.len(), 6);
        assert_eq!(p[1], vec![(lp(0), 0), (lp(1), 1)]);
        assert_eq!(p[3], vec![(lp(0), 1), (lp(1), 0)]);
    }
}
