//! The compute DAG: placeholders (inputs) and compute stages, in topological order.

use super::expr::{Affine, Cond, DType, Expr};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Reduction combiner of a compute stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
}

impl ReduceOp {
    pub fn identity(self) -> f64 {
        match self {
            ReduceOp::Sum => 0.0,
            ReduceOp::Max => f64::NEG_INFINITY,
            ReduceOp::Min => f64::INFINITY,
        }
    }

    pub fn combine(self, acc: f64, x: f64) -> f64 {
        match self {
            ReduceOp::Sum => acc + x,
            ReduceOp::Max => acc.max(x),
            ReduceOp::Min => acc.min(x),
        }
    }
}

/// A loop axis of a compute stage: a name (for readable code) and an extent.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Axis {
    pub name: String,
    pub extent: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StageKind {
    /// An input tensor.
    Placeholder,
    /// `out[space] = body` or `out[space] = reduce_{reduce_axes} body`. The body's axes are
    /// numbered space axes first (`0..space.len()`), then reduction axes.
    Compute {
        space: Vec<Axis>,
        reduce_axes: Vec<Axis>,
        reduce: Option<ReduceOp>,
        body: Expr,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    pub name: String,
    pub shape: Vec<i64>,
    pub dtype: DType,
    /// A placeholder's check data (`data::input_of`); unsaid: its type's usual values.
    #[serde(default, skip_serializing_if = "InputData::is_usual")]
    pub data: InputData,
    #[serde(flatten)]
    pub kind: StageKind,
}

/// What a placeholder's check data are drawn from (see `data::input_of`). The values a kernel
/// is checked on must exercise what it computes: a requantization's multiplier drawn from
/// f32's usual `[-1, 1)` would saturate nearly every output of a sum of 8-bit products.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputData {
    /// The type's usual values: f32 in `[-1, 1)`, every value of an 8-bit type.
    #[default]
    Usual,
    /// A requantization multiplier (f32): positive, log-uniform over `[2^-16, 2^-4)`, the
    /// range where the sums of 8-bit products of the checked shapes land inside 8 bits.
    Multiplier,
}

impl InputData {
    pub fn is_usual(&self) -> bool {
        *self == InputData::Usual
    }
}

impl Stage {
    pub fn is_placeholder(&self) -> bool {
        matches!(self.kind, StageKind::Placeholder)
    }

    pub fn space(&self) -> &[Axis] {
        match &self.kind {
            StageKind::Compute { space, .. } => space,
            StageKind::Placeholder => &[],
        }
    }

    pub fn reduce_axes(&self) -> &[Axis] {
        match &self.kind {
            StageKind::Compute { reduce_axes, .. } => reduce_axes,
            StageKind::Placeholder => &[],
        }
    }

    pub fn is_reduction(&self) -> bool {
        matches!(
            &self.kind,
            StageKind::Compute {
                reduce: Some(_),
                ..
            }
        )
    }

    /// Extents of all axes, space then reduce.
    pub fn axis_extents(&self) -> Vec<i64> {
        self.space()
            .iter()
            .chain(self.reduce_axes())
            .map(|a| a.extent)
            .collect()
    }

    pub fn body(&self) -> Option<&Expr> {
        match &self.kind {
            StageKind::Compute { body, .. } => Some(body),
            StageKind::Placeholder => None,
        }
    }

    pub fn num_elements(&self) -> i64 {
        self.shape.iter().product()
    }

    /// Stage indices this stage reads, deduplicated, in first-read order.
    pub fn inputs(&self) -> Vec<usize> {
        let mut out = vec![];
        if let Some(b) = self.body() {
            b.visit_loads(&mut |t, _| {
                if !out.contains(&t) {
                    out.push(t)
                }
            });
        }
        out
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DagError {
    #[error("stage {stage}: {msg}")]
    Invalid { stage: String, msg: String },
    #[error("the DAG has no stages")]
    Empty,
}

/// Largest tensor (elements) and largest iteration space of one stage (points): one limit for
/// every way a DAG is made (op specs, the text form, imports), checked by [`ComputeDag::new`].
/// Far past what can be measured (2^40 f32 are 4 TiB), it keeps sizes and FLOP counts inside
/// `i64`/`u64` and turns an absurd request into an error at the door, not an empty job.
pub const MAX_POINTS: i64 = 1 << 40;

/// The product of `extents` when it is at most [`MAX_POINTS`].
pub fn points(extents: &[i64]) -> Option<i64> {
    extents.iter().try_fold(1i64, |acc, &e| {
        acc.checked_mul(e).filter(|&p| p <= MAX_POINTS)
    })
}

/// A tensor program: stages in topological order (a stage reads only earlier stages).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComputeDag {
    pub stages: Vec<Stage>,
}

impl ComputeDag {
    /// Checks the structural invariants every later pass relies on: topological order,
    /// index arity, unique names, and that every read stays inside the tensor it reads for all
    /// axis values (so generated code never reads out of bounds, and padding is explicit).
    pub fn new(stages: Vec<Stage>) -> Result<Self, DagError> {
        if stages.is_empty() {
            return Err(DagError::Empty);
        }
        let dag = ComputeDag { stages };
        dag.validate()?;
        Ok(dag)
    }

    fn validate(&self) -> Result<(), DagError> {
        for (i, s) in self.stages.iter().enumerate() {
            let bad = |msg: String| DagError::Invalid {
                stage: s.name.clone(),
                msg,
            };
            if s.name.is_empty()
                || !s
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
            {
                return Err(bad("names are ASCII letters, digits, '_' or '.'".into()));
            }
            if self.stages[..i].iter().any(|o| o.name == s.name) {
                return Err(bad("duplicate stage name".into()));
            }
            if s.shape.iter().any(|&e| e <= 0) {
                return Err(bad(format!(
                    "every extent must be positive, got {:?}",
                    s.shape
                )));
            }
            if points(&s.shape).is_none() {
                return Err(bad(format!(
                    "shape {:?} has more than 2^40 elements (the largest tensor)",
                    s.shape
                )));
            }
            let StageKind::Compute {
                space,
                reduce_axes,
                reduce,
                body,
            } = &s.kind
            else {
                continue;
            };
            if space.len() != s.shape.len()
                || space.iter().zip(&s.shape).any(|(a, &e)| a.extent != e)
            {
                return Err(bad("space axes must match the shape".into()));
            }
            if reduce.is_some() == reduce_axes.is_empty() {
                return Err(bad(
                    "a reduction needs reduction axes, and only a reduction has them".into(),
                ));
            }
            if reduce_axes.iter().any(|a| a.extent <= 0) {
                return Err(bad("reduction extents must be positive".into()));
            }
            let ext = s.axis_extents();
            if points(&ext).is_none() {
                return Err(bad(format!(
                    "iteration space {ext:?} has more than 2^40 points (the largest stage)"
                )));
            }
            if body.max_axis() > ext.len() {
                return Err(bad("the body uses an axis the stage does not have".into()));
            }
            let mut err = None;
            body.visit_loads(&mut |t, idx| {
                if err.is_some() {
                    return;
                }
                if t >= i {
                    err = Some(bad(format!(
                        "reads stage #{t}, which does not come before it"
                    )));
                    return;
                }
                let src = &self.stages[t];
                if idx.len() != src.shape.len() {
                    err = Some(bad(format!(
                        "reads {} with {} indices, it has {} dimensions",
                        src.name,
                        idx.len(),
                        src.shape.len()
                    )));
                }
            });
            if let Some(e) = err {
                return Err(e);
            }
            self.check_bounds(s, body, &ext, &mut vec![]).map_err(bad)?;
        }
        for s in &self.stages {
            super::types::check_stage(self, s).map_err(|msg| DagError::Invalid {
                stage: s.name.clone(),
                msg,
            })?;
        }
        Ok(())
    }

    /// Checks that every load is inside its tensor for every axis value that reaches it.
    /// Guards from enclosing `select`s narrow the ranges: `select(0 <= i-1 < H, A[i-1], 0)` is in
    /// bounds. See [`guarded_range`] for the guards understood; anything else is checked over the
    /// full range, which is conservative.
    fn check_bounds(
        &self,
        s: &Stage,
        e: &Expr,
        ext: &[i64],
        guards: &mut Vec<Cond>,
    ) -> Result<(), String> {
        match e {
            Expr::Const(_) | Expr::Index(_) => Ok(()),
            Expr::Load(t, idx) => {
                let src = &self.stages[*t];
                for (d, a) in idx.iter().enumerate() {
                    let (lo, hi) = guarded_range(a, ext, guards);
                    if lo < 0 || hi >= src.shape[d] {
                        return Err(format!(
                            "reads {} out of bounds in dimension {d}: index range [{lo}, {hi}] for extent {}",
                            src.name, src.shape[d]
                        ));
                    }
                }
                Ok(())
            }
            Expr::Unary(_, a) => self.check_bounds(s, a, ext, guards),
            Expr::Binary(_, a, b) => {
                self.check_bounds(s, a, ext, guards)?;
                self.check_bounds(s, b, ext, guards)
            }
            Expr::Select(c, a, b) => {
                self.check_cond_bounds(s, c, ext, guards)?;
                guards.push((**c).clone());
                let r = self.check_bounds(s, a, ext, guards);
                guards.pop();
                r?;
                self.check_bounds(s, b, ext, guards)
            }
        }
    }

    fn check_cond_bounds(
        &self,
        s: &Stage,
        c: &Cond,
        ext: &[i64],
        guards: &mut Vec<Cond>,
    ) -> Result<(), String> {
        match c {
            Cond::Index(..) => Ok(()),
            Cond::Value(_, a, b) => {
                self.check_bounds(s, a, ext, guards)?;
                self.check_bounds(s, b, ext, guards)
            }
            Cond::And(a, b) | Cond::Or(a, b) => {
                self.check_cond_bounds(s, a, ext, guards)?;
                self.check_cond_bounds(s, b, ext, guards)
            }
            Cond::Not(a) => self.check_cond_bounds(s, a, ext, guards),
        }
    }

    pub fn stage_by_name(&self, name: &str) -> Option<usize> {
        self.stages.iter().position(|s| s.name == name)
    }

    /// For each stage, the stages that read it.
    pub fn consumers(&self) -> Vec<Vec<usize>> {
        let mut out = vec![vec![]; self.stages.len()];
        for (i, s) in self.stages.iter().enumerate() {
            for t in s.inputs() {
                out[t].push(i);
            }
        }
        out
    }

    /// Compute stages nobody reads: the kernel's outputs.
    pub fn outputs(&self) -> Vec<usize> {
        let cons = self.consumers();
        (0..self.stages.len())
            .filter(|&i| !self.stages[i].is_placeholder() && cons[i].is_empty())
            .collect()
    }

    pub fn placeholders(&self) -> Vec<usize> {
        (0..self.stages.len())
            .filter(|&i| self.stages[i].is_placeholder())
            .collect()
    }

    /// Floating-point operations of one run of the whole DAG (a multiply-add counts as two,
    /// as in TVM's FLOP counter).
    pub fn flop_count(&self) -> u64 {
        self.stages
            .iter()
            .map(|s| match &s.kind {
                StageKind::Placeholder => 0,
                StageKind::Compute { reduce, body, .. } => {
                    let per = body.flops() + u64::from(reduce.is_some());
                    let iters: i64 = s.axis_extents().iter().product();
                    per * iters as u64
                }
            })
            .sum()
    }

    /// Canonical text of the computation, without stage or axis names, so that one operator
    /// written through the library or the text form gives one key.
    pub fn canonical(&self) -> String {
        #[derive(Serialize)]
        struct Canon<'a> {
            shape: &'a [i64],
            dtype: DType,
            reduce_extents: Vec<i64>,
            reduce: Option<ReduceOp>,
            body: Option<&'a Expr>,
        }
        let canon: Vec<Canon> = self
            .stages
            .iter()
            .map(|s| Canon {
                shape: &s.shape,
                dtype: s.dtype,
                reduce_extents: s.reduce_axes().iter().map(|a| a.extent).collect(),
                reduce: match &s.kind {
                    StageKind::Compute { reduce, .. } => *reduce,
                    StageKind::Placeholder => None,
                },
                body: s.body(),
            })
            .collect();
        serde_json::to_string(&canon).expect("serializing plain data cannot fail")
    }

    /// Stable workload key: a hash of the canonical form (same op and shapes give the same key
    /// on every run and machine).
    pub fn workload_key(&self) -> String {
        let digest = Sha256::digest(self.canonical().as_bytes());
        digest[..12].iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Inclusive range `[lo, hi]` of index `a` over axes in `[0, ext)` where all `guards` hold.
/// Two kinds of guard narrow it: one on a single axis (`lo <= axis + c < hi`) narrows that axis,
/// and one on the index itself plus a constant (`y + ry - 1 >= 0` for a read at `y + ry - 1`)
/// bounds the index directly, which is what a padding guard fused into a reduction looks like.
/// The text form infers input shapes with this same function, so what it infers always passes
/// [`ComputeDag::new`].
pub(crate) fn guarded_range(a: &Affine, ext: &[i64], guards: &[Cond]) -> (i64, i64) {
    let (mut lo, mut hi) = affine_range(a, &narrowed_ranges(ext, guards));
    for g in guards {
        narrow_by(g, a, &mut lo, &mut hi);
    }
    if lo > hi {
        // The guards are never all true: the load is never executed.
        return (0, 0);
    }
    (lo, hi)
}

/// Axis ranges `[lo, hi]` inclusive after applying `lo <= axis + c < hi` style guards.
fn narrowed_ranges(ext: &[i64], guards: &[Cond]) -> Vec<(i64, i64)> {
    let mut r: Vec<(i64, i64)> = ext.iter().map(|&e| (0, e - 1)).collect();
    for (x, (lo, hi)) in r.iter_mut().enumerate() {
        let axis = Affine::axis(x);
        for g in guards {
            narrow_by(g, &axis, lo, hi);
        }
    }
    r
}

/// Narrows the inclusive range `[lo, hi]` of `a` by the conjuncts of `c` of the form
/// `a + k OP 0` or `-a + k OP 0`; other conditions say nothing about `a` and are skipped.
fn narrow_by(c: &Cond, a: &Affine, lo: &mut i64, hi: &mut i64) {
    use super::expr::CmpOp::*;
    match c {
        Cond::And(x, y) => {
            narrow_by(x, a, lo, hi);
            narrow_by(y, a, lo, hi)
        }
        Cond::Index(op, l, r) => {
            let g = l.add(&r.scale(-1));
            let (op, bound) = if g.terms == a.terms {
                (*op, a.offset - g.offset)
            } else if g.terms == a.scale(-1).terms {
                (op.flip(), g.offset + a.offset)
            } else {
                return;
            };
            // Now `a OP bound`.
            match op {
                Lt => *hi = (*hi).min(bound - 1),
                Le => *hi = (*hi).min(bound),
                Gt => *lo = (*lo).max(bound + 1),
                Ge => *lo = (*lo).max(bound),
                Eq => {
                    *lo = (*lo).max(bound);
                    *hi = (*hi).min(bound)
                }
                Ne => {}
            }
        }
        _ => {}
    }
}

fn affine_range(a: &Affine, ranges: &[(i64, i64)]) -> (i64, i64) {
    let (mut lo, mut hi) = (a.offset, a.offset);
    for &(x, c) in &a.terms {
        let (l, h) = ranges[x];
        if l > h {
            // The guard is never true: the load is never executed.
            return (0, 0);
        }
        if c > 0 {
            lo += c * l;
            hi += c * h;
        } else {
            lo += c * h;
            hi += c * l;
        }
    }
    (lo, hi)
}
