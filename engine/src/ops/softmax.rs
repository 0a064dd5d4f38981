//! Row softmax, written in TVM's four stages.

use super::builder::{DagBuilder, ld};
use crate::ir::{BinaryOp, ComputeDag, DagError, Expr, ReduceOp, UnaryOp};

/// Row softmax over the last axis of an `m x n` matrix, in four stages (max, exp, sum, div) as
/// TVM writes it, so that fusion and inlining decisions are the scheduler's.
pub fn softmax(m: i64, n: i64) -> Result<ComputeDag, DagError> {
    let mut b = DagBuilder::new();
    let x = b.placeholder("x", &[m, n]);
    let mx = b.reduce("row_max", &[m], &[("k", n)], Some(ReduceOp::Max), |a| {
        ld(x, &[a[0].clone(), a[1].clone()])
    });
    let e = b.compute("exp", &[m, n], |a| {
        Expr::unary(
            UnaryOp::Exp,
            Expr::binary(BinaryOp::Sub, ld(x, a), ld(mx, &[a[0].clone()])),
        )
    });
    let s = b.reduce("row_sum", &[m], &[("k", n)], Some(ReduceOp::Sum), |a| {
        ld(e, &[a[0].clone(), a[1].clone()])
    });
    b.compute("softmax", &[m, n], |a| {
        Expr::binary(BinaryOp::Div, ld(e, a), ld(s, &[a[0].clone()]))
    });
    b.finish()
}
