//! `dtype=`: the element types of an operator's inputs, and the integer form of its DAG.
//!
//! The library writes each operator once, in f32. Its integer form is the same DAG retyped:
//! the data input (the first) and the weight (the second) 8-bit, a bias i32, every computed
//! stage i32, as ONNX's `MatMulInteger` / `ConvInteger` compute before requantization. The
//! names follow the operand order of the dot-product instructions: `u8i8` is x86 VNNI's
//! `vpdpbusd` (unsigned data, signed weights), `i8i8` aarch64's `sdot` and ONNX Runtime's
//! default for QDQ models.
//!
//! `out_dtype=u8` / `i8` requantizes the i32 result, as the `QuantizeLinear` after a
//! quantized layer of a QDQ model does (and ONNX's `QLinearConv` / `QLinearMatMul`): one more
//! stage, `requant[.., f, ..] = round(acc[.., f, ..] * scale[f]) + zero_point[0]`, stored
//! saturated to 8 bits. `scale` is the multiplier per output channel (the data's scale times
//! the channel's weight scale over the output's scale, f32) and `zero_point` the output's (of
//! the output's type): inputs, not parameters, so that every layer of one shape is one task.
//! Rounding comes before the zero point is added, as ONNX specifies and ONNX Runtime computes
//! (`round(x + z)` and `round(x) + z` differ at ties when z is odd).

use crate::ir::{
    Affine, BinaryOp, ComputeDag, DType, DagError, Expr, InputData, Stage, StageKind, UnaryOp,
};

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

/// `dag` (an integer form, one output) with its output requantized to `out` (see the module
/// docs); `channel_axis` is the output's axis that `scale` runs along.
pub(crate) fn requantize(
    dag: ComputeDag,
    out: DType,
    channel_axis: usize,
) -> Result<ComputeDag, DagError> {
    let acc = match dag.outputs()[..] {
        [o] => o,
        _ => unreachable!("a library operator has one output"),
    };
    let shape = dag.stages[acc].shape.clone();
    let mut stages = dag.stages;
    let placeholder = |name: &str, shape: Vec<i64>, dtype, data| Stage {
        name: name.into(),
        shape,
        dtype,
        data,
        kind: StageKind::Placeholder,
    };
    let scale = stages.len();
    let channels = vec![shape[channel_axis]];
    stages.push(placeholder(
        "scale",
        channels,
        DType::F32,
        InputData::Multiplier,
    ));
    let zero_point = stages.len();
    stages.push(placeholder("zero_point", vec![1], out, InputData::Usual));
    let mut b = super::DagBuilder::from_stages(stages);
    b.compute("requant", &shape, |ax| {
        let scaled = Expr::binary(
            BinaryOp::Mul,
            Expr::Load(acc, ax.to_vec()),
            Expr::Load(scale, vec![ax[channel_axis].clone()]),
        );
        Expr::binary(
            BinaryOp::Add,
            Expr::unary(UnaryOp::Round, scaled),
            Expr::Load(zero_point, vec![Affine::constant(0)]),
        )
    });
    let mut stages = b.into_stages();
    stages.last_mut().expect("just added").dtype = out;
    ComputeDag::new(stages)
}
