//! `dtype=`: the element types of an operator's inputs, and the integer form of its DAG.
//!
//! The library writes each operator once, in f32. Its integer form is the same DAG retyped:
//! the data input (the first) and the weight (the second) 8-bit, a bias i32, every computed
//! stage i32, as ONNX's `MatMulInteger` / `ConvInteger` compute before requantization. The
//! names follow the operand order of the dot-product instructions: `u8i8` is x86 VNNI's
//! `vpdpbusd` (unsigned data, signed weights), `i8i8` aarch64's `sdot` and ONNX Runtime's
//! default for QDQ models.
//!
//! A max pool's integer form (`dtype=u8` / `i8`, [`super::IntegerForm::Compare`]) compares
//! and never sums: every stage keeps the data's type, exact, and the padding's -infinity is
//! the type's least value. It is what ONNX Runtime runs for `MaxPool` between a
//! `DequantizeLinear` and a `QuantizeLinear` of one scale and zero point: dequantization is
//! increasing, so the max commutes with it.
//!
//! `out_dtype=u8` / `i8` requantizes the i32 result, as the `QuantizeLinear` after a
//! quantized layer of a QDQ model does (and ONNX's `QLinearConv` / `QLinearMatMul`): one more
//! stage, `requant[.., f, ..] = round(acc[.., f, ..] * scale[f]) + zero_point[0]`, stored
//! saturated to 8 bits. `scale` is the multiplier per output channel (the data's scale times
//! the channel's weight scale over the output's scale, f32) and `zero_point` the output's (of
//! the output's type): inputs, not parameters, so that every layer of one shape is one task.
//! Rounding comes before the zero point is added, as ONNX specifies and ONNX Runtime computes
//! (`round(x + z)` and `round(x) + z` differ at ties when z is odd).

use super::IntegerForm;
use crate::ir::{
    Affine, BinaryOp, ComputeDag, Cond, DType, DagError, Expr, InputData, Stage, StageKind, UnaryOp,
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
    /// u8 data compared, every stage u8.
    U8,
    /// i8 data compared, every stage i8.
    I8,
}

impl OpDType {
    pub const ALL: [OpDType; 5] = [
        OpDType::F32,
        OpDType::U8I8,
        OpDType::I8I8,
        OpDType::U8,
        OpDType::I8,
    ];

    pub fn name(self) -> &'static str {
        match self {
            OpDType::F32 => "f32",
            OpDType::U8I8 => "u8i8",
            OpDType::I8I8 => "i8i8",
            OpDType::U8 => "u8",
            OpDType::I8 => "i8",
        }
    }

    /// Whether an operator whose integer forms are `form` has these types: f32 always, data
    /// and weight types for a sum, a data type for a comparison.
    pub fn fits(self, form: Option<IntegerForm>) -> bool {
        match self {
            OpDType::F32 => true,
            OpDType::U8I8 | OpDType::I8I8 => matches!(form, Some(IntegerForm::Sum { .. })),
            OpDType::U8 | OpDType::I8 => form == Some(IntegerForm::Compare),
        }
    }

    pub fn parse(s: &str) -> Option<OpDType> {
        OpDType::ALL.into_iter().find(|d| d.name() == s)
    }

    /// The data input's and the weight's types of a summed form, the data's alone (twice) of
    /// a compared one; `None` for f32.
    pub fn operands(self) -> Option<(DType, DType)> {
        match self {
            OpDType::F32 => None,
            OpDType::U8I8 => Some((DType::U8, DType::I8)),
            OpDType::I8I8 => Some((DType::I8, DType::I8)),
            OpDType::U8 => Some((DType::U8, DType::U8)),
            OpDType::I8 => Some((DType::I8, DType::I8)),
        }
    }
}

/// The f32 DAG of a library operator in `dtype` (see the module docs): its placeholders in
/// declaration order are the data, the weight, then an optional `bias`.
pub(crate) fn retype(dag: ComputeDag, dtype: OpDType) -> Result<ComputeDag, DagError> {
    let Some((data, weight)) = dtype.operands() else {
        return Ok(dag);
    };
    if matches!(dtype, OpDType::U8 | OpDType::I8) {
        return compared(dag, data);
    }
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

/// The compared form of `dag` in `t`: every stage `t`, each constant (a max pool's -infinity)
/// clamped into `t`'s range.
fn compared(dag: ComputeDag, t: DType) -> Result<ComputeDag, DagError> {
    let (lo, hi) = t.int_range().expect("an 8-bit type");
    let mut stages = dag.stages;
    for s in &mut stages {
        s.dtype = t;
        if let StageKind::Compute { body, .. } = &mut s.kind {
            *body = clamped(body, lo as f64, hi as f64);
        }
    }
    ComputeDag::new(stages)
}

/// `e` with every constant clamped into `[lo, hi]`.
fn clamped(e: &Expr, lo: f64, hi: f64) -> Expr {
    let cl = |e: &Expr| Box::new(clamped(e, lo, hi));
    match e {
        Expr::Const(c) => Expr::Const(c.clamp(lo, hi)),
        Expr::Index(_) | Expr::Load(..) => e.clone(),
        Expr::Unary(op, a) => Expr::Unary(*op, cl(a)),
        Expr::Binary(op, a, b) => Expr::Binary(*op, cl(a), cl(b)),
        Expr::Select(c, a, b) => Expr::Select(Box::new(clamped_cond(c, lo, hi)), cl(a), cl(b)),
    }
}

fn clamped_cond(c: &Cond, lo: f64, hi: f64) -> Cond {
    let cl = |c: &Cond| Box::new(clamped_cond(c, lo, hi));
    match c {
        Cond::Index(..) => c.clone(),
        Cond::Value(op, a, b) => Cond::Value(
            *op,
            Box::new(clamped(a, lo, hi)),
            Box::new(clamped(b, lo, hi)),
        ),
        Cond::And(a, b) => Cond::And(cl(a), cl(b)),
        Cond::Or(a, b) => Cond::Or(cl(a), cl(b)),
        Cond::Not(a) => Cond::Not(cl(a)),
    }
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
