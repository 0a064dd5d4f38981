//! The program a compiled model runs: every tensor it touches, where each lives (the arena, the
//! weights file, or a view of another), and the steps that compute them in an order that
//! respects their dependencies. `lowering` builds it from the graph, its calls (one per fused
//! group) and one kernel per task.

use tunehub_engine::ir::DType;
use tunehub_engine::package::Kernel;

pub type ValueId = usize;

/// One tensor of the run.
#[derive(Debug, Clone)]
pub struct Value {
    pub name: String,
    pub shape: Vec<i64>,
    /// f32, or 8-bit (a QDQ model's quantized tensors, its weights) or i32 (their biases).
    pub dtype: DType,
    pub storage: Storage,
}

impl Value {
    pub fn elements(&self) -> i64 {
        self.shape.iter().product()
    }

    pub fn bytes(&self) -> u64 {
        self.elements().max(0) as u64 * self.dtype.bytes() as u64
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// A slot of the arena (an activation, a model input or output): the memory plan's.
    Arena,
    /// The same elements, in the same order, as another value (Reshape, Flatten, Squeeze...).
    View(ValueId),
    /// In the weights file: index into [`Program::constants`].
    Constant(usize),
}

/// A constant stored in the weights file.
#[derive(Debug, Clone)]
pub struct Constant {
    /// What it is (a tensor's name, or a folded batch norm's parts).
    pub key: String,
    pub data: ConstData,
}

/// A constant's elements, in their type.
#[derive(Debug, Clone, PartialEq)]
pub enum ConstData {
    F32(Vec<f32>),
    I32(Vec<i32>),
    U8(Vec<u8>),
    I8(Vec<i8>),
}

impl ConstData {
    pub fn dtype(&self) -> DType {
        match self {
            ConstData::F32(_) => DType::F32,
            ConstData::I32(_) => DType::I32,
            ConstData::U8(_) => DType::U8,
            ConstData::I8(_) => DType::I8,
        }
    }

    /// Integers as `dtype` (8-bit or i32); `None` when one is out of its range.
    pub fn ints(dtype: DType, v: &[i64]) -> Option<ConstData> {
        fn all<T: TryFrom<i64>>(v: &[i64]) -> Option<Vec<T>> {
            v.iter().map(|&x| T::try_from(x).ok()).collect()
        }
        Some(match dtype {
            DType::I32 => ConstData::I32(all(v)?),
            DType::U8 => ConstData::U8(all(v)?),
            DType::I8 => ConstData::I8(all(v)?),
            _ => return None,
        })
    }

    /// The elements in the order of a strided walk: `shape` row-major, element `i` at
    /// `sum(i_d * strides[d])` of these (a transposition).
    pub fn permuted(&self, shape: &[i64], strides: &[i64]) -> ConstData {
        fn walk<T: std::marker::Copy>(v: &[T], shape: &[i64], strides: &[i64]) -> Vec<T> {
            let mut out = Vec::with_capacity(v.len());
            let mut idx = vec![0i64; shape.len()];
            let total: i64 = shape.iter().product();
            for _ in 0..total {
                let at: i64 = idx.iter().zip(strides).map(|(i, s)| i * s).sum();
                out.push(v[at as usize]);
                for d in (0..shape.len()).rev() {
                    idx[d] += 1;
                    if idx[d] < shape[d] {
                        break;
                    }
                    idx[d] = 0;
                }
            }
            out
        }
        match self {
            ConstData::F32(v) => ConstData::F32(walk(v, shape, strides)),
            ConstData::I32(v) => ConstData::I32(walk(v, shape, strides)),
            ConstData::U8(v) => ConstData::U8(walk(v, shape, strides)),
            ConstData::I8(v) => ConstData::I8(walk(v, shape, strides)),
        }
    }

    /// These elements (of shape `shape`) with `pads[d]` elements equal to `value` added
    /// before axis `d` and `pads[rank + d]` after it (ONNX's `Pad`); `None` when `value` is
    /// not of their type.
    pub fn padded(&self, shape: &[i64], pads: &[i64], value: i64) -> Option<ConstData> {
        fn pad<T: std::marker::Copy>(v: &[T], shape: &[i64], pads: &[i64], fill: T) -> Vec<T> {
            let r = shape.len();
            let out: Vec<i64> = (0..r).map(|d| shape[d] + pads[d] + pads[r + d]).collect();
            let strides = crate::glue::row_major(&out);
            let mut o = vec![fill; out.iter().product::<i64>() as usize];
            let mut idx = vec![0i64; r];
            for &x in v {
                let at: i64 = (0..r).map(|d| (idx[d] + pads[d]) * strides[d]).sum();
                o[at as usize] = x;
                for d in (0..r).rev() {
                    idx[d] += 1;
                    if idx[d] < shape[d] {
                        break;
                    }
                    idx[d] = 0;
                }
            }
            o
        }
        Some(match self {
            ConstData::F32(v) => ConstData::F32(pad(v, shape, pads, value as f32)),
            ConstData::I32(v) => ConstData::I32(pad(v, shape, pads, i32::try_from(value).ok()?)),
            ConstData::U8(v) => ConstData::U8(pad(v, shape, pads, u8::try_from(value).ok()?)),
            ConstData::I8(v) => ConstData::I8(pad(v, shape, pads, i8::try_from(value).ok()?)),
        })
    }

    /// Little-endian, as the targets store them.
    pub fn le_bytes(&self) -> Vec<u8> {
        match self {
            ConstData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            ConstData::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            ConstData::U8(v) => v.clone(),
            ConstData::I8(v) => v.iter().map(|&x| x as u8).collect(),
        }
    }
}

/// A weight a kernel reads packed: written once by `function` when the model is created.
#[derive(Debug, Clone, PartialEq)]
pub struct Packed {
    pub constant: usize,
    pub function: String,
    pub elements: i64,
    /// The packed elements' type (the weight's).
    pub dtype: DType,
}

/// What a kernel argument points at.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arg {
    Value(ValueId),
    Packed(usize),
}

#[derive(Debug, Clone)]
pub struct KernelCall {
    pub symbol: String,
    pub task: usize,
    /// In the kernel's order; the output's is `output`.
    pub args: Vec<Arg>,
    pub output: ValueId,
    /// The ONNX nodes it runs.
    pub nodes: Vec<String>,
}

/// `dst[dst_offset + sum(i_d * dst_strides[d])] = src[src_offset + sum(i_d * src_strides[d])]`
/// over `shape`: transposes, slices, concatenations, splits, broadcasts and pads are all this.
#[derive(Debug, Clone)]
pub struct Copy {
    pub dst: ValueId,
    pub dst_offset: i64,
    pub dst_strides: Vec<i64>,
    pub src: ValueId,
    pub src_offset: i64,
    pub src_strides: Vec<i64>,
    pub shape: Vec<i64>,
    /// A conversion between the model's layout and a kernel's at a region's edge (`layout`),
    /// not an operator of the model: profiled apart from the glue, as the layouts' cost.
    pub layout: bool,
}

/// `dst[o, j, i] = src[o, indices[j], i]` for `o < outer`, `i < inner`; `src` has `axis`
/// entries on the gathered axis.
#[derive(Debug, Clone)]
pub struct Gather {
    pub dst: ValueId,
    pub src: ValueId,
    pub outer: i64,
    pub axis: i64,
    pub inner: i64,
    pub indices: Vec<i64>,
}

/// A QDQ model's conversion between f32 and an 8-bit tensor, one scale and zero point for
/// the whole tensor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Convert {
    pub dst: ValueId,
    pub src: ValueId,
    pub scale: f32,
    pub zero_point: i32,
}

/// ONNX's `DynamicQuantizeLinear`: the scale and u8 zero point that map the range of `src`
/// (widened to hold 0) onto 0..=255, and `src` quantized with them into `dst`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DynamicQuantize {
    pub dst: ValueId,
    /// f32, one element.
    pub scale: ValueId,
    /// u8, one element.
    pub zero_point: ValueId,
    pub src: ValueId,
}

/// An integer operator's sums corrected by its data zero point (`tunehub_onnx::integer`):
/// `dst[i] = src[i] - zero_point * sums[i % len(sums)]`, i32 (`dst` i32, or f32 when the
/// model casts the corrected sums to float32 and nothing else reads them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ZeroPointShift {
    pub dst: ValueId,
    pub src: ValueId,
    /// u8 or i8, one element (computed at run time, or a constant).
    pub zero_point: ValueId,
    /// i32 constant, of the output's elements without its batch, in its layout.
    pub sums: ValueId,
}

#[derive(Debug, Clone)]
pub enum Step {
    Kernel(KernelCall),
    Copy(Copy),
    /// Every element of `dst` set to `value` (in `dst`'s type: an 8-bit zero point is exact).
    Fill {
        dst: ValueId,
        value: f32,
    },
    Gather(Gather),
    /// `dst = saturate(round_half_even(src / scale) + zero_point)`: ONNX's `QuantizeLinear`.
    Quantize(Convert),
    /// `dst = (src - zero_point) * scale`: ONNX's `DequantizeLinear`; of an i32 `src`, with
    /// scale 1 and zero point 0, a `Cast` to float32.
    Dequantize(Convert),
    DynamicQuantize(DynamicQuantize),
    ZeroPointShift(ZeroPointShift),
    /// `dst = a op b` on single f32 values (`op` one of `+ - * /`).
    Scalar {
        dst: ValueId,
        a: ValueId,
        b: ValueId,
        op: char,
    },
}

impl Step {
    /// The values it reads.
    pub fn reads(&self) -> Vec<ValueId> {
        match self {
            Step::Kernel(k) => k
                .args
                .iter()
                .filter_map(|a| match a {
                    Arg::Value(v) if *v != k.output => Some(*v),
                    _ => None,
                })
                .collect(),
            Step::Copy(c) => vec![c.src],
            Step::Fill { .. } => vec![],
            Step::Gather(g) => vec![g.src],
            Step::Quantize(c) | Step::Dequantize(c) => vec![c.src],
            Step::DynamicQuantize(d) => vec![d.src],
            Step::ZeroPointShift(z) => vec![z.src, z.zero_point, z.sums],
            Step::Scalar { a, b, .. } => vec![*a, *b],
        }
    }

    /// The values it writes: one, but a dynamic quantization's three.
    pub fn writes(&self) -> Vec<ValueId> {
        match self {
            Step::Kernel(k) => vec![k.output],
            Step::Copy(c) => vec![c.dst],
            Step::Fill { dst, .. } => vec![*dst],
            Step::Gather(g) => vec![g.dst],
            Step::Quantize(c) | Step::Dequantize(c) => vec![c.dst],
            Step::DynamicQuantize(d) => vec![d.dst, d.scale, d.zero_point],
            Step::ZeroPointShift(z) => vec![z.dst],
            Step::Scalar { dst, .. } => vec![*dst],
        }
    }
}

/// What became of one ONNX node (the manifest's per-node entry).
#[derive(Debug, Clone, serde::Serialize)]
pub struct NodeNote {
    pub node: String,
    pub op: String,
    /// "kernel" (with `task`), "view", "copy", "gather", "quantize", "dequantize", "scalar",
    /// "cast" (an integer tensor to float32), "folded" (computed at build time), or "unused"
    /// (nothing reads what it computes: a conversion an integer kernel reads behind, a
    /// transpose a product reads through).
    pub how: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<usize>,
}

#[derive(Debug, Clone, Default)]
pub struct Program {
    pub values: Vec<Value>,
    pub constants: Vec<Constant>,
    pub packed: Vec<Packed>,
    pub steps: Vec<Step>,
    /// The model's inputs and outputs, in its order.
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<ValueId>,
    pub nodes: Vec<NodeNote>,
    /// Every kernel, by task.
    pub kernels: Vec<Kernel>,
}

impl Program {
    /// The value whose memory `v` is (itself, unless it is a view).
    pub fn root(&self, mut v: ValueId) -> ValueId {
        while let Storage::View(of) = self.values[v].storage {
            v = of;
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::ConstData;

    /// Padding adds `value` before and after each axis, the elements in between in order; a
    /// value outside the type is refused.
    #[test]
    fn padding_surrounds_the_elements() {
        let x = ConstData::U8(vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(
            x.padded(&[2, 3], &[1, 0, 0, 1], 9),
            Some(ConstData::U8(vec![
                9, 9, 9, 9, //
                1, 2, 3, 9, //
                4, 5, 6, 9,
            ]))
        );
        assert_eq!(x.padded(&[2, 3], &[0, 0, 0, 0], 7), Some(x.clone()));
        assert_eq!(x.padded(&[2, 3], &[1, 1, 1, 1], 256), None);
        let w = ConstData::I8(vec![-1, 1]);
        assert_eq!(
            w.padded(&[1, 2], &[0, 0, 0, 2], 0),
            Some(ConstData::I8(vec![-1, 1, 0, 0]))
        );
    }
}
