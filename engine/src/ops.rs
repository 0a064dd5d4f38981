//! The operator library: common tensor operators, each a function of its parameters that
//! builds a compute DAG, and a registry to build them from a spec such as
//! `conv2d_nchw(n=1, c=64, h=56, w=56, f=64, kh=3, kw=3, stride=1, pad=1)`.

use crate::ir::{
    Affine, Axis, BinaryOp, ComputeDag, Cond, DType, DagError, Expr, ReduceOp, Stage, StageKind,
    UnaryOp,
};
use std::collections::BTreeMap;

/// Builds DAGs stage by stage; axes of a compute are passed to the body closure as affine
/// expressions (space axes, then reduction axes).
#[derive(Default)]
pub struct DagBuilder {
    stages: Vec<Stage>,
}

impl DagBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn placeholder(&mut self, name: &str, shape: &[i64]) -> usize {
        self.stages.push(Stage {
            name: name.into(),
            shape: shape.to_vec(),
            dtype: DType::F32,
            kind: StageKind::Placeholder,
        });
        self.stages.len() - 1
    }

    /// `name[space] = body(space)`.
    pub fn compute(
        &mut self,
        name: &str,
        shape: &[i64],
        body: impl FnOnce(&[Affine]) -> Expr,
    ) -> usize {
        self.reduce(name, shape, &[], None, body)
    }

    /// `name[space] = reduce_{raxes} body(space ++ raxes)`.
    pub fn reduce(
        &mut self,
        name: &str,
        shape: &[i64],
        raxes: &[(&str, i64)],
        op: Option<ReduceOp>,
        body: impl FnOnce(&[Affine]) -> Expr,
    ) -> usize {
        const NAMES: [&str; 8] = ["i", "j", "k", "l", "m", "n", "o", "p"];
        let space: Vec<Axis> = shape
            .iter()
            .enumerate()
            .map(|(d, &e)| Axis {
                name: NAMES.get(d).map_or(format!("ax{d}"), |s| s.to_string()),
                extent: e,
            })
            .collect();
        let reduce_axes: Vec<Axis> = raxes
            .iter()
            .map(|&(n, e)| Axis {
                name: n.into(),
                extent: e,
            })
            .collect();
        let vars: Vec<Affine> = (0..space.len() + reduce_axes.len())
            .map(Affine::axis)
            .collect();
        let body = body(&vars);
        self.stages.push(Stage {
            name: name.into(),
            shape: shape.to_vec(),
            dtype: DType::F32,
            kind: StageKind::Compute {
                space,
                reduce_axes,
                reduce: op,
                body,
            },
        });
        self.stages.len() - 1
    }

    pub fn shape(&self, t: usize) -> &[i64] {
        &self.stages[t].shape
    }

    pub fn finish(self) -> Result<ComputeDag, DagError> {
        ComputeDag::new(self.stages)
    }
}

fn ld(t: usize, idx: &[Affine]) -> Expr {
    Expr::Load(t, idx.to_vec())
}

fn c(x: i64) -> Affine {
    Affine::constant(x)
}

fn mul(a: Expr, b: Expr) -> Expr {
    Expr::binary(BinaryOp::Mul, a, b)
}

fn add(a: Expr, b: Expr) -> Expr {
    Expr::binary(BinaryOp::Add, a, b)
}

/// Output extent of a sliding window.
fn out_extent(inp: i64, k: i64, stride: i64, pad: i64, dil: i64) -> i64 {
    (inp + 2 * pad - dil * (k - 1) - 1) / stride + 1
}

/// `src` itself without padding, else a padding stage over it.
fn padded(b: &mut DagBuilder, src: usize, hd: usize, wd: usize, pad: i64, fill: f64) -> usize {
    if pad > 0 {
        pad_stage(b, src, "pad", hd, wd, pad, fill)
    } else {
        src
    }
}

/// `pad[...] = select(in range, src[... - pad], fill)` on the two spatial dims `hd`, `wd`.
fn pad_stage(
    b: &mut DagBuilder,
    src: usize,
    name: &str,
    hd: usize,
    wd: usize,
    pad: i64,
    fill: f64,
) -> usize {
    let mut shape = b.shape(src).to_vec();
    let (h, w) = (shape[hd], shape[wd]);
    shape[hd] += 2 * pad;
    shape[wd] += 2 * pad;
    b.compute(name, &shape, |ax| {
        let mut idx = ax.to_vec();
        idx[hd] = ax[hd].add(&c(-pad));
        idx[wd] = ax[wd].add(&c(-pad));
        let cond = Cond::And(
            Box::new(Cond::in_range(idx[hd].clone(), 0, h)),
            Box::new(Cond::in_range(idx[wd].clone(), 0, w)),
        );
        Expr::select(cond, ld(src, &idx), Expr::Const(fill))
    })
}

/// Adds `bias[f]` (broadcast over dim `fd`) and/or relu as one elementwise epilogue stage.
fn epilogue(b: &mut DagBuilder, src: usize, fd: usize, bias: bool, relu: bool) -> usize {
    if !bias && !relu {
        return src;
    }
    let shape = b.shape(src).to_vec();
    let bias_t = bias.then(|| b.placeholder("bias", &[shape[fd]]));
    let name = match (bias, relu) {
        (true, true) => "bias_relu",
        (true, false) => "bias_add",
        _ => "relu",
    };
    b.compute(name, &shape, |ax| {
        let mut e = ld(src, ax);
        if let Some(bt) = bias_t {
            e = add(e, ld(bt, &[ax[fd].clone()]));
        }
        if relu {
            e = Expr::unary(UnaryOp::Relu, e);
        }
        e
    })
}

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

/// Parameters of a 2-D convolution or pooling window.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub kh: i64,
    pub kw: i64,
    pub stride: i64,
    pub pad: i64,
    pub dilation: i64,
}

impl Window {
    /// A `k x k` window, undilated.
    pub fn square(k: i64, stride: i64, pad: i64) -> Window {
        Window {
            kh: k,
            kw: k,
            stride,
            pad,
            dilation: 1,
        }
    }

    /// Output height and width for an `h x w` input; an empty output is an error.
    fn output(&self, h: i64, w: i64) -> Result<(i64, i64), DagError> {
        let (oh, ow) = (
            out_extent(h, self.kh, self.stride, self.pad, self.dilation),
            out_extent(w, self.kw, self.stride, self.pad, self.dilation),
        );
        check_window(oh, ow)?;
        Ok((oh, ow))
    }
}

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

fn check_window(oh: i64, ow: i64) -> Result<(), DagError> {
    if oh <= 0 || ow <= 0 {
        return Err(DagError::Invalid {
            stage: "window".into(),
            msg: format!("the window leaves an empty output ({oh}x{ow})"),
        });
    }
    Ok(())
}

/// One parameter of a library operator.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    pub name: &'static str,
    /// `None`: required.
    pub default: Option<i64>,
    pub doc: &'static str,
}

const fn req(name: &'static str, doc: &'static str) -> Param {
    Param {
        name,
        default: None,
        doc,
    }
}

const fn opt(name: &'static str, default: i64, doc: &'static str) -> Param {
    Param {
        name,
        default: Some(default),
        doc,
    }
}

type Build = fn(&BTreeMap<&'static str, i64>) -> Result<ComputeDag, DagError>;

/// A library operator: its name, parameters and builder.
pub struct OpDef {
    pub name: &'static str,
    pub doc: &'static str,
    pub params: &'static [Param],
    build: Build,
}

fn win(p: &BTreeMap<&'static str, i64>) -> Window {
    Window {
        kh: p["kh"],
        kw: p["kw"],
        stride: p["stride"],
        pad: p["pad"],
        dilation: p["dilation"],
    }
}

const CONV_WIN: [Param; 5] = [
    opt("kh", 3, "kernel height"),
    opt("kw", 3, "kernel width"),
    opt("stride", 1, "stride (both dims)"),
    opt("pad", 0, "zero padding (both dims)"),
    opt("dilation", 1, "dilation (both dims)"),
];

/// Every library operator.
pub const OPS: &[OpDef] = &[
    OpDef {
        name: "matmul",
        doc: "C[m,n] = sum_k A[m,k] * B[k,n]",
        params: &[
            req("m", "rows of A and C"),
            req("n", "columns of B and C"),
            req("k", "reduction length"),
        ],
        build: |p| matmul(p["m"], p["n"], p["k"]),
    },
    OpDef {
        name: "batch_matmul",
        doc: "C[b,m,n] = sum_k A[b,m,k] * B[b,k,n]",
        params: &[
            req("b", "batch"),
            req("m", "rows"),
            req("n", "columns"),
            req("k", "reduction length"),
        ],
        build: |p| batch_matmul(p["b"], p["m"], p["n"], p["k"]),
    },
    OpDef {
        name: "dense",
        doc: "out[m,n] = relu?(sum_k data[m,k] * weight[n,k] + bias?[n])",
        params: &[
            req("m", "batch rows"),
            req("n", "output features"),
            req("k", "input features"),
            opt("bias", 1, "add a bias (0/1)"),
            opt("relu", 1, "apply relu (0/1)"),
        ],
        build: |p| dense(p["m"], p["n"], p["k"], p["bias"] != 0, p["relu"] != 0),
    },
    OpDef {
        name: "conv2d_nchw",
        doc: "2-D convolution, data NCHW, kernel FCHW (KCRS), groups = 1",
        params: &[
            req("n", "batch"),
            req("c", "input channels"),
            req("h", "input height"),
            req("w", "input width"),
            req("f", "output channels"),
            CONV_WIN[0],
            CONV_WIN[1],
            CONV_WIN[2],
            CONV_WIN[3],
            CONV_WIN[4],
            opt("bias", 0, "add a bias (0/1)"),
            opt("relu", 0, "apply relu (0/1)"),
        ],
        build: |p| {
            conv2d_nchw(
                p["n"],
                p["c"],
                p["h"],
                p["w"],
                p["f"],
                win(p),
                p["bias"] != 0,
                p["relu"] != 0,
            )
        },
    },
    OpDef {
        name: "conv2d_nhwc",
        doc: "2-D convolution, data NHWC, kernel HWIO, groups = 1",
        params: &[
            req("n", "batch"),
            req("h", "input height"),
            req("w", "input width"),
            req("c", "input channels"),
            req("f", "output channels"),
            CONV_WIN[0],
            CONV_WIN[1],
            CONV_WIN[2],
            CONV_WIN[3],
            CONV_WIN[4],
            opt("bias", 0, "add a bias (0/1)"),
            opt("relu", 0, "apply relu (0/1)"),
        ],
        build: |p| {
            conv2d_nhwc(
                p["n"],
                p["h"],
                p["w"],
                p["c"],
                p["f"],
                win(p),
                p["bias"] != 0,
                p["relu"] != 0,
            )
        },
    },
    OpDef {
        name: "depthwise_conv2d_nchw",
        doc: "depthwise 2-D convolution, NCHW, channel multiplier 1",
        params: &[
            req("n", "batch"),
            req("c", "channels"),
            req("h", "input height"),
            req("w", "input width"),
            CONV_WIN[0],
            CONV_WIN[1],
            CONV_WIN[2],
            CONV_WIN[3],
            CONV_WIN[4],
            opt("bias", 0, "add a bias (0/1)"),
            opt("relu", 0, "apply relu (0/1)"),
        ],
        build: |p| {
            depthwise_conv2d_nchw(
                p["n"],
                p["c"],
                p["h"],
                p["w"],
                win(p),
                p["bias"] != 0,
                p["relu"] != 0,
            )
        },
    },
    OpDef {
        name: "max_pool2d",
        doc: "max pooling, NCHW",
        params: &[
            req("n", "batch"),
            req("c", "channels"),
            req("h", "input height"),
            req("w", "input width"),
            opt("kh", 2, "window height"),
            opt("kw", 2, "window width"),
            opt("stride", 2, "stride"),
            opt("pad", 0, "padding"),
            opt("dilation", 1, "dilation"),
        ],
        build: |p| pool2d(PoolKind::Max, p["n"], p["c"], p["h"], p["w"], win(p)),
    },
    OpDef {
        name: "avg_pool2d",
        doc: "average pooling, NCHW, padding counted",
        params: &[
            req("n", "batch"),
            req("c", "channels"),
            req("h", "input height"),
            req("w", "input width"),
            opt("kh", 2, "window height"),
            opt("kw", 2, "window width"),
            opt("stride", 2, "stride"),
            opt("pad", 0, "padding"),
            opt("dilation", 1, "dilation"),
        ],
        build: |p| pool2d(PoolKind::Avg, p["n"], p["c"], p["h"], p["w"], win(p)),
    },
    OpDef {
        name: "softmax",
        doc: "row softmax of an m x n matrix (max, exp, sum, divide)",
        params: &[req("m", "rows"), req("n", "row length")],
        build: |p| softmax(p["m"], p["n"]),
    },
    OpDef {
        name: "elementwise",
        doc: "elementwise chain relu(tanh(a + b) * a) over m x n",
        params: &[req("m", "rows"), req("n", "columns")],
        build: |p| elementwise(p["m"], p["n"]),
    },
];

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum OpSpecError {
    #[error("unknown operator '{0}' (known: {1})")]
    UnknownOp(String, String),
    #[error("operator spec '{spec}': {msg}")]
    Syntax { spec: String, msg: String },
    #[error("{op}: {msg}")]
    Param { op: String, msg: String },
    #[error(transparent)]
    Dag(#[from] DagError),
}

/// Largest value of one parameter. The size of the whole operator is bounded where its DAG is
/// built (`ir::dag::MAX_POINTS`), the one limit the text form shares.
pub const MAX_PARAM: i64 = 1 << 20;

pub fn find_op(name: &str) -> Option<&'static OpDef> {
    OPS.iter().find(|o| o.name == name)
}

/// The input of a library operator that is a constant at inference (a layer's weight), by
/// operator name: the one the command line marks layout-free by default, so that the kernel
/// reads it packed in the order its loops walk it (see `Task::with_layout_free`). `None` for
/// operators whose inputs are all activations (batch_matmul's B is attention's keys/values).
pub fn constant_weight(op: &str) -> Option<&'static str> {
    match op {
        "matmul" => Some("B"),
        "dense" => Some("weight"),
        "conv2d_nchw" | "conv2d_nhwc" | "depthwise_conv2d_nchw" => Some("kernel"),
        _ => None,
    }
}

/// A library operator with its parameters, e.g. `matmul(512, 512, 512)` or
/// `conv2d_nchw(n=1, c=64, h=56, w=56, f=64, pad=1)`: positional values fill parameters in order,
/// named ones may follow; the rest take their defaults.
pub fn parse_op_spec(
    spec: &str,
) -> Result<(&'static OpDef, BTreeMap<&'static str, i64>), OpSpecError> {
    let syn = |msg: &str| OpSpecError::Syntax {
        spec: spec.into(),
        msg: msg.into(),
    };
    let s = spec.trim();
    let (name, args) = match s.find('(') {
        Some(p) => {
            let rest = s[p + 1..].trim_end();
            let inner = rest
                .strip_suffix(')')
                .ok_or_else(|| syn("expected ')' at the end"))?;
            (s[..p].trim(), inner)
        }
        None => (s, ""),
    };
    let op = find_op(name).ok_or_else(|| {
        OpSpecError::UnknownOp(
            name.into(),
            OPS.iter().map(|o| o.name).collect::<Vec<_>>().join(", "),
        )
    })?;
    let perr = |msg: String| OpSpecError::Param {
        op: op.name.into(),
        msg,
    };
    let mut vals: BTreeMap<&'static str, i64> = BTreeMap::new();
    let mut named_seen = false;
    // `name()` has no arguments; otherwise every comma separates two of them (a stray comma,
    // as in `matmul(64,64,64,)`, is a typo, not an argument to skip).
    let args: Vec<&str> = if args.trim().is_empty() {
        vec![]
    } else {
        args.split(',').map(str::trim).collect()
    };
    if let Some(i) = args.iter().position(|a| a.is_empty()) {
        return Err(syn(&format!("argument {} is empty (a stray ',')", i + 1)));
    }
    for (pos, arg) in args.into_iter().enumerate() {
        let (pname, v) = match arg.split_once('=') {
            Some((k, v)) => {
                named_seen = true;
                let p = op
                    .params
                    .iter()
                    .find(|p| p.name == k.trim())
                    .ok_or_else(|| {
                        perr(format!(
                            "unknown parameter '{}' (parameters: {})",
                            k.trim(),
                            op.params
                                .iter()
                                .map(|p| p.name)
                                .collect::<Vec<_>>()
                                .join(", ")
                        ))
                    })?;
                (p.name, v.trim())
            }
            None => {
                if named_seen {
                    return Err(syn("a positional value cannot follow a named one"));
                }
                let p = op
                    .params
                    .get(pos)
                    .ok_or_else(|| perr(format!("takes at most {} parameters", op.params.len())))?;
                (p.name, arg)
            }
        };
        let v: i64 = v
            .parse()
            .map_err(|_| perr(format!("parameter '{pname}' must be an integer, got '{v}'")))?;
        if vals.insert(pname, v).is_some() {
            return Err(perr(format!("parameter '{pname}' given twice")));
        }
    }
    for p in op.params {
        match (vals.get(p.name), p.default) {
            (None, Some(d)) => {
                vals.insert(p.name, d);
            }
            (None, None) => {
                return Err(perr(format!("missing parameter '{}' ({})", p.name, p.doc)));
            }
            _ => {}
        }
    }
    for (k, &v) in &vals {
        let min = if matches!(*k, "pad" | "bias" | "relu") {
            0
        } else {
            1
        };
        if v < min || v > MAX_PARAM {
            return Err(perr(format!(
                "parameter '{k}' = {v} is out of range [{min}, {MAX_PARAM}]"
            )));
        }
    }
    Ok((op, vals))
}

impl OpDef {
    pub fn build(&self, params: &BTreeMap<&'static str, i64>) -> Result<ComputeDag, DagError> {
        (self.build)(params)
    }
}

/// Parses a spec and builds its DAG.
pub fn build_op(spec: &str) -> Result<ComputeDag, OpSpecError> {
    let (op, params) = parse_op_spec(spec)?;
    Ok(op.build(&params)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn constant_weights_are_inputs_of_their_operators() {
        for (spec, w) in [
            ("matmul(4,4,4)", "B"),
            ("dense(m=1,n=4,k=4)", "weight"),
            ("conv2d_nchw(n=1,c=2,h=5,w=5,f=2)", "kernel"),
            ("conv2d_nhwc(n=1,h=5,w=5,c=2,f=2)", "kernel"),
            ("depthwise_conv2d_nchw(n=1,c=2,h=5,w=5)", "kernel"),
        ] {
            let (op, _) = parse_op_spec(spec).unwrap();
            assert_eq!(constant_weight(op.name), Some(w));
            let dag = build_op(spec).unwrap();
            assert!(dag.placeholders().iter().any(|&p| dag.stages[p].name == w));
        }
        assert_eq!(constant_weight("softmax"), None);
    }

    #[test]
    fn malformed_specs_are_refused_with_the_reason() {
        for (spec, want) in [
            ("matmul(64,64,64", "expected ')'"),
            ("matmul(64,64,64,)", "argument 4 is empty"),
            ("matmul(,64,64,64)", "argument 1 is empty"),
            ("matmul(64,,64)", "argument 2 is empty"),
            ("matmul(64,64)", "missing parameter 'k'"),
            ("matmul(64,64,64,64)", "at most 3"),
            ("matmul(64,64,x)", "must be an integer"),
            ("matmul(0,64,64)", "out of range"),
            ("matmul(1048577,1,1)", "out of range"),
            ("nosuch(1)", "unknown operator"),
        ] {
            let e = build_op(spec).unwrap_err().to_string();
            assert!(e.contains(want), "{spec}: {e}");
        }
        assert!(build_op("matmul(64, 64, 64)").is_ok());
        assert!(build_op(" matmul( m=64 ,n=64, k=64 ) ").is_ok());
    }

    /// Each parameter within its range, the whole operator past the one size limit of every
    /// DAG (the text form's too): refused when the DAG is built.
    #[test]
    fn an_operator_past_the_size_limit_is_refused() {
        let e = build_op("matmul(1048576,1048576,1048576)")
            .unwrap_err()
            .to_string();
        assert!(e.contains("2^40"), "{e}");
        let text = crate::text::parse(
            "C[i, j] += A[i, k] * B[k, j] where i < 1048576, j < 1048576, k < 1048576;",
        )
        .unwrap_err()
        .to_string();
        assert!(text.contains("2^40"), "{text}");
        assert!(build_op("matmul(1024,1024,1024)").is_ok());
    }

    /// Pieces op specs are made of, and some that break them.
    fn spec_soup() -> impl Strategy<Value = String> {
        let tok = prop::sample::select(vec![
            "matmul",
            "conv2d_nchw",
            "softmax",
            "dense",
            "max_pool2d",
            "(",
            ")",
            ",",
            "=",
            " ",
            "m",
            "n",
            "k",
            "pad",
            "stride",
            "bias",
            "0",
            "1",
            "3",
            "64",
            "-1",
            "1048576",
            "1048577",
            "99999999999999999999",
            "layout_free",
            "B",
            "+",
            "é",
            "\u{0}",
        ]);
        prop::collection::vec(tok, 0..24).prop_map(|t| t.concat())
    }

    // Bounded here (256 cases each); `PROPTEST_CASES=100000 cargo test -p tunehub-engine
    // op_spec` runs a long fuzz.
    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        /// Any text: no panic; a refusal says what was wrong; an accepted spec builds a DAG
        /// within the size limit.
        #[test]
        fn op_spec_parser_never_panics(s in ".{0,80}") {
            check_spec(&s)?;
        }

        #[test]
        fn op_spec_token_soup_never_panics(s in spec_soup()) {
            check_spec(&s)?;
        }
    }

    fn check_spec(s: &str) -> Result<(), TestCaseError> {
        match build_op(s) {
            Ok(dag) => {
                for st in &dag.stages {
                    prop_assert!(crate::ir::dag::points(&st.axis_extents()).is_some());
                }
                // Accepted specs are exactly the well-formed ones: a closing parenthesis, no
                // empty argument.
                let t = s.trim();
                if t.contains('(') {
                    prop_assert!(t.ends_with(')'), "{s}");
                    prop_assert!(!t.contains(",)") && !t.contains("(,") && !t.contains(",,"));
                }
            }
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(!msg.trim().is_empty(), "{s:?}: empty error");
            }
        }
        Ok(())
    }
}
