//! [`OpSpec`]: one library operator with every parameter resolved and its layout-free inputs,
//! parsed once from its text and printed in one canonical form that parses back to the same
//! workload. The command line, the API, the ONNX import and the bench pass it around instead
//! of the string, so the spec is parsed once and the DAG built once ([`OpSpec::task`]).
//!
//! The text: positional values fill parameters in order, named ones may follow, the rest take
//! their defaults; `layout_free=` is one more named argument, the inputs to pack (`B`, `A+B`,
//! or `none`). Without it an operator packs its constant weight (a layer's weight, packed
//! once as at inference), so that every client tunes the same kernel for the same text.
//! `dtype=` is another, the input types (`f32` unless said, or an integer form: see
//! [`super::dtype`]), printed after the parameters; `out_dtype=u8|i8` after it requantizes an
//! integer form's i32 result (`i32`, the default, is not printed).
//!
//! The canonical form ([`Display`](std::fmt::Display)): every parameter named in the
//! operator's order, those at their default left out, no spaces, then the resolved inputs:
//! `matmul(512,512,512)` prints `matmul(m=512,n=512,k=512,layout_free=B)`. `layout_free=none`
//! is printed when the operator has a constant weight that is not packed, nothing when it has
//! none (`softmax(m=8,n=8)`).

use super::dtype::{OpDType, requantize, retype};
use super::syntax;
use super::{IntegerForm, MAX_PARAM, OPS, OpDef, find_op};
use crate::ir::{ComputeDag, DType, DagError};
use crate::task::{Task, WorkloadOptions};
use std::collections::BTreeMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

/// The argument that names the layout-free inputs.
pub const LAYOUT_FREE: &str = "layout_free";

/// The argument that names the input types (see [`OpDType`]).
pub const DTYPE: &str = "dtype";

/// The argument that requantizes an integer form's output (TVM's name for an op's output type).
pub const OUT_DTYPE: &str = "out_dtype";

/// `layout_free=none`: explicitly no packed input.
pub const NONE: &str = "none";

/// Which inputs a kernel reads packed (see `Task::with_layout_free`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum LayoutFree {
    /// Not said: the operator's constant weight, or none when it has none.
    #[default]
    Default,
    /// These inputs by name, in the operator's input order; empty: none (`layout_free=none`).
    Inputs(Vec<String>),
}

impl LayoutFree {
    /// Explicitly no packed input.
    pub fn none() -> LayoutFree {
        LayoutFree::Inputs(vec![])
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum OpSpecError {
    #[error("unknown operator '{0}' (known: {1})")]
    UnknownOp(String, String),
    #[error("operator spec '{spec}': {msg}")]
    Syntax { spec: String, msg: String },
    #[error("{op}: {msg}")]
    Param { op: String, msg: String },
    #[error("{op}: layout_free: {msg}")]
    LayoutFree { op: String, msg: String },
    #[error("{op}: dtype: {msg}")]
    DType { op: String, msg: String },
    #[error(transparent)]
    Dag(#[from] DagError),
}

/// A library operator, its parameters (defaults filled, each within its range) and its
/// layout-free inputs (names checked against the operator's inputs). Equality is of the
/// workload: `Default` equals the inputs it resolves to.
#[derive(Clone)]
pub struct OpSpec {
    op: &'static OpDef,
    params: BTreeMap<&'static str, i64>,
    layout_free: LayoutFree,
    dtype: OpDType,
    /// The requantized output's type (`out_dtype=`); `None`: the integer form's i32, or f32.
    out_dtype: Option<DType>,
}

/// The operator named `name`, or the error listing the known ones.
pub(crate) fn lookup(name: &str) -> Result<&'static OpDef, OpSpecError> {
    find_op(name).ok_or_else(|| {
        OpSpecError::UnknownOp(
            name.into(),
            OPS.iter().map(|o| o.name).collect::<Vec<_>>().join(", "),
        )
    })
}

fn param_err(op: &OpDef, msg: String) -> OpSpecError {
    OpSpecError::Param {
        op: op.name.into(),
        msg,
    }
}

/// `value` as the input types of `op`: f32 for every operator, the integer forms for those
/// that have them.
fn parse_dtype(op: &OpDef, value: &str) -> Result<OpDType, OpSpecError> {
    let err = |msg: String| OpSpecError::DType {
        op: op.name.into(),
        msg,
    };
    let d = OpDType::parse(value).ok_or_else(|| {
        err(format!(
            "unknown input types '{value}' (known: {})",
            OpDType::ALL.map(OpDType::name).join(", ")
        ))
    })?;
    match op.integer {
        _ if d.fits(op.integer) => Ok(d),
        None => Err(err(format!("{} has no integer form", op.name))),
        Some(IntegerForm::Sum { .. }) => Err(err(format!(
            "{} sums a data input and a weight: say u8i8 or i8i8",
            op.name
        ))),
        Some(IntegerForm::Compare) => {
            Err(err(format!("{} compares one input: say u8 or i8", op.name)))
        }
    }
}

/// `value` as an output type: `i32` (the default: `None`), `u8` or `i8` (requantized).
fn parse_out_dtype(op: &OpDef, value: &str) -> Result<Option<DType>, OpSpecError> {
    match value {
        "i32" => Ok(None),
        "u8" => Ok(Some(DType::U8)),
        "i8" => Ok(Some(DType::I8)),
        _ => Err(OpSpecError::DType {
            op: op.name.into(),
            msg: format!("unknown output type '{value}' (known: i32, u8, i8)"),
        }),
    }
}

/// `out_dtype` requantizes an integer form: with f32 inputs it is an error.
fn check_out_dtype(
    op: &OpDef,
    dtype: OpDType,
    out_dtype: Option<DType>,
) -> Result<(), OpSpecError> {
    match out_dtype {
        Some(t) if !matches!(dtype, OpDType::U8I8 | OpDType::I8I8) => Err(OpSpecError::DType {
            op: op.name.into(),
            msg: format!(
                "{OUT_DTYPE}={} requantizes an integer form: say {DTYPE}=u8i8 or i8i8 too",
                t.name()
            ),
        }),
        _ => Ok(()),
    }
}

fn lf_err(op: &OpDef, msg: String) -> OpSpecError {
    OpSpecError::LayoutFree {
        op: op.name.into(),
        msg,
    }
}

/// Every parameter: the given ones, then the defaults; each within its range.
fn complete(
    op: &'static OpDef,
    mut vals: BTreeMap<&'static str, i64>,
) -> Result<BTreeMap<&'static str, i64>, OpSpecError> {
    for p in op.params {
        match (vals.get(p.name), p.default) {
            (None, Some(d)) => {
                vals.insert(p.name, d);
            }
            (None, None) => {
                return Err(param_err(
                    op,
                    format!("missing parameter '{}' ({})", p.name, p.doc),
                ));
            }
            _ => {}
        }
    }
    for (k, &v) in &vals {
        // A padding of 0 and the 0/1 flags are meaningful; every size is at least 1.
        let min = if matches!(*k, "pad" | "bias" | "relu") {
            0
        } else {
            1
        };
        if v < min || v > MAX_PARAM {
            return Err(param_err(
                op,
                format!("parameter '{k}' = {v} is out of range [{min}, {MAX_PARAM}]"),
            ));
        }
    }
    Ok(vals)
}

/// `names` checked against the inputs of `op` with `params`: in the operator's input order,
/// each once.
fn check_inputs(
    op: &OpDef,
    params: &BTreeMap<&'static str, i64>,
    names: &[&str],
) -> Result<Vec<String>, OpSpecError> {
    let inputs = op.inputs(params);
    if names.len() > 1 && names.contains(&NONE) {
        return Err(lf_err(
            op,
            format!("'{NONE}' stands alone: it means no input is packed"),
        ));
    }
    if let Some(bad) = names.iter().find(|n| !inputs.contains(n)) {
        return Err(lf_err(
            op,
            format!(
                "`{bad}` is not an input of {} (its inputs: {})",
                op.name,
                inputs.join(", ")
            ),
        ));
    }
    Ok(inputs
        .iter()
        .filter(|i| names.contains(i))
        .map(|i| i.to_string())
        .collect())
}

/// The value of `layout_free=`: `none`, or input names joined by `+`.
fn parse_inputs(
    op: &OpDef,
    params: &BTreeMap<&'static str, i64>,
    text: &str,
) -> Result<Vec<String>, OpSpecError> {
    if text == NONE {
        return Ok(vec![]);
    }
    let names: Vec<&str> = text.split('+').map(str::trim).collect();
    if names.iter().any(|n| n.is_empty()) {
        return Err(lf_err(
            op,
            format!(
                "an empty input name in '{text}' (inputs joined by '+', e.g. layout_free={}, \
                 or layout_free={NONE})",
                op.constant_weight.unwrap_or("A")
            ),
        ));
    }
    check_inputs(op, params, &names)
}

impl OpSpec {
    /// Parses an op spec: `matmul(512, 512, 512)`, `conv2d_nchw(n=1, c=64, h=56, w=56, f=64,
    /// pad=1, layout_free=kernel)`, `matmul(64,64,64,layout_free=none)`. The DAG is not
    /// built: its size limit is checked by [`OpSpec::dag`].
    pub fn parse(text: &str) -> Result<OpSpec, OpSpecError> {
        let call = syntax::split_call(text).map_err(|e| OpSpecError::Syntax {
            spec: text.into(),
            msg: e.to_string(),
        })?;
        let op = lookup(call.name)?;
        let args: Vec<(Option<&str>, &str)> = call.args.iter().map(|a| (a.key, a.value)).collect();
        OpSpec::from_args(op, &args, text)
    }

    /// From split arguments (positional values, then named ones, `layout_free` among them):
    /// what [`OpSpec::parse`] and shape ranges share. `text` names the spec in syntax errors.
    pub(crate) fn from_args(
        op: &'static OpDef,
        args: &[(Option<&str>, &str)],
        text: &str,
    ) -> Result<OpSpec, OpSpecError> {
        let mut vals: BTreeMap<&'static str, i64> = BTreeMap::new();
        let mut layout_free: Option<&str> = None;
        let mut dtype: Option<OpDType> = None;
        let mut out_dtype: Option<Option<DType>> = None;
        let mut named_seen = false;
        for (pos, &(key, value)) in args.iter().enumerate() {
            let pname = match key {
                Some(DTYPE) => {
                    named_seen = true;
                    if dtype.replace(parse_dtype(op, value)?).is_some() {
                        return Err(OpSpecError::DType {
                            op: op.name.into(),
                            msg: "given twice".into(),
                        });
                    }
                    continue;
                }
                Some(OUT_DTYPE) => {
                    named_seen = true;
                    if out_dtype.replace(parse_out_dtype(op, value)?).is_some() {
                        return Err(OpSpecError::DType {
                            op: op.name.into(),
                            msg: format!("{OUT_DTYPE} given twice"),
                        });
                    }
                    continue;
                }
                Some(LAYOUT_FREE) => {
                    named_seen = true;
                    if layout_free.replace(value).is_some() {
                        return Err(lf_err(op, "given twice".into()));
                    }
                    continue;
                }
                Some(k) => {
                    named_seen = true;
                    let p = op.params.iter().find(|p| p.name == k).ok_or_else(|| {
                        param_err(
                            op,
                            format!(
                                "unknown parameter '{k}' (parameters: {}; options: {LAYOUT_FREE}, {DTYPE}, {OUT_DTYPE})",
                                op.param_names()
                            ),
                        )
                    })?;
                    p.name
                }
                None => {
                    if named_seen {
                        return Err(OpSpecError::Syntax {
                            spec: text.into(),
                            msg: "a positional value cannot follow a named one".into(),
                        });
                    }
                    let p = op.params.get(pos).ok_or_else(|| {
                        param_err(op, format!("takes at most {} parameters", op.params.len()))
                    })?;
                    p.name
                }
            };
            let v: i64 = value.parse().map_err(|_| {
                param_err(
                    op,
                    format!("parameter '{pname}' must be an integer, got '{value}'"),
                )
            })?;
            if vals.insert(pname, v).is_some() {
                return Err(param_err(op, format!("parameter '{pname}' given twice")));
            }
        }
        let params = complete(op, vals)?;
        let layout_free = match layout_free {
            None => LayoutFree::Default,
            Some(text) => LayoutFree::Inputs(parse_inputs(op, &params, text)?),
        };
        let dtype = dtype.unwrap_or_default();
        let out_dtype = out_dtype.flatten();
        check_out_dtype(op, dtype, out_dtype)?;
        Ok(OpSpec {
            op,
            params,
            layout_free,
            dtype,
            out_dtype,
        })
    }

    /// An operator by name with parameters by name (the others at their defaults): for code
    /// that has the values, not a text (the ONNX import, record keys).
    pub fn new(
        op: &str,
        params: &[(&str, i64)],
        layout_free: LayoutFree,
    ) -> Result<OpSpec, OpSpecError> {
        let op = lookup(op)?;
        let mut vals = BTreeMap::new();
        for &(name, v) in params {
            let p = op.params.iter().find(|p| p.name == name).ok_or_else(|| {
                param_err(
                    op,
                    format!(
                        "unknown parameter '{name}' (parameters: {})",
                        op.param_names()
                    ),
                )
            })?;
            if vals.insert(p.name, v).is_some() {
                return Err(param_err(op, format!("parameter '{name}' given twice")));
            }
        }
        let params = complete(op, vals)?;
        OpSpec {
            op,
            params,
            layout_free: LayoutFree::Default,
            dtype: OpDType::F32,
            out_dtype: None,
        }
        .with_layout_free(layout_free)
    }

    /// The input types (`dtype=`; f32 when not said).
    pub fn dtype(&self) -> OpDType {
        self.dtype
    }

    /// The spec with these input types (checked against the operator's forms).
    pub fn with_dtype(self, dtype: OpDType) -> Result<OpSpec, OpSpecError> {
        let dtype = parse_dtype(self.op, dtype.name())?;
        check_out_dtype(self.op, dtype, self.out_dtype)?;
        Ok(OpSpec { dtype, ..self })
    }

    /// The requantized output's type (`out_dtype=`): `None` for an integer form's i32 result
    /// or an f32 operator's f32.
    pub fn out_dtype(&self) -> Option<DType> {
        self.out_dtype
    }

    /// The spec with its integer form's output requantized to `out` (u8 or i8), or not
    /// (`None`).
    pub fn with_out_dtype(self, out: Option<DType>) -> Result<OpSpec, OpSpecError> {
        let out_dtype = match out {
            None => None,
            Some(t) => parse_out_dtype(self.op, t.name())?,
        };
        check_out_dtype(self.op, self.dtype, out_dtype)?;
        Ok(OpSpec { out_dtype, ..self })
    }

    pub fn op(&self) -> &'static OpDef {
        self.op
    }

    pub fn name(&self) -> &'static str {
        self.op.name
    }

    /// Every parameter, defaults included.
    pub fn params(&self) -> &BTreeMap<&'static str, i64> {
        &self.params
    }

    pub fn param(&self, name: &str) -> Option<i64> {
        self.params.get(name).copied()
    }

    /// The layout-free inputs as written (`Default` when the text did not say).
    pub fn layout_free(&self) -> &LayoutFree {
        &self.layout_free
    }

    /// The layout-free inputs resolved: `Default` is the operator's constant weight.
    pub fn layout_free_inputs(&self) -> Vec<&str> {
        match &self.layout_free {
            LayoutFree::Default => self.op.constant_weight.into_iter().collect(),
            LayoutFree::Inputs(names) => names.iter().map(String::as_str).collect(),
        }
    }

    /// The operator's inputs with these parameters, in the DAG's order.
    pub fn inputs(&self) -> Vec<&'static str> {
        self.op.inputs(&self.params)
    }

    /// The spec with these layout-free inputs instead (names checked).
    pub fn with_layout_free(self, layout_free: LayoutFree) -> Result<OpSpec, OpSpecError> {
        let layout_free = match layout_free {
            LayoutFree::Default => LayoutFree::Default,
            LayoutFree::Inputs(names) => {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                LayoutFree::Inputs(check_inputs(self.op, &self.params, &names)?)
            }
        };
        Ok(OpSpec {
            layout_free,
            ..self
        })
    }

    /// The spec with `Default` read as no packed input: for descriptions written before the
    /// default existed (records and datasets of the bench), where no `layout_free=` meant none.
    pub fn unpacked_by_default(self) -> OpSpec {
        match self.layout_free {
            LayoutFree::Default => OpSpec {
                layout_free: LayoutFree::none(),
                ..self
            },
            LayoutFree::Inputs(_) => self,
        }
    }

    /// The task's options, resolved (the default is the constant weight), in input order.
    pub fn options(&self) -> WorkloadOptions {
        WorkloadOptions {
            layout_free: self
                .layout_free_inputs()
                .into_iter()
                .map(String::from)
                .collect(),
        }
    }

    /// The spec with an API request's typed options: non-empty ones replace `Default`, agree
    /// with an explicit `layout_free=` or are an error; empty ones leave the text's choice (so
    /// the default is the same for every client: the constant weight).
    pub fn with_options(self, options: &WorkloadOptions) -> Result<OpSpec, OpSpecError> {
        if options.layout_free.is_empty() {
            return Ok(self);
        }
        let names: Vec<&str> = options.layout_free.iter().map(String::as_str).collect();
        let typed = check_inputs(self.op, &self.params, &names)?;
        match &self.layout_free {
            LayoutFree::Default => Ok(OpSpec {
                layout_free: LayoutFree::Inputs(typed),
                ..self
            }),
            LayoutFree::Inputs(written) if *written == typed => Ok(self),
            LayoutFree::Inputs(written) => {
                let written = if written.is_empty() {
                    NONE.to_string()
                } else {
                    written.join("+")
                };
                Err(lf_err(
                    self.op,
                    format!(
                        "the spec says {LAYOUT_FREE}={written}, the options say [{}]: give \
                         it in one place",
                        typed.join(", ")
                    ),
                ))
            }
        }
    }

    /// Builds the DAG (its size limit checked).
    pub fn dag(&self) -> Result<ComputeDag, DagError> {
        let dag = retype(self.op.build(&self.params)?, self.dtype)?;
        match (self.out_dtype, self.op.integer) {
            (Some(out), Some(IntegerForm::Sum { channel_axis })) => {
                requantize(dag, out, channel_axis)
            }
            _ => Ok(dag),
        }
    }

    /// The tuning task: the DAG built once, the layout-free inputs applied, described by the
    /// canonical form.
    pub fn task(&self) -> Result<Task, OpSpecError> {
        let dag = self.dag()?;
        Task::new(dag, self.to_string())
            .with_layout_free(&self.layout_free_inputs())
            .map_err(|msg| lf_err(self.op, msg))
    }

    /// The canonical form, with the parameters in `ranged` written `name=lo..hi` (a shape
    /// range's form).
    pub(crate) fn write_canonical(
        &self,
        f: &mut impl fmt::Write,
        ranged: &[(&str, i64, i64)],
    ) -> fmt::Result {
        write!(f, "{}(", self.op.name)?;
        let mut sep = "";
        for p in self.op.params {
            if let Some(&(_, lo, hi)) = ranged.iter().find(|r| r.0 == p.name) {
                write!(f, "{sep}{}={lo}..{hi}", p.name)?;
            } else {
                let v = self.params[p.name];
                if p.default == Some(v) {
                    continue;
                }
                write!(f, "{sep}{}={v}", p.name)?;
            }
            sep = ",";
        }
        if self.dtype != OpDType::F32 {
            write!(f, "{sep}{DTYPE}={}", self.dtype.name())?;
            sep = ",";
        }
        if let Some(out) = self.out_dtype {
            write!(f, "{sep}{OUT_DTYPE}={}", out.name())?;
            sep = ",";
        }
        let packed = self.layout_free_inputs();
        if !packed.is_empty() {
            write!(f, "{sep}{LAYOUT_FREE}={}", packed.join("+"))?;
        } else if self.op.constant_weight.is_some() {
            // Said, so that pasting it back does not pack the weight by default.
            write!(f, "{sep}{LAYOUT_FREE}={NONE}")?;
        }
        f.write_str(")")
    }
}

impl fmt::Display for OpSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_canonical(f, &[])
    }
}

impl fmt::Debug for OpSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpSpec")
            .field("spec", &self.to_string())
            .field("layout_free", &self.layout_free)
            .finish()
    }
}

impl PartialEq for OpSpec {
    fn eq(&self, other: &Self) -> bool {
        self.op.name == other.op.name
            && self.params == other.params
            && self.layout_free_inputs() == other.layout_free_inputs()
            && self.dtype == other.dtype
            && self.out_dtype == other.out_dtype
    }
}

impl Eq for OpSpec {}

impl Hash for OpSpec {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.op.name.hash(state);
        self.params.hash(state);
        self.layout_free_inputs().hash(state);
        self.dtype.hash(state);
        self.out_dtype.hash(state);
    }
}

impl FromStr for OpSpec {
    type Err = OpSpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        OpSpec::parse(s)
    }
}

/// As its canonical string.
impl serde::Serialize for OpSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for OpSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        OpSpec::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{self, Window};
    use proptest::prelude::*;

    fn spec(s: &str) -> OpSpec {
        OpSpec::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn every_library_operator_prints_canonically() {
        for (text, want) in [
            (
                "matmul(512,512,512)",
                "matmul(m=512,n=512,k=512,layout_free=B)",
            ),
            (
                "matmul(64,64,64,layout_free=none)",
                "matmul(m=64,n=64,k=64,layout_free=none)",
            ),
            (
                "batch_matmul(12, 128, 128, 64)",
                "batch_matmul(b=12,m=128,n=128,k=64)",
            ),
            (
                "dense(m=1,n=1000,k=1024,bias=1,relu=1)",
                "dense(m=1,n=1000,k=1024,layout_free=weight)",
            ),
            (
                "dense(1,8,4,bias=0,relu=0,layout_free=data+weight)",
                "dense(m=1,n=8,k=4,bias=0,relu=0,layout_free=data+weight)",
            ),
            (
                "conv2d_nchw(n=1,c=64,h=56,w=56,f=64,kh=3,kw=3,pad=1)",
                "conv2d_nchw(n=1,c=64,h=56,w=56,f=64,pad=1,layout_free=kernel)",
            ),
            (
                "conv2d_nhwc(1,56,56,64,64,kh=1,kw=1,stride=2,bias=1,relu=1)",
                "conv2d_nhwc(n=1,h=56,w=56,c=64,f=64,kh=1,kw=1,stride=2,bias=1,relu=1,\
                 layout_free=kernel)",
            ),
            (
                "depthwise_conv2d_nchw(n=1,c=32,h=112,w=112,dilation=2,layout_free=none)",
                "depthwise_conv2d_nchw(n=1,c=32,h=112,w=112,dilation=2,layout_free=none)",
            ),
            (
                "max_pool2d(1,64,112,112,kh=3,kw=3)",
                "max_pool2d(n=1,c=64,h=112,w=112,kh=3,kw=3)",
            ),
            (
                "avg_pool2d(n=1,c=8,h=8,w=8,kh=2,kw=2,stride=2,pad=0,dilation=1)",
                "avg_pool2d(n=1,c=8,h=8,w=8)",
            ),
            ("softmax(8,8)", "softmax(m=8,n=8)"),
            ("softmax(8,8,layout_free=none)", "softmax(m=8,n=8)"),
            (
                "elementwise(m=4,n=4,layout_free=b+a)",
                "elementwise(m=4,n=4,layout_free=a+b)",
            ),
        ] {
            let s = spec(text);
            assert_eq!(s.to_string(), want, "{text}");
            assert_eq!(spec(want), s, "{want}");
            assert_eq!(spec(want).to_string(), want);
        }
        // Every operator of the registry, whatever is in the table above.
        for op in OPS {
            let s = spec(&ops::tests::small_spec(op));
            let printed = s.to_string();
            assert!(printed.starts_with(&format!("{}(", op.name)), "{printed}");
            assert_eq!(spec(&printed), s);
            assert_eq!(spec(&printed).to_string(), printed);
            assert_eq!(
                printed.contains("layout_free="),
                op.constant_weight.is_some(),
                "{printed}"
            );
        }
    }

    #[test]
    fn layout_free_defaults_to_the_constant_weight_and_is_checked() {
        let m = spec("matmul(8,8,8)");
        assert_eq!(*m.layout_free(), LayoutFree::Default);
        assert_eq!(m.layout_free_inputs(), ["B"]);
        assert_eq!(m.options().layout_free, ["B"]);
        assert_eq!(m, spec("matmul(8,8,8,layout_free=B)"));
        assert_ne!(m, spec("matmul(8,8,8,layout_free=none)"));
        assert!(spec("matmul(8,8,8,layout_free=none)").options().is_empty());
        assert!(spec("softmax(4,4)").options().is_empty());
        assert_eq!(spec("softmax(4,4)"), spec("softmax(4,4,layout_free=none)"));
        // Several inputs, in the operator's order, each once.
        let both = spec("matmul(8,8,8,layout_free=B+A+B)");
        assert_eq!(both.layout_free_inputs(), ["A", "B"]);
        assert_eq!(both.to_string(), "matmul(m=8,n=8,k=8,layout_free=A+B)");
        // The bias is an input only when there is one.
        assert_eq!(
            spec("dense(1,8,4,layout_free=weight+bias)").layout_free_inputs(),
            ["weight", "bias"]
        );
        for (text, want) in [
            (
                "matmul(8,8,8,layout_free=Z)",
                "matmul: layout_free: `Z` is not an input of matmul (its inputs: A, B)",
            ),
            (
                "dense(1,8,4,bias=0,layout_free=bias)",
                "`bias` is not an input of dense (its inputs: data, weight)",
            ),
            ("matmul(8,8,8,layout_free=none+B)", "'none' stands alone"),
            ("matmul(8,8,8,layout_free=)", "an empty input name"),
            ("matmul(8,8,8,layout_free=A+)", "an empty input name"),
            ("matmul(8,8,8,layout_free=B,layout_free=A)", "given twice"),
            (
                "matmul(8,layout_free=B,8,8)",
                "positional value cannot follow",
            ),
        ] {
            let e = OpSpec::parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn typed_options_replace_the_default_and_must_agree_with_the_text() {
        let opts = |names: &[&str]| WorkloadOptions {
            layout_free: names.iter().map(|n| n.to_string()).collect(),
        };
        // Empty typed options leave the text's choice: the default is the constant weight.
        let d = spec("matmul(8,8,8)").with_options(&opts(&[])).unwrap();
        assert_eq!(d.options(), opts(&["B"]));
        let none = spec("matmul(8,8,8,layout_free=none)")
            .with_options(&opts(&[]))
            .unwrap();
        assert!(none.options().is_empty());
        // Non-empty ones replace the default.
        let a = spec("matmul(8,8,8)").with_options(&opts(&["A"])).unwrap();
        assert_eq!(a.options(), opts(&["A"]));
        assert_eq!(a.to_string(), "matmul(m=8,n=8,k=8,layout_free=A)");
        // The same inputs said twice agree; different ones are an error.
        let same = spec("matmul(8,8,8,layout_free=B+A)")
            .with_options(&opts(&["A", "B"]))
            .unwrap();
        assert_eq!(same.layout_free_inputs(), ["A", "B"]);
        for (text, typed) in [
            ("matmul(8,8,8,layout_free=B)", &["A"][..]),
            ("matmul(8,8,8,layout_free=none)", &["B"][..]),
        ] {
            let e = spec(text)
                .with_options(&opts(typed))
                .unwrap_err()
                .to_string();
            assert!(e.contains("give it in one place"), "{text}: {e}");
        }
        let e = spec("matmul(8,8,8)")
            .with_options(&opts(&["Z"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`Z` is not an input"), "{e}");
        // Read as an old description: no `layout_free=` means none.
        assert!(
            spec("matmul(8,8,8)")
                .unpacked_by_default()
                .options()
                .is_empty()
        );
        assert_eq!(
            spec("matmul(8,8,8,layout_free=B)")
                .unpacked_by_default()
                .options(),
            opts(&["B"])
        );
    }

    /// The task of a spec has the key the same workload always had: stored records keep
    /// matching.
    #[test]
    fn tasks_keep_their_workload_keys() {
        let t = spec("matmul(512,512,512)").task().unwrap();
        let want = Task::new(ops::matmul(512, 512, 512).unwrap(), "x")
            .with_layout_free(&["B"])
            .unwrap();
        assert_eq!(t.key, want.key);
        assert_eq!(t.layout_free, want.layout_free);
        assert_eq!(t.desc, "matmul(m=512,n=512,k=512,layout_free=B)");
        let plain = spec("matmul(64,64,64,layout_free=none)").task().unwrap();
        assert_eq!(
            plain.key,
            Task::new(ops::matmul(64, 64, 64).unwrap(), "x").key
        );
        assert!(plain.layout_free.is_empty());
        let conv = spec("conv2d_nchw(n=1,c=64,h=56,w=56,f=64,pad=1)")
            .task()
            .unwrap();
        let dag =
            ops::conv2d_nchw(1, 64, 56, 56, 64, Window::square(3, 1, 1), false, false).unwrap();
        let want = Task::new(dag, "x").with_layout_free(&["kernel"]).unwrap();
        assert_eq!(conv.key, want.key);
        assert_eq!(
            conv.options(),
            spec("conv2d_nchw(1,64,56,56,64,pad=1)").options()
        );
        // The options a task reports rebuild the same spec.
        let back = spec("conv2d_nchw(n=1,c=64,h=56,w=56,f=64,pad=1,layout_free=none)")
            .with_layout_free(LayoutFree::Inputs(conv.options().layout_free))
            .unwrap();
        assert_eq!(back.task().unwrap().key, conv.key);
    }

    /// Descriptions the bench and the datasets wrote (no `layout_free=` there meant none) give
    /// the tasks the sugar's string path gave them: their records keep matching.
    #[test]
    fn stored_descriptions_keep_their_tasks() {
        for desc in [
            "matmul(512,512,512,layout_free=B)",
            "matmul(64,64,64)",
            "dense(m=1,n=1000,k=1024,bias=1,relu=1,layout_free=weight)",
            "conv2d_nchw(n=1,c=64,h=56,w=56,f=64,kh=3,kw=3,pad=1,layout_free=kernel)",
            "conv2d_nhwc(n=1,h=56,w=56,c=64,f=64,kh=3,kw=3,pad=1,layout_free=kernel)",
            "depthwise_conv2d_nchw(n=1,c=32,h=112,w=112,kh=3,kw=3,pad=1,layout_free=kernel)",
            "batch_matmul(b=12,m=128,n=128,k=64)",
            "softmax(m=128,n=1000)",
        ] {
            let (clean, _) = crate::ops::described::split_layout_free(desc);
            let old = Task::from_desc(ops::build_op(&clean).unwrap(), desc).unwrap();
            let new = spec(desc).unpacked_by_default().task().unwrap();
            assert_eq!(
                (&new.key, &new.layout_free),
                (&old.key, &old.layout_free),
                "{desc}"
            );
        }
    }

    #[test]
    fn specs_from_values_are_checked_as_parsed_ones() {
        let s = OpSpec::new(
            "conv2d_nchw",
            &[("n", 1), ("c", 3), ("h", 8), ("w", 8), ("f", 4), ("pad", 1)],
            LayoutFree::Inputs(vec!["kernel".into()]),
        )
        .unwrap();
        assert_eq!(s, spec("conv2d_nchw(1,3,8,8,4,pad=1)"));
        for (name, params, want) in [
            ("nosuch", &[][..], "unknown operator"),
            ("matmul", &[("m", 1), ("n", 1)][..], "missing parameter 'k'"),
            (
                "matmul",
                &[("m", 1), ("n", 1), ("k", 0)][..],
                "out of range",
            ),
            ("matmul", &[("q", 1)][..], "unknown parameter 'q'"),
            ("matmul", &[("m", 1), ("m", 1)][..], "given twice"),
        ] {
            let e = OpSpec::new(name, params, LayoutFree::Default)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{name} {params:?}: {e}");
        }
        let e = OpSpec::new(
            "softmax",
            &[("m", 2), ("n", 2)],
            LayoutFree::Inputs(vec!["W".into()]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("its inputs: x"), "{e}");
    }

    #[test]
    fn serialised_as_the_canonical_string() {
        let s = spec("matmul(8, 8, 8)");
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, r#""matmul(m=8,n=8,k=8,layout_free=B)""#);
        assert_eq!(serde_json::from_str::<OpSpec>(&json).unwrap(), s);
        let e = serde_json::from_str::<OpSpec>(r#""matmul(8,8)""#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing parameter 'k'"), "{e}");
        assert_eq!(
            "softmax(2,2)".parse::<OpSpec>().unwrap(),
            spec("softmax(m=2,n=2)")
        );
    }

    /// `dtype=` prints canonically, parses back, keys a workload of its own and types the DAG:
    /// 8-bit data and weight, i32 bias and computed stages.
    #[test]
    fn input_types_are_part_of_the_workload() {
        use crate::ir::DType;
        let f = spec("dense(m=2,n=4,k=8,dtype=f32)");
        assert_eq!(f, spec("dense(m=2,n=4,k=8)"));
        assert!(!f.to_string().contains("dtype"));
        let q = spec("dense(2,4,8,dtype=u8i8)");
        assert_eq!(
            q.to_string(),
            "dense(m=2,n=4,k=8,dtype=u8i8,layout_free=weight)"
        );
        assert_eq!(spec(&q.to_string()), q);
        let s8 = spec("dense(2,4,8,dtype=i8i8)");
        let keys: Vec<String> = [&f, &q, &s8]
            .iter()
            .map(|s| s.dag().unwrap().workload_key())
            .collect();
        assert!(keys[0] != keys[1] && keys[1] != keys[2] && keys[0] != keys[2]);
        let dag = q.dag().unwrap();
        let types: Vec<(&str, DType)> = dag
            .stages
            .iter()
            .map(|s| (s.name.as_str(), s.dtype))
            .collect();
        assert_eq!(
            types,
            [
                ("data", DType::U8),
                ("weight", DType::I8),
                ("dense", DType::I32),
                ("bias", DType::I32),
                ("bias_relu", DType::I32)
            ]
        );
        for op in OPS.iter().filter(|o| o.integer.is_some()) {
            let dtype = match op.integer {
                Some(IntegerForm::Compare) => "i8",
                _ => "i8i8",
            };
            let text = crate::ops::tests::small_spec(op).replace(')', &format!(",dtype={dtype})"));
            let dag = spec(&text).dag().unwrap();
            assert!(dag.stages.iter().all(|s| s.dtype.is_int()), "{text}");
        }
    }

    #[test]
    fn malformed_specs_are_refused_with_the_reason() {
        for (text, want) in [
            ("matmul(64,64,64", "expected ')'"),
            ("matmul(64,64,64,)", "argument 4 is empty"),
            ("matmul(,64,64,64)", "argument 1 is empty"),
            ("matmul(64,,64)", "argument 2 is empty"),
            ("matmul(64,64)", "missing parameter 'k'"),
            ("matmul(64,64,64,64)", "at most 3"),
            ("matmul(64,64,x)", "must be an integer"),
            ("matmul(0,64,64)", "out of range"),
            ("matmul(1048577,1,1)", "out of range"),
            ("matmul(m=1,m=1,n=1,k=1)", "given twice"),
            ("matmul(8,8,8,layout_fre=B)", "options: layout_free, dtype"),
            ("matmul(8,8,8,dtype=i4)", "unknown input types 'i4'"),
            ("softmax(8,8,dtype=u8i8)", "softmax has no integer form"),
            ("max_pool2d(1,8,8,8,dtype=u8i8)", "say u8 or i8"),
            ("matmul(8,8,8,dtype=u8)", "say u8i8 or i8i8"),
            (
                "max_pool2d(1,8,8,8,dtype=u8,out_dtype=u8)",
                "say dtype=u8i8 or i8i8",
            ),
            ("matmul(8,8,8,dtype=u8i8,dtype=f32)", "given twice"),
            ("nosuch(1)", "unknown operator"),
        ] {
            let e = OpSpec::parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
        assert!(OpSpec::parse("matmul(64, 64, 64)").is_ok());
        assert!(OpSpec::parse(" matmul( m=64 ,n=64, k=64 ) ").is_ok());
    }

    /// Each parameter within its range, the whole operator past the one size limit of every
    /// DAG (the text form's too): refused when the DAG is built.
    #[test]
    fn an_operator_past_the_size_limit_is_refused() {
        let big = spec("matmul(1048576,1048576,1048576)");
        let e = big.dag().unwrap_err().to_string();
        assert!(e.contains("2^40"), "{e}");
        assert!(big.task().unwrap_err().to_string().contains("2^40"));
        let text = crate::text::parse(
            "C[i, j] += A[i, k] * B[k, j] where i < 1048576, j < 1048576, k < 1048576;",
        )
        .unwrap_err()
        .to_string();
        assert!(text.contains("2^40"), "{text}");
        assert!(spec("matmul(1024,1024,1024)").dag().is_ok());
    }

    /// Pieces op specs are made of, and some that break them.
    fn spec_soup() -> impl Strategy<Value = String> {
        let tok = prop::sample::select(vec![
            "matmul",
            "conv2d_nchw",
            "softmax",
            "dense",
            "max_pool2d",
            "(",
            ")",
            ",",
            "=",
            " ",
            "m",
            "n",
            "k",
            "pad",
            "stride",
            "bias",
            "0",
            "1",
            "3",
            "64",
            "-1",
            "1048576",
            "1048577",
            "99999999999999999999",
            "layout_free",
            "B",
            "A",
            "none",
            "+",
            "é",
            "\u{0}",
        ]);
        prop::collection::vec(tok, 0..24).prop_map(|t| t.concat())
    }

    /// Well-formed specs of every operator: its required parameters (small, so the DAG is
    /// cheap), some optional ones, positional or named, and a `layout_free=` or not.
    fn valid_spec() -> impl Strategy<Value = String> {
        (
            0..OPS.len(),
            prop::collection::vec(1i64..6, 16),
            prop::collection::vec(any::<bool>(), 16),
            0usize..5,
            0usize..4,
        )
            .prop_map(|(o, vals, flags, npos, lf)| {
                let op = &OPS[o];
                let mut args = vec![];
                for (i, p) in op.params.iter().enumerate() {
                    let v = match (p.name, p.default) {
                        ("bias" | "relu", _) => vals[i] % 2,
                        ("pad", _) => vals[i] % 2,
                        ("stride" | "dilation", _) => 1 + vals[i] % 2,
                        // Windows no larger than the input (every size is at least 4 below).
                        ("kh" | "kw", _) => 1 + vals[i] % 3,
                        (_, Some(_)) => vals[i],
                        (_, None) => 3 + vals[i],
                    };
                    if p.default.is_some() && !flags[i] {
                        continue;
                    }
                    if i < npos && args.len() == i {
                        args.push(v.to_string());
                    } else {
                        args.push(format!("{}={v}", p.name));
                    }
                }
                match lf {
                    1 => args.push("layout_free=none".into()),
                    2 => args.push(format!("layout_free={}", op.inputs[0].name)),
                    3 => {
                        // The last input always there, then the first: printed in input order.
                        let last = op.inputs.iter().rfind(|i| i.when.is_none()).unwrap();
                        args.push(format!("layout_free={}+{}", last.name, op.inputs[0].name));
                    }
                    _ => {}
                }
                format!("{}({})", op.name, args.join(", "))
            })
    }

    // Bounded here (256 cases each); `PROPTEST_CASES=100000 cargo test -p tunehub-engine
    // op_spec` runs a long fuzz.
    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        /// Any text: no panic; a refusal says what was wrong; an accepted spec round-trips
        /// and builds a DAG within the size limit.
        #[test]
        fn op_spec_parser_never_panics(s in ".{0,80}") {
            check_spec(&s)?;
        }

        #[test]
        fn op_spec_token_soup_never_panics(s in spec_soup()) {
            check_spec(&s)?;
        }

        /// For any accepted spec s: parse(print(parse(s))) == parse(s), and the printed form
        /// is a fixed point.
        #[test]
        fn op_spec_round_trips_through_its_canonical_form(s in valid_spec()) {
            let p = OpSpec::parse(&s).map_err(|e| TestCaseError::fail(format!("{s}: {e}")))?;
            check_spec(&s)?;
            let back = OpSpec::parse(&p.to_string()).unwrap();
            prop_assert_eq!(back.options(), p.options());
            prop_assert_eq!(back.params(), p.params());
        }
    }

    fn check_spec(s: &str) -> Result<(), TestCaseError> {
        let Ok(p) = OpSpec::parse(s) else {
            let msg = OpSpec::parse(s).unwrap_err().to_string();
            prop_assert!(!msg.trim().is_empty(), "{s:?}: empty error");
            return Ok(());
        };
        // Accepted specs are exactly the well-formed ones: a closing parenthesis, no empty
        // argument.
        let t = s.trim();
        if t.contains('(') {
            prop_assert!(t.ends_with(')'), "{s}");
            prop_assert!(!t.contains(",)") && !t.contains("(,") && !t.contains(",,"));
        }
        let printed = p.to_string();
        let back = OpSpec::parse(&printed);
        prop_assert!(back.is_ok(), "{s:?} printed {printed:?}: {back:?}");
        let back = back.unwrap();
        prop_assert_eq!(&back, &p, "{:?} printed {:?}", s, printed);
        prop_assert_eq!(back.to_string(), printed.clone());
        prop_assert!(!printed.contains(' '), "{printed}");
        if let Ok(dag) = p.dag() {
            for st in &dag.stages {
                prop_assert!(crate::ir::dag::points(&st.axis_extents()).is_some());
            }
        }
        Ok(())
    }
}
