//! A QDQ model's conversions between f32 and its 8-bit tensors, as steps: `QuantizeLinear`
//! (`saturate(round_half_even(x / scale) + zero_point)`) and `DequantizeLinear`
//! (`(q - zero_point) * scale`), one scale and zero point per tensor. Where an integer kernel
//! reads the 8-bit tensor behind a `DequantizeLinear`, the conversion is computed for nothing
//! and `prune` drops it. A tensor kept in a kernel's layout (`layout`) is converted in it. A
//! `DequantizeLinear` of a constant (a weight) is folded where an f32 operator reads it
//! (`constants::dequantized`).

use crate::error::CompileError;
use crate::lowering::Lowering;
use crate::program::{Convert, Step, Storage};
use tunehub_engine::ir::DType;
use tunehub_onnx::graph::Node;
use tunehub_onnx::quantized::{QUANTIZE, eight_bit, single};

impl Lowering<'_> {
    pub(crate) fn convert(&mut self, n: &Node) -> Result<(), CompileError> {
        let g = self.g;
        if n.input(0).is_some_and(|x| g.is_constant(x)) {
            self.note(n, "folded", None);
            return Ok(());
        }
        let zero_point = single(g, n).ok_or_else(|| {
            CompileError::node(
                n,
                "a compiled model converts an activation with one scale and one zero point (a \
                 per-axis one is for weights)",
            )
        })?;
        let scale = n.input(1).and_then(|s| g.floats(s)).unwrap_or_default()[0];
        if !(scale.is_finite() && scale > 0.0) {
            return Err(CompileError::node(
                n,
                format!("its scale {scale} is not finite and positive"),
            ));
        }
        let eight_bit = eight_bit(g, n).ok_or_else(|| {
            CompileError::node(n, "a compiled model converts u8 and i8 tensors only")
        })?;
        let quantize = n.op == QUANTIZE;
        // A tensor kept in a kernel's layout is converted in it, and the result kept so
        // (a dequantization, when its readers take it so).
        let readers_keep = || quantize || n.outputs.first().is_some_and(|t| self.readers_keep(t));
        let kept = n
            .input(0)
            .and_then(|x| self.kept(x))
            .filter(|_| readers_keep());
        let src = match &kept {
            Some(k) => k.value,
            None => self.any_input(n, 0)?.0,
        };
        let want = if quantize { DType::F32 } else { eight_bit };
        let got = self.p.values[src].dtype;
        if got != want {
            return Err(CompileError::node(
                n,
                format!("its input is {}, not {}", got.name(), want.name()),
            ));
        }
        let out = if quantize { eight_bit } else { DType::F32 };
        let dst = match (&kept, n.outputs.first().filter(|o| !o.is_empty())) {
            (Some(k), Some(t)) => {
                let shape = self.shape_of(t, Some(n))?;
                self.keep(t, &shape, out, &k.perm)
                    .map_err(|e| CompileError::node(n, e))?
            }
            _ => self.typed_output(n, 0, out, Storage::Arena)?.0,
        };
        let c = Convert {
            dst,
            src,
            scale,
            zero_point: zero_point as i32,
        };
        self.p.steps.push(if quantize {
            Step::Quantize(c)
        } else {
            Step::Dequantize(c)
        });
        self.note(n, if quantize { "quantize" } else { "dequantize" }, None);
        Ok(())
    }
}
