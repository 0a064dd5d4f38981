//! What varies along the vector lane: the coefficient of the lane in an index, and whether a
//! value or a condition differs between lanes. Shared by the register tiles (`regtile`) and
//! the range selects (`peel`).

use crate::lower::{Atom, Lin, VCond, VExpr, Var};

/// The coefficient of `lane` in `l` (0 when absent), or `None` when it appears inside a
/// non-linear term, where consecutive lanes need not be consecutive addresses.
pub(super) fn lane_coef(l: &Lin, lane: Var) -> Option<i64> {
    let nonlinear = l.terms.iter().any(|(a, _)| {
        let mut vs = vec![];
        if !matches!(a, Atom::Var(_)) {
            a.vars(&mut vs);
        }
        vs.contains(&lane)
    });
    (!nonlinear).then(|| l.var_coef(lane))
}

/// Whether the condition differs between lanes.
pub(super) fn cond_uses(c: &VCond, lane: Var) -> bool {
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
