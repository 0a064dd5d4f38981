//! Transform steps and their JSON form, close to Ansor's record steps so that a reader of
//! Ansor logs reads ours: `["SP", stage, iter, extent, [lengths], inner_to_outer]`,
//! `["RE", stage, [order]]`, `["FU", stage, [iters]]`, `["AN", stage, iter, code]`,
//! `["CA", stage, target_stage, target_iter]`, `["CI", stage]`, `["CR", stage]`,
//! `["CHW", stage, "local"]`, `["PR", stage, iter, "auto_unroll_max_step$N"]`,
//! `["RF", stage, axis, factor]` (Ansor's RF names a split iterator instead: ours splits and
//! factors in one step).
//!
//! Stage and iterator numbers are positions at the time the step is applied, as in Ansor.

use serde_json::{Value, json};

/// Loop annotations, numbered as Ansor's `IteratorAnnotation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Annotation {
    None = 0,
    Unroll = 1,
    Vectorize = 2,
    Parallel = 3,
}

impl Annotation {
    fn from_code(c: i64) -> Option<Annotation> {
        match c {
            0 => Some(Annotation::None),
            1 => Some(Annotation::Unroll),
            2 => Some(Annotation::Vectorize),
            3 => Some(Annotation::Parallel),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Step {
    /// Splits leaf `iter` into `lengths.len() + 1` loops. With `inner_to_outer` the lengths are
    /// the extents of the inner loops (outer to inner) and the outermost gets the rest, as Ansor
    /// writes them; otherwise the lengths are the outer loops and the innermost gets the rest.
    /// `extent` is the iterator's extent when the step was made (informational, as in Ansor).
    Split {
        stage: usize,
        iter: usize,
        extent: Option<i64>,
        lengths: Vec<i64>,
        inner_to_outer: bool,
    },
    /// New order of all leaf loops, as a permutation of their current positions.
    Reorder {
        stage: usize,
        order: Vec<usize>,
    },
    /// Fuses consecutive leaf loops into one.
    Fuse {
        stage: usize,
        iters: Vec<usize>,
    },
    Annotate {
        stage: usize,
        iter: usize,
        ann: Annotation,
    },
    /// Computes `stage` inside loop `target_iter` of its consumer `target`.
    ComputeAt {
        stage: usize,
        target: usize,
        target_iter: usize,
    },
    ComputeInline {
        stage: usize,
    },
    ComputeRoot {
        stage: usize,
    },
    /// Computes `stage` into a new local stage `<name>.local` (inserted before it, taking its
    /// number), and turns `stage` into a copy of it.
    CacheWrite {
        stage: usize,
    },
    /// Factors reduction axis `axis` (its number among the stage's axes, space first) of a
    /// fresh stage: `<name>.rf` (inserted before it, taking its number) reduces the axis's
    /// outer `extent / factor` part into `factor` partial results, a space axis it can
    /// vectorize; `stage` then reduces the partials (Ansor's rfactor of a split's inner part).
    Rfactor {
        stage: usize,
        axis: usize,
        factor: i64,
    },
    /// Unrolls the stage's innermost loops while their product stays within `max_step`.
    AutoUnroll {
        stage: usize,
        iter: usize,
        max_step: i64,
    },
}

#[derive(Debug, Clone, thiserror::Error, PartialEq)]
#[error("step {index}: {msg}")]
pub struct StepParseError {
    pub index: usize,
    pub msg: String,
}

impl Step {
    pub fn stage(&self) -> usize {
        match self {
            Step::Split { stage, .. }
            | Step::Reorder { stage, .. }
            | Step::Fuse { stage, .. }
            | Step::Annotate { stage, .. }
            | Step::ComputeAt { stage, .. }
            | Step::ComputeInline { stage }
            | Step::ComputeRoot { stage }
            | Step::CacheWrite { stage }
            | Step::Rfactor { stage, .. }
            | Step::AutoUnroll { stage, .. } => *stage,
        }
    }

    pub fn to_json(&self) -> Value {
        match self {
            Step::Split {
                stage,
                iter,
                extent,
                lengths,
                inner_to_outer,
            } => {
                json!([
                    "SP",
                    stage,
                    iter,
                    extent,
                    lengths,
                    i64::from(*inner_to_outer)
                ])
            }
            Step::Reorder { stage, order } => json!(["RE", stage, order]),
            Step::Fuse { stage, iters } => json!(["FU", stage, iters]),
            Step::Annotate { stage, iter, ann } => json!(["AN", stage, iter, *ann as i64]),
            Step::ComputeAt {
                stage,
                target,
                target_iter,
            } => json!(["CA", stage, target, target_iter]),
            Step::ComputeInline { stage } => json!(["CI", stage]),
            Step::ComputeRoot { stage } => json!(["CR", stage]),
            Step::CacheWrite { stage } => json!(["CHW", stage, "local"]),
            Step::Rfactor {
                stage,
                axis,
                factor,
            } => json!(["RF", stage, axis, factor]),
            Step::AutoUnroll {
                stage,
                iter,
                max_step,
            } => {
                json!([
                    "PR",
                    stage,
                    iter,
                    format!("auto_unroll_max_step${max_step}")
                ])
            }
        }
    }

    /// Parses one step; `index` only labels errors.
    pub fn from_json(v: &Value, index: usize) -> Result<Step, StepParseError> {
        let err = |msg: String| StepParseError { index, msg };
        let a = v
            .as_array()
            .ok_or_else(|| err(format!("a step is a JSON array, got {v}")))?;
        let code = a
            .first()
            .and_then(Value::as_str)
            .ok_or_else(|| err("a step starts with its code, e.g. \"SP\"".into()))?;
        let arity = |n: usize| {
            if a.len() == n {
                Ok(())
            } else {
                Err(err(format!(
                    "\"{code}\" takes {} fields, got {}",
                    n - 1,
                    a.len() - 1
                )))
            }
        };
        let uint = |i: usize, what: &str| -> Result<usize, StepParseError> {
            a[i].as_u64()
                .and_then(|x| usize::try_from(x).ok())
                .ok_or_else(|| {
                    err(format!(
                        "\"{code}\": {what} must be a non-negative integer, got {}",
                        a[i]
                    ))
                })
        };
        let uints = |i: usize, what: &str| -> Result<Vec<usize>, StepParseError> {
            a[i].as_array()
                .ok_or_else(|| err(format!("\"{code}\": {what} must be an array")))?
                .iter()
                .map(|x| {
                    x.as_u64().map(|x| x as usize).ok_or_else(|| {
                        err(format!(
                            "\"{code}\": {what} must hold non-negative integers"
                        ))
                    })
                })
                .collect()
        };
        Ok(match code {
            "SP" => {
                arity(6)?;
                let extent =
                    if a[3].is_null() {
                        None
                    } else {
                        Some(a[3].as_i64().ok_or_else(|| {
                            err("\"SP\": extent must be an integer or null".into())
                        })?)
                    };
                let lengths = a[4]
                    .as_array()
                    .ok_or_else(|| err("\"SP\": lengths must be an array".into()))?
                    .iter()
                    .map(|x| {
                        x.as_i64()
                            .ok_or_else(|| err("\"SP\": lengths must be integers".into()))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let ito = a[5].as_i64().or_else(|| a[5].as_bool().map(i64::from));
                let inner_to_outer = match ito {
                    Some(0) => false,
                    Some(1) => true,
                    _ => return Err(err("\"SP\": inner_to_outer must be 0 or 1".into())),
                };
                Step::Split {
                    stage: uint(1, "stage")?,
                    iter: uint(2, "iter")?,
                    extent,
                    lengths,
                    inner_to_outer,
                }
            }
            "RE" => {
                arity(3)?;
                Step::Reorder {
                    stage: uint(1, "stage")?,
                    order: uints(2, "order")?,
                }
            }
            "FU" => {
                arity(3)?;
                Step::Fuse {
                    stage: uint(1, "stage")?,
                    iters: uints(2, "iters")?,
                }
            }
            "AN" => {
                arity(4)?;
                let c = a[3]
                    .as_i64()
                    .ok_or_else(|| err("\"AN\": annotation must be an integer".into()))?;
                let ann = Annotation::from_code(c).ok_or_else(|| {
                    err(format!(
                        "\"AN\": unknown annotation {c} (0 none, 1 unroll, 2 vectorize, 3 parallel)"
                    ))
                })?;
                Step::Annotate {
                    stage: uint(1, "stage")?,
                    iter: uint(2, "iter")?,
                    ann,
                }
            }
            "CA" => {
                arity(4)?;
                Step::ComputeAt {
                    stage: uint(1, "stage")?,
                    target: uint(2, "target stage")?,
                    target_iter: uint(3, "target iter")?,
                }
            }
            "CI" => {
                arity(2)?;
                Step::ComputeInline {
                    stage: uint(1, "stage")?,
                }
            }
            "CR" => {
                arity(2)?;
                Step::ComputeRoot {
                    stage: uint(1, "stage")?,
                }
            }
            "CHW" => {
                arity(3)?;
                if a[2].as_str() != Some("local") {
                    return Err(err("\"CHW\": only the \"local\" scope exists on CPU".into()));
                }
                Step::CacheWrite {
                    stage: uint(1, "stage")?,
                }
            }
            "RF" => {
                arity(4)?;
                Step::Rfactor {
                    stage: uint(1, "stage")?,
                    axis: uint(2, "axis")?,
                    factor: a[3]
                        .as_i64()
                        .ok_or_else(|| err("\"RF\": factor must be an integer".into()))?,
                }
            }
            "PR" => {
                arity(4)?;
                let p = a[3]
                    .as_str()
                    .ok_or_else(|| err("\"PR\": the pragma must be a string".into()))?;
                let n = p
                    .strip_prefix("auto_unroll_max_step$")
                    .and_then(|n| n.parse::<i64>().ok())
                    .ok_or_else(|| {
                        err(format!(
                            "\"PR\": unknown pragma '{p}' (known: auto_unroll_max_step$N)"
                        ))
                    })?;
                Step::AutoUnroll {
                    stage: uint(1, "stage")?,
                    iter: uint(2, "iter")?,
                    max_step: n,
                }
            }
            other => {
                return Err(err(format!(
                    "unknown step code \"{other}\" (known: SP RE FU AN CA CI CR CHW RF PR)"
                )));
            }
        })
    }
}
