//! Group 1: operations a value, a condition or an index expression executes per iteration, by
//! class.

use super::layout::*;
use tunehub_engine::ir::{BinaryOp, UnaryOp};
use tunehub_engine::lower::{Atom, Lin, VCond, VExpr};

/// Integer operations evaluating `l`: a coefficient multiply, an add per extra summand (a
/// multiply feeding an add counts as one mad), and the div/mod/min/max atoms.
pub(super) fn lin_ops(l: &Lin, c: &mut [f64; N_COMPUTE]) {
    let mut muls = 0usize;
    let mut summands = usize::from(l.c != 0);
    for (a, k) in &l.terms {
        summands += 1;
        if k.abs() != 1 {
            muls += 1;
        }
        match a {
            Atom::Var(_) => {}
            Atom::Div(x, _) | Atom::Mod(x, _) => {
                c[I_DIVMOD] += 1.0;
                lin_ops(x, c);
            }
            Atom::Max(x, y) | Atom::Min(x, y) => {
                c[I_MINMAX] += 1.0;
                lin_ops(x, c);
                lin_ops(y, c);
            }
        }
    }
    let adds = summands.saturating_sub(1);
    let mad = muls.min(adds);
    c[I_MAD] += mad as f64;
    c[I_MUL] += (muls - mad) as f64;
    c[I_ADDSUB] += (adds - mad) as f64;
}

fn is_mul(e: &VExpr) -> bool {
    matches!(e, VExpr::Binary(BinaryOp::Mul, _, _))
}

/// Per-iteration operation counts of `e`; collects its loads.
pub(super) fn count_expr<'e>(
    e: &'e VExpr,
    c: &mut [f64; N_COMPUTE],
    loads: &mut Vec<(usize, &'e Lin)>,
) {
    match e {
        VExpr::Const(_) => {}
        VExpr::Index(l) => lin_ops(l, c),
        VExpr::Load { buf, index } => {
            lin_ops(index, c);
            loads.push((*buf, index));
        }
        VExpr::Unary(op, a) => {
            let slot = match op {
                UnaryOp::Neg => F_ADDSUB,
                UnaryOp::Relu => F_MINMAX,
                UnaryOp::Abs | UnaryOp::Round => F_OTHER,
                UnaryOp::Exp
                | UnaryOp::Log
                | UnaryOp::Sqrt
                | UnaryOp::Rsqrt
                | UnaryOp::Tanh
                | UnaryOp::Sigmoid
                | UnaryOp::Erf => F_MATH,
            };
            c[slot] += 1.0;
            count_expr(a, c, loads);
        }
        VExpr::Binary(BinaryOp::Add | BinaryOp::Sub, a, b) if is_mul(a) || is_mul(b) => {
            // a*b + c: one fused multiply-add.
            c[F_MAD] += 1.0;
            let (m, other) = if is_mul(a) { (a, b) } else { (b, a) };
            if let VExpr::Binary(_, x, y) = &**m {
                count_expr(x, c, loads);
                count_expr(y, c, loads);
            }
            count_expr(other, c, loads);
        }
        VExpr::Binary(op, a, b) => {
            let slot = match op {
                BinaryOp::Add | BinaryOp::Sub => F_ADDSUB,
                BinaryOp::Mul => F_MUL,
                BinaryOp::Div => F_DIV,
                BinaryOp::Min | BinaryOp::Max => F_MINMAX,
            };
            c[slot] += 1.0;
            count_expr(a, c, loads);
            count_expr(b, c, loads);
        }
        VExpr::Select(cond, a, b) => {
            c[SELECT] += 1.0;
            count_cond(cond, c, loads);
            count_expr(a, c, loads);
            count_expr(b, c, loads);
        }
    }
}

fn count_cond<'e>(e: &'e VCond, c: &mut [f64; N_COMPUTE], loads: &mut Vec<(usize, &'e Lin)>) {
    match e {
        VCond::Index(_, a, b) => {
            c[I_CMP] += 1.0;
            lin_ops(a, c);
            lin_ops(b, c);
        }
        VCond::Value(_, a, b) => {
            c[F_CMP] += 1.0;
            count_expr(a, c, loads);
            count_expr(b, c, loads);
        }
        VCond::And(a, b) | VCond::Or(a, b) => {
            c[BOOL_OP] += 1.0;
            count_cond(a, c, loads);
            count_cond(b, c, loads);
        }
        VCond::Not(a) => {
            c[BOOL_OP] += 1.0;
            count_cond(a, c, loads);
        }
    }
}
