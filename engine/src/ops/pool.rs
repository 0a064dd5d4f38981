//! 2-D pooling (max and average), NCHW.

use super::builder::{DagBuilder, ld, mul};
use super::window::{Window, padded};
use crate::ir::{ComputeDag, DagError, Expr, ReduceOp};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolKind {
    Max,
    Avg,
}

/// 2-D pooling, NCHW. Average pooling counts padding (TVM's `count_include_pad=True`).
pub fn pool2d(
    kind: PoolKind,
    n: i64,
    c_in: i64,
    h: i64,
    w: i64,
    win: Window,
) -> Result<ComputeDag, DagError> {
    let Window {
        kh,
        kw,
        stride,
        pad,
        dilation,
    } = win;
    let (oh, ow) = win.output(h, w)?;
    let mut b = DagBuilder::new();
    let data = b.placeholder("data", &[n, c_in, h, w]);
    let fill = if kind == PoolKind::Max {
        f64::NEG_INFINITY
    } else {
        0.0
    };
    let src = padded(&mut b, data, 2, 3, pad, fill);
    let op = if kind == PoolKind::Max {
        ReduceOp::Max
    } else {
        ReduceOp::Sum
    };
    let name = if kind == PoolKind::Max {
        "max_pool"
    } else {
        "pool_sum"
    };
    let red = b.reduce(
        name,
        &[n, c_in, oh, ow],
        &[("ry", kh), ("rx", kw)],
        Some(op),
        |x| {
            ld(
                src,
                &[
                    x[0].clone(),
                    x[1].clone(),
                    x[2].scale(stride).add(&x[4].scale(dilation)),
                    x[3].scale(stride).add(&x[5].scale(dilation)),
                ],
            )
        },
    );
    if kind == PoolKind::Avg {
        let inv = 1.0 / (kh * kw) as f64;
        b.compute("avg_pool", &[n, c_in, oh, ow], |x| {
            mul(ld(red, x), Expr::Const(inv))
        });
    }
    b.finish()
}
