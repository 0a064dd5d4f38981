//! The operator library: common tensor operators, each a function of its parameters that
//! builds a compute DAG, a registry of them, and [`OpSpec`], one operator with its parameters
//! and options as the text `conv2d_nchw(n=1, c=64, h=56, w=56, f=64, pad=1)` names it.
//!
//! # Layout
//!
//! - `mod.rs`: the registry ([`OPS`], [`OpDef`], [`find_op`], [`constant_weight`]) and
//!   [`build_op`], the DAG of a spec.
//! - `builder.rs`: [`DagBuilder`], how every operator writes its DAG.
//! - `window.rs`: the sliding [`Window`] of convolutions and pools.
//! - the operators by family, re-exported here: `matmul.rs` ([`matmul()`], [`batch_matmul`],
//!   [`dense`]), `conv.rs` ([`conv2d_nchw`], [`conv2d_nhwc`], [`depthwise_conv2d_nchw`],
//!   [`depthwise_conv2d_nhwc`]),
//!   `pool.rs` ([`pool2d`], [`pool2d_nhwc`]), `softmax.rs` ([`softmax()`]), `elementwise.rs`
//!   ([`elementwise()`]).
//! - [`syntax`]: the one tokenizer of `name(arg, key=value, ...)`, shared with shape ranges.
//! - [`spec`]: [`OpSpec`], parsed once, printed canonically, built into a DAG or a task.
//! - [`described`]: descriptions stored before `OpSpec` (the sugar, no default), read.
//! - [`dtype`]: `dtype=`, the integer forms of the matrix products and convolutions (summed)
//!   and of the max pools (compared).

mod builder;
mod conv;
pub mod described;
pub mod dtype;
mod elementwise;
mod matmul;
mod pool;
mod softmax;
pub mod spec;
pub mod syntax;
mod window;

pub use builder::DagBuilder;
pub use conv::{conv2d_nchw, conv2d_nhwc, depthwise_conv2d_nchw, depthwise_conv2d_nhwc};
pub use described::split_layout_free;
pub use dtype::OpDType;
pub use elementwise::elementwise;
pub use matmul::{batch_matmul, dense, matmul};
pub use pool::{PoolKind, pool2d, pool2d_nhwc};
pub use softmax::softmax;
pub use spec::{LayoutFree, OpSpec, OpSpecError};
pub use window::Window;

use crate::ir::{ComputeDag, DagError};
use std::collections::BTreeMap;

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

/// One input (placeholder) of a library operator.
#[derive(Debug, Clone, Copy)]
pub struct Input {
    pub name: &'static str,
    /// The 0/1 parameter the input exists with (an optional bias); `None`: always there.
    pub when: Option<&'static str>,
}

const fn input(name: &'static str) -> Input {
    Input { name, when: None }
}

const fn input_if(name: &'static str, param: &'static str) -> Input {
    Input {
        name,
        when: Some(param),
    }
}

/// A library operator: its name, parameters, inputs and builder.
pub struct OpDef {
    pub name: &'static str,
    pub doc: &'static str,
    pub params: &'static [Param],
    /// Its inputs in the order its DAG declares them: an op spec names its layout-free inputs
    /// among these without building the DAG.
    pub inputs: &'static [Input],
    /// The input that is a constant at inference (a layer's weight): the one packed by default
    /// (see [`constant_weight`]).
    pub constant_weight: Option<&'static str>,
    /// Its integer forms (`dtype=`, `out_dtype=`: see [`dtype`]), if it has them.
    pub integer: Option<IntegerForm>,
    build: Build,
}

/// An operator's integer forms (see [`dtype`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntegerForm {
    /// 8-bit data and weight summed in i32 (`dtype=u8i8|i8i8`), requantizable: the scales
    /// run along the output's axis `channel_axis`, the weight's output channels.
    Sum { channel_axis: usize },
    /// 8-bit data compared, never summed (`dtype=u8|i8`, a max pool): every stage keeps the
    /// data's type.
    Compare,
}

const fn channels(channel_axis: usize) -> Option<IntegerForm> {
    Some(IntegerForm::Sum { channel_axis })
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

const POOL_WIN: [Param; 5] = [
    opt("kh", 2, "window height"),
    opt("kw", 2, "window width"),
    opt("stride", 2, "stride"),
    opt("pad", 0, "padding"),
    opt("dilation", 1, "dilation"),
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
        inputs: &[input("A"), input("B")],
        constant_weight: Some("B"),
        integer: channels(1),
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
        inputs: &[input("A"), input("B")],
        constant_weight: None,
        integer: channels(2),
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
        inputs: &[input("data"), input("weight"), input_if("bias", "bias")],
        constant_weight: Some("weight"),
        integer: channels(1),
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
        inputs: &[input("data"), input("kernel"), input_if("bias", "bias")],
        constant_weight: Some("kernel"),
        integer: channels(1),
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
        inputs: &[input("data"), input("kernel"), input_if("bias", "bias")],
        constant_weight: Some("kernel"),
        integer: channels(3),
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
        inputs: &[input("data"), input("kernel"), input_if("bias", "bias")],
        constant_weight: Some("kernel"),
        integer: channels(1),
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
        name: "depthwise_conv2d_nhwc",
        doc: "depthwise 2-D convolution, data NHWC, kernel [kh,kw,c,1], channel multiplier 1",
        params: &[
            req("n", "batch"),
            req("h", "input height"),
            req("w", "input width"),
            req("c", "channels"),
            CONV_WIN[0],
            CONV_WIN[1],
            CONV_WIN[2],
            CONV_WIN[3],
            CONV_WIN[4],
            opt("bias", 0, "add a bias (0/1)"),
            opt("relu", 0, "apply relu (0/1)"),
        ],
        inputs: &[input("data"), input("kernel"), input_if("bias", "bias")],
        constant_weight: Some("kernel"),
        integer: channels(3),
        build: |p| {
            depthwise_conv2d_nhwc(
                p["n"],
                p["h"],
                p["w"],
                p["c"],
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
            POOL_WIN[0],
            POOL_WIN[1],
            POOL_WIN[2],
            POOL_WIN[3],
            POOL_WIN[4],
        ],
        inputs: &[input("data")],
        constant_weight: None,
        integer: Some(IntegerForm::Compare),
        build: |p| pool2d(PoolKind::Max, p["n"], p["c"], p["h"], p["w"], win(p)),
    },
    OpDef {
        name: "max_pool2d_nhwc",
        doc: "max pooling, NHWC",
        params: &[
            req("n", "batch"),
            req("h", "input height"),
            req("w", "input width"),
            req("c", "channels"),
            POOL_WIN[0],
            POOL_WIN[1],
            POOL_WIN[2],
            POOL_WIN[3],
            POOL_WIN[4],
        ],
        inputs: &[input("data")],
        constant_weight: None,
        integer: Some(IntegerForm::Compare),
        build: |p| pool2d_nhwc(PoolKind::Max, p["n"], p["h"], p["w"], p["c"], win(p)),
    },
    OpDef {
        name: "avg_pool2d",
        doc: "average pooling, NCHW, padding counted",
        params: &[
            req("n", "batch"),
            req("c", "channels"),
            req("h", "input height"),
            req("w", "input width"),
            POOL_WIN[0],
            POOL_WIN[1],
            POOL_WIN[2],
            POOL_WIN[3],
            POOL_WIN[4],
        ],
        inputs: &[input("data")],
        constant_weight: None,
        integer: None,
        build: |p| pool2d(PoolKind::Avg, p["n"], p["c"], p["h"], p["w"], win(p)),
    },
    OpDef {
        name: "softmax",
        doc: "row softmax of an m x n matrix (max, exp, sum, divide)",
        params: &[req("m", "rows"), req("n", "row length")],
        inputs: &[input("x")],
        constant_weight: None,
        integer: None,
        build: |p| softmax(p["m"], p["n"]),
    },
    OpDef {
        name: "elementwise",
        doc: "elementwise chain relu(tanh(a + b) * a) over m x n",
        params: &[req("m", "rows"), req("n", "columns")],
        inputs: &[input("a"), input("b")],
        constant_weight: None,
        integer: None,
        build: |p| elementwise(p["m"], p["n"]),
    },
];

/// Largest value of one parameter. The size of the whole operator is bounded where its DAG is
/// built (`ir::dag::MAX_POINTS`), the one limit the text form shares.
pub const MAX_PARAM: i64 = 1 << 20;

pub fn find_op(name: &str) -> Option<&'static OpDef> {
    OPS.iter().find(|o| o.name == name)
}

/// The input of a library operator that is a constant at inference (a layer's weight), by
/// operator name: the one an op spec packs by default ([`LayoutFree::Default`]), so that the
/// kernel reads it in the order its loops walk it (see `Task::with_layout_free`). `None` for
/// operators whose inputs are all activations (batch_matmul's B is attention's keys/values).
pub fn constant_weight(op: &str) -> Option<&'static str> {
    find_op(op).and_then(|o| o.constant_weight)
}

impl OpDef {
    pub fn build(&self, params: &BTreeMap<&'static str, i64>) -> Result<ComputeDag, DagError> {
        (self.build)(params)
    }

    /// The names of its inputs with these parameters, in the DAG's order.
    pub fn inputs(&self, params: &BTreeMap<&'static str, i64>) -> Vec<&'static str> {
        self.inputs
            .iter()
            .filter(|i| {
                i.when
                    .is_none_or(|p| params.get(p).is_some_and(|&v| v != 0))
            })
            .map(|i| i.name)
            .collect()
    }

    /// `m, n, k`: its parameters' names, for messages.
    pub(crate) fn param_names(&self) -> String {
        self.params
            .iter()
            .map(|p| p.name)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The DAG of an op spec (its layout options, which do not change the DAG, aside): for callers
/// that want the computation only, through the one parser ([`OpSpec::parse`]).
pub fn build_op(spec: &str) -> Result<ComputeDag, OpSpecError> {
    Ok(OpSpec::parse(spec)?.dag()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the registry says of each operator's inputs is what its DAG declares, with and
    /// without the optional bias; the constant weight is one of them.
    #[test]
    fn declared_inputs_are_the_dags_placeholders() {
        for op in OPS {
            let spec = OpSpec::parse(&small_spec(op)).unwrap();
            for bias in [0, 1] {
                let mut params = spec.params().clone();
                if params.contains_key("bias") {
                    params.insert("bias", bias);
                }
                let dag = op.build(&params).unwrap();
                let names: Vec<&str> = dag
                    .placeholders()
                    .iter()
                    .map(|&p| dag.stages[p].name.as_str())
                    .collect();
                assert_eq!(op.inputs(&params), names, "{} bias={bias}", op.name);
                if let Some(w) = op.constant_weight {
                    assert!(names.contains(&w), "{}", op.name);
                }
            }
        }
    }

    #[test]
    fn constant_weights_are_inputs_of_their_operators() {
        for (spec, w) in [
            ("matmul(4,4,4)", "B"),
            ("dense(m=1,n=4,k=4)", "weight"),
            ("conv2d_nchw(n=1,c=2,h=5,w=5,f=2)", "kernel"),
            ("conv2d_nhwc(n=1,h=5,w=5,c=2,f=2)", "kernel"),
            ("depthwise_conv2d_nchw(n=1,c=2,h=5,w=5)", "kernel"),
        ] {
            let s = OpSpec::parse(spec).unwrap();
            assert_eq!(constant_weight(s.name()), Some(w));
            let dag = s.dag().unwrap();
            assert!(dag.placeholders().iter().any(|&p| dag.stages[p].name == w));
        }
        for op in [
            "batch_matmul",
            "max_pool2d",
            "max_pool2d_nhwc",
            "avg_pool2d",
            "softmax",
            "elementwise",
        ] {
            assert_eq!(constant_weight(op), None, "{op}");
        }
        assert_eq!(constant_weight("nosuch"), None);
    }

    /// The DAG of a spec is `OpSpec`'s, its layout aside.
    #[test]
    fn build_op_is_the_spec_dag() {
        for spec in ["softmax(4,8)", "matmul(8,8,8,layout_free=none)"] {
            assert_eq!(
                build_op(spec).unwrap().workload_key(),
                OpSpec::parse(spec).unwrap().dag().unwrap().workload_key()
            );
        }
        assert!(build_op("matmul(8,8)").is_err());
    }

    /// A small valid spec of `op`: every required parameter 4 (a window of 3 fits).
    pub(crate) fn small_spec(op: &OpDef) -> String {
        let args: Vec<String> = op
            .params
            .iter()
            .filter(|p| p.default.is_none())
            .map(|p| format!("{}=4", p.name))
            .collect();
        format!("{}({})", op.name, args.join(","))
    }
}
