//! Matrix products: `matmul`, `batch_matmul` and `dense` (TVM's layout, with its optional
//! bias and relu).

use super::builder::{DagBuilder, epilogue, ld, mul};
use crate::ir::{ComputeDag, DagError, ReduceOp};

pub fn matmul(m: i64, n: i64, k: i64) -> Result<ComputeDag, DagError> {
    let mut b = DagBuilder::new();
    let a = b.placeholder("A", &[m, k]);
    let w = b.placeholder("B", &[k, n]);
    b.reduce("C", &[m, n], &[("k", k)], Some(ReduceOp::Sum), |x| {
        mul(
            ld(a, &[x[0].clone(), x[2].clone()]),
            ld(w, &[x[2].clone(), x[1].clone()]),
        )
    });
    b.finish()
}

pub fn batch_matmul(batch: i64, m: i64, n: i64, k: i64) -> Result<ComputeDag, DagError> {
    let mut b = DagBuilder::new();
    let a = b.placeholder("A", &[batch, m, k]);
    let w = b.placeholder("B", &[batch, k, n]);
    b.reduce("C", &[batch, m, n], &[("k", k)], Some(ReduceOp::Sum), |x| {
        mul(
            ld(a, &[x[0].clone(), x[1].clone(), x[3].clone()]),
            ld(w, &[x[0].clone(), x[3].clone(), x[2].clone()]),
        )
    });
    b.finish()
}

/// `out[i, j] = act(sum_k data[i, k] * weight[j, k] + bias[j])`, TVM's dense layout.
pub fn dense(m: i64, n: i64, k: i64, bias: bool, relu: bool) -> Result<ComputeDag, DagError> {
    let mut b = DagBuilder::new();
    let a = b.placeholder("data", &[m, k]);
    let w = b.placeholder("weight", &[n, k]);
    let d = b.reduce("dense", &[m, n], &[("k", k)], Some(ReduceOp::Sum), |x| {
        mul(
            ld(a, &[x[0].clone(), x[2].clone()]),
            ld(w, &[x[1].clone(), x[2].clone()]),
        )
    });
    epilogue(&mut b, d, 1, bias, relu);
    b.finish()
}
