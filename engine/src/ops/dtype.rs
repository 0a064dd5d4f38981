//! `dtype=`: the element types of an operator's inputs, and the integer form of its DAG.
//!
//! The library writes each operator once, in f32. Its integer form is the same DAG retyped:
//! the data input (the first) and the weight (the second) 8-bit, a bias i32, every computed
//! stage i32, as ONNX's `MatMulInteger` / `ConvInteger` compute before requantization. The
//! names follow the operand order of the dot-product instructions: `u8i8` is x86 VNNI's
//! `vpdpbusd` (unsigned data, signed weights), `i8i8` aarch64's `sdot` and ONNX Runtime's
//! default for QDQ models.

use crate::ir::{ComputeDag, DType, DagError, StageKind};

/// The element types of an operator's inputs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum OpDType {
    #[default]
    F32,
    /// u8 data, i8 weights, i32 bias and result.
    U8I8,
    /// i8 data and weights, i32 bias and result.
    I8I8,
}

impl OpDType {
    pub const ALL: [OpDType; 3] = [OpDType::F32, OpDType::U8I8, OpDType::I8I8];

    pub fn name(self) -> &'static str {
        match self {
            OpDType::F32 => "f32",
            OpDType::U8I8 => "u8i8",
            OpDType::I8I8 => "i8i8",
        }
    }

    pub fn parse(s: &str) -> Option<OpDType> {
        OpDType::ALL.into_iter().find(|d| d.name() == s)
    }

    /// The data input's and the weight's types; `None` for f32.
    pub fn operands(self) -> Option<(DType, DType)> {
        match self {
            OpDType::F32 => None,
            OpDType::U8I8 => Some((DType::U8, DType::I8)),
            OpDType::I8I8 => Some((DType::I8, DType::I8)),
        }
    }
}

/// The f32 DAG of a library operator in `dtype` (see the module docs): its placeholders in
/// declaration order are the data, the weight, then an optional `bias`.
pub(crate) fn retype(dag: ComputeDag, dtype: OpDType) -> Result<ComputeDag, DagError> {
    let Some((data, weight)) = dtype.operands() else {
        return Ok(dag);
    };
    let mut stages = dag.stages;
    let mut nth = 0;
    for s in &mut stages {
        s.dtype = match s.kind {
            StageKind::Placeholder if s.name == "bias" => DType::I32,
            StageKind::Placeholder => {
                nth += 1;
                if nth == 1 { data } else { weight }
            }
            StageKind::Compute { .. } => DType::I32,
        };
    }
    ComputeDag::new(stages)
}
