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
//! (one statement per body), the innermost loop is the vectorized one with a whole number of
//! vectors, the store is a sum whose index walks the vector loop contiguously, and the value
//! needs nothing but loads (contiguous or lane-invariant), + - * /, negation and selects on
//! lane-invariant conditions along the lanes. Anything else keeps the plain emission.

use crate::ir::{BinaryOp, ReduceOp, UnaryOp};
use crate::lower::{Atom, Lin, LoopKind, Stmt, VCond, VExpr, Var};
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
    /// The vectorized loop and its extent (a multiple of the lanes).
    pub lane: (Var, i64),
    /// The accumulating store: buffer, index and value.
    pub buf: usize,
    pub index: &'s Lin,
    pub value: &'s VExpr,
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
                        out.insert(st as *const Stmt, t);
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

/// The register tile whose band starts at `top`, if the nest below it is one.
fn plan(top: &Stmt, lanes: i64, max: i64) -> Option<RegTile<'_>> {
    // The perfect nest from `top` down to a store.
    let mut loops = vec![];
    let mut s = top;
    let (buf, index, value) = loop {
        match s {
            Stmt::For {
                var,
                extent,
                kind,
                body,
            } if body.len() == 1 => {
                loops.push((*var, *extent, *kind));
                s = &body[0];
            }
            Stmt::Store {
                buf,
                index,
                value,
                reduce: Some(ReduceOp::Sum),
            } => break (*buf, index, value),
            _ => return None,
        }
    };
    let &(lane, lane_extent, LoopKind::Vectorized) = loops.last()? else {
        return None;
    };
    if lane_extent % lanes != 0 || lane_coef(index, lane) != Some(1) {
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
    let vectors = tile.iter().map(|l| l.1).product::<i64>() * (lane_extent / lanes);
    if vectors > max || vector_form(value, lane).is_none() {
        return None;
    }
    Some(RegTile {
        band: band.into_iter().copied().collect(),
        tile: tile.iter().map(|l| (l.0, l.1)).collect(),
        lane: (lane, lane_extent),
        buf,
        index,
        value,
    })
}

/// The coefficient of `lane` in `l` (0 when absent), or `None` when it appears inside a
/// non-linear term, where consecutive lanes need not be consecutive addresses.
fn lane_coef(l: &Lin, lane: Var) -> Option<i64> {
    let nonlinear = l.terms.iter().any(|(a, _)| {
        let mut vs = vec![];
        if !matches!(a, Atom::Var(_)) {
            a.vars(&mut vs);
        }
        vs.contains(&lane)
    });
    (!nonlinear).then(|| l.var_coef(lane))
}

fn cond_uses(c: &VCond, lane: Var) -> bool {
    match c {
        VCond::Index(_, a, b) => lin_uses(a, lane) || lin_uses(b, lane),
        VCond::Value(_, a, b) => uses(a, lane) || uses(b, lane),
        VCond::And(a, b) | VCond::Or(a, b) => cond_uses(a, lane) || cond_uses(b, lane),
        VCond::Not(a) => cond_uses(a, lane),
    }
}

fn lin_uses(l: &Lin, lane: Var) -> bool {
    let mut vs = vec![];
    l.vars(&mut vs);
    vs.contains(&lane)
}

/// Whether the value differs between lanes.
pub(super) fn uses(e: &VExpr, lane: Var) -> bool {
    match e {
        VExpr::Const(_) => false,
        VExpr::Load { index, .. } | VExpr::Index(index) => lin_uses(index, lane),
        VExpr::Unary(_, a) => uses(a, lane),
        VExpr::Binary(_, a, b) => uses(a, lane) || uses(b, lane),
        VExpr::Select(c, a, b) => cond_uses(c, lane) || uses(a, lane) || uses(b, lane),
    }
}

/// `Some(true)` when the value can be computed as one vector per group of lanes, `Some(false)`
/// when it is the same in every lane (a scalar the vector operations broadcast), `None` when it
/// needs what the tile form does not write (gathers, lane-dependent conditions, math calls or
/// min/max over lanes).
fn vector_form(e: &VExpr, lane: Var) -> Option<bool> {
    if !uses(e, lane) {
        return Some(false);
    }
    match e {
        VExpr::Load { index, .. } => (lane_coef(index, lane)? == 1).then_some(true),
        VExpr::Unary(UnaryOp::Neg, a) => vector_form(a, lane),
        VExpr::Binary(BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div, a, b) => {
            vector_form(a, lane)?;
            vector_form(b, lane)?;
            Some(true)
        }
        VExpr::Select(c, a, b) if !cond_uses(c, lane) => {
            vector_form(a, lane)?;
            vector_form(b, lane)?;
            Some(true)
        }
        _ => None,
    }
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

fn map_cond(c: &VCond, f: &impl Fn(&Lin) -> Lin) -> VCond {
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
    fn tile_points_run_outermost_slowest() {
        let p = tile_points(&[(lp(0), 2), (lp(1), 3)]);
        assert_eq!(p.len(), 6);
        assert_eq!(p[1], vec![(lp(0), 0), (lp(1), 1)]);
        assert_eq!(p[3], vec![(lp(0), 1), (lp(1), 0)]);
    }
}
