//! The nodes no kernel runs: views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout, a
//! Cast to float32) cost nothing, they name the same memory; Transpose, Concat, Split, Slice,
//! Expand and Pad are strided copies (`Copy`), Pad after a fill; Gather with constant indices
//! is a `Gather`. A QDQ model's conversions are `convert`'s; a dynamically quantized model's
//! (`DynamicQuantizeLinear`, a `Cast` of i32 sums) `dynamic`'s. Arithmetic on single values
//! (a data scale times a weight's) is one line of C. Anything else is an error naming
//! the node. Views and copies take tensors of any type; Pad and Gather float32 ones.

use crate::error::CompileError;
use crate::lowering::Lowering;
use crate::program::{Copy, Gather, Step, Storage, ValueId};
use tunehub_engine::ir::DType;
use tunehub_onnx::classify::on_scalars;
use tunehub_onnx::graph::Node;
use tunehub_onnx::integer::DYNAMIC_QUANTIZE;
use tunehub_onnx::quantized::{DEQUANTIZE, QUANTIZE};

/// Row-major strides of `shape`, in elements.
pub fn row_major(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

const VIEWS: &[&str] = &[
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Identity",
    "Dropout",
    "Cast",
];

/// `axis` of a rank-`r` tensor, negative ones counted from the end.
fn axis(n: &Node, a: i64, r: usize) -> Result<usize, CompileError> {
    let r = r as i64;
    let v = if a < 0 { a + r } else { a };
    if !(0..r.max(1)).contains(&v) {
        return Err(CompileError::node(
            n,
            format!("axis {a} is out of range for rank {r}"),
        ));
    }
    Ok(v as usize)
}

impl Lowering<'_> {
    /// Input `i` of `n`, of any type.
    pub(crate) fn any_input(
        &mut self,
        n: &Node,
        i: usize,
    ) -> Result<(ValueId, Vec<i64>), CompileError> {
        let t = n
            .input(i)
            .ok_or_else(|| CompileError::node(n, format!("input {i} is missing")))?;
        let v = self.value_of(t, Some(n))?;
        Ok((v, self.p.values[v].shape.clone()))
    }

    /// Input `i` of `n`, which must be float32 (what Pad and Gather take).
    fn input_value(&mut self, n: &Node, i: usize) -> Result<(ValueId, Vec<i64>), CompileError> {
        self.typed_input(n, i, DType::F32)
    }

    /// Input `i` of `n`, which must be of type `want`.
    fn typed_input(
        &mut self,
        n: &Node,
        i: usize,
        want: DType,
    ) -> Result<(ValueId, Vec<i64>), CompileError> {
        let (v, shape) = self.any_input(n, i)?;
        match self.p.values[v].dtype {
            t if t == want => Ok((v, shape)),
            t => Err(CompileError::node(
                n,
                format!(
                    "its input '{}' is {}, not {} (Pad and Gather take float32; a Concat's \
                     inputs are of one type)",
                    self.p.values[v].name,
                    t.name(),
                    want.name()
                ),
            )),
        }
    }

    /// Input `i` of `n` and its type, and output `o` of the same type in the arena.
    fn same_type(
        &mut self,
        n: &Node,
        i: usize,
        o: usize,
    ) -> Result<(ValueId, Vec<i64>, ValueId, Vec<i64>), CompileError> {
        let (x, xs) = self.any_input(n, i)?;
        let (y, ys) = self.typed_output(n, o, self.p.values[x].dtype, Storage::Arena)?;
        Ok((x, xs, y, ys))
    }

    /// A float32 output.
    fn output_value(
        &mut self,
        n: &Node,
        i: usize,
        storage: Storage,
    ) -> Result<(ValueId, Vec<i64>), CompileError> {
        self.typed_output(n, i, DType::F32, storage)
    }

    pub(crate) fn typed_output(
        &mut self,
        n: &Node,
        i: usize,
        dtype: DType,
        storage: Storage,
    ) -> Result<(ValueId, Vec<i64>), CompileError> {
        let t = n
            .outputs
            .get(i)
            .filter(|o| !o.is_empty())
            .ok_or_else(|| CompileError::node(n, format!("output {i} is missing")))?
            .clone();
        let shape = self.shape_of(&t, Some(n))?;
        let v = self.add(&t, shape.clone(), dtype, storage);
        Ok((v, shape))
    }

    /// A constant integer list: input `i`, else attribute `attr`.
    fn ints_of(&self, n: &Node, i: usize, attr: &str) -> Result<Option<Vec<i64>>, CompileError> {
        match n.input(i) {
            Some(t) => self.g.ints(t).map(Some).ok_or_else(|| {
                CompileError::node(n, format!("its input '{t}' must be a constant"))
            }),
            None => Ok(n.ints(attr)),
        }
    }

    pub(crate) fn glue(&mut self, n: &Node) -> Result<(), CompileError> {
        let g = self.g;
        let op = n.op.as_str();
        if op == QUANTIZE || op == DEQUANTIZE {
            return self.convert(n);
        }
        if op == DYNAMIC_QUANTIZE {
            return self.dynamic_quantize(n);
        }
        if on_scalars(g, n) {
            let (a, _) = self.input_value(n, 0)?;
            let (b, _) = self.input_value(n, 1)?;
            let (dst, _) = self.output_value(n, 0, Storage::Arena)?;
            let op = match op {
                "Add" => '+',
                "Sub" => '-',
                "Mul" => '*',
                _ => '/',
            };
            self.p.steps.push(Step::Scalar { dst, a, b, op });
            self.note(n, "scalar", None);
            return Ok(());
        }
        if op == "Cast" && n.int("to") == Some(1) {
            if self.cast_done(n) {
                return self.cast_integer(n);
            }
            let (x, _) = self.held(n)?;
            if self.p.values[x].dtype == DType::I32 {
                return self.cast_integer(n);
            }
        }
        if VIEWS.contains(&op) {
            if op == "Cast" && n.int("to") != Some(1) {
                return Err(CompileError::node(
                    n,
                    "only a Cast to float32 is supported in a compiled model",
                ));
            }
            // A view of any type (a Flatten of a quantized tensor); a Cast of float32 only.
            let (x, xs) = match op {
                "Cast" => self.input_value(n, 0)?,
                _ => self.any_input(n, 0)?,
            };
            let (root, dtype) = (self.p.root(x), self.p.values[x].dtype);
            let (_, ys) = self.typed_output(n, 0, dtype, Storage::View(root))?;
            if xs.iter().product::<i64>() != ys.iter().product::<i64>() {
                return Err(CompileError::node(
                    n,
                    "its output does not have its input's elements",
                ));
            }
            self.note(n, "view", None);
            return Ok(());
        }
        match op {
            "Transpose" => {
                let (x, xs, y, ys) = self.same_type(n, 0, 0)?;
                let perm = n
                    .ints("perm")
                    .unwrap_or_else(|| (0..xs.len() as i64).rev().collect());
                let strides = row_major(&xs);
                let src_strides = perm
                    .iter()
                    .map(|&p| axis(n, p, xs.len()).map(|p| strides[p]))
                    .collect::<Result<_, _>>()?;
                self.copy(y, 0, row_major(&ys), x, 0, src_strides, ys);
            }
            "Concat" => {
                let first = (0..n.inputs.len())
                    .find(|&i| n.input(i).is_some())
                    .unwrap_or(0);
                let (x, _) = self.any_input(n, first)?;
                let dtype = self.p.values[x].dtype;
                let (y, ys) = self.typed_output(n, 0, dtype, Storage::Arena)?;
                let a = axis(n, n.int("axis").unwrap_or(0), ys.len())?;
                let out_strides = row_major(&ys);
                let mut at = 0;
                for i in 0..n.inputs.len() {
                    if n.input(i).is_none() {
                        continue;
                    }
                    let (x, xs) = self.typed_input(n, i, dtype)?;
                    self.copy(
                        y,
                        at * out_strides[a],
                        out_strides.clone(),
                        x,
                        0,
                        row_major(&xs),
                        xs.clone(),
                    );
                    at += xs[a];
                }
            }
            "Split" => {
                let (x, xs) = self.any_input(n, 0)?;
                let dtype = self.p.values[x].dtype;
                let a = axis(n, n.int("axis").unwrap_or(0), xs.len())?;
                let strides = row_major(&xs);
                let mut at = 0;
                for i in 0..n.outputs.len() {
                    if n.outputs[i].is_empty() {
                        continue;
                    }
                    let (y, ys) = self.typed_output(n, i, dtype, Storage::Arena)?;
                    self.copy(
                        y,
                        0,
                        row_major(&ys),
                        x,
                        at * strides[a],
                        strides.clone(),
                        ys.clone(),
                    );
                    at += ys[a];
                }
            }
            "Slice" => {
                let (x, xs, y, ys) = self.same_type(n, 0, 0)?;
                let starts = self.ints_of(n, 1, "starts")?.unwrap_or_default();
                let axes = self
                    .ints_of(n, 3, "axes")?
                    .unwrap_or_else(|| (0..starts.len() as i64).collect());
                let steps = self
                    .ints_of(n, 4, "steps")?
                    .unwrap_or_else(|| vec![1; starts.len()]);
                let strides = row_major(&xs);
                let mut src_strides = strides.clone();
                let mut offset = 0;
                for (k, &ax) in axes.iter().enumerate() {
                    let d = axis(n, ax, xs.len())?;
                    let (dim, step) = (xs[d], steps.get(k).copied().unwrap_or(1));
                    if step == 0 {
                        return Err(CompileError::node(n, "a step of 0"));
                    }
                    let mut s = starts.get(k).copied().unwrap_or(0);
                    if s < 0 {
                        s += dim;
                    }
                    s = if step > 0 {
                        s.clamp(0, dim)
                    } else {
                        s.clamp(0, dim - 1)
                    };
                    offset += s * strides[d];
                    src_strides[d] = strides[d] * step;
                }
                self.copy(y, 0, row_major(&ys), x, offset, src_strides, ys);
            }
            "Expand" => {
                let (x, xs, y, ys) = self.same_type(n, 0, 0)?;
                let strides = row_major(&xs);
                let lead = ys.len().saturating_sub(xs.len());
                let src_strides = (0..ys.len())
                    .map(|d| match d.checked_sub(lead) {
                        Some(i) if xs[i] != 1 || ys[d] == 1 => strides[i],
                        _ => 0,
                    })
                    .collect();
                self.copy(y, 0, row_major(&ys), x, 0, src_strides, ys);
            }
            "Pad" => {
                let mode = n.string("mode").unwrap_or_else(|| "constant".into());
                if mode != "constant" || n.input(3).is_some() {
                    return Err(CompileError::node(
                        n,
                        "only a constant Pad over every axis is supported",
                    ));
                }
                let (x, xs) = self.input_value(n, 0)?;
                let pads = self
                    .ints_of(n, 1, "pads")?
                    .ok_or_else(|| CompileError::node(n, "no pads"))?;
                if pads.len() != 2 * xs.len() || pads.iter().any(|&p| p < 0) {
                    return Err(CompileError::node(
                        n,
                        "pads must be 2 per axis and not negative",
                    ));
                }
                let value = match n.input(2) {
                    Some(t) => g.scalar(t).ok_or_else(|| {
                        CompileError::node(n, "its constant_value must be a constant")
                    })? as f32,
                    None => n.float("value").unwrap_or(0.0),
                };
                let (y, ys) = self.output_value(n, 0, Storage::Arena)?;
                let out_strides = row_major(&ys);
                let offset = (0..xs.len()).map(|d| pads[d] * out_strides[d]).sum();
                self.p.steps.push(Step::Fill { dst: y, value });
                self.copy(y, offset, out_strides, x, 0, row_major(&xs), xs);
            }
            "Gather" => {
                let (x, xs) = self.input_value(n, 0)?;
                let a = axis(n, n.int("axis").unwrap_or(0), xs.len())?;
                let t = n.input(1).unwrap_or_default();
                let indices = g.ints(t).ok_or_else(|| {
                    CompileError::node(n, "only constant indices are supported in a compiled model")
                })?;
                let indices = indices
                    .into_iter()
                    .map(|i| {
                        let v = if i < 0 { i + xs[a] } else { i };
                        if (0..xs[a]).contains(&v) {
                            Ok(v)
                        } else {
                            Err(CompileError::node(
                                n,
                                format!("index {i} is out of range for {}", xs[a]),
                            ))
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let (y, _) = self.output_value(n, 0, Storage::Arena)?;
                self.p.steps.push(Step::Gather(Gather {
                    dst: y,
                    src: x,
                    outer: xs[..a].iter().product(),
                    axis: xs[a],
                    inner: xs[a + 1..].iter().product(),
                    indices,
                }));
                self.note(n, "gather", None);
                return Ok(());
            }
            _ => {
                return Err(CompileError::node(
                    n,
                    format!(
                        "not supported in a compiled model (runs: the tuned operators, views {}, and Transpose, Concat, Split, Slice, Expand, Pad, Gather)",
                        VIEWS.join(", ")
                    ),
                ));
            }
        }
        self.note(n, "copy", None);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn copy(
        &mut self,
        dst: ValueId,
        dst_offset: i64,
        dst_strides: Vec<i64>,
        src: ValueId,
        src_offset: i64,
        src_strides: Vec<i64>,
        shape: Vec<i64>,
    ) {
        self.p.steps.push(Step::Copy(Copy {
            dst,
            dst_offset,
            dst_strides,
            src,
            src_offset,
            src_strides,
            shape,
            layout: false,
        }));
    }
}
