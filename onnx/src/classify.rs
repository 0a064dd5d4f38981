//! What each ONNX operator is to the extraction: an anchor (a task's main computation), an
//! elementwise operator (fused into an anchor as its epilogue, or a task of its own), layout
//! glue (no task), or unsupported (skipped, with the reason).

use crate::graph::{Graph, Node};

#[derive(Debug, Clone, PartialEq)]
pub enum Class {
    Anchor,
    Elementwise,
    /// Moves or reinterprets data, or computes on constants only: no task.
    Glue,
    Unsupported(String),
}

/// Anchors: reductions and windows that set a task's loop nest.
pub const ANCHORS: &[&str] = &[
    "Conv",
    "Gemm",
    "MatMul",
    // onnxruntime's dynamic quantization (`integer`).
    "ConvInteger",
    "MatMulInteger",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "Softmax",
    "LayerNormalization",
    "ReduceMean",
];

/// Elementwise operators (with numpy broadcasting of constant or same-shape operands).
pub const ELEMENTWISE: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Relu",
    "Clip",
    "Sigmoid",
    "Tanh",
    "Erf",
    "Gelu",
    "Sqrt",
    "Exp",
    "Neg",
    "Abs",
    "Pow",
    "LeakyRelu",
    "BatchNormalization",
];

/// Layout glue: no arithmetic, so no task (the end-to-end estimate leaves their copies out).
pub const GLUE: &[&str] = &[
    "Reshape",
    "Flatten",
    "Transpose",
    "Concat",
    "Identity",
    "Dropout",
    "Squeeze",
    "Unsqueeze",
    "Shape",
    "Constant",
    "Gather",
    "Slice",
    "Split",
    "Expand",
    "Cast",
    "Pad",
    // Conversions between a QDQ model's quantized tensors and f32 (see `quantized`): taken
    // into a quantized anchor's task where one reads or writes them.
    "QuantizeLinear",
    "DequantizeLinear",
    // Its scale and zero point from the tensor's range, then as `QuantizeLinear`.
    "DynamicQuantizeLinear",
];

pub fn classify(g: &Graph, n: &Node) -> Class {
    // Everything computed from constants alone is folded: no task.
    if !n.outputs.is_empty() && n.outputs.iter().all(|o| o.is_empty() || g.is_constant(o)) {
        return Class::Glue;
    }
    let op = n.op.as_str();
    if GLUE.contains(&op) || on_scalars(g, n) {
        return Class::Glue;
    }
    let check = if ANCHORS.contains(&op) {
        anchor_limits(g, n).map(|()| Class::Anchor)
    } else if ELEMENTWISE.contains(&op) {
        elementwise_limits(g, n).map(|()| Class::Elementwise)
    } else {
        Err(format!(
            "not among the supported operators ({}, {}; glue: {})",
            ANCHORS.join(", "),
            ELEMENTWISE.join(", "),
            GLUE.join(", ")
        ))
    };
    let class = check.unwrap_or_else(Class::Unsupported);
    // A computing node past where shape inference stopped (an operator tract does not know, a
    // broken node) has no shape to write a task with: listed with the reason, never dropped.
    if matches!(class, Class::Anchor | Class::Elementwise)
        && let Some(o) = n.outputs.first().filter(|o| !o.is_empty())
        && g.shape(o).is_none()
    {
        let why = g.inference_error.as_deref().map_or(String::new(), |e| {
            format!(" (shape inference stopped: {e})")
        });
        return Class::Unsupported(format!("the shape of its output '{o}' is not known{why}"));
    }
    class
}

/// Whether `n` is arithmetic on single values computed at run time (a dynamically quantized
/// model's data scale times its weight's): one step of glue, not a task to tune.
pub fn on_scalars(g: &Graph, n: &Node) -> bool {
    let one = |t: &str| g.shape(t).is_some_and(|s| s.iter().product::<i64>() == 1);
    matches!(n.op.as_str(), "Add" | "Sub" | "Mul" | "Div")
        && n.outputs.len() == 1
        && one(&n.outputs[0])
        && n.inputs.len() == 2
        && n.inputs.iter().all(|t| one(t))
}

fn anchor_limits(g: &Graph, n: &Node) -> Result<(), String> {
    let x = n.input(0).and_then(|t| g.shape(t));
    if crate::integer::is_integer_op(&n.op) {
        crate::integer::integer_anchor(g, n)?;
    }
    match crate::integer::float_op(&n.op) {
        "Conv" | "MaxPool" | "AveragePool" | "GlobalAveragePool" => {
            if x.is_some_and(|s| s.len() != 4) {
                return Err("only 2-D windows (NCHW inputs) are supported".into());
            }
            if n.string("auto_pad")
                .is_some_and(|p| p != "NOTSET" && !p.is_empty())
            {
                return Err("auto_pad is not supported: export with explicit pads".into());
            }
            if n.op == "MaxPool" && n.outputs.iter().filter(|o| !o.is_empty()).count() > 1 {
                return Err("MaxPool's indices output is not supported".into());
            }
        }
        "MatMul" => {
            let b = n.input(1).and_then(|t| g.shape(t));
            if x.is_some_and(|s| s.len() < 2) || b.is_some_and(|s| s.len() < 2) {
                return Err("1-D MatMul operands are not supported".into());
            }
        }
        "Softmax" | "LayerNormalization" => {
            let axis = n.int("axis").unwrap_or(-1);
            if let Some(s) = x {
                let r = s.len() as i64;
                if s.len() < 2 {
                    return Err("a rank-1 input is not supported".into());
                }
                if n.op == "LayerNormalization" && axis != -1 && axis != r - 1 {
                    return Err("only normalization over the last axis is supported".into());
                }
            }
        }
        "ReduceMean" => {
            if let Some(s) = x
                && reduced_axes(g, n, s.len()).is_none()
            {
                return Err(
                    "only a mean over constant axes, some but not all of them, is supported".into(),
                );
            }
        }
        _ => {}
    }
    Ok(())
}

/// The axes a ReduceMean averages over (constant, some but not all of them; the last axis, a
/// global pool's `[2, 3]`, a mean over the sequence `[1]`), sorted.
pub fn reduced_axes(g: &Graph, n: &Node, rank: usize) -> Option<Vec<usize>> {
    let axes = match n.ints("axes") {
        Some(a) => a,
        None => match n.input(1) {
            Some(t) => g
                .value(t)
                .and_then(|_| g.scalar(t).map(|a| vec![a as i64]).or_else(|| g.ints(t)))?,
            None => return None,
        },
    };
    let r = rank as i64;
    let mut a: Vec<i64> = axes
        .iter()
        .map(|&a| if a < 0 { a + r } else { a })
        .collect();
    a.sort_unstable();
    a.dedup();
    let ok = !a.is_empty() && a.len() < rank && a.iter().all(|&x| (0..r).contains(&x));
    ok.then(|| a.into_iter().map(|x| x as usize).collect())
}

fn elementwise_limits(g: &Graph, n: &Node) -> Result<(), String> {
    match n.op.as_str() {
        "Pow" => match n.input(1).and_then(|t| g.scalar(t)) {
            Some(p) if [0.5, 1.0, 2.0, 3.0].contains(&p) => Ok(()),
            _ => Err("only a constant exponent of 0.5, 1, 2 or 3 is supported".into()),
        },
        "Gelu" => match n.string("approximate").as_deref() {
            None | Some("none") | Some("tanh") => Ok(()),
            Some(a) => Err(format!("approximate='{a}' is not supported")),
        },
        "Clip" => {
            for i in [1, 2] {
                if let Some(t) = n.input(i)
                    && g.scalar(t).is_none()
                {
                    return Err("only constant bounds are supported".into());
                }
            }
            Ok(())
        }
        "BatchNormalization" => {
            if n.outputs.iter().filter(|o| !o.is_empty()).count() > 1 {
                return Err("training mode (running statistics outputs) is not supported".into());
            }
            Ok(())
        }
        _ => Ok(()),
    }
}
