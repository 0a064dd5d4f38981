//! The constants a QDQ model's quantized anchor (`quantized`) runs on in its integer form,
//! computed from the model's quantizers as ONNX Runtime's `QLinearConv` / `QLinearMatMul`
//! compute them: with the data `x = sx * (qx - zx)`, the weights `w = sw[c] * qw` and the bias
//! `b`, the output `y = sy * (qy - zy)` is
//!
//! `qy = round(sx * sw[c] / sy * (sum(qx * qw) - zx * sum(qw) + round(b / (sx * sw[c])))) + zy`
//!
//! so the kernel takes the i32 bias `round(b / (sx * sw[c])) - zx * sum(qw[c])`, the f32
//! multiplier `sx * sw[c] / sy` and the zero point `zy`. The quantizer writes the bias as i32
//! already in the units `sx * sw[c]`; it is read through its `DequantizeLinear` all the same,
//! so that a float bias, or one in other units, gives the same constants.

use crate::graph::Graph;
use crate::quantized::{DEQUANTIZE, dequantize_constant, producer, quantized, scales, single};
use tunehub_engine::ir::DType;

/// The constants of one anchor, per output channel but the zero point.
#[derive(Debug, Clone, PartialEq)]
pub struct Requantization {
    pub bias: Vec<i32>,
    pub scale: Vec<f32>,
    pub zero_point: i64,
    /// The output's type (the zero point's): u8 or i8.
    pub out: DType,
}

/// The constants of anchor `a` (a node index) of `g`; an error says what in the model is not
/// as a quantized anchor must be (the extraction checked the shape of the pattern, not the
/// values of its scales).
pub fn requantization(g: &Graph, a: usize) -> Result<Requantization, String> {
    let n = &g.nodes[a];
    let q = quantized(g, a).ok_or_else(|| format!("'{}' is not a quantized anchor", n.name))?;
    let dq = |i: usize| {
        n.input(i)
            .and_then(|t| producer(g, t))
            .filter(|d| d.op == DEQUANTIZE)
            .ok_or_else(|| format!("input {i} of '{}' is not dequantized", n.name))
    };
    let (data, weight) = (dq(0)?, dq(1)?);
    let output = &g.nodes[*q
        .members
        .last()
        .expect("a quantized anchor ends in its quantizer")];
    let sx = f64::from(scales(g, data)?[0]);
    let sy = f64::from(scales(g, output)?[0]);
    let zy = single(g, output).ok_or("the output's quantizer is not per tensor")?;
    let sw = scales(g, weight)?;
    let w_name = weight.input(0).unwrap_or_default();
    let w = g
        .ints(w_name)
        .ok_or_else(|| format!("the weight '{w_name}' is not a constant"))?;
    let w_shape = g.shape(w_name).unwrap_or_default();
    // The output channel of each weight element: the leading axis of a Conv's or a transposed
    // Gemm's weight, the last of a MatMul's.
    let (channels, channel_of): (usize, Box<dyn Fn(usize) -> usize>) = if n.op == "MatMul" {
        let c = *w_shape.last().unwrap_or(&1) as usize;
        (c, Box::new(move |i| i % c.max(1)))
    } else {
        let c = *w_shape.first().unwrap_or(&1) as usize;
        let per = w.len() / c.max(1);
        (c, Box::new(move |i| i / per.max(1)))
    };
    if sw.len() != 1 && sw.len() != channels {
        return Err(format!(
            "the weight '{w_name}' has {} scales for {channels} channels",
            sw.len()
        ));
    }
    let mut sums = vec![0i64; channels];
    for (i, &v) in w.iter().enumerate() {
        sums[channel_of(i)] += v;
    }
    let bias = match n.input(2) {
        Some(b) => floats_behind(g, b, channels)?,
        None => vec![0.0; channels],
    };
    let zx = q.data_zero_point;
    let mut out = Requantization {
        bias: Vec::with_capacity(channels),
        scale: Vec::with_capacity(channels),
        zero_point: zy,
        out: q.out,
    };
    for c in 0..channels {
        let unit = sx * f64::from(sw[if sw.len() == 1 { 0 } else { c }]);
        let b = (bias[c] / unit).round_ties_even() - (zx * sums[c]) as f64;
        if !(f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&b) {
            return Err(format!(
                "the bias of channel {c} of '{}' is out of i32's range in the sum's units",
                n.name
            ));
        }
        out.bias.push(b as i32);
        out.scale.push((unit / sy) as f32);
    }
    Ok(out)
}

/// A constant bias of `channels` values as floats: dequantized when a `DequantizeLinear` of a
/// constant computes it, else the constant's own.
fn floats_behind(g: &Graph, t: &str, channels: usize) -> Result<Vec<f64>, String> {
    let v: Vec<f64> = match producer(g, t).filter(|d| d.op == DEQUANTIZE) {
        Some(d) => dequantize_constant(g, d)?,
        None => g
            .floats(t)
            .ok_or_else(|| format!("the bias '{t}' is not a constant"))?
            .into_iter()
            .map(f64::from)
            .collect(),
    };
    if v.len() != channels {
        return Err(format!(
            "the bias '{t}' has {} values for {channels} channels",
            v.len()
        ));
    }
    Ok(v)
}
