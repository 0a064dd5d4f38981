//! Reduction loops GCC may reorder: a serial loop whose whole body accumulates into one
//! element (the loop variable is not in the store's index) from operands that are contiguous
//! along the loop. GCC keeps such a float sum in order, one dependent add per element (a
//! latency chain: rfactor's combination of 64 partials cost 4x its vector main loop); written
//! as `omp simd reduction` on a scalar it is vectorized and reassociated. Contiguity keeps it
//! to loads the vectorizer reads whole (a strided operand would become gathers).

use crate::ir::ReduceOp;
use crate::lower::{Lin, Stmt, VCond, VExpr, Var};

/// The store of `body` when the loop over `var` is such a reduction: `(buffer, index, value,
/// op)`.
pub(super) fn contiguous_reduction(
    var: Var,
    body: &[Stmt],
) -> Option<(usize, &Lin, &VExpr, ReduceOp)> {
    let [
        Stmt::Store {
            buf,
            index,
            value,
            reduce: Some(op),
        },
    ] = body
    else {
        return None;
    };
    if uses(index, var) {
        return None;
    }
    let mut ok = true;
    let mut varies = false;
    visit(value, &mut |b, idx| {
        if b == *buf {
            ok = false;
        }
        if uses(idx, var) {
            varies = true;
            ok &= idx.var_coef(var) == 1 && !nonlinear_use(idx, var);
        }
    });
    (ok && varies).then_some((*buf, index, value, *op))
}

fn uses(l: &Lin, v: Var) -> bool {
    let mut vs = vec![];
    l.vars(&mut vs);
    vs.contains(&v)
}

/// Whether `v` appears inside a division, modulo, min or max of `l`.
fn nonlinear_use(l: &Lin, v: Var) -> bool {
    l.terms
        .iter()
        .any(|(a, _)| !matches!(a, crate::lower::Atom::Var(_)) && uses(&Lin::atom(a.clone()), v))
}

fn visit(e: &VExpr, f: &mut impl FnMut(usize, &Lin)) {
    match e {
        VExpr::Const(_) | VExpr::Index(_) => {}
        VExpr::Load { buf, index } => f(*buf, index),
        VExpr::Unary(_, a) => visit(a, f),
        VExpr::Binary(_, a, b) => {
            visit(a, f);
            visit(b, f)
        }
        VExpr::Select(c, a, b) => {
            visit_cond(c, f);
            visit(a, f);
            visit(b, f)
        }
    }
}

fn visit_cond(c: &VCond, f: &mut impl FnMut(usize, &Lin)) {
    match c {
        VCond::Index(..) => {}
        VCond::Value(_, a, b) => {
            visit(a, f);
            visit(b, f)
        }
        VCond::And(a, b) | VCond::Or(a, b) => {
            visit_cond(a, f);
            visit_cond(b, f)
        }
        VCond::Not(a) => visit_cond(a, f),
    }
}
