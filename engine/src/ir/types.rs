//! What each element type may compute: the typing rules [`ComputeDag::new`] checks.
//!
//! - A placeholder is f32, u8, i8 or i32 (8-bit data and weights, 32-bit biases).
//! - An f32 stage reads tensors of any type, converted to f32 (dequantization).
//! - An i32 stage computes exactly in integers, as ONNX's `MatMulInteger` and `ConvInteger`
//!   do: it reads only integer tensors, its constants are integers, and its operations are
//!   those that stay in the integers (add, subtract, multiply, min, max, negate, abs, relu,
//!   select). A sum of 8-bit products must fit in i32 for every input, so that the kernel, the
//!   reference and every other implementation agree without relying on wrap-around.
//! - An 8-bit stage requantizes, as ONNX's `QuantizeLinear` does: it computes its body in
//!   f32, like an f32 stage, and stores it rounded to the nearest integer (ties to even) and
//!   saturated to its type ([`DType::quantize`]). It does not sum: a sum is an i32 stage's,
//!   requantized by a stage after it. It may take a max or a min of values of its own type
//!   (loads, constants in its range, selects of those: a max pool's integer form), which is
//!   one of them, exact.
//! - f16 is refused until it is generated.
//!
//! [`DType::quantize`]: super::DType::quantize
//!
//! [`ComputeDag::new`]: super::ComputeDag::new

use super::dag::{ComputeDag, InputData, ReduceOp, Stage, StageKind};
use super::expr::{BinaryOp, Cond, DType, Expr, UnaryOp};

/// Checks stage `i` of `dag` against the rules above.
pub(super) fn check_stage(dag: &ComputeDag, s: &Stage) -> Result<(), String> {
    if s.dtype == DType::F16 {
        return Err("dtype f16 is not supported yet".into());
    }
    // The harness and the reference draw a multiplier's check data as f32 values.
    if s.data == InputData::Multiplier && (s.dtype != DType::F32 || !s.is_placeholder()) {
        return Err(format!(
            "{}: multiplier check data are for an f32 input, not a {} {}",
            s.name,
            s.dtype.name(),
            if s.is_placeholder() {
                "input"
            } else {
                "computed stage"
            }
        ));
    }
    let StageKind::Compute {
        body,
        reduce,
        reduce_axes,
        ..
    } = &s.kind
    else {
        return Ok(());
    };
    match s.dtype {
        DType::F32 => Ok(()),
        DType::I8 | DType::U8 => match reduce {
            None => Ok(()),
            Some(ReduceOp::Max | ReduceOp::Min) if moves(dag, body, s.dtype) => Ok(()),
            Some(ReduceOp::Max | ReduceOp::Min) => Err(format!(
                "a {} stage takes a max or min of {0} values only (loads, constants, selects)",
                s.dtype.name()
            )),
            Some(ReduceOp::Sum) => Err(format!(
                "a {} stage cannot sum: sum in an i32 stage and requantize after it",
                s.dtype.name()
            )),
        },
        DType::I32 => {
            integer_only(dag, body)?;
            if *reduce == Some(ReduceOp::Sum) {
                let ext = s.axis_extents();
                let terms: i128 = reduce_axes.iter().map(|a| i128::from(a.extent)).product();
                if let Some((lo, hi)) = bound(dag, body, &ext) {
                    let worst = lo.abs().max(hi.abs()) * terms;
                    if worst > i128::from(i32::MAX) {
                        return Err(format!(
                            "a sum of {terms} terms of magnitude up to {} may overflow i32",
                            lo.abs().max(hi.abs())
                        ));
                    }
                }
            }
            Ok(())
        }
        DType::F16 => unreachable!("refused above"),
    }
}

/// Whether `e` only moves values of type `t`: loads of `t` tensors, constants in its range,
/// selects of those.
fn moves(dag: &ComputeDag, e: &Expr, t: DType) -> bool {
    match e {
        Expr::Load(x, _) => dag.stages[*x].dtype == t,
        Expr::Const(c) => t
            .int_range()
            .is_some_and(|(lo, hi)| c.fract() == 0.0 && (lo as f64..=hi as f64).contains(c)),
        Expr::Select(_, a, b) => moves(dag, a, t) && moves(dag, b, t),
        _ => false,
    }
}

/// Whether an i32 body stays in the integers (see the module docs).
fn integer_only(dag: &ComputeDag, e: &Expr) -> Result<(), String> {
    match e {
        Expr::Const(c) => {
            let (lo, hi) = (f64::from(i32::MIN), f64::from(i32::MAX));
            if c.fract() != 0.0 || !(lo..=hi).contains(c) {
                return Err(format!("an i32 stage uses the constant {c}, not an i32"));
            }
            Ok(())
        }
        Expr::Index(_) => Ok(()),
        Expr::Load(t, _) => {
            let src = &dag.stages[*t];
            if src.dtype.is_int() {
                Ok(())
            } else {
                Err(format!(
                    "an i32 stage reads {} of {}: integer stages read integer tensors",
                    src.name,
                    src.dtype.name()
                ))
            }
        }
        Expr::Unary(op, a) => match op {
            UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Relu => integer_only(dag, a),
            _ => Err(format!("an i32 stage cannot compute {}", op.name())),
        },
        Expr::Binary(op, a, b) => {
            if *op == BinaryOp::Div {
                return Err("an i32 stage cannot divide".into());
            }
            integer_only(dag, a)?;
            integer_only(dag, b)
        }
        Expr::Select(c, a, b) => {
            cond_integer_only(dag, c)?;
            integer_only(dag, a)?;
            integer_only(dag, b)
        }
    }
}

fn cond_integer_only(dag: &ComputeDag, c: &Cond) -> Result<(), String> {
    match c {
        Cond::Index(..) => Ok(()),
        Cond::Value(_, a, b) => {
            integer_only(dag, a)?;
            integer_only(dag, b)
        }
        Cond::And(a, b) | Cond::Or(a, b) => {
            cond_integer_only(dag, a)?;
            cond_integer_only(dag, b)
        }
        Cond::Not(a) => cond_integer_only(dag, a),
    }
}

/// The inclusive range of an integer body over every input, or `None` where it reads an i32
/// tensor (whose values are the caller's: a bias is added as ONNX adds it, in i32).
fn bound(dag: &ComputeDag, e: &Expr, ext: &[i64]) -> Option<(i128, i128)> {
    let r = match e {
        Expr::Const(c) => (*c as i128, *c as i128),
        Expr::Index(a) => {
            let (lo, hi) = a.range(ext);
            (lo.into(), hi.into())
        }
        Expr::Load(t, _) => match dag.stages[*t].dtype {
            DType::I8 | DType::U8 => {
                let (lo, hi) = dag.stages[*t].dtype.int_range()?;
                (lo.into(), hi.into())
            }
            _ => return None,
        },
        Expr::Unary(op, a) => {
            let (lo, hi) = bound(dag, a, ext)?;
            match op {
                UnaryOp::Neg => (-hi, -lo),
                UnaryOp::Abs if lo >= 0 => (lo, hi),
                UnaryOp::Abs => (0, lo.abs().max(hi.abs())),
                _ => (lo.max(0), hi.max(0)),
            }
        }
        Expr::Binary(op, a, b) => {
            let (al, ah) = bound(dag, a, ext)?;
            let (bl, bh) = bound(dag, b, ext)?;
            match op {
                BinaryOp::Add => (al + bl, ah + bh),
                BinaryOp::Sub => (al - bh, ah - bl),
                BinaryOp::Mul => {
                    let p = [al * bl, al * bh, ah * bl, ah * bh];
                    (*p.iter().min()?, *p.iter().max()?)
                }
                BinaryOp::Min => (al.min(bl), ah.min(bh)),
                BinaryOp::Max => (al.max(bl), ah.max(bh)),
                BinaryOp::Div => return None,
            }
        }
        Expr::Select(_, a, b) => {
            let (al, ah) = bound(dag, a, ext)?;
            let (bl, bh) = bound(dag, b, ext)?;
            (al.min(bl), ah.max(bh))
        }
    };
    Some(r)
}

#[cfg(test)]
mod tests {
    use crate::ir::{ComputeDag, DType, DagError, InputData};
    use crate::ops;

    /// `dag`'s stages retyped by name (the others kept), through the checks.
    fn typed(spec: &str, types: &[(&str, DType)]) -> Result<ComputeDag, DagError> {
        let mut stages = ops::build_op(spec).unwrap().stages;
        for s in &mut stages {
            if let Some(&(_, t)) = types.iter().find(|(n, _)| *n == s.name) {
                s.dtype = t;
            }
        }
        ComputeDag::new(stages)
    }

    fn refused(r: Result<ComputeDag, DagError>, want: &str) {
        let e = r.unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }

    #[test]
    fn integer_stages_compute_in_the_integers() {
        use DType::*;
        let q = [("A", U8), ("B", I8), ("C", I32)];
        assert!(typed("matmul(4,4,4)", &q).is_ok());
        // An i32 stage cannot read f32, nor divide, nor take an exponential.
        refused(
            typed("matmul(4,4,4)", &[("A", F32), ("B", I8), ("C", I32)]),
            "reads A of f32",
        );
        refused(
            typed(
                "avg_pool2d(1,2,4,4)",
                &[("data", I8), ("pool_sum", I32), ("avg_pool", I32)],
            ),
            "not an i32",
        );
        refused(typed("softmax(2,4)", &[("softmax", I32)]), "cannot divide");
        refused(
            typed(
                "softmax(2,4)",
                &[("x", I32), ("row_max", I32), ("exp", I32)],
            ),
            "cannot compute exp",
        );
        // An 8-bit stage requantizes elementwise; it does not sum, it may take a max. f16 is
        // not generated yet.
        refused(
            typed("matmul(4,4,4)", &[("A", U8), ("B", I8), ("C", I8)]),
            "cannot sum",
        );
        assert!(typed("max_pool2d(1,2,4,4)", &[("data", U8), ("max_pool", U8)]).is_ok());
        refused(
            typed("max_pool2d(1,2,4,4)", &[("data", I8), ("max_pool", U8)]),
            "max or min of u8 values only",
        );
        assert!(typed("elementwise(4,4)", &[("a", I8), ("relu", U8)]).is_ok());
        refused(typed("matmul(4,4,4)", &[("A", F16)]), "f16");
        // Multiplier check data are f32 inputs' (a stored DAG is read from outside).
        let mut m = typed("matmul(4,4,4)", &q).unwrap().stages;
        m[0].data = InputData::Multiplier;
        refused(ComputeDag::new(m), "multiplier check data");
        // An f32 stage reads integers (dequantization).
        assert!(typed("matmul(4,4,4)", &[("A", U8), ("B", I8)]).is_ok());
    }

    /// A sum of 8-bit products that could pass i32 is refused; one that cannot is kept.
    #[test]
    fn sums_that_may_overflow_are_refused() {
        use DType::*;
        // A product reaches 255 * -128 = -32640, and 32640 * 65794 > 2^31 - 1 >= 32640 * 65793.
        let q = [("A", U8), ("B", I8), ("C", I32)];
        assert!(typed("matmul(1,1,65793)", &q).is_ok());
        refused(typed("matmul(1,1,65794)", &q), "may overflow i32");
    }
}
