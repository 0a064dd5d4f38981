//! A chain of elementwise stages, the smallest workload with fusion to decide.

use super::builder::{DagBuilder, add, ld, mul};
use crate::ir::{ComputeDag, DagError, Expr, UnaryOp};

/// A chain of three elementwise stages: `out = relu(tanh(a + b) * a)`.
pub fn elementwise(m: i64, n: i64) -> Result<ComputeDag, DagError> {
    let mut b = DagBuilder::new();
    let a = b.placeholder("a", &[m, n]);
    let bb = b.placeholder("b", &[m, n]);
    let t0 = b.compute("add", &[m, n], |x| add(ld(a, x), ld(bb, x)));
    let t1 = b.compute("tanh_mul", &[m, n], |x| {
        mul(Expr::unary(UnaryOp::Tanh, ld(t0, x)), ld(a, x))
    });
    b.compute("relu", &[m, n], |x| Expr::unary(UnaryOp::Relu, ld(t1, x)));
    b.finish()
}
