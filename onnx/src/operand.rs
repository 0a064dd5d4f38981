//! Where each input of a task's workload comes from in the model: what a compiled model passes
//! to the kernel that serves one occurrence of the task.

use serde::Serialize;

/// One workload input's source.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Operand {
    /// A tensor of the model as it is (an activation, an input or a constant): the workload
    /// declares it with the same elements in the same order (size-1 dimensions dropped, rows
    /// flattened), so its memory is passed as is.
    Tensor { name: String },
    /// A convolution's weight with the batch norm `bn` (a node name) after it folded in: each
    /// filter scaled by `gamma / sqrt(var + eps)`.
    FoldedWeight { weight: String, bn: String },
    /// What remains of that batch norm, one bias per channel, the convolution's own `bias`
    /// (when it has one) merged in: `(bias - mean) * scale + beta`.
    FoldedBias { bias: Option<String>, bn: String },
    /// A batch norm not after a convolution: `gamma / sqrt(var + eps)` per channel...
    BnScale { bn: String },
    /// ... and `beta - mean * scale`.
    BnShift { bn: String },
    /// The tensor `name` with its axes permuted as ONNX's `Transpose` does (axis `i` is axis
    /// `perm[i]` of `name`): an operand the kernel takes in another layout than the model's
    /// (a quantized convolution reads NHWC data and an HWIO weight). A constant is
    /// transposed at build time, an activation by a copy before the kernel.
    Transposed { name: String, perm: Vec<usize> },
    /// The tensor `name` transposed as in `Transposed`, then padded: `pads` holds each axis's
    /// elements added before it, then each axis's added after it (ONNX's `Pad`), all equal to
    /// `value`. A quantized convolution whose padding must hold its data's zero point reads
    /// its data so (the window itself pads nothing), and input channels are filled to a
    /// multiple of 4 (the dot-product instructions' group), in the weight with 0.
    Padded {
        name: String,
        perm: Vec<usize>,
        pads: Vec<i64>,
        value: i64,
    },
    /// The Winograd transform `U = G g G^T` of the `[f, c, 3, 3]` constant `weight` for
    /// F(m x m, 3 x 3), as `[alpha^2, c, f]` (`crate::winograd::weight`).
    Winograd { weight: String, m: i64 },
    /// One part of a QDQ model's quantized anchor (the node `anchor`) in its integer form,
    /// computed from the model's quantizers (`quantized::requantization`).
    Requantized { anchor: String, part: QuantPart },
}

/// The inputs an integer form takes beyond the 8-bit data and weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QuantPart {
    /// i32 per output channel: the bias in the sum's units, less the data zero point's share.
    Bias,
    /// f32 per output channel: the i32 sum's multiplier into the output's units.
    Scale,
    /// The output's zero point, one 8-bit value.
    ZeroPoint,
}

impl Operand {
    pub fn tensor(name: &str) -> Operand {
        Operand::Tensor {
            name: name.to_string(),
        }
    }
}

/// The workload's inputs by name, each with its source.
pub type Operands = Vec<(String, Operand)>;
