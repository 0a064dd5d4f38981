//! Expressions of the tensor-expression IR.
//!
//! Index expressions are affine (`i*stride + r*dilation - pad`) over a stage's axes. Keeping
//! them affine is what makes bound inference for `compute_at` exact and cheap: the region a
//! consumer reads is an interval per dimension, computed from coefficients alone.

use serde::{Deserialize, Serialize};

/// Element type of a tensor. f32 is computed everywhere; the integer types are those of
/// quantized operators (8-bit data and weights, 32-bit accumulators and biases: see
/// [`ComputeDag::new`](super::ComputeDag::new) for what an integer stage may compute). F16
/// is kept in the IR so that records and workload keys do not change when it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    F16,
    I8,
    I32,
    U8,
}

impl DType {
    pub fn bytes(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F16 => 2,
            DType::I8 | DType::U8 => 1,
        }
    }

    pub fn c_name(self) -> &'static str {
        match self {
            DType::F32 => "float",
            DType::F16 => "_Float16",
            DType::I8 => "int8_t",
            DType::I32 => "int32_t",
            DType::U8 => "uint8_t",
        }
    }

    /// The name in op specs and the text form.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::I8 => "i8",
            DType::I32 => "i32",
            DType::U8 => "u8",
        }
    }

    pub fn is_int(self) -> bool {
        matches!(self, DType::I8 | DType::I32 | DType::U8)
    }

    /// The values of an integer type, inclusive.
    pub fn int_range(self) -> Option<(i64, i64)> {
        match self {
            DType::I8 => Some((-128, 127)),
            DType::U8 => Some((0, 255)),
            DType::I32 => Some((i32::MIN.into(), i32::MAX.into())),
            DType::F32 | DType::F16 => None,
        }
    }

    /// Whether a computed stage of this type requantizes: an 8-bit stage computes in f32 and
    /// stores [`DType::quantize`]d values.
    pub fn is_8bit(self) -> bool {
        matches!(self, DType::I8 | DType::U8)
    }

    /// `v` as an 8-bit stage stores it, ONNX's `QuantizeLinear` conversion: rounded to the
    /// nearest integer with ties to even, saturated to the type's range; NaN stores 0. Other
    /// types store `v` unchanged.
    pub fn quantize(self, v: f64) -> f64 {
        match self.int_range() {
            Some((lo, hi)) if self.is_8bit() => match v.is_nan() {
                true => 0.0,
                false => v.round_ties_even().clamp(lo as f64, hi as f64),
            },
            _ => v,
        }
    }
}

/// `offset + sum(coef * axis)`, axes numbered within one stage: space axes first, then
/// reduction axes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct Affine {
    /// `(axis, coefficient)`, sorted by axis, no zero coefficients.
    pub terms: Vec<(usize, i64)>,
    pub offset: i64,
}

impl Affine {
    pub fn constant(c: i64) -> Self {
        Affine {
            terms: vec![],
            offset: c,
        }
    }

    pub fn axis(a: usize) -> Self {
        Affine {
            terms: vec![(a, 1)],
            offset: 0,
        }
    }

    /// Builds from unsorted terms, merging duplicates and dropping zeros.
    pub fn new(mut terms: Vec<(usize, i64)>, offset: i64) -> Self {
        terms.sort_by_key(|t| t.0);
        let mut out: Vec<(usize, i64)> = Vec::with_capacity(terms.len());
        for (a, c) in terms {
            match out.last_mut() {
                Some(last) if last.0 == a => last.1 += c,
                _ => out.push((a, c)),
            }
        }
        out.retain(|t| t.1 != 0);
        Affine { terms: out, offset }
    }

    pub fn add(&self, other: &Affine) -> Affine {
        let mut t = self.terms.clone();
        t.extend_from_slice(&other.terms);
        Affine::new(t, self.offset + other.offset)
    }

    pub fn scale(&self, k: i64) -> Affine {
        Affine::new(
            self.terms.iter().map(|&(a, c)| (a, c * k)).collect(),
            self.offset * k,
        )
    }

    pub fn coef(&self, axis: usize) -> i64 {
        self.terms.iter().find(|t| t.0 == axis).map_or(0, |t| t.1)
    }

    pub fn eval(&self, axes: &[i64]) -> i64 {
        self.offset + self.terms.iter().map(|&(a, c)| c * axes[a]).sum::<i64>()
    }

    /// Inclusive `[min, max]` when each axis ranges over `[0, extent)`.
    pub fn range(&self, extents: &[i64]) -> (i64, i64) {
        let (mut lo, mut hi) = (self.offset, self.offset);
        for &(a, c) in &self.terms {
            let top = c * (extents[a] - 1);
            if c > 0 {
                hi += top;
            } else {
                lo += top;
            }
        }
        (lo, hi)
    }

    /// Replaces each axis by an affine expression over another stage's axes (inlining).
    pub fn substitute(&self, by: &[Affine]) -> Affine {
        let mut out = Affine::constant(self.offset);
        for &(a, c) in &self.terms {
            out = out.add(&by[a].scale(c));
        }
        out
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnaryOp {
    Neg,
    Exp,
    Log,
    Sqrt,
    Rsqrt,
    Tanh,
    Sigmoid,
    Abs,
    Relu,
    /// The error function (ONNX's `Erf`, GELU's exact form).
    Erf,
    /// To the nearest integer, halves to even: the rounding of ONNX's `QuantizeLinear`.
    Round,
}

impl UnaryOp {
    pub const ALL: [UnaryOp; 11] = [
        UnaryOp::Neg,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Abs,
        UnaryOp::Relu,
        UnaryOp::Erf,
        UnaryOp::Round,
    ];

    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Abs => "abs",
            UnaryOp::Relu => "relu",
            UnaryOp::Erf => "erf",
            UnaryOp::Round => "round",
        }
    }

    pub fn from_name(s: &str) -> Option<UnaryOp> {
        UnaryOp::ALL.into_iter().find(|o| o.name() == s)
    }

    pub fn eval(self, x: f64) -> f64 {
        match self {
            UnaryOp::Neg => -x,
            UnaryOp::Exp => x.exp(),
            UnaryOp::Log => x.ln(),
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Rsqrt => 1.0 / x.sqrt(),
            UnaryOp::Tanh => x.tanh(),
            UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            UnaryOp::Abs => x.abs(),
            UnaryOp::Relu => x.max(0.0),
            // std has no erf yet; libm's is musl's, correctly rounded to within an ulp.
            UnaryOp::Erf => libm::erf(x),
            UnaryOp::Round => x.round_ties_even(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
}

impl BinaryOp {
    pub fn eval(self, a: f64, b: f64) -> f64 {
        match self {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
            BinaryOp::Min => a.min(b),
            BinaryOp::Max => a.max(b),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CmpOp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl CmpOp {
    pub fn eval<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
        }
    }

    /// The comparison with its operands swapped: `a OP b` iff `b OP.flip() a`.
    pub fn flip(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            o => o,
        }
    }

    pub fn c_op(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
        }
    }
}

/// A boolean condition, used by `select` (padding, masks).
#[derive(Debug, Clone, PartialEq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cond {
    /// Compares two index expressions (`i - pad >= 0`).
    Index(CmpOp, Affine, Affine),
    /// Compares two values (`x > 0`).
    Value(CmpOp, Box<Expr>, Box<Expr>),
    And(Box<Cond>, Box<Cond>),
    Or(Box<Cond>, Box<Cond>),
    Not(Box<Cond>),
}

/// A scalar value expression of a compute stage's body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expr {
    Const(#[serde(with = "float_json")] f64),
    /// Reads `tensor[indices]`; `tensor` is a stage index of the DAG.
    Load(usize, Vec<Affine>),
    /// An index value used as a number (e.g. iota, masks).
    Index(Affine),
    Unary(UnaryOp, Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    Select(Box<Cond>, Box<Expr>, Box<Expr>),
}

// Hashing f64 constants by bits is fine: keys are computed from a canonical serialization,
// never from this impl, which only lets `Cond` derive `Hash`.
impl std::hash::Hash for Expr {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Expr::Const(c) => c.to_bits().hash(state),
            Expr::Load(t, idx) => {
                t.hash(state);
                idx.hash(state)
            }
            Expr::Index(a) => a.hash(state),
            Expr::Unary(o, a) => {
                o.hash(state);
                a.hash(state)
            }
            Expr::Binary(o, a, b) => {
                o.hash(state);
                a.hash(state);
                b.hash(state)
            }
            Expr::Select(c, a, b) => {
                c.hash(state);
                a.hash(state);
                b.hash(state)
            }
        }
    }
}

impl Expr {
    pub fn load(tensor: usize, idx: Vec<Affine>) -> Expr {
        Expr::Load(tensor, idx)
    }

    pub fn unary(op: UnaryOp, a: Expr) -> Expr {
        Expr::Unary(op, Box::new(a))
    }

    pub fn binary(op: BinaryOp, a: Expr, b: Expr) -> Expr {
        Expr::Binary(op, Box::new(a), Box::new(b))
    }

    pub fn select(c: Cond, a: Expr, b: Expr) -> Expr {
        Expr::Select(Box::new(c), Box::new(a), Box::new(b))
    }

    /// Whether some unary op of the expression (conditions included) satisfies `pred`.
    pub fn any_unary(&self, pred: &impl Fn(UnaryOp) -> bool) -> bool {
        match self {
            Expr::Const(_) | Expr::Load(..) | Expr::Index(_) => false,
            Expr::Unary(op, a) => pred(*op) || a.any_unary(pred),
            Expr::Binary(_, a, b) => a.any_unary(pred) || b.any_unary(pred),
            Expr::Select(c, a, b) => c.any_unary(pred) || a.any_unary(pred) || b.any_unary(pred),
        }
    }

    /// Calls `f` on every load, including loads inside conditions.
    pub fn visit_loads(&self, f: &mut impl FnMut(usize, &[Affine])) {
        match self {
            Expr::Const(_) | Expr::Index(_) => {}
            Expr::Load(t, idx) => f(*t, idx),
            Expr::Unary(_, a) => a.visit_loads(f),
            Expr::Binary(_, a, b) => {
                a.visit_loads(f);
                b.visit_loads(f)
            }
            Expr::Select(c, a, b) => {
                c.visit_loads(f);
                a.visit_loads(f);
                b.visit_loads(f)
            }
        }
    }

    /// Rewrites every load bottom-up; `f` returns the replacement of a load.
    pub fn map_loads(&self, f: &mut impl FnMut(usize, &[Affine]) -> Expr) -> Expr {
        match self {
            Expr::Const(_) | Expr::Index(_) => self.clone(),
            Expr::Load(t, idx) => f(*t, idx),
            Expr::Unary(o, a) => Expr::Unary(*o, Box::new(a.map_loads(f))),
            Expr::Binary(o, a, b) => {
                Expr::Binary(*o, Box::new(a.map_loads(f)), Box::new(b.map_loads(f)))
            }
            Expr::Select(c, a, b) => Expr::Select(
                Box::new(c.map_loads(f)),
                Box::new(a.map_loads(f)),
                Box::new(b.map_loads(f)),
            ),
        }
    }

    /// Replaces axis `a` of every index by `by[a]` (used when inlining a producer).
    pub fn substitute_axes(&self, by: &[Affine]) -> Expr {
        match self {
            Expr::Const(_) => self.clone(),
            Expr::Load(t, idx) => Expr::Load(*t, idx.iter().map(|x| x.substitute(by)).collect()),
            Expr::Index(a) => Expr::Index(a.substitute(by)),
            Expr::Unary(o, a) => Expr::Unary(*o, Box::new(a.substitute_axes(by))),
            Expr::Binary(o, a, b) => Expr::Binary(
                *o,
                Box::new(a.substitute_axes(by)),
                Box::new(b.substitute_axes(by)),
            ),
            Expr::Select(c, a, b) => Expr::Select(
                Box::new(c.substitute_axes(by)),
                Box::new(a.substitute_axes(by)),
                Box::new(b.substitute_axes(by)),
            ),
        }
    }

    /// Counts floating-point operations of one evaluation (loads and selects are free; a
    /// transcendental counts as one, as TVM does).
    pub fn flops(&self) -> u64 {
        match self {
            Expr::Const(_) | Expr::Load(..) | Expr::Index(_) => 0,
            Expr::Unary(UnaryOp::Neg, a) | Expr::Unary(UnaryOp::Abs, a) => a.flops(),
            Expr::Unary(_, a) => 1 + a.flops(),
            Expr::Binary(_, a, b) => 1 + a.flops() + b.flops(),
            Expr::Select(c, a, b) => c.flops() + a.flops().max(b.flops()),
        }
    }

    /// Largest axis number used, plus one.
    pub fn max_axis(&self) -> usize {
        let mut m = 0;
        self.visit_affines(&mut |a| {
            for &(x, _) in &a.terms {
                m = m.max(x + 1);
            }
        });
        m
    }

    fn visit_affines(&self, f: &mut impl FnMut(&Affine)) {
        match self {
            Expr::Const(_) => {}
            Expr::Load(_, idx) => idx.iter().for_each(&mut *f),
            Expr::Index(a) => f(a),
            Expr::Unary(_, a) => a.visit_affines(f),
            Expr::Binary(_, a, b) => {
                a.visit_affines(f);
                b.visit_affines(f)
            }
            Expr::Select(c, a, b) => {
                c.visit_affines(f);
                a.visit_affines(f);
                b.visit_affines(f)
            }
        }
    }
}

impl Cond {
    /// See [`Expr::any_unary`].
    pub fn any_unary(&self, pred: &impl Fn(UnaryOp) -> bool) -> bool {
        match self {
            Cond::Index(..) => false,
            Cond::Value(_, a, b) => a.any_unary(pred) || b.any_unary(pred),
            Cond::And(a, b) | Cond::Or(a, b) => a.any_unary(pred) || b.any_unary(pred),
            Cond::Not(a) => a.any_unary(pred),
        }
    }

    pub fn visit_loads(&self, f: &mut impl FnMut(usize, &[Affine])) {
        match self {
            Cond::Index(..) => {}
            Cond::Value(_, a, b) => {
                a.visit_loads(f);
                b.visit_loads(f)
            }
            Cond::And(a, b) | Cond::Or(a, b) => {
                a.visit_loads(f);
                b.visit_loads(f)
            }
            Cond::Not(a) => a.visit_loads(f),
        }
    }

    pub fn map_loads(&self, f: &mut impl FnMut(usize, &[Affine]) -> Expr) -> Cond {
        match self {
            Cond::Index(..) => self.clone(),
            Cond::Value(o, a, b) => {
                Cond::Value(*o, Box::new(a.map_loads(f)), Box::new(b.map_loads(f)))
            }
            Cond::And(a, b) => Cond::And(Box::new(a.map_loads(f)), Box::new(b.map_loads(f))),
            Cond::Or(a, b) => Cond::Or(Box::new(a.map_loads(f)), Box::new(b.map_loads(f))),
            Cond::Not(a) => Cond::Not(Box::new(a.map_loads(f))),
        }
    }

    pub fn substitute_axes(&self, by: &[Affine]) -> Cond {
        match self {
            Cond::Index(o, a, b) => Cond::Index(*o, a.substitute(by), b.substitute(by)),
            Cond::Value(o, a, b) => Cond::Value(
                *o,
                Box::new(a.substitute_axes(by)),
                Box::new(b.substitute_axes(by)),
            ),
            Cond::And(a, b) => Cond::And(
                Box::new(a.substitute_axes(by)),
                Box::new(b.substitute_axes(by)),
            ),
            Cond::Or(a, b) => Cond::Or(
                Box::new(a.substitute_axes(by)),
                Box::new(b.substitute_axes(by)),
            ),
            Cond::Not(a) => Cond::Not(Box::new(a.substitute_axes(by))),
        }
    }

    fn flops(&self) -> u64 {
        match self {
            Cond::Index(..) => 0,
            Cond::Value(_, a, b) => a.flops() + b.flops(),
            Cond::And(a, b) | Cond::Or(a, b) => a.flops() + b.flops(),
            Cond::Not(a) => a.flops(),
        }
    }

    fn visit_affines(&self, f: &mut impl FnMut(&Affine)) {
        match self {
            Cond::Index(_, a, b) => {
                f(a);
                f(b)
            }
            Cond::Value(_, a, b) => {
                a.visit_affines(f);
                b.visit_affines(f)
            }
            Cond::And(a, b) | Cond::Or(a, b) => {
                a.visit_affines(f);
                b.visit_affines(f)
            }
            Cond::Not(a) => a.visit_affines(f),
        }
    }

    /// `lo <= idx < hi` for an index expression, the guard of a padding stage.
    pub fn in_range(idx: Affine, lo: i64, hi: i64) -> Cond {
        Cond::And(
            Box::new(Cond::Index(CmpOp::Ge, idx.clone(), Affine::constant(lo))),
            Box::new(Cond::Index(CmpOp::Lt, idx, Affine::constant(hi))),
        )
    }
}

/// Float constants in JSON: a number, or `"inf"`, `"-inf"`, `"nan"` for what JSON numbers
/// cannot hold (a padded max-pool's padding is -inf). serde_json alone writes those as `null`
/// and refuses to read them back: a stored DAG would not load.
mod float_json {
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        match *v {
            x if x.is_finite() => s.serialize_f64(x),
            x if x.is_nan() => s.serialize_str("nan"),
            x if x > 0.0 => s.serialize_str("inf"),
            _ => s.serialize_str("-inf"),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Float {
            Number(f64),
            Named(String),
        }
        match Float::deserialize(d)? {
            Float::Number(x) => Ok(x),
            Float::Named(s) => match s.as_str() {
                "inf" => Ok(f64::INFINITY),
                "-inf" => Ok(f64::NEG_INFINITY),
                "nan" => Ok(f64::NAN),
                _ => Err(D::Error::custom(format!(
                    "a float constant is a number, \"inf\", \"-inf\" or \"nan\", not {s:?}"
                ))),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::ir::ComputeDag;
    use crate::ops::{self, PoolKind, Window};

    /// ONNX's `QuantizeLinear` conversion: ties to even, saturation at both ends.
    #[test]
    fn quantize_rounds_ties_to_even_and_saturates() {
        use super::{DType, UnaryOp};
        let q = |t: DType, v: f64| t.quantize(v);
        for (v, want) in [
            (0.5, 0.0),
            (1.5, 2.0),
            (2.5, 2.0),
            (-1.5, -2.0),
            (2.4999, 2.0),
        ] {
            assert_eq!(q(DType::I8, v), want, "{v}");
            assert_eq!(UnaryOp::Round.eval(v), want, "{v}");
        }
        assert_eq!(q(DType::I8, 127.5), 127.0);
        assert_eq!(q(DType::I8, -128.6), -128.0);
        assert_eq!(q(DType::U8, -3.0), 0.0);
        assert_eq!(q(DType::U8, 254.5), 254.0);
        assert_eq!(q(DType::U8, 1e9), 255.0);
        assert_eq!(q(DType::U8, f64::NAN), 0.0);
        // Other types store values as they are.
        assert_eq!(q(DType::I32, 2.5), 2.5);
    }

    /// A padded max-pool (padding -inf) is stored and read back as it was, with its key.
    #[test]
    fn infinite_constants_survive_json() {
        let w = Window::square(3, 2, 1);
        let dag = ops::pool2d(PoolKind::Max, 1, 4, 9, 9, w).unwrap();
        let json = serde_json::to_string(&dag).unwrap();
        assert!(json.contains(r#"{"const":"-inf"}"#), "{json}");
        let back: ComputeDag = serde_json::from_str(&json).unwrap();
        assert_eq!(back.workload_key(), dag.workload_key());
        assert_eq!(serde_json::to_string(&back).unwrap(), json);
        let bad = json.replace("\"-inf\"", "\"minus infinity\"");
        let e = serde_json::from_str::<ComputeDag>(&bad)
            .unwrap_err()
            .to_string();
        assert!(e.contains("float constant"), "{e}");
    }
}
