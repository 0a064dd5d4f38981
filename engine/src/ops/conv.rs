//! 2-D convolutions: NCHW, NHWC, depthwise NCHW and NHWC, each with its optional bias and
//! relu.

use super::builder::{DagBuilder, c, epilogue, ld, mul};
use super::window::{Window, padded};
use crate::ir::{ComputeDag, DagError, ReduceOp};

#[allow(clippy::too_many_arguments)]
pub fn conv2d_nchw(
    n: i64,
    c_in: i64,
    h: i64,
    w: i64,
    f: i64,
    win: Window,
    bias: bool,
    relu: bool,
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
    let kern = b.placeholder("kernel", &[f, c_in, kh, kw]);
    let src = padded(&mut b, data, 2, 3, pad, 0.0);
    // axes: nn, ff, yy, xx | rc, ry, rx
    let conv = b.reduce(
        "conv",
        &[n, f, oh, ow],
        &[("rc", c_in), ("ry", kh), ("rx", kw)],
        Some(ReduceOp::Sum),
        |x| {
            let (nn, ff, yy, xx, rc, ry, rx) = (&x[0], &x[1], &x[2], &x[3], &x[4], &x[5], &x[6]);
            mul(
                ld(
                    src,
                    &[
                        nn.clone(),
                        rc.clone(),
                        yy.scale(stride).add(&ry.scale(dilation)),
                        xx.scale(stride).add(&rx.scale(dilation)),
                    ],
                ),
                ld(kern, &[ff.clone(), rc.clone(), ry.clone(), rx.clone()]),
            )
        },
    );
    epilogue(&mut b, conv, 1, bias, relu);
    b.finish()
}

#[allow(clippy::too_many_arguments)]
pub fn conv2d_nhwc(
    n: i64,
    h: i64,
    w: i64,
    c_in: i64,
    f: i64,
    win: Window,
    bias: bool,
    relu: bool,
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
    let data = b.placeholder("data", &[n, h, w, c_in]);
    let kern = b.placeholder("kernel", &[kh, kw, c_in, f]);
    let src = padded(&mut b, data, 1, 2, pad, 0.0);
    // axes: nn, yy, xx, ff | ry, rx, rc
    let conv = b.reduce(
        "conv",
        &[n, oh, ow, f],
        &[("ry", kh), ("rx", kw), ("rc", c_in)],
        Some(ReduceOp::Sum),
        |x| {
            let (nn, yy, xx, ff, ry, rx, rc) = (&x[0], &x[1], &x[2], &x[3], &x[4], &x[5], &x[6]);
            mul(
                ld(
                    src,
                    &[
                        nn.clone(),
                        yy.scale(stride).add(&ry.scale(dilation)),
                        xx.scale(stride).add(&rx.scale(dilation)),
                        rc.clone(),
                    ],
                ),
                ld(kern, &[ry.clone(), rx.clone(), rc.clone(), ff.clone()]),
            )
        },
    );
    epilogue(&mut b, conv, 3, bias, relu);
    b.finish()
}

/// Depthwise convolution, NCHW, channel multiplier 1.
pub fn depthwise_conv2d_nchw(
    n: i64,
    c_in: i64,
    h: i64,
    w: i64,
    win: Window,
    bias: bool,
    relu: bool,
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
    let kern = b.placeholder("kernel", &[c_in, 1, kh, kw]);
    let src = padded(&mut b, data, 2, 3, pad, 0.0);
    let conv = b.reduce(
        "depthwise",
        &[n, c_in, oh, ow],
        &[("ry", kh), ("rx", kw)],
        Some(ReduceOp::Sum),
        |x| {
            let (nn, cc, yy, xx, ry, rx) = (&x[0], &x[1], &x[2], &x[3], &x[4], &x[5]);
            mul(
                ld(
                    src,
                    &[
                        nn.clone(),
                        cc.clone(),
                        yy.scale(stride).add(&ry.scale(dilation)),
                        xx.scale(stride).add(&rx.scale(dilation)),
                    ],
                ),
                ld(kern, &[cc.clone(), c(0), ry.clone(), rx.clone()]),
            )
        },
    );
    epilogue(&mut b, conv, 1, bias, relu);
    b.finish()
}

/// Depthwise convolution, NHWC, channel multiplier 1; the kernel `[kh, kw, c, 1]` (TFLite's
/// and XNNPACK's layout, HWIO with one output per input channel). Channels are the innermost
/// axis of data, kernel and output: a vector spans channels, whatever the map's width (a 7x7
/// map fills no vector along its rows).
pub fn depthwise_conv2d_nhwc(
    n: i64,
    h: i64,
    w: i64,
    c_in: i64,
    win: Window,
    bias: bool,
    relu: bool,
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
    let data = b.placeholder("data", &[n, h, w, c_in]);
    let kern = b.placeholder("kernel", &[kh, kw, c_in, 1]);
    let src = padded(&mut b, data, 1, 2, pad, 0.0);
    // axes: nn, yy, xx, cc | ry, rx
    let conv = b.reduce(
        "depthwise",
        &[n, oh, ow, c_in],
        &[("ry", kh), ("rx", kw)],
        Some(ReduceOp::Sum),
        |x| {
            let (nn, yy, xx, cc, ry, rx) = (&x[0], &x[1], &x[2], &x[3], &x[4], &x[5]);
            mul(
                ld(
                    src,
                    &[
                        nn.clone(),
                        yy.scale(stride).add(&ry.scale(dilation)),
                        xx.scale(stride).add(&rx.scale(dilation)),
                        cc.clone(),
                    ],
                ),
                ld(kern, &[ry.clone(), rx.clone(), cc.clone(), c(0)]),
            )
        },
    );
    epilogue(&mut b, conv, 3, bias, relu);
    b.finish()
}
