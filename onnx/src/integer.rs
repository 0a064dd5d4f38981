//! `MatMulInteger` and `ConvInteger`, as `onnxruntime.quantization.quantize_dynamic` writes
//! them: the data quantized at run time by a `DynamicQuantizeLinear` (u8, its scale and zero
//! point computed from the tensor's range), the weight an 8-bit constant, the exact i32
//! result `sum((x - zx) * (w - zw))` then cast to f32 and scaled by f32 operators.
//!
//! The integer form the library tunes sums `x * w` alone (`dtype=u8i8|i8i8`, no requantized
//! output), a convolution's window padded with 0. The data zero point, a run-time scalar, is
//! then a correction of the sums: with symmetric weights (`zw = 0`, as the quantizer writes
//! them), `sum((x - zx) * w) = sum(x * w) - zx * sum(w)`, where `sum(w)` runs over the weights
//! the window reads inside the data (the padding holds `zx`, which adds 0). The build
//! subtracts `zx` times those sums ([`zero_point_sums`]) after the kernel.

use crate::graph::{Graph, Node};
use crate::quantized::{Quantized, eight_bit, producer, zero_points};
use tract_onnx::prelude::DatumType;
use tunehub_engine::ir::DType;
use tunehub_engine::ops::OpDType;

/// The ONNX operator that quantizes a tensor with its own range.
pub const DYNAMIC_QUANTIZE: &str = "DynamicQuantizeLinear";

/// Whether `op` is an integer matrix product or convolution.
pub fn is_integer_op(op: &str) -> bool {
    matches!(op, "MatMulInteger" | "ConvInteger")
}

/// The f32 operator an integer one sums as (inputs 0 and 1 alike; its inputs 2 and 3 are
/// zero points, not a bias).
pub fn float_op(op: &str) -> &str {
    match op {
        "MatMulInteger" => "MatMul",
        "ConvInteger" => "Conv",
        other => other,
    }
}

/// Integer node `n` as a quantized anchor with an i32 result (`out: I32`, no members), or
/// why it cannot be one.
pub fn integer_anchor(g: &Graph, n: &Node) -> Result<Quantized, String> {
    let (x, w) = match (n.input(0), n.input(1)) {
        (Some(x), Some(w)) => (x, w),
        _ => return Err("it needs its data and its weight".into()),
    };
    if g.is_constant(x) {
        return Err("its data is a constant".into());
    }
    if !g.is_constant(w) || g.value(w).map(|v| v.datum_type()) != Some(DatumType::I8) {
        return Err(
            "its weight must be an i8 constant (quantize with weight_type=QInt8)".to_string(),
        );
    }
    match n.input(3) {
        None => {}
        Some(z) => match g.ints(z) {
            Some(z) if z.iter().all(|&z| z == 0) => {}
            _ => {
                return Err(
                    "its weight zero point must be a constant 0 (symmetric weights)".into(),
                );
            }
        },
    }
    let inputs = match data_type(g, n)? {
        DType::U8 => OpDType::U8I8,
        _ => OpDType::I8I8,
    };
    if let Some(z) = n.input(2)
        && g.shape(z).is_some_and(|s| s.iter().product::<i64>() != 1)
    {
        return Err("its data zero point must be one scalar (not one per row)".into());
    }
    Ok(Quantized {
        inputs,
        out: DType::I32,
        data_zero_point: 0,
        members: vec![],
    })
}

/// The 8-bit type of an integer node's data (ONNX gives its zero point the same type): its
/// zero point's when that is a constant, u8 when a `DynamicQuantizeLinear` computes the zero
/// point or the data, a `QuantizeLinear`'s type when one computes the data.
fn data_type(g: &Graph, n: &Node) -> Result<DType, String> {
    let unknown = || "the type of its data is not known (give it a constant zero point)".into();
    let from = |dt: DatumType| match dt {
        DatumType::U8 => Ok(DType::U8),
        DatumType::I8 => Ok(DType::I8),
        other => Err(format!("its data is {other:?}, not u8 or i8")),
    };
    if let Some(z) = n.input(2) {
        if let Some(v) = g.value(z) {
            return from(v.datum_type());
        }
        if producer(g, z).is_some_and(|p| p.op == DYNAMIC_QUANTIZE) {
            return Ok(DType::U8);
        }
    }
    let p = producer(g, n.input(0).unwrap_or_default()).ok_or_else(unknown)?;
    match p.op.as_str() {
        DYNAMIC_QUANTIZE => Ok(DType::U8),
        crate::quantized::QUANTIZE => eight_bit(g, p).ok_or_else(unknown),
        _ => Err(unknown()),
    }
}

/// Whether tensor `t` is a `Cast` of a `ConvInteger`'s sums (which the build keeps in the
/// convolution's NHWC).
pub fn cast_of_conv_sums(g: &Graph, t: &str) -> bool {
    producer(g, t)
        .filter(|c| c.op == "Cast")
        .and_then(|c| c.input(0))
        .and_then(|x| producer(g, x))
        .is_some_and(|p| p.op == "ConvInteger")
}

/// The tensor holding an integer node's data zero point, when one is given that is not a
/// constant 0: the build then corrects the kernel's sums by it.
pub fn data_zero_point<'g>(g: &'g Graph, n: &'g Node) -> Option<&'g str> {
    let z = n.input(2)?;
    let zero = g.is_constant(z) && zero_points(g, n).is_some_and(|v| v.iter().all(|&v| v == 0));
    (!zero).then_some(z)
}

/// What the build multiplies the data zero point by and subtracts from the kernel's sums, in
/// the layout of the node's output without its batch: a matrix product's `[n]` sums of the
/// weight's columns (the output's last axis), a convolution's `[f, oh, ow]` sums of the
/// weights its window reads inside the data at each output position.
pub fn zero_point_sums(g: &Graph, n: &Node) -> Result<(Vec<i64>, Vec<i32>), String> {
    let w_name = n.input(1).unwrap_or_default();
    let w = g
        .ints(w_name)
        .ok_or_else(|| format!("the weight '{w_name}' is not a constant"))?;
    let ws = g.shape(w_name).unwrap_or_default().to_vec();
    let sums = if n.op == "MatMulInteger" {
        let [k, cols] = ws[..] else {
            return Err(format!("its weight is {ws:?}, not a matrix"));
        };
        let mut s = vec![0i64; cols as usize];
        for r in 0..k {
            for c in 0..cols {
                s[c as usize] += w[(r * cols + c) as usize];
            }
        }
        (vec![cols], s)
    } else {
        conv_sums(g, n, &w, &ws)?
    };
    let (shape, s) = sums;
    let s = s
        .into_iter()
        .map(|v| i32::try_from(v).map_err(|_| "a weight sum is out of i32's range".to_string()))
        .collect::<Result<Vec<i32>, String>>()?;
    Ok((shape, s))
}

/// A convolution's `[f, oh, ow]` sums of the weights inside the data (see [`zero_point_sums`]).
fn conv_sums(g: &Graph, n: &Node, w: &[i64], ws: &[i64]) -> Result<(Vec<i64>, Vec<i64>), String> {
    let x = g.shape(n.input(0).unwrap_or_default()).unwrap_or_default();
    let out = g.shape(n.outputs.first().map_or("", String::as_str));
    let (Some(out), [_, _, h, wd], [f, cg, kh, kw]) = (out, x, ws) else {
        return Err("its shapes are not those of a 2-D convolution".into());
    };
    let (oh, ow) = (out[2], out[3]);
    let two = |a: &str, d: i64| n.ints(a).unwrap_or_else(|| vec![d, d]);
    let (s, dl, p) = (two("strides", 1), two("dilations", 1), two("pads", 0));
    let mut sums = Vec::with_capacity((f * oh * ow) as usize);
    for o in 0..*f {
        let filter = &w[(o * cg * kh * kw) as usize..((o + 1) * cg * kh * kw) as usize];
        for y in 0..oh {
            for xo in 0..ow {
                let mut t = 0;
                for (i, &v) in filter.iter().enumerate() {
                    let (ky, kx) = ((i as i64 / kw) % kh, i as i64 % kw);
                    let iy = y * s[0] - p[0] + ky * dl[0];
                    let ix = xo * s[1] - p[1] + kx * dl[1];
                    if (0..*h).contains(&iy) && (0..*wd).contains(&ix) {
                        t += v;
                    }
                }
                sums.push(t);
            }
        }
    }
    Ok((vec![*f, oh, ow], sums))
}
