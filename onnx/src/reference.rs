//! The reference execution of a model: tract runs the same ONNX file (with the same fixed
//! input shapes), so that what tunehub compiles is checked against an implementation that
//! shares none of its code.

use crate::error::ImportError;
use crate::shapes::InputShapes;
use tract_onnx::prelude::*;

/// One float tensor: its shape and its elements in row-major order.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// Runs the model on `inputs` (the model's non-constant inputs, in its order) and returns its
/// outputs in its order. `dir` is where external weight files are looked for.
pub fn run(
    bytes: &[u8],
    shapes: &InputShapes,
    dir: Option<&str>,
    inputs: &[Array],
) -> Result<Vec<Array>, ImportError> {
    let fail = |e: TractError| ImportError::Graph(format!("reference run: {e:#}"));
    let proto = crate::graph::decode(bytes, shapes)?;
    let model = tract_onnx::onnx()
        .parse(&proto, dir)
        .map_err(fail)?
        .model
        .into_optimized()
        .map_err(fail)?
        .into_runnable()
        .map_err(fail)?;
    let values: TVec<TValue> = inputs
        .iter()
        .map(|a| {
            tract_ndarray::ArrayD::from_shape_vec(a.shape.clone(), a.data.clone())
                .map(|x| Tensor::from(x).into_tvalue())
                .map_err(|e| ImportError::Graph(format!("reference input: {e}")))
        })
        .collect::<Result<_, _>>()?;
    let outputs = model.run(values).map_err(fail)?;
    outputs
        .iter()
        .map(|t| {
            let t = t.cast_to::<f32>().map_err(fail)?;
            Ok(Array {
                shape: t.shape().to_vec(),
                data: t
                    .try_as_plain_ram()
                    .and_then(|v| v.as_slice::<f32>().map(<[f32]>::to_vec))
                    .map_err(fail)?,
            })
        })
        .collect()
}
