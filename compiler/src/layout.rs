//! Kernels that read or write another layout than the model's tensors (a quantized
//! convolution runs in NHWC on NCHW tensors): an operand is transposed before the kernel (a
//! constant once, at build time; an activation by a copy).
//!
//! A kernel's result stays in its layout (it is *kept*) for as long as its readers take it so:
//! the next convolution reads it as it is, and steps that treat every element alike (a
//! conversion, a same-shape elementwise call such as a residual add) compute theirs in the
//! same layout and keep it in turn. The model's layout is copied back once, before the first
//! reader that needs it (a pool, a reshape, the model's output): a chain of convolutions
//! and residual adds pays one copy at each end, not two per convolution (issue 60's layouts
//! per region, here the region every integer convolution of a QDQ model grows).
//!
//! Permutations read as ONNX's `Transpose`: axis `i` of the result is axis `perm[i]` of the
//! source.

use crate::glue::row_major;
use crate::lowering::Lowering;
use crate::program::{Convert, Copy, Step, Storage, ValueId};
use tunehub_engine::ir::DType;
use tunehub_onnx::Operand;
use tunehub_onnx::classify::{Class, classify};
use tunehub_onnx::graph::Node;
use tunehub_onnx::quantized::{DEQUANTIZE, QUANTIZE, consumers, quantized};

/// A tensor of the model held in another layout (only so, when a kernel wrote it; beside the
/// model's, when an activation was transposed for a kernel): `value` is the tensor transposed
/// by `perm` (its axis `i` is the model's axis `perm[i]`).
#[derive(Debug, Clone)]
pub(crate) struct Kept {
    pub(crate) perm: Vec<usize>,
    pub(crate) value: ValueId,
}

/// The permutation that undoes `perm`.
fn inverse(perm: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    inv
}

/// A permutation's name in value names: `0231` (NCHW data read as NHWC).
fn layout_name(perm: &[usize]) -> String {
    perm.iter().map(usize::to_string).collect()
}

/// `perm` permutes the axes of a rank-`rank` tensor.
fn check_perm(perm: &[usize], shape: &[i64]) -> Result<(), String> {
    let mut sorted = perm.to_vec();
    sorted.sort_unstable();
    match sorted == (0..shape.len()).collect::<Vec<_>>() {
        true => Ok(()),
        false => Err(format!("{perm:?} does not permute the axes of {shape:?}")),
    }
}

/// The copy of `src` (of shape `xs`) permuted by `perm` into `dst`.
fn permute(dst: ValueId, src: ValueId, xs: &[i64], perm: &[usize]) -> Step {
    let strides = row_major(xs);
    let shape: Vec<i64> = perm.iter().map(|&p| xs[p]).collect();
    Step::Copy(Copy {
        dst,
        dst_offset: 0,
        dst_strides: row_major(&shape),
        src,
        src_offset: 0,
        src_strides: perm.iter().map(|&p| strides[p]).collect(),
        shape,
        layout: true,
    })
}

impl Lowering<'_> {
    /// Tensor `t` with its axes permuted (axis `i` is axis `perm[i]` of `t`): a constant of
    /// the model transposed here, stored only so; an activation copied into the arena before
    /// its first reader. Once each.
    pub(crate) fn transposed(
        &mut self,
        t: &str,
        perm: &[usize],
        node: &Node,
    ) -> Result<ValueId, String> {
        let key = format!("{t}.{}", layout_name(perm));
        if let Some(&v) = self.by_name.get(&key) {
            return Ok(v);
        }
        let xs = self.shape_of(t, Some(node)).map_err(|e| e.to_string())?;
        check_perm(perm, &xs)?;
        let shape: Vec<i64> = perm.iter().map(|&p| xs[p]).collect();
        let strides = row_major(&xs);
        let src_strides: Vec<i64> = perm.iter().map(|&p| strides[p]).collect();
        // A constant of the model not yet stored is read here, so that only its transposition
        // lands in the weights file.
        let (x, constant) = match self.by_name.get(t).copied() {
            None if self.g.is_constant(t) => (None, self.constant_data(t)),
            _ => {
                let x = self.value_of(t, Some(node)).map_err(|e| e.to_string())?;
                let stored = match self.p.values[x].storage {
                    Storage::Constant(c) => Some(self.p.constants[c].data.clone()),
                    _ => None,
                };
                (Some(x), stored)
            }
        };
        let v = match (x, constant) {
            (_, Some(data)) => {
                let data = data.permuted(&shape, &src_strides);
                self.constant(key.clone(), shape, data)
            }
            (None, None) => return Err(format!("'{t}' is a constant of an unsupported type")),
            (Some(x), None) => {
                let dtype = self.p.values[x].dtype;
                let v = self.add(&key, shape, dtype, Storage::Arena);
                let step = match self.reconverted(x, perm) {
                    Some(c) => Step::Dequantize(Convert { dst: v, ..c }),
                    None => permute(v, x, &xs, perm),
                };
                self.p.steps.push(step);
                // Now in both layouts: a conversion or an elementwise kernel reading it later
                // keeps to this one (a residual add's shortcut from a pool).
                if !self.kept.contains_key(t) {
                    let k = Kept {
                        perm: perm.to_vec(),
                        value: v,
                    };
                    self.kept.insert(t.to_string(), k);
                }
                v
            }
        };
        self.by_name.insert(key, v);
        Ok(v)
    }

    /// Tensor `t` transposed by `perm`, then padded with `value` (`pads`: before each axis,
    /// then after each, as the operand `Padded` says): a constant here, at build time; an
    /// activation by a fill and a copy before its first reader (read as a kernel kept it,
    /// when it did so in this layout). Once each.
    pub(crate) fn padded(
        &mut self,
        t: &str,
        perm: &[usize],
        pads: &[i64],
        value: i64,
        node: &Node,
    ) -> Result<ValueId, String> {
        let list: Vec<String> = pads.iter().map(i64::to_string).collect();
        let key = format!("{t}.{}.pad{}", layout_name(perm), list.join("_"));
        if let Some(&v) = self.by_name.get(&key) {
            return Ok(v);
        }
        let xs = self.shape_of(t, Some(node)).map_err(|e| e.to_string())?;
        check_perm(perm, &xs)?;
        let r = xs.len();
        if pads.len() != 2 * r || pads.iter().any(|&p| p < 0) {
            return Err(format!(
                "pads {pads:?} are not 2 per axis of {xs:?}, or are negative"
            ));
        }
        let shape: Vec<i64> = perm.iter().map(|&p| xs[p]).collect();
        let out: Vec<i64> = (0..r).map(|d| shape[d] + pads[d] + pads[r + d]).collect();
        let strides = row_major(&xs);
        let src_strides: Vec<i64> = perm.iter().map(|&p| strides[p]).collect();
        let unfit = || format!("'{t}' cannot be padded with {value}: not a value of its type");
        let stored = match self.by_name.get(t).copied() {
            None if self.kept.contains_key(t) => None,
            None if self.g.is_constant(t) => self.constant_data(t),
            Some(x) => match self.p.values[x].storage {
                Storage::Constant(c) => Some(self.p.constants[c].data.clone()),
                _ => None,
            },
            None => None,
        };
        if let Some(data) = stored {
            let data = data
                .permuted(&shape, &src_strides)
                .padded(&shape, pads, value)
                .ok_or_else(unfit)?;
            let v = self.constant(key.clone(), out, data);
            self.by_name.insert(key, v);
            return Ok(v);
        }
        // Read as kept, the copy only pads; otherwise it also converts, unless `perm` keeps
        // the model's order.
        let (src, src_strides, layout) = match self.kept(t) {
            Some(k) if k.perm == perm => (k.value, row_major(&shape), false),
            _ => (
                self.value_of(t, Some(node)).map_err(|e| e.to_string())?,
                src_strides,
                perm.iter().enumerate().any(|(i, &p)| i != p),
            ),
        };
        let dtype = self.p.values[src].dtype;
        let fits = match dtype {
            DType::U8 => (0..=255).contains(&value),
            DType::I8 => (-128..=127).contains(&value),
            DType::I32 => i32::try_from(value).is_ok(),
            _ => value.abs() < 1 << 24,
        };
        if !fits {
            return Err(unfit());
        }
        let v = self.add(&key, out.clone(), dtype, Storage::Arena);
        let dst_strides = row_major(&out);
        let dst_offset = (0..r).map(|d| pads[d] * dst_strides[d]).sum();
        self.p.steps.push(Step::Fill {
            dst: v,
            value: value as f32,
        });
        self.p.steps.push(Step::Copy(Copy {
            dst: v,
            dst_offset,
            dst_strides,
            src,
            src_offset: 0,
            src_strides,
            shape,
            layout,
        }));
        Ok(v)
    }

    /// The arena value that holds tensor `t` of the model (of shape `shape`) transposed by
    /// `perm`, kept so until a reader needs the model's layout ([`Lowering::materialize`]).
    pub(crate) fn keep(
        &mut self,
        t: &str,
        shape: &[i64],
        dtype: DType,
        perm: &[usize],
    ) -> Result<ValueId, String> {
        check_perm(perm, shape)?;
        let own: Vec<i64> = perm.iter().map(|&p| shape[p]).collect();
        let v = self.add(
            &format!("{t}.{}", layout_name(perm)),
            own,
            dtype,
            Storage::Arena,
        );
        self.kept.insert(
            t.to_string(),
            Kept {
                perm: perm.to_vec(),
                value: v,
            },
        );
        Ok(v)
    }

    /// The value a kernel whose result is in another layout writes tensor `t` into: axis `i`
    /// of `t` is axis `perm[i]` of the kernel's result (`Call.output_perm`).
    pub(crate) fn kernel_layout(
        &mut self,
        t: &str,
        shape: &[i64],
        dtype: DType,
        perm: &[usize],
    ) -> Result<ValueId, String> {
        check_perm(perm, shape)?;
        self.keep(t, shape, dtype, &inverse(perm))
    }

    /// When `x` is a dequantization's result whose 8-bit source is held in layout `perm`:
    /// that conversion again, from the source so held (its `dst` to be set). Wanted in that
    /// layout, the conversion is done again rather than its f32 result copied: it reads one
    /// byte per element where the copy moves four, and writes no more.
    fn reconverted(&self, x: ValueId, perm: &[usize]) -> Option<Convert> {
        let c = self.p.steps.iter().find_map(|s| match s {
            Step::Dequantize(c) if c.dst == x => Some(*c),
            _ => None,
        })?;
        let k = self.kept.get(&self.p.values[c.src].name)?;
        (k.perm == perm).then_some(Convert { src: k.value, ..c })
    }

    /// Whether every reader of tensor `t` takes it in any layout: a same-shape elementwise
    /// node or a conversion (each keeps it in turn), or a quantized anchor (which reads the
    /// 8-bit tensor behind a conversion, not `t`). A dequantization whose result a pool or a
    /// reshape reads is computed in the model's layout instead: the 8-bit tensor before it
    /// is copied back, a quarter of the f32 result's bytes.
    pub(crate) fn readers_keep(&self, t: &str) -> bool {
        let g = self.g;
        consumers(g, t).iter().all(|&c| match g.nodes.get(c) {
            None => false,
            Some(n) => {
                n.op == QUANTIZE
                    || n.op == DEQUANTIZE
                    || classify(g, n) == Class::Elementwise
                    || quantized(g, c).is_some()
            }
        })
    }

    /// Tensor `t`, when it is held in another layout.
    pub(crate) fn kept(&self, t: &str) -> Option<Kept> {
        self.kept.get(t).cloned()
    }

    /// The model's layout of a kept tensor `t`, copied back here (before its first reader
    /// that needs it); `None` when `t` is not kept.
    pub(crate) fn materialize(&mut self, t: &str) -> Option<ValueId> {
        let k = self.kept(t)?;
        let own = &self.p.values[k.value];
        let (own_shape, dtype) = (own.shape.clone(), own.dtype);
        let back = inverse(&k.perm);
        let shape: Vec<i64> = back.iter().map(|&p| own_shape[p]).collect();
        let v = self.add(t, shape, dtype, Storage::Arena);
        self.p.steps.push(permute(v, k.value, &own_shape, &back));
        Some(v)
    }

    /// The layout a same-shape elementwise call computes in: that of its kept operands, when
    /// they are kept in one same layout and every operand has the output's shape or a single
    /// element. An operand of the model's layout is then transposed into it (a residual
    /// add's shortcut from a pool): one copy either way, and the result stays kept for the
    /// next convolution. `None` (the model's layout) otherwise, or when nothing it reads is
    /// kept.
    pub(crate) fn elementwise_layout(
        &self,
        nodes: &[usize],
        operands: &[(String, Operand)],
        out_shape: &[i64],
    ) -> Option<Vec<usize>> {
        let g = self.g;
        // A chain between conversions ends in its `QuantizeLinear` (`Group::eight_bit`).
        if !nodes
            .iter()
            .all(|&i| g.nodes[i].op == QUANTIZE || classify(g, &g.nodes[i]) == Class::Elementwise)
        {
            return None;
        }
        let mut layout: Option<Vec<usize>> = None;
        for (_, o) in operands {
            let Operand::Tensor { name } = o else {
                return None;
            };
            let shape = g.shape(name)?;
            match self.kept.get(name.as_str()) {
                Some(k) if shape == out_shape => match &layout {
                    Some(p) if *p != k.perm => return None,
                    _ => layout = Some(k.perm.clone()),
                },
                _ if shape == out_shape || shape.iter().product::<i64>() == 1 => {}
                _ => return None,
            }
        }
        layout
    }
}
