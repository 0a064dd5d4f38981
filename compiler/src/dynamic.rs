//! A dynamically quantized model's steps (`tunehub_onnx::integer`): `DynamicQuantizeLinear`
//! (its scale and zero point from the tensor's range, then the tensor quantized), the data
//! zero point's correction of an integer kernel's sums, and the `Cast` of those i32 sums to
//! f32. Each is elementwise but for the correction's sums, which are stored in the layout of
//! the kernel's result: a tensor kept in a kernel's layout (`layout`) stays so through them.

use crate::error::CompileError;
use crate::glue::row_major;
use crate::lowering::Lowering;
use crate::program::{ConstData, Convert, DynamicQuantize, Step, Storage, ValueId, ZeroPointShift};
use tunehub_engine::ir::DType;
use tunehub_onnx::graph::{Graph, Node};
use tunehub_onnx::integer::{data_zero_point, zero_point_sums};
use tunehub_onnx::quantized::consumers;

impl Lowering<'_> {
    /// Output `o` of `n`, of `dtype`: kept in the layout the model's tensor `x` (its input) is
    /// kept in, else in the model's.
    fn alike(
        &mut self,
        n: &Node,
        x: &str,
        o: usize,
        dtype: DType,
    ) -> Result<ValueId, CompileError> {
        let t = n.outputs.get(o).map_or("", String::as_str);
        match self.kept(x) {
            Some(k) => {
                let shape = self.shape_of(t, Some(n))?;
                self.keep(t, &shape, dtype, &k.perm)
                    .map_err(|e| CompileError::node(n, e))
            }
            None => Ok(self.typed_output(n, o, dtype, Storage::Arena)?.0),
        }
    }

    /// Input 0 of `n` as it is held (kept in a kernel's layout, or the model's), and its name.
    pub(crate) fn held(&mut self, n: &Node) -> Result<(ValueId, String), CompileError> {
        let x = n.input(0).unwrap_or_default().to_string();
        let v = match self.kept(&x) {
            Some(k) => k.value,
            None => self.any_input(n, 0)?.0,
        };
        Ok((v, x))
    }

    /// ONNX's `DynamicQuantizeLinear` of an f32 tensor.
    pub(crate) fn dynamic_quantize(&mut self, n: &Node) -> Result<(), CompileError> {
        let (src, x) = self.held(n)?;
        if self.p.values[src].dtype != DType::F32 {
            return Err(CompileError::node(n, "its input is not float32"));
        }
        let dst = self.alike(n, &x, 0, DType::U8)?;
        let scale = self.typed_output(n, 1, DType::F32, Storage::Arena)?.0;
        let zero_point = self.typed_output(n, 2, DType::U8, Storage::Arena)?.0;
        if self.p.values[scale].elements() != 1 || self.p.values[zero_point].elements() != 1 {
            return Err(CompileError::node(
                n,
                "its scale and zero point are not scalars",
            ));
        }
        self.p.steps.push(Step::DynamicQuantize(DynamicQuantize {
            dst,
            scale,
            zero_point,
            src,
        }));
        self.note(n, "quantize", None);
        Ok(())
    }

    /// A `Cast` to float32 of an i32 tensor (an integer operator's sums), unless the
    /// correction of those sums already wrote its result.
    pub(crate) fn cast_integer(&mut self, n: &Node) -> Result<(), CompileError> {
        if self.cast_done(n) {
            self.note(n, "cast", None);
            return Ok(());
        }
        let (src, x) = self.held(n)?;
        let dst = self.alike(n, &x, 0, DType::F32)?;
        self.p.steps.push(Step::Dequantize(Convert {
            dst,
            src,
            scale: 1.0,
            zero_point: 0,
        }));
        self.note(n, "cast", None);
        Ok(())
    }

    /// After the kernel of integer node `n` wrote its sums to `out`: their correction by the
    /// data zero point, when `n` has one that is not a constant 0. The corrected sums are
    /// `out`, or, when a `Cast` to float32 alone reads them (as `quantize_dynamic` writes it),
    /// that cast's result, converted in the same pass.
    pub(crate) fn shift_zero_point(&mut self, n: &Node, out: &str) -> Result<(), CompileError> {
        let g = self.g;
        let Some(z) = data_zero_point(g, n) else {
            return Ok(());
        };
        let zero_point = self.value_of(z, Some(n))?;
        if !matches!(self.p.values[zero_point].dtype, DType::U8 | DType::I8)
            || self.p.values[zero_point].elements() != 1
        {
            return Err(CompileError::node(
                n,
                "its data zero point is not one 8-bit value",
            ));
        }
        let (shape, sums) = zero_point_sums(g, n).map_err(|e| CompileError::node(n, e))?;
        // Kept with its batch axis first (a convolution's NHWC), corrected so; else in the
        // model's layout, which the uncorrected kept sums must then not stand for.
        let kept = self
            .kept(out)
            .filter(|k| k.perm.first() == Some(&0) && k.perm.len() == shape.len() + 1);
        let (src, sums) = match &kept {
            // The sums in the kernel's layout: its perm without the batch axis.
            Some(k) => {
                let perm: Vec<usize> = k.perm[1..].iter().map(|&p| p - 1).collect();
                let own: Vec<i64> = perm.iter().map(|&p| shape[p]).collect();
                let strides = row_major(&shape);
                let walk: Vec<i64> = perm.iter().map(|&p| strides[p]).collect();
                let data = ConstData::I32(sums).permuted(&own, &walk);
                (k.value, (own, data))
            }
            None => {
                let v = self.value_of(out, Some(n))?;
                self.kept.remove(out);
                (v, (shape, ConstData::I32(sums)))
            }
        };
        let elements = |s: &[i64]| s.iter().product::<i64>();
        if elements(&self.p.values[src].shape) % elements(&sums.0).max(1) != 0 {
            return Err(CompileError::node(
                n,
                "its zero point's sums do not divide its output",
            ));
        }
        let key = format!("{}.zero_point_sums", n.name);
        let sums = self.constant(key, sums.0, sums.1);
        self.p.values[src].name = format!("{out}.sums");
        let (name, dtype) = match sole_cast(g, out) {
            Some(cast) => (cast.outputs[0].as_str(), DType::F32),
            None => (out, DType::I32),
        };
        let out_shape = self.shape_of(name, Some(n))?;
        let dst = match &kept {
            Some(k) => self
                .keep(name, &out_shape, dtype, &k.perm)
                .map_err(|e| CompileError::node(n, e))?,
            None => self.add(name, out_shape, dtype, Storage::Arena),
        };
        self.p.steps.push(Step::ZeroPointShift(ZeroPointShift {
            dst,
            src,
            zero_point,
            sums,
        }));
        Ok(())
    }

    /// Whether the result of `Cast` node `n` is already computed (by the correction of the
    /// sums it converts: [`Self::shift_zero_point`]).
    pub(crate) fn cast_done(&self, n: &Node) -> bool {
        n.outputs
            .first()
            .is_some_and(|t| self.by_name.contains_key(t) || self.kept(t).is_some())
    }
}

/// The `Cast` to float32 that alone reads `t`, when one does.
fn sole_cast<'g>(g: &'g Graph, t: &str) -> Option<&'g Node> {
    let [c] = consumers(g, t)[..] else {
        return None;
    };
    g.nodes
        .get(c)
        .filter(|c| c.op == "Cast" && c.int("to") == Some(1) && c.outputs.len() == 1)
}
