//! A built model against its reference: the same random inputs through the library and through
//! tract running the ONNX file; every output must match within the kernels' tolerance
//! (`measure::check`: relative 1e-3 of the larger of the element and the output's RMS).

use crate::error::CompileError;
use crate::library::Library;
use rand::{Rng, SeedableRng};
use tunehub_engine::measure::check::compare;
use tunehub_onnx::InputShapes;
use tunehub_onnx::reference::{self, Array};

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
/// success.
pub fn against_reference(
    lib: &mut Library,
    model: &[u8],
    shapes: &InputShapes,
    model_dir: Option<&str>,
    seed: u64,
) -> Result<Vec<String>, CompileError> {
    let inputs = random_inputs(lib, seed);
    let expected = reference::run(model, shapes, model_dir, &inputs)?;
    let got = lib.run(&inputs)?;
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
    for ((e, g), name) in expected.iter().zip(&got).zip(&names) {
        compare(&g.data, &e.data).map_err(|detail| CompileError::Mismatch {
            output: name.clone(),
            detail,
        })?;
    }
    Ok(names)
}

/// The model a compiled one is checked against: its file's bytes, the shapes it was compiled
/// with, where its external weights are.
pub struct Reference<'a> {
    pub model: &'a [u8],
    pub shapes: &'a InputShapes,
    pub dir: Option<&'a str>,
}
