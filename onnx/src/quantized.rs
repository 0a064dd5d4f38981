//! QDQ models, as `onnxruntime.quantization` writes them: every quantized tensor between a
//! `QuantizeLinear` and a `DequantizeLinear`, weights as 8-bit constants behind a
//! `DequantizeLinear` (per-channel scales), biases as i32 constants behind another. A
//! convolution or matrix product that reads dequantized data and a dequantized constant
//! weight, and whose result goes only to a `QuantizeLinear` (through a `Relu`, when the
//! quantizer kept it), is its operator's integer form requantized (`dtype=u8i8|i8i8`,
//! `out_dtype=u8|i8`), the computation ONNX Runtime runs there as `QLinearConv` /
//! `QLinearMatMul`. The other `QuantizeLinear` and `DequantizeLinear` nodes convert between
//! the quantized tensors and the f32 operators around them (a residual add, a pool).
//!
//! A dynamically quantized model's `MatMulInteger` and `ConvInteger` are quantized anchors too,
//! with i32 sums for their result (`integer`).
//!
//! A `MaxPool` between a `DequantizeLinear` and a `QuantizeLinear` of one same scale and zero
//! point is the 8-bit max pool (`dtype=u8|i8`), as ONNX Runtime's QDQ transformer runs it:
//! dequantization is increasing, so the max commutes with it, and the quantization undoes it.
//!
//! An anchor is read so only when the integer form computes what the model says: 8-bit
//! data, i8 weights with zero points 0 (symmetric, as the quantizer writes them), one scale
//! and zero point for the data and the output, and a data zero point of 0 where there is no
//! bias to take it (MatMul; a convolution whose window pads reads its data padded with the
//! zero point: `library::explicit_padding`). Otherwise it stays f32, as tract runs it.

use crate::graph::{Graph, Node};
use crate::window::window;
use tract_onnx::prelude::DatumType;
use tunehub_engine::ir::DType;
use tunehub_engine::ops::OpDType;

/// The ONNX operators that quantize and dequantize.
pub const QUANTIZE: &str = "QuantizeLinear";
pub const DEQUANTIZE: &str = "DequantizeLinear";

/// A quantized anchor (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct Quantized {
    /// The data's and the weight's types.
    pub inputs: OpDType,
    /// The requantized output's type; i32 for an integer operator's sums (`integer`).
    pub out: DType,
    /// The data's zero point: the build takes `zero_point * sum(weights)` off each channel's
    /// bias, so the task has a bias even where the model's layer has none.
    pub data_zero_point: i64,
    /// The nodes after the anchor, in graph order: a `Relu`, then the `QuantizeLinear` (none
    /// for an integer operator).
    pub members: Vec<usize>,
}

impl Quantized {
    /// Whether the anchor compares its 8-bit data (a max pool) rather than summing products
    /// that a requantization brings back to 8 bits.
    pub fn compares(&self) -> bool {
        matches!(self.inputs, OpDType::U8 | OpDType::I8)
    }
}

/// Anchor `a` of `g` as a quantized anchor, when it is one.
pub fn quantized(g: &Graph, a: usize) -> Option<Quantized> {
    let n = &g.nodes[a];
    if n.op == "MaxPool" {
        return max_pool(g, n);
    }
    if crate::integer::is_integer_op(&n.op) {
        return crate::integer::integer_anchor(g, n).ok();
    }
    if !matches!(n.op.as_str(), "Conv" | "MatMul" | "Gemm") {
        return None;
    }
    let data = producer(g, n.input(0)?).filter(|d| d.op == DEQUANTIZE)?;
    let weight = producer(g, n.input(1)?).filter(|d| d.op == DEQUANTIZE)?;
    let x = data.input(0)?;
    let w = weight.input(0)?;
    if g.is_constant(x) || !g.is_constant(w) || g.value(w)?.datum_type() != DatumType::I8 {
        return None;
    }
    if !zero_points(g, weight).is_some_and(|z| z.iter().all(|&z| z == 0))
        || !per_output_channel(g, n, weight)
    {
        return None;
    }
    let data_zero_point = single(g, data)?;
    let inputs = match (eight_bit(g, data)?, data_zero_point) {
        // A convolution's padding holds the zero point: its data is read padded so
        // (`library::explicit_padding`). A MatMul has no bias to take the zero point's share.
        (_, z) if z != 0 && n.op == "MatMul" => return None,
        (DType::U8, _) => OpDType::U8I8,
        (DType::I8, _) => OpDType::I8I8,
        _ => return None,
    };
    // The result, through an optional Relu, to one QuantizeLinear alone.
    let mut members = vec![];
    let mut t = n.outputs.first()?.as_str();
    loop {
        let [c] = consumers(g, t)[..] else {
            return None;
        };
        let node = g.nodes.get(c)?;
        match node.op.as_str() {
            "Relu" if members.is_empty() => members.push(c),
            QUANTIZE if node.input(0) == Some(t) => {
                single(g, node)?;
                members.push(c);
                return Some(Quantized {
                    inputs,
                    out: eight_bit(g, node)?,
                    data_zero_point,
                    members,
                });
            }
            _ => return None,
        }
        t = node.outputs.first()?.as_str();
    }
}

/// A quantized `MaxPool` (see the module docs), in the library's window.
fn max_pool(g: &Graph, n: &Node) -> Option<Quantized> {
    let k = n.ints("kernel_shape")?;
    let [kh, kw] = k[..] else {
        return None;
    };
    if n.int("ceil_mode").unwrap_or(0) != 0 || window(n, kh, kw).is_none() {
        return None;
    }
    let (_, t, scale, zero_point) = dequantized_from(g, n.input(0)?)?;
    let (c, after) = quantized_to(g, n.outputs.first()?)?;
    if after != (t, scale, zero_point) {
        return None;
    }
    Some(Quantized {
        inputs: if t == DType::U8 {
            OpDType::U8
        } else {
            OpDType::I8
        },
        out: t,
        data_zero_point: zero_point,
        members: vec![c],
    })
}

/// The `QuantizeLinear` that ends an elementwise chain `nodes` (in graph order) between
/// conversions, when it is one: every activation the chain reads from outside is dequantized
/// from an 8-bit tensor with one scale and zero point, and its result is read by that
/// `QuantizeLinear` alone (one scale and zero point). Its task reads the 8-bit tensors and
/// writes the quantized one, the conversions folded in, as ONNX Runtime's `QLinearAdd` (a
/// residual add) and `QLinearMul` do.
pub fn quantized_chain(g: &Graph, nodes: &[usize]) -> Option<usize> {
    let inside = |t: &str| {
        nodes
            .iter()
            .any(|&i| g.nodes[i].outputs.iter().any(|o| o == t))
    };
    let mut dequantized = 0;
    for &i in nodes {
        for t in g.nodes[i].inputs.iter().filter(|t| !t.is_empty()) {
            if inside(t) || g.is_constant(t) {
                continue;
            }
            dequantized_from(g, t)?;
            dequantized += 1;
        }
    }
    let (c, _) = quantized_to(g, g.nodes[*nodes.last()?].outputs.first()?)?;
    (dequantized > 0).then_some(c)
}

/// The `QuantizeLinear` that alone reads `t`, with one scale and zero point: its index, and
/// the type, scale and zero point it quantizes to.
fn quantized_to(g: &Graph, t: &str) -> Option<(usize, (DType, f32, i64))> {
    let [c] = consumers(g, t)[..] else {
        return None;
    };
    let q = g
        .nodes
        .get(c)
        .filter(|q| q.op == QUANTIZE && q.input(0) == Some(t))?;
    let scale = *g.floats(q.input(1)?)?.first()?;
    Some((c, (eight_bit(g, q)?, scale, single(g, q)?)))
}

/// The 8-bit tensor, type, scale and zero point behind `t`, when one `DequantizeLinear` with
/// one scale and zero point computes `t` from an activation.
pub fn dequantized_from<'g>(g: &'g Graph, t: &str) -> Option<(&'g str, DType, f32, i64)> {
    let d = producer(g, t).filter(|d| d.op == DEQUANTIZE)?;
    let q = d.input(0).filter(|q| !g.is_constant(q))?;
    let scale = *g.floats(d.input(1)?)?.first()?;
    Some((q, eight_bit(g, d)?, scale, single(g, d)?))
}

/// Per output of the model, in its order: the scale of the `DequantizeLinear` that computes
/// it, one per tensor (a QDQ model's logits), else `None`. Such an output is a count of
/// these quanta: a tie rounded the other way anywhere upstream moves it by a whole one.
pub fn output_quanta(g: &Graph) -> Vec<Option<f32>> {
    g.output_order
        .iter()
        .map(|o| {
            let d = producer(g, o).filter(|d| d.op == DEQUANTIZE)?;
            single(g, d)?;
            g.floats(d.input(1)?)?.first().copied()
        })
        .collect()
}

/// The quantized tensor behind `t` when a `DequantizeLinear` computes `t`.
pub fn dequantized<'g>(g: &'g Graph, t: &str) -> Option<&'g str> {
    producer(g, t).filter(|d| d.op == DEQUANTIZE)?.input(0)
}

/// The node computing `t`.
pub(crate) fn producer<'g>(g: &'g Graph, t: &str) -> Option<&'g Node> {
    g.nodes.iter().find(|n| n.outputs.iter().any(|o| o == t))
}

/// The nodes reading `t`; an output of the graph counts as a reader too, `usize::MAX`, which
/// is no node.
pub fn consumers(g: &Graph, t: &str) -> Vec<usize> {
    let mut out: Vec<usize> = (0..g.nodes.len())
        .filter(|&i| g.nodes[i].inputs.iter().any(|x| x == t))
        .collect();
    if g.outputs.contains(t) {
        out.push(usize::MAX);
    }
    out
}

/// A (de)quantize node's quantized type, from its zero point (ONNX's default without one: u8).
pub fn eight_bit(g: &Graph, q: &Node) -> Option<DType> {
    let dt = match q.input(2) {
        None => DatumType::U8,
        Some(z) => g.value(z)?.datum_type(),
    };
    match dt {
        DatumType::U8 => Some(DType::U8),
        DatumType::I8 => Some(DType::I8),
        _ => None,
    }
}

/// Whether a weight's scales are one, or one per output channel: along the axis of the
/// weight that the output's channels index (a scale along the summed axis would not factor
/// out of the sum).
fn per_output_channel(g: &Graph, anchor: &Node, dq: &Node) -> bool {
    let (Some(scales), Some(w)) = (
        dq.input(1).and_then(|s| g.floats(s)),
        dq.input(0).and_then(|w| g.shape(w)),
    ) else {
        return false;
    };
    if scales.len() == 1 {
        return true;
    }
    let rank = w.len();
    let channels = match anchor.op.as_str() {
        "Conv" => 0,
        "Gemm" if anchor.int("transB").unwrap_or(0) == 1 => 0,
        _ => rank.saturating_sub(1),
    };
    axis(dq, rank) == Some(channels) && w.get(channels) == Some(&(scales.len() as i64))
}

/// The axis a (de)quantize node's scales run along in a tensor of `rank` dimensions: its
/// `axis` (ONNX's default 1; a negative one counts from the end), `None` when out of range.
pub fn axis(q: &Node, rank: usize) -> Option<usize> {
    let rank = rank as i64;
    let a = q.int("axis").unwrap_or(1);
    let a = if a < 0 { a + rank } else { a };
    (0..rank).contains(&a).then_some(a as usize)
}

/// The scales of a (de)quantize node: constants, finite and positive.
pub(crate) fn scales(g: &Graph, q: &Node) -> Result<Vec<f32>, String> {
    let t = q.input(1).unwrap_or_default();
    let s = g
        .floats(t)
        .ok_or_else(|| format!("the scale '{t}' of '{}' is not a constant", q.name))?;
    if s.is_empty() || s.iter().any(|&x| !(x.is_finite() && x > 0.0)) {
        return Err(format!(
            "the scales of '{}' must be finite and positive",
            q.name
        ));
    }
    Ok(s)
}

/// What a `DequantizeLinear` `d` of a constant computes, `(q - zero_point) * scale` with one
/// scale and zero point, or one per index along its `axis`: the one reading of a dequantized
/// constant (a weight an f32 operator reads, a bias the requantization takes).
pub fn dequantize_constant(g: &Graph, d: &Node) -> Result<Vec<f64>, String> {
    let x = d.input(0).unwrap_or_default();
    let q = g
        .ints(x)
        .ok_or_else(|| format!("'{}': its input '{x}' is not an integer constant", d.name))?;
    let s = scales(g, d)?;
    let z = zero_points(g, d)
        .ok_or_else(|| format!("'{}': its zero point is not a constant", d.name))?;
    if z.len() != 1 && z.len() != s.len() {
        return Err(format!(
            "'{}': its zero points do not match its scales",
            d.name
        ));
    }
    // Element `i` reads scale `(i / inner) % along`.
    let (inner, along) = if s.len() == 1 {
        (1, 1)
    } else {
        let shape = g.shape(x).unwrap_or_default();
        let a = axis(d, shape.len())
            .filter(|&a| shape[a] == s.len() as i64)
            .ok_or_else(|| {
                format!(
                    "'{}': its {} scales do not run along an axis of {shape:?}",
                    d.name,
                    s.len()
                )
            })?;
        let inner: i64 = shape[a + 1..].iter().product();
        (inner.max(1) as usize, s.len())
    };
    Ok(q.iter()
        .enumerate()
        .map(|(i, &v)| {
            let c = (i / inner) % along;
            let zp = z[if z.len() == 1 { 0 } else { c }];
            (v - zp) as f64 * f64::from(s[c])
        })
        .collect())
}

/// The zero points of a (de)quantize node (none said: 0).
pub(crate) fn zero_points(g: &Graph, q: &Node) -> Option<Vec<i64>> {
    match q.input(2) {
        None => Some(vec![0]),
        Some(z) => g.ints(z),
    }
}

/// The zero point of a per-tensor (de)quantize node: one scale and one zero point.
pub fn single(g: &Graph, q: &Node) -> Option<i64> {
    let scale = g.floats(q.input(1)?)?;
    match zero_points(g, q)?[..] {
        [z] if scale.len() == 1 => Some(z),
        _ => None,
    }
}
