//! 2-D pooling (max and average), NCHW and NHWC.

use super::builder::{DagBuilder, ld, mul};
use super::window::{Window, padded};
use crate::ir::{Affine, ComputeDag, DagError, Expr, ReduceOp};

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
    let (oh, ow) = win.output(h, w)?;
    pool(kind, [n, c_in, h, w], [n, c_in, oh, ow], (2, 3), win)
}

/// 2-D pooling, NHWC (channels innermost, as a quantized convolution writes them): the same
/// computation as [`pool2d`] with the axes in that order.
pub fn pool2d_nhwc(
    kind: PoolKind,
    n: i64,
    h: i64,
    w: i64,
    c_in: i64,
    win: Window,
) -> Result<ComputeDag, DagError> {
    let (oh, ow) = win.output(h, w)?;
    pool(kind, [n, h, w, c_in], [n, oh, ow, c_in], (1, 2), win)
}

/// A pool over the spatial axes `(hd, wd)` of `shape`: the output's point `x` (then the window's
/// row and column, axes 4 and 5) reads its input at `x` with those two axes moved by the
/// window.
fn pool(
    kind: PoolKind,
    shape: [i64; 4],
    out: [i64; 4],
    (hd, wd): (usize, usize),
    win: Window,
) -> Result<ComputeDag, DagError> {
    let Window {
        kh,
        kw,
        stride,
        pad,
        dilation,
    } = win;
    let mut b = DagBuilder::new();
    let data = b.placeholder("data", &shape);
    // An integer form (`dtype=u8|i8`) takes the type's least value for -infinity.
    let fill = if kind == PoolKind::Max {
        f64::NEG_INFINITY
    } else {
        0.0
    };
    let src = padded(&mut b, data, hd, wd, pad, fill);
    let (op, name) = match kind {
        PoolKind::Max => (ReduceOp::Max, "max_pool"),
        PoolKind::Avg => (ReduceOp::Sum, "pool_sum"),
    };
    let red = b.reduce(name, &out, &[("ry", kh), ("rx", kw)], Some(op), |x| {
        let mut idx: Vec<Affine> = x[..4].to_vec();
        idx[hd] = x[hd].scale(stride).add(&x[4].scale(dilation));
        idx[wd] = x[wd].scale(stride).add(&x[5].scale(dilation));
        ld(src, &idx)
    });
    if kind == PoolKind::Avg {
        let inv = 1.0 / (kh * kw) as f64;
        b.compute("avg_pool", &out, |x| mul(ld(red, x), Expr::Const(inv)));
    }
    b.finish()
}
