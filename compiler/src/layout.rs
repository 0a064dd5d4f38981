//! Kernels that read or write another layout than the model's tensors (a quantized
//! convolution runs in NHWC on NCHW tensors): an operand is transposed before the kernel (a
//! constant once, at build time; an activation by a copy), a result copied back after it.
//! Permutations read as ONNX's `Transpose`: axis `i` of the result is axis `perm[i]` of the
//! source.

use crate::glue::row_major;
use crate::lowering::Lowering;
use crate::program::{Copy, Step, Storage, ValueId};
use tunehub_onnx::graph::Node;

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
                self.p.steps.push(permute(v, x, &xs, perm));
                v
            }
        };
        self.by_name.insert(key, v);
        Ok(v)
    }

    /// The arena value a kernel writes `model` (a tensor of the model) into, laid out so
    /// that axis `i` of `model` is its axis `perm[i]`.
    pub(crate) fn laid_out(&mut self, model: ValueId, perm: &[usize]) -> Result<ValueId, String> {
        let ms = self.p.values[model].shape.clone();
        check_perm(perm, &ms)?;
        let mut shape = vec![0; ms.len()];
        for (i, &p) in perm.iter().enumerate() {
            shape[p] = ms[i];
        }
        let name = format!("{}.{}", self.p.values[model].name, layout_name(perm));
        let dtype = self.p.values[model].dtype;
        Ok(self.add(&name, shape, dtype, Storage::Arena))
    }

    /// The step after the kernel: its result `own` copied into the model's tensor `model`.
    pub(crate) fn copy_back(&mut self, model: ValueId, own: ValueId, perm: &[usize]) {
        let ks = self.p.values[own].shape.clone();
        self.p.steps.push(permute(model, own, &ks, perm));
    }
}
