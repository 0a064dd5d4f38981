//! Constants computed at build time: a batch norm folded into the convolution before it (its
//! scale into the weight, the rest into one bias per channel), or kept as a per-channel scale
//! and shift, computed in f64 from the model's f32 values, stored as f32; a QDQ model's
//! requantization constants (`tunehub_onnx::requantization`) and its dequantized weights.

use crate::program::ConstData;
use tunehub_onnx::graph::Graph;
use tunehub_onnx::quantized::{DEQUANTIZE, dequantize_constant};
use tunehub_onnx::{Operand, QuantPart};

/// Inference batch norm: `y = (x - mean) * gamma / sqrt(var + eps) + beta`, per channel.
struct BatchNorm {
    scale: Vec<f64>,
    shift: Vec<f64>,
    mean: Vec<f64>,
    beta: Vec<f64>,
}

fn batch_norm(g: &Graph, bn: &str) -> Result<BatchNorm, String> {
    let n = g
        .nodes
        .iter()
        .find(|n| n.name == bn)
        .ok_or_else(|| format!("no batch norm node '{bn}'"))?;
    let eps = f64::from(n.float("epsilon").unwrap_or(1e-5));
    let get = |i: usize, what: &str| -> Result<Vec<f64>, String> {
        let t = n
            .input(i)
            .ok_or_else(|| format!("batch norm '{bn}' has no {what}"))?;
        let v = g
            .floats(t)
            .ok_or_else(|| format!("batch norm '{bn}': its {what} '{t}' is not a constant"))?;
        Ok(v.into_iter().map(f64::from).collect())
    };
    let (gamma, beta, mean, var) = (
        get(1, "scale")?,
        get(2, "bias")?,
        get(3, "mean")?,
        get(4, "variance")?,
    );
    let c = gamma.len();
    if [beta.len(), mean.len(), var.len()].iter().any(|&l| l != c) {
        return Err(format!(
            "batch norm '{bn}': its parameters differ in length"
        ));
    }
    let scale: Vec<f64> = gamma
        .iter()
        .zip(&var)
        .map(|(g, v)| g / (v + eps).sqrt())
        .collect();
    let shift = (0..c).map(|i| beta[i] - mean[i] * scale[i]).collect();
    Ok(BatchNorm {
        scale,
        shift,
        mean,
        beta,
    })
}

fn to_f32(v: impl IntoIterator<Item = f64>) -> Vec<f32> {
    v.into_iter().map(|x| x as f32).collect()
}

/// The key, shape and elements of a computed operand (not a plain tensor).
pub fn folded(g: &Graph, o: &Operand) -> Result<(String, Vec<i64>, ConstData), String> {
    if let Operand::Requantized { anchor, part } = o {
        return requantized(g, anchor, *part);
    }
    let (key, shape, data) = folded_f32(g, o)?;
    Ok((key, shape, ConstData::F32(data)))
}

/// One part of a quantized anchor's constants.
fn requantized(
    g: &Graph,
    anchor: &str,
    part: QuantPart,
) -> Result<(String, Vec<i64>, ConstData), String> {
    let a = g
        .nodes
        .iter()
        .position(|n| n.name == anchor)
        .ok_or_else(|| format!("no node '{anchor}'"))?;
    let r = tunehub_onnx::requantization::requantization(g, a)?;
    let channels = vec![r.scale.len() as i64];
    Ok(match part {
        QuantPart::Bias => (format!("{anchor}.bias"), channels, ConstData::I32(r.bias)),
        QuantPart::Scale => (format!("{anchor}.scale"), channels, ConstData::F32(r.scale)),
        QuantPart::ZeroPoint => {
            let dtype = r.out;
            let z = ConstData::ints(dtype, &[r.zero_point])
                .ok_or_else(|| format!("the zero point of '{anchor}' is out of range"))?;
            (format!("{anchor}.zero_point"), vec![1], z)
        }
    })
}

/// `t` as f32 when a `DequantizeLinear` of a constant computes it (`None` otherwise):
/// `(q - zero_point) * scale`, per tensor or along its `axis`.
pub fn dequantized(g: &Graph, t: &str) -> Result<Option<Vec<f32>>, String> {
    let Some(d) = g
        .nodes
        .iter()
        .find(|n| n.op == DEQUANTIZE && n.outputs.iter().any(|o| o == t))
    else {
        return Ok(None);
    };
    if !d.input(0).is_some_and(|x| g.is_constant(x)) {
        return Ok(None);
    }
    let v = dequantize_constant(g, d)?;
    Ok(Some(v.into_iter().map(|x| x as f32).collect()))
}

fn folded_f32(g: &Graph, o: &Operand) -> Result<(String, Vec<i64>, Vec<f32>), String> {
    match o {
        Operand::Requantized { .. } => unreachable!("typed: `requantized`"),
        Operand::Transposed { name, .. } | Operand::Padded { name, .. } => {
            Err(format!("'{name}' is laid out, not computed"))
        }
        Operand::Tensor { name } => Err(format!("'{name}' is not computed")),
        Operand::FoldedWeight { weight, bn } => {
            let b = batch_norm(g, bn)?;
            let w = g
                .floats(weight)
                .ok_or_else(|| format!("the weight '{weight}' is not a constant"))?;
            let shape = g.shape(weight).map(<[i64]>::to_vec).unwrap_or_default();
            let per = w.len() / b.scale.len().max(1);
            if per * b.scale.len() != w.len() {
                return Err(format!(
                    "the weight '{weight}' does not have one filter per channel of '{bn}'"
                ));
            }
            let data = w
                .iter()
                .enumerate()
                .map(|(i, &x)| (f64::from(x) * b.scale[i / per]) as f32)
                .collect();
            Ok((format!("{weight}*{bn}"), shape, data))
        }
        Operand::FoldedBias { bias, bn } => {
            let b = batch_norm(g, bn)?;
            let own = match bias {
                Some(t) => g
                    .floats(t)
                    .ok_or_else(|| format!("the bias '{t}' is not a constant"))?
                    .into_iter()
                    .map(f64::from)
                    .collect(),
                None => vec![0.0; b.scale.len()],
            };
            let data = (0..b.scale.len()).map(|i| (own[i] - b.mean[i]) * b.scale[i] + b.beta[i]);
            Ok((
                format!("{bn}.folded_bias"),
                vec![b.scale.len() as i64],
                to_f32(data),
            ))
        }
        Operand::Winograd { weight, m } => {
            let w = g
                .floats(weight)
                .ok_or_else(|| format!("the weight '{weight}' is not a constant"))?;
            let shape = g.shape(weight).unwrap_or_default();
            let [f, c, 3, 3] = *shape else {
                return Err(format!(
                    "the weight '{weight}' is {shape:?}, not 3x3 filters: no Winograd form"
                ));
            };
            let (f, c) = (f as usize, c as usize);
            let alpha = *m + 2;
            let u = tunehub_onnx::winograd::weight(&w, f, c, *m);
            let dims = vec![alpha * alpha, c as i64, f as i64];
            Ok((format!("{weight}.winograd{m}"), dims, u))
        }
        Operand::BnScale { bn } => {
            let b = batch_norm(g, bn)?;
            Ok((
                format!("{bn}.scale"),
                vec![b.scale.len() as i64],
                to_f32(b.scale),
            ))
        }
        Operand::BnShift { bn } => {
            let b = batch_norm(g, bn)?;
            Ok((
                format!("{bn}.shift"),
                vec![b.shift.len() as i64],
                to_f32(b.shift),
            ))
        }
    }
}
