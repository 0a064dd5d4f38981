//! A built model against its reference: the same random inputs through the library and through
//! tract running the ONNX file; every output must match within the kernels' tolerance
//! (`measure::check`: relative 1e-3 of the larger of the element and the output's RMS). A
//! QDQ model's output that a `DequantizeLinear` computes is a count of its scale's quanta:
//! a value within f32's rounding of a half, rounded the other way on one side anywhere
//! upstream, moves it by a whole quantum, so each element may be [`QUANTA`] of them off.

use crate::error::CompileError;
use crate::library::Library;
use rand::{Rng, SeedableRng};
use tunehub_engine::measure::check::compare;
use tunehub_onnx::InputShapes;
use tunehub_onnx::graph::Graph;
use tunehub_onnx::quantized::output_quanta;
use tunehub_onnx::reference::{self, Array};

/// How many quanta a quantized output's elements may be off the reference's. ResNet-18
/// quantized by ONNX Runtime (20 requantizations deep) was at most 1 off, in a quarter of its
/// logits, against ONNX Runtime and tract alike.
pub const QUANTA: f32 = 2.0;

/// Random inputs of the model's shapes, uniform in [-1, 1), from `seed`.
pub fn random_inputs(lib: &Library, seed: u64) -> Vec<Array> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    lib.manifest
        .inputs
        .iter()
        .map(|io| {
            let shape: Vec<usize> = io.shape.iter().map(|&d| d as usize).collect();
            let n = shape.iter().product();
            Array {
                shape,
                data: (0..n).map(|_| rng.gen_range(-1.0f32..1.0)).collect(),
            }
        })
        .collect()
}

/// Runs both on the same random inputs and compares every output; the outputs' names on
/// success. The library runs twice, on inputs it reads where they are and on inputs it copies.
pub fn against_reference(
    lib: &mut Library,
    model: &[u8],
    shapes: &InputShapes,
    model_dir: Option<&str>,
    seed: u64,
) -> Result<Vec<String>, CompileError> {
    let inputs = random_inputs(lib, seed);
    let expected = reference::run(model, shapes, model_dir, &inputs)?;
    // The inputs read where they are, and copied first: the same outputs, bit for bit.
    let got = lib.run_placed(&inputs, true)?;
    let copied = lib.run_placed(&inputs, false)?;
    for ((g, c), io) in got.iter().zip(&copied).zip(&lib.manifest.outputs) {
        if g.data
            .iter()
            .zip(&c.data)
            .any(|(a, b)| a.to_bits() != b.to_bits())
        {
            return Err(CompileError::Mismatch {
                output: io.name.clone(),
                detail: "not the same with the inputs read where they are and copied".into(),
            });
        }
    }
    let names: Vec<String> = lib
        .manifest
        .outputs
        .iter()
        .map(|o| o.name.clone())
        .collect();
    if expected.len() != got.len() {
        return Err(CompileError::Library(format!(
            "the reference gives {} outputs, the library {}",
            expected.len(),
            got.len()
        )));
    }
    let quanta = output_quanta(&Graph::load(model, shapes, model_dir)?);
    for (((e, g), name), q) in expected.iter().zip(&got).zip(&names).zip(quanta) {
        let checked = match q {
            None => compare(&g.data, &e.data),
            Some(q) => within_quanta(&g.data, &e.data, q),
        };
        checked.map_err(|detail| CompileError::Mismatch {
            output: name.clone(),
            detail,
        })?;
    }
    Ok(names)
}

/// Every element within [`QUANTA`] of `quantum` of the reference's.
fn within_quanta(got: &[f32], want: &[f32], quantum: f32) -> Result<(), String> {
    // A hair over: both sides are the same multiples of the quantum, rounded to f32.
    let limit = (QUANTA + 0.01) * quantum;
    let off: Vec<usize> = (0..want.len())
        .filter(|&i| {
            got.get(i)
                .is_none_or(|g| (g - want[i]).abs().is_nan() || (g - want[i]).abs() > limit)
        })
        .collect();
    match off.first() {
        None if got.len() == want.len() => Ok(()),
        None => Err(format!(
            "{} elements, the reference {}",
            got.len(),
            want.len()
        )),
        Some(&i) => Err(format!(
            "{} of {} elements are more than {QUANTA} quanta ({quantum:e}) off; first at flat \
             index {i}: got {:e}, expected {:e}",
            off.len(),
            want.len(),
            got.get(i).copied().unwrap_or(f32::NAN),
            want[i]
        )),
    }
}

/// The model a compiled one is checked against: its file's bytes, the shapes it was compiled
/// with, where its external weights are.
pub struct Reference<'a> {
    pub model: &'a [u8],
    pub shapes: &'a InputShapes,
    pub dir: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A quantized output may be off by whole quanta up to [`QUANTA`], not by more.
    #[test]
    fn a_quantized_output_is_within_two_quanta() {
        let want = [0.5, -1.0, 3.0];
        assert!(within_quanta(&want, &want, 0.5).is_ok());
        assert!(within_quanta(&[1.5, -2.0, 3.0], &want, 0.5).is_ok());
        let e = within_quanta(&[2.0, -1.0, 3.0], &want, 0.5).unwrap_err();
        assert!(e.contains("1 of 3") && e.contains("index 0"), "{e}");
        assert!(within_quanta(&[f32::NAN, -1.0, 3.0], &want, 0.5).is_err());
        assert!(within_quanta(&want[..2], &want, 0.5).is_err());
    }
}
