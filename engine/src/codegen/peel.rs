//! Selects on a range of the vector lane: a padding stage's `select(0 <= x - 1 < W, data[...],
//! 0)` stored by a vectorized loop, or inlined into a register tile's operand. Left to GCC, the
//! conditional load became a masked gather per vector (`vgatherdps`): a depthwise
//! convolution's padding computed per channel cost more than the convolution itself.
//!
//! A plain vectorized loop that stores such a select is split into three loops (the value
//! outside the range, inside it, outside it: the middle one a contiguous copy); a register
//! tile loads the operand under a mask of the lanes in range (`th_vloadm`, `th_vload2m`, see
//! `masked`). Both apply when the condition is a conjunction of comparisons of index
//! expressions, each free of the lane or linear in it; the conditions free of the lane guard
//! the whole range.

use super::lanes::{cond_uses, lane_coef};
use crate::ir::CmpOp;
use crate::lower::{Lin, Stmt, VCond, VExpr, Var};

/// A condition on the lane `L`: `k * L + rest  op  0`, `k` not 0.
pub(super) struct LaneCond {
    pub k: i64,
    pub op: CmpOp,
    pub rest: Lin,
}

/// A select's condition split into comparisons linear in the lane and conditions free of it.
pub(super) struct LaneRange<'s> {
    pub lane: Vec<LaneCond>,
    pub invariant: Vec<&'s VCond>,
}

fn conjuncts<'s>(c: &'s VCond, out: &mut Vec<&'s VCond>) {
    match c {
        VCond::And(a, b) => {
            conjuncts(a, out);
            conjuncts(b, out);
        }
        _ => out.push(c),
    }
}

/// `c` as a range of `lane`, when it is one (and does depend on the lane).
pub(super) fn lane_range(c: &VCond, lane: Var) -> Option<LaneRange<'_>> {
    let mut atoms = vec![];
    conjuncts(c, &mut atoms);
    let (mut conds, mut invariant) = (vec![], vec![]);
    for atom in atoms {
        if !cond_uses(atom, lane) {
            invariant.push(atom);
            continue;
        }
        let VCond::Index(op, l, r) = atom else {
            return None;
        };
        if matches!(op, CmpOp::Eq | CmpOp::Ne) {
            return None;
        }
        let d = l.sub(r);
        let k = lane_coef(&d, lane)?;
        let rest = d.sub(&Lin::var(lane).scale(k));
        conds.push(LaneCond { k, op: *op, rest });
    }
    (!conds.is_empty()).then_some(LaneRange {
        lane: conds,
        invariant,
    })
}

impl LaneCond {
    /// The bound on the lane as `(is_lower, numerator, k)`: the lane is at least (lower) or
    /// below (upper) `ceil(numerator / k)`, `k > 0`.
    pub(super) fn bound(&self) -> (bool, Lin, i64) {
        // With k < 0, negate both sides: the comparison turns around.
        let (k, rest, op) = if self.k > 0 {
            (self.k, self.rest.clone(), self.op)
        } else {
            let flip = match self.op {
                CmpOp::Lt => CmpOp::Gt,
                CmpOp::Le => CmpOp::Ge,
                CmpOp::Gt => CmpOp::Lt,
                CmpOp::Ge => CmpOp::Le,
                o => o,
            };
            (-self.k, self.rest.scale(-1), flip)
        };
        // k L + rest >= 0 <=> L >= ceil(-rest / k); > 0 is >= 1; < 0 <=> L < ceil(-rest / k).
        match op {
            CmpOp::Ge => (true, rest.scale(-1), k),
            CmpOp::Gt => (true, rest.scale(-1).add_const(1), k),
            CmpOp::Lt => (false, rest.scale(-1), k),
            _ => (false, rest.scale(-1).add_const(1), k),
        }
    }
}

/// A plain vectorized loop's store of a select on a range of its lane.
pub(super) struct Peel<'s> {
    pub range: LaneRange<'s>,
    pub buf: usize,
    pub index: &'s Lin,
    pub inside: &'s VExpr,
    pub outside: &'s VExpr,
}

/// The split of the body of the vectorized loop over `lane`, if it is one store of a select
/// on a range of the lane.
pub(super) fn plan(lane: Var, body: &[Stmt]) -> Option<Peel<'_>> {
    let [
        Stmt::Store {
            buf,
            index,
            value: VExpr::Select(c, inside, outside),
            reduce: None,
        },
    ] = body
    else {
        return None;
    };
    Some(Peel {
        range: lane_range(c, lane)?,
        buf: *buf,
        index,
        inside,
        outside,
    })
}
