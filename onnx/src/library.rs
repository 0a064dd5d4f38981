//! A group as an operator of the engine's library when one fits exactly (a convolution with
//! its bias or folded batch norm and relu, a dense layer, a plain matrix product, a pool, a row
//! softmax): it then shares its records with the same operator typed by hand. Anything else is
//! written in the text form (`workload`).
//!
//! The spec's layout-free inputs are always explicit, the model's constant weights read by the
//! anchor: the op spec's default (the operator's constant weight) is a guess about a model the
//! import does not need to make.

use crate::fuse::Group;
use crate::graph::{Graph, Node};
use crate::integer::float_op;
use crate::layout::Layout;
use crate::operand::{Operand, Operands};
use crate::window::window;
use tunehub_engine::ops::{LayoutFree, OpSpec, OpSpecError};

/// A library operator with the inputs the model has constant (`packed`), said explicitly: an
/// empty list prints `layout_free=none` for an operator with a constant weight, never the
/// default.
pub fn op(name: &str, params: &[(&str, i64)], packed: &[&str]) -> Result<OpSpec, OpSpecError> {
    let packed = packed.iter().map(|p| p.to_string()).collect();
    OpSpec::new(name, params, LayoutFree::Inputs(packed))
}

/// The op spec, when the group is exactly a library operator (an error when its values are
/// not the operator's: out of its parameters' ranges); a quantized anchor's is the integer
/// form of its f32 computation's, requantized.
pub fn spec(g: &Graph, group: &Group, layout: Layout) -> Option<Result<OpSpec, OpSpecError>> {
    // A quantized anchor's weight is a constant behind its DequantizeLinear (which the
    // graph may not have folded: a large one is left to run).
    let a = &g.nodes[group.anchor?];
    let constant_weight = group.quantized.is_some() || a.input(1).is_some_and(|w| g.is_constant(w));
    let integer = group.quantized.is_some();
    let f32_spec = f32_spec(g, &group.in_f32(g), constant_weight, integer)?;
    // An f32 window operator in NHWC is written in the text form (`workload`), a batch norm
    // unfolded: the library's convolution would take the folded weight in the model's layout.
    let window_op = matches!(a.op.as_str(), "Conv" | "MaxPool" | "AveragePool");
    if !integer && layout.nhwc() && window_op {
        return None;
    }
    Some(match &group.quantized {
        None => f32_spec,
        Some(q) => f32_spec
            .and_then(|s| integer_layout(&s, q.data_zero_point))
            .and_then(|s| s.with_dtype(q.inputs))
            .and_then(|s| s.with_out_dtype(requantized(q))),
    })
}

/// The type a quantized anchor requantizes its sums to: none for a max pool (it compares) or
/// an integer operator (its i32 sums are its result: `integer`).
fn requantized(q: &crate::quantized::Quantized) -> Option<tunehub_engine::ir::DType> {
    (!q.compares() && q.out != tunehub_engine::ir::DType::I32).then_some(q.out)
}

/// The f32 spec of a quantized anchor as its integer form runs it: with a bias (`bias=1`)
/// where the data zero point moves its sums (the build folds `-zero_point * sum(weights)`
/// into one), and a convolution in NHWC (the dot-product instructions sum 4 input channels
/// at a time, which NCHW data do not hold side by side; the build transposes around it:
/// [`output_perm`]). A max pool runs in NHWC too, on the convolutions' results as they are.
fn integer_layout(s: &OpSpec, data_zero_point: i64) -> Result<OpSpec, OpSpecError> {
    let param = |k: &str| s.param(k).unwrap_or(0);
    let depthwise = s.name() == "depthwise_conv2d_nchw";
    let explicit = (s.name() == "conv2d_nchw" || depthwise)
        .then(|| explicit_padding(param("c"), param("pad"), data_zero_point, depthwise))
        .flatten();
    let mut params: Vec<(&str, i64)> = s.params().iter().map(|(&k, &v)| (k, v)).collect();
    for p in &mut params {
        match (p.0, explicit) {
            ("bias", _) if data_zero_point != 0 => p.1 = 1,
            ("h" | "w", Some(e)) => p.1 += 2 * e.spatial,
            ("pad", Some(e)) => p.1 -= e.spatial,
            ("c", Some(e)) => p.1 += e.channels,
            _ => {}
        }
    }
    let name = match s.name() {
        "conv2d_nchw" => "conv2d_nhwc",
        "depthwise_conv2d_nchw" => "depthwise_conv2d_nhwc",
        "max_pool2d" => "max_pool2d_nhwc",
        other => other,
    };
    let packed = s.layout_free_inputs();
    op(name, &params, &packed)
}

/// What a quantized convolution of one group adds to its data before its window reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExplicitPadding {
    /// Rows and columns on each side, filled with the data's zero point (the window's own
    /// padding, which would fill with 0, then pads nothing).
    pub spatial: i64,
    /// Input channels added, filled with the zero point in the data and 0 in the weight: the
    /// dot-product instructions sum 4 channels at a time (a first layer's 3 would leave it a
    /// plain integer loop).
    pub channels: i64,
}

/// The explicit padding of a quantized convolution with `c` input channels, window padding
/// `pad` and data zero point `zero_point`, when it needs one: where its padding must hold a
/// zero point that is not 0, or (of one group; a depthwise one sums no channels) its
/// channels do not fill groups of 4.
pub fn explicit_padding(
    c: i64,
    pad: i64,
    zero_point: i64,
    depthwise: bool,
) -> Option<ExplicitPadding> {
    let e = ExplicitPadding {
        spatial: if zero_point != 0 { pad } else { 0 },
        channels: if depthwise { 0 } else { (4 - c % 4) % 4 },
    };
    (e.spatial > 0 || e.channels > 0).then_some(e)
}

/// For a call of `spec` whose output is in another layout than the model's tensor: axis `i`
/// of the model's tensor is axis `perm[i]` of the kernel's output (a quantized convolution's
/// NHWC result, copied back to NCHW).
pub fn output_perm(spec: Option<&OpSpec>) -> Option<Vec<usize>> {
    matches!(
        spec?.name(),
        "conv2d_nhwc" | "depthwise_conv2d_nhwc" | "max_pool2d_nhwc"
    )
    .then(|| vec![0, 3, 1, 2])
}

/// The spec of `group` in f32; `integer`: of a quantized anchor, whose max pool may pad (its
/// padding is then its type's least value, which a stored DAG holds).
fn f32_spec(
    g: &Graph,
    group: &Group,
    constant_weight: bool,
    integer: bool,
) -> Option<Result<OpSpec, OpSpecError>> {
    let a = &g.nodes[group.anchor?];
    let members: Vec<&Node> = group.members.iter().map(|&m| &g.nodes[m]).collect();
    let x = g.shape(a.input(0)?)?;
    let out = g.shape(a.outputs.first()?)?;
    // An integer operator's inputs 2 and 3 are zero points, not a bias.
    match float_op(&a.op) {
        "Conv" => {
            let mut rest = members.as_slice();
            let mut bias = a.op == "Conv" && a.input(2).is_some();
            if rest.first().is_some_and(|n| n.op == "BatchNormalization") {
                bias = true;
                rest = &rest[1..];
            }
            let relu = rest.first().is_some_and(|n| n.op == "Relu");
            if rest.len() > usize::from(relu) || !constant_weight {
                return None;
            }
            let w = g.shape(a.input(1)?)?;
            let (win, groups) = (window(a, w[2], w[3])?, a.int("group").unwrap_or(1));
            let (n, c, h, wd, f) = (x[0], x[1], x[2], x[3], w[0]);
            let mut params = vec![("n", n), ("c", c), ("h", h), ("w", wd)];
            let name = if groups == 1 {
                params.push(("f", f));
                "conv2d_nchw"
            } else if groups == c && f == c {
                "depthwise_conv2d_nchw"
            } else {
                return None;
            };
            params.extend(win);
            params.extend([("bias", i64::from(bias)), ("relu", i64::from(relu))]);
            Some(op(name, &params, &["kernel"]))
        }
        "Gemm" => {
            let plain = a.int("transA").unwrap_or(0) == 0
                && a.int("transB").unwrap_or(0) == 1
                && a.float("alpha").unwrap_or(1.0) == 1.0
                && a.float("beta").unwrap_or(1.0) == 1.0;
            let bias = match a.input(2).and_then(|c| g.shape(c)) {
                None => a.input(2).is_none().then_some(false)?,
                Some(s) if s.last() == out.last() && s.iter().product::<i64>() == out[1] => true,
                Some(_) => return None,
            };
            let relu = members.first().is_some_and(|n| n.op == "Relu");
            if !plain || members.len() > usize::from(relu) || !constant_weight {
                return None;
            }
            let params = [
                ("m", x[0]),
                ("n", out[1]),
                ("k", x[1]),
                ("bias", i64::from(bias)),
                ("relu", i64::from(relu)),
            ];
            Some(op("dense", &params, &["weight"]))
        }
        "MatMul" => {
            let w = g.shape(a.input(1)?)?;
            if !members.is_empty() || w.len() != 2 || !constant_weight {
                return None;
            }
            let rows: i64 = out[..out.len() - 1].iter().product();
            Some(op(
                "matmul",
                &[("m", rows), ("n", w[1]), ("k", w[0])],
                &["B"],
            ))
        }
        "MaxPool" | "AveragePool" => {
            let k = a.ints("kernel_shape")?;
            let win = window(a, *k.first()?, *k.get(1)?)?;
            let max = a.op == "MaxPool";
            let no_pad = a.ints("pads").is_none_or(|p| p.iter().all(|&p| p == 0));
            // The library's average counts padding, ONNX's default does not; the library's
            // padded max pool fills with -infinity, which a stored DAG (JSON) cannot hold.
            let pads = no_pad || (max && integer);
            if !members.is_empty() || a.int("ceil_mode").unwrap_or(0) != 0 || !pads {
                return None;
            }
            let name = if max { "max_pool2d" } else { "avg_pool2d" };
            let mut params = vec![("n", x[0]), ("c", x[1]), ("h", x[2]), ("w", x[3])];
            params.extend(win);
            Some(op(name, &params, &[]))
        }
        "Softmax" => {
            let r = x.len() as i64;
            let axis = a.int("axis").unwrap_or(-1);
            if !members.is_empty() || (axis != -1 && axis != r - 1) {
                return None;
            }
            let rows: i64 = x[..x.len() - 1].iter().product();
            Some(op("softmax", &[("m", rows), ("n", x[x.len() - 1])], &[]))
        }
        _ => None,
    }
}

/// Where the library operator's inputs come from (the placeholders' names are the operator's:
/// `data`, `kernel`, `bias`, `weight`, `A`, `B`, `x`), for a group [`spec`] gave a spec for.
/// A quantized anchor reads the quantized tensors behind its `DequantizeLinear` nodes, and
/// its bias, multipliers and output zero point as the build computes them (`requantization`).
pub fn operands(g: &Graph, group: &Group) -> Operands {
    let Some(a) = group.anchor.map(|a| &g.nodes[a]) else {
        return vec![];
    };
    if let Some(q) = &group.quantized {
        return quantized_operands(g, a, q);
    }
    let t = |i: usize| a.input(i).map(Operand::tensor);
    let mut out: Operands = vec![];
    let mut push = |name: &str, o: Option<Operand>| {
        if let Some(o) = o {
            out.push((name.to_string(), o));
        }
    };
    match a.op.as_str() {
        "Conv" => {
            push("data", t(0));
            let bn = group
                .members
                .first()
                .map(|&m| &g.nodes[m])
                .filter(|n| n.op == "BatchNormalization")
                .map(|n| n.name.clone());
            match bn {
                Some(bn) => {
                    let weight = a.input(1).unwrap_or_default().to_string();
                    let bias = a.input(2).map(str::to_string);
                    push(
                        "kernel",
                        Some(Operand::FoldedWeight {
                            weight,
                            bn: bn.clone(),
                        }),
                    );
                    push("bias", Some(Operand::FoldedBias { bias, bn }));
                }
                None => {
                    push("kernel", t(1));
                    push("bias", t(2));
                }
            }
        }
        "Gemm" => {
            push("data", t(0));
            push("weight", t(1));
            push("bias", t(2));
        }
        "MatMul" => {
            push("A", t(0));
            push("B", t(1));
        }
        "Softmax" => push("x", t(0)),
        _ => push("data", t(0)),
    }
    out
}

/// A quantized anchor's inputs: the tensors behind its `DequantizeLinear` nodes, then what
/// the build computes. It has a bias where [`spec`] gave it one: its own, or the data zero
/// point's share.
fn quantized_operands(g: &Graph, a: &Node, q: &crate::quantized::Quantized) -> Operands {
    use crate::operand::QuantPart;
    let behind = |i: usize| {
        let x = a.input(i).unwrap_or_default();
        Operand::tensor(crate::quantized::dequantized(g, x).unwrap_or(x))
    };
    let part = |part| Operand::Requantized {
        anchor: a.name.clone(),
        part,
    };
    if q.compares() {
        // A max pool reads its data as the convolutions write it (`integer_layout`).
        let Operand::Tensor { name } = behind(0) else {
            unreachable!("behind() gives tensors")
        };
        let perm = vec![0, 2, 3, 1];
        return vec![("data".into(), Operand::Transposed { name, perm })];
    }
    let (data, weight) = match float_op(&a.op) {
        "Conv" => ("data", "kernel"),
        "Gemm" => ("data", "weight"),
        _ => ("A", "B"),
    };
    let mut out: Operands = vec![(data.into(), behind(0)), (weight.into(), behind(1))];
    // A convolution runs in NHWC (`integer_layout`): NCHW data to NHWC, the OIHW weight to
    // HWIO (a depthwise one's `[c,1,kh,kw]` to `[kh,kw,c,1]`), each padded where it must be
    // (`explicit_padding`).
    if float_op(&a.op) == "Conv" {
        let c = a.input(0).and_then(|x| g.shape(x)).map_or(0, |s| s[1]);
        let depthwise = a.int("group").unwrap_or(1) != 1;
        let pad = a.ints("pads").and_then(|p| p.first().copied()).unwrap_or(0);
        let e = explicit_padding(c, pad, q.data_zero_point, depthwise);
        let (s, ch) = e.map_or((0, 0), |e| (e.spatial, e.channels));
        let weight_perm = if depthwise {
            vec![2, 3, 0, 1]
        } else {
            vec![2, 3, 1, 0]
        };
        let padding = [
            (
                vec![0, 2, 3, 1],
                vec![0, s, s, 0, 0, s, s, ch],
                q.data_zero_point,
            ),
            (weight_perm, vec![0, 0, 0, 0, 0, 0, ch, 0], 0),
        ];
        for ((_, o), (perm, pads, value)) in out.iter_mut().zip(padding) {
            let Operand::Tensor { name } = o.clone() else {
                unreachable!("behind() gives tensors")
            };
            *o = match e {
                None => Operand::Transposed { name, perm },
                Some(_) => Operand::Padded {
                    name,
                    perm,
                    pads,
                    value,
                },
            };
        }
    }
    if requantized(q).is_none() {
        // An integer operator's sums are its result (`integer`).
        return out;
    }
    if a.op != "MatMul" && (a.input(2).is_some() || q.data_zero_point != 0) {
        out.push(("bias".into(), part(QuantPart::Bias)));
    }
    out.push(("scale".into(), part(QuantPart::Scale)));
    out.push(("zero_point".into(), part(QuantPart::ZeroPoint)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A library form says which inputs are packed, whatever the operator's default.
    #[test]
    fn library_forms_say_their_layout_free_inputs() {
        let mm = [("m", 4), ("n", 8), ("k", 16)];
        let activation = op("matmul", &mm, &[]).unwrap();
        assert_eq!(
            activation.to_string(),
            "matmul(m=4,n=8,k=16,layout_free=none)"
        );
        assert!(activation.options().is_empty());
        let weight = op("matmul", &mm, &["B"]).unwrap();
        assert_eq!(weight.to_string(), "matmul(m=4,n=8,k=16,layout_free=B)");
        assert_ne!(activation.task().unwrap().key, weight.task().unwrap().key);
        let pool = [("n", 1), ("c", 2), ("h", 4), ("w", 4)];
        assert_eq!(
            op("max_pool2d", &pool, &[]).unwrap().to_string(),
            "max_pool2d(n=1,c=2,h=4,w=4)"
        );
        let e = op("softmax", &[("m", 0), ("n", 4)], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("out of range"), "{e}");
    }
}
