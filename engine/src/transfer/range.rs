//! Shape ranges (dynamic shapes): one library operator with one or two of its size parameters
//! given as `lo..hi`, e.g. `matmul(m=1..512,n=768,k=768)`. A range is tuned through a few
//! representative shapes; any other shape of it is then served by the representative nearest it
//! (its schedule adapted by `adapt`): the range's dispatch table.
//!
//! How representatives are picked (DietCode tunes a whole range at once and shares its
//! micro-kernels across shapes; Ansor's schedule sharing applies one shape's record to others
//! of the same function): per ranged extent, points including both ends spaced evenly on a
//! log scale that counts every octave below [`DENSE_BELOW`] twice (`warp`): one point per two
//! octaves above it, so that neighbouring representatives there are about 4x apart and every
//! shape is within about 2x of one, and one per octave below it (1, 2, 4, 8 of `m=1..64`); `1 +
//! ceil(span / 2)` points for a warped span, at least 2, at most [`MAX_REPRESENTATIVES`]. The
//! interior points are rounded to the nearest `2^a` or `3 * 2^a` (many divisors: the split
//! factors adapted from them re-fit well). Two ranged extents make the grid of both point sets,
//! the larger set thinned first until the grid has at most [`MAX_REPRESENTATIVES`] shapes.
//!
//! Why denser at small extents: there a schedule's shape changes with the extent itself, not
//! just its tile counts. A loop of 1 vanishes (m=1 of a dense is a matrix-vector product, tuned
//! with rfactor), and a loop of 2 or 4 fills a fraction of a vector or of a register tile's
//! rows, so adapting across an octave loses much: on `dense(m=1..64,n=3072,k=768)` the shape
//! m=2, served by m=1's schedule, ran at 0.50 of its own tuning, while on `matmul(m=16..512)`
//! shapes 2x from their representative kept 0.98 to 1.00 (docs/experiments/
//! 2026-11-25-shape-ranges.md). Above 16 (a 512-bit vector of f32, more than a register tile's
//! rows) the split factors re-fit with little loss, and the two-octave spacing stays.
//!
//! The distance between shapes is the sum of the log-ratios of their extents (`distance`),
//! separable per extent: on a grid the nearest representative is the nearest point on each
//! extent. So the dispatch table is a grid of boxes, each extent split at the geometric mean of
//! neighbouring points (a tie goes to the smaller).

use crate::ir::{ComputeDag, DagError};
use crate::ops::spec::lookup;
use crate::ops::{LayoutFree, MAX_PARAM, OpDef, OpSpec, syntax};
use crate::task::WorkloadOptions;
use std::collections::BTreeMap;
use std::fmt;

/// Most extents one range spans.
pub const MAX_RANGED: usize = 2;

/// Most representative shapes one range is tuned through.
pub const MAX_REPRESENTATIVES: usize = 8;

/// Extents below this get one representative per octave, not per two (see the module doc).
pub const DENSE_BELOW: i64 = 16;

#[derive(Debug, PartialEq, thiserror::Error)]
pub enum RangeError {
    #[error(
        "'{0}' is not a library operator's spec: shape ranges are op specs such as \
         matmul(m=1..512,n=768,k=768) (the text form has no ranges)"
    )]
    NotAnOperator(String),
    #[error("shape range '{spec}': {msg}")]
    Syntax { spec: String, msg: String },
    #[error("{op}: '{param}' is not one of its extents (a range spans one of: {extents})")]
    NotAnExtent {
        op: String,
        param: String,
        extents: String,
    },
    #[error("{op}: the range {param}={lo}..{hi} is empty ({lo} > {hi}): write it low..high")]
    Empty {
        op: String,
        param: String,
        lo: i64,
        hi: i64,
    },
    #[error("{op}: the range {param}={lo}..{hi} is out of bounds [1, {MAX_PARAM}]")]
    OutOfBounds {
        op: String,
        param: String,
        lo: i64,
        hi: i64,
    },
    #[error("{op}: {n} ranged extents; a range spans at most {MAX_RANGED}")]
    TooMany { op: String, n: usize },
    #[error("'{0}' has no range: give one or two extents as lo..hi, e.g. m=1..512")]
    NoRange(String),
    #[error("{0}")]
    Op(String),
    #[error("{spec}: {err}")]
    Shape { spec: String, err: DagError },
}

/// One ranged extent: a size parameter of the operator and its bounds (inclusive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ranged {
    pub name: &'static str,
    pub lo: i64,
    pub hi: i64,
}

/// A parsed shape range. Printed ([`Display`](fmt::Display)) in the op spec's canonical form,
/// the ranged extents as `lo..hi`: `matmul(m=1..512,n=768,k=768,layout_free=B)`.
#[derive(Clone)]
pub struct ShapeRange {
    /// The operator at the low end of every ranged extent, with the range's layout-free
    /// inputs.
    low: OpSpec,
    /// In the operator's parameter order.
    pub ranged: Vec<Ranged>,
}

impl fmt::Debug for ShapeRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for ShapeRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ranged: Vec<(&str, i64, i64)> =
            self.ranged.iter().map(|r| (r.name, r.lo, r.hi)).collect();
        self.low.write_canonical(f, &ranged)
    }
}

/// Equal ranges print the same canonical form (options resolved).
impl PartialEq for ShapeRange {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl std::str::FromStr for ShapeRange {
    type Err = RangeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ShapeRange::parse(s)
    }
}

/// The part of the dispatch table one representative serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// The representative's index in the list given to `dispatch`.
    pub representative: usize,
    /// Per ranged extent, the interval served (inclusive).
    pub bounds: Vec<(i64, i64)>,
}

/// The operator's size parameters (those without a default): what a range may span.
fn extents_of(op: &OpDef) -> Vec<&'static str> {
    op.params
        .iter()
        .filter(|p| p.default.is_none())
        .map(|p| p.name)
        .collect()
}

/// The range `spec` names ([`ShapeRange::parse`]).
pub fn parse(spec: &str) -> Result<ShapeRange, RangeError> {
    ShapeRange::parse(spec)
}

impl ShapeRange {
    /// Parses `spec`: an op spec with one or two size parameters as `lo..hi` (named or
    /// positional), the rest as the operator takes them, `layout_free=` included. Every
    /// representative shape is built, so a range whose shapes do not make valid DAGs is
    /// refused here.
    pub fn parse(spec: &str) -> Result<ShapeRange, RangeError> {
        let s = spec.trim();
        let not_op = || RangeError::NotAnOperator(s.to_string());
        // The text form (`Y[i] = relu(X[i]) ...`) is told apart by its name before the rest
        // is read as a call.
        let name = syntax::name_of(s).ok_or_else(not_op)?;
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(not_op());
        }
        let syn = |msg: String| RangeError::Syntax {
            spec: s.to_string(),
            msg,
        };
        let call = syntax::split_call(s).map_err(|e| syn(e.to_string()))?;
        let op = lookup(call.name).map_err(|e| RangeError::Op(e.to_string()))?;
        let extents = extents_of(op);
        // The ranged arguments are replaced by their low end; the op spec's own reading checks
        // the rest (names, positions, duplicates, bounds, layout_free).
        let mut plain: Vec<(Option<&str>, String)> = vec![];
        let mut ranged = vec![];
        for (pos, arg) in call.args.iter().enumerate() {
            let Some((lo, hi)) = arg.value.split_once("..") else {
                plain.push((arg.key, arg.value.to_string()));
                continue;
            };
            let param = match arg.key {
                Some(k) => k.to_string(),
                None => op
                    .params
                    .get(pos)
                    .map(|p| p.name.to_string())
                    .ok_or_else(|| syn(format!("argument {} has no parameter", pos + 1)))?,
            };
            let Some(&pname) = extents.iter().find(|e| **e == param) else {
                return Err(RangeError::NotAnExtent {
                    op: op.name.into(),
                    param,
                    extents: extents.join(", "),
                });
            };
            let bound = |v: &str, which: &str| {
                v.trim().parse::<i64>().map_err(|_| {
                    syn(format!(
                        "the {which} end of {pname}={} must be an integer",
                        arg.value
                    ))
                })
            };
            let (lo, hi) = (bound(lo, "low")?, bound(hi, "high")?);
            let err = |e: fn(String, String, i64, i64) -> RangeError| {
                Err(e(op.name.into(), pname.into(), lo, hi))
            };
            if lo > hi {
                return err(|op, param, lo, hi| RangeError::Empty { op, param, lo, hi });
            }
            if lo < 1 || hi > MAX_PARAM {
                return err(|op, param, lo, hi| RangeError::OutOfBounds { op, param, lo, hi });
            }
            ranged.push(Ranged {
                name: pname,
                lo,
                hi,
            });
            plain.push((arg.key, lo.to_string()));
        }
        if ranged.is_empty() {
            return Err(RangeError::NoRange(s.to_string()));
        }
        if ranged.len() > MAX_RANGED {
            return Err(RangeError::TooMany {
                op: op.name.into(),
                n: ranged.len(),
            });
        }
        let args: Vec<(Option<&str>, &str)> = plain.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let low = OpSpec::from_args(op, &args, s).map_err(|e| RangeError::Op(e.to_string()))?;
        let order = |n: &str| op.params.iter().position(|p| p.name == n);
        ranged.sort_by_key(|r| order(r.name));
        let range = ShapeRange { low, ranged };
        for values in range.representatives() {
            range.dag_at(&values)?;
        }
        Ok(range)
    }

    pub fn op_name(&self) -> &'static str {
        self.low.name()
    }

    /// The layout-free inputs as written (`Default`: the operator's constant weight).
    pub fn layout_free(&self) -> &LayoutFree {
        self.low.layout_free()
    }

    /// The options of every shape of the range, resolved as an op spec's.
    pub fn options(&self) -> WorkloadOptions {
        self.low.options()
    }

    /// The range with an API request's typed options, by the op spec's rule
    /// ([`OpSpec::with_options`]).
    pub fn with_options(self, options: &WorkloadOptions) -> Result<ShapeRange, RangeError> {
        let low = self
            .low
            .with_options(options)
            .map_err(|e| RangeError::Op(e.to_string()))?;
        Ok(ShapeRange { low, ..self })
    }

    /// The identity the database keeps ranges by: every parameter named, in the operator's
    /// order, defaults written out, options apart
    /// (`dense(m=16..512,n=768,k=768,bias=1,relu=0)`). Equal ranges have equal specs. Kept as
    /// it was for the stored ranges; the canonical form people read is
    /// [`Display`](fmt::Display).
    pub fn spec(&self) -> String {
        let args: Vec<String> = self
            .low
            .op()
            .params
            .iter()
            .map(|p| match self.ranged.iter().find(|r| r.name == p.name) {
                Some(r) => format!("{}={}..{}", p.name, r.lo, r.hi),
                None => format!("{}={}", p.name, self.low.params()[p.name]),
            })
            .collect();
        format!("{}({})", self.op_name(), args.join(","))
    }

    fn params_at(&self, values: &[i64]) -> BTreeMap<&'static str, i64> {
        let mut p = self.low.params().clone();
        for (r, v) in self.ranged.iter().zip(values) {
            p.insert(r.name, *v);
        }
        p
    }

    /// The op spec of one shape of the range, every parameter named, without the options:
    /// the ranged extents at `values` (in order).
    pub fn spec_at(&self, values: &[i64]) -> String {
        let p = self.params_at(values);
        let args: Vec<String> = self
            .low
            .op()
            .params
            .iter()
            .map(|q| format!("{}={}", q.name, p[q.name]))
            .collect();
        format!("{}({})", self.op_name(), args.join(","))
    }

    /// One shape of the range as an op spec with the range's options: the ranged extents at
    /// `values` (in order).
    pub fn op_spec_at(&self, values: &[i64]) -> Result<OpSpec, RangeError> {
        let p: Vec<(&str, i64)> = self.params_at(values).into_iter().collect();
        OpSpec::new(self.op_name(), &p, self.low.layout_free().clone())
            .map_err(|e| RangeError::Op(e.to_string()))
    }

    /// The DAG of one shape of the range.
    pub fn dag_at(&self, values: &[i64]) -> Result<ComputeDag, RangeError> {
        self.low
            .op()
            .build(&self.params_at(values))
            .map_err(|err| RangeError::Shape {
                spec: self.spec_at(values),
                err,
            })
    }

    /// Whether `values` (one per ranged extent) lie in the range.
    pub fn contains(&self, values: &[i64]) -> bool {
        values.len() == self.ranged.len()
            && self
                .ranged
                .iter()
                .zip(values)
                .all(|(r, v)| (r.lo..=r.hi).contains(v))
    }

    /// The representative shapes to tune (see the module doc): the grid of each extent's
    /// points, the first extent outermost.
    pub fn representatives(&self) -> Vec<Vec<i64>> {
        let mut counts: Vec<usize> = self
            .ranged
            .iter()
            .map(|r| point_count(r.lo, r.hi))
            .collect();
        while counts.iter().product::<usize>() > MAX_REPRESENTATIVES {
            // Thin the larger point set (the later extent on a tie).
            let i = (0..counts.len())
                .max_by_key(|&i| counts[i])
                .expect("one ranged extent at least");
            counts[i] -= 1;
        }
        let axes: Vec<Vec<i64>> = self
            .ranged
            .iter()
            .zip(&counts)
            .map(|(r, &n)| points(r.lo, r.hi, n))
            .collect();
        grid(&axes)
    }

    /// The values of the ranged extents that make `dag`, when `dag` is a shape of this range
    /// (same operator, same fixed parameters); `None` otherwise. Each ranged extent is an
    /// input's dimension, so its candidates are the DAG's extents within bounds.
    pub fn values_of(&self, dag: &ComputeDag) -> Option<Vec<i64>> {
        let mut seen: Vec<i64> = super::structure::extents(dag);
        seen.sort_unstable();
        seen.dedup();
        let axes: Vec<Vec<i64>> = self
            .ranged
            .iter()
            .map(|r| {
                seen.iter()
                    .copied()
                    .filter(|v| (r.lo..=r.hi).contains(v))
                    .collect()
            })
            .collect();
        if axes.iter().any(Vec::is_empty) {
            return None;
        }
        let key = dag.workload_key();
        grid(&axes).into_iter().find(|values| {
            self.dag_at(values)
                .is_ok_and(|d| d.stages.len() == dag.stages.len() && d.workload_key() == key)
        })
    }

    /// Checks a list of representatives (a stored or imported range's): each inside the range,
    /// no two alike, together a full grid (every combination of their values per extent), at
    /// most [`MAX_REPRESENTATIVES`], each building a DAG.
    pub fn check_representatives(&self, reps: &[Vec<i64>]) -> Result<(), String> {
        if reps.is_empty() || reps.len() > MAX_REPRESENTATIVES {
            return Err(format!(
                "{} representatives: 1 to {MAX_REPRESENTATIVES}",
                reps.len()
            ));
        }
        for v in reps {
            if !self.contains(v) {
                return Err(format!("representative {v:?} is not in {}", self.spec()));
            }
            self.dag_at(v).map_err(|e| e.to_string())?;
        }
        let axes = self.axes(reps);
        let mut sorted = reps.to_vec();
        sorted.sort();
        sorted.dedup();
        if sorted.len() != reps.len() {
            return Err("a representative is listed twice".into());
        }
        if axes.iter().map(Vec::len).product::<usize>() != reps.len() {
            return Err(
                "the representatives are not a grid (each value of one extent with \
                 each of the other)"
                    .into(),
            );
        }
        Ok(())
    }

    /// Each extent's distinct representative values, ascending.
    fn axes(&self, reps: &[Vec<i64>]) -> Vec<Vec<i64>> {
        (0..self.ranged.len())
            .map(|d| {
                let mut a: Vec<i64> = reps.iter().filter_map(|v| v.get(d).copied()).collect();
                a.sort_unstable();
                a.dedup();
                a
            })
            .collect()
    }

    /// The dispatch table of representatives `reps` (checked by `check_representatives`): one
    /// cell per representative, in the order given, with the intervals it serves.
    pub fn dispatch(&self, reps: &[Vec<i64>]) -> Vec<Cell> {
        let axes = self.axes(reps);
        let bounds: Vec<Vec<(i64, i64)>> = self
            .ranged
            .iter()
            .zip(&axes)
            .map(|(r, a)| intervals(r.lo, r.hi, a))
            .collect();
        reps.iter()
            .enumerate()
            .map(|(i, v)| Cell {
                representative: i,
                bounds: v
                    .iter()
                    .enumerate()
                    .map(|(d, x)| {
                        let j = axes[d].binary_search(x).expect("a value of its axis");
                        bounds[d][j]
                    })
                    .collect(),
            })
            .collect()
    }

    /// The index of the representative that serves `values`, by the dispatch table.
    pub fn serving(&self, reps: &[Vec<i64>], values: &[i64]) -> Option<usize> {
        self.dispatch(reps)
            .into_iter()
            .find(|c| {
                c.bounds
                    .iter()
                    .zip(values)
                    .all(|((lo, hi), v)| (*lo..=*hi).contains(v))
            })
            .map(|c| c.representative)
    }
}

/// Points per extent: one per two warped octaves, plus one (see the module doc).
fn point_count(lo: i64, hi: i64) -> usize {
    if lo == hi {
        return 1;
    }
    let span = warp(hi as f64) - warp(lo as f64);
    (1 + (span / 2.0 - 1e-9).ceil() as usize).clamp(2, MAX_REPRESENTATIVES)
}

/// The position of extent `x` on the scale representatives are spaced evenly on: `log2 x`, plus
/// `log2 x` again below [`DENSE_BELOW`] (an octave there counts twice), continuous at it.
fn warp(x: f64) -> f64 {
    x.log2() + x.min(DENSE_BELOW as f64).log2()
}

/// The extent at position `u` of the `warp` scale (its inverse).
fn unwarp(u: f64) -> f64 {
    let knee = 2.0 * (DENSE_BELOW as f64).log2();
    if u <= knee {
        (u / 2.0).exp2()
    } else {
        (u - knee / 2.0).exp2()
    }
}

/// `n` points from `lo` to `hi`, both included, evenly spaced on the `warp` scale, the interior
/// ones rounded to a number with many divisors; fewer when rounding makes two equal.
fn points(lo: i64, hi: i64, n: usize) -> Vec<i64> {
    if lo == hi || n < 2 {
        return vec![lo];
    }
    let (a, b) = (warp(lo as f64), warp(hi as f64));
    let mut v: Vec<i64> = (0..n)
        .map(|i| match i {
            0 => lo,
            i if i == n - 1 => hi,
            i => nice(unwarp(a + (b - a) * i as f64 / (n - 1) as f64)).clamp(lo, hi),
        })
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The number of the form `2^a` or `3 * 2^a` nearest `x` in ratio (ties: the smaller).
fn nice(x: f64) -> i64 {
    let x = x.max(1.0);
    let a = x.log2().floor() as u32;
    let mut cands = vec![1i64 << a, 1i64 << (a + 1)];
    if a >= 1 {
        cands.push(3i64 << (a - 1));
    }
    cands.sort_unstable();
    cands
        .into_iter()
        .min_by(|p, q| {
            let d = |c: i64| (c as f64 / x).ln().abs();
            d(*p).total_cmp(&d(*q))
        })
        .expect("candidates")
}

/// The interval of `[lo, hi]` each point of `axis` (ascending) is nearest to in ratio: split at
/// the geometric mean of neighbours, a tie to the smaller.
fn intervals(lo: i64, hi: i64, axis: &[i64]) -> Vec<(i64, i64)> {
    let mut out = Vec::with_capacity(axis.len());
    let mut start = lo;
    for (i, &a) in axis.iter().enumerate() {
        let end = match axis.get(i + 1) {
            Some(&b) => isqrt(a as i128 * b as i128) as i64,
            None => hi,
        };
        out.push((start, end));
        start = end + 1;
    }
    out
}

/// The largest integer whose square is at most `n` (n >= 0).
fn isqrt(n: i128) -> i128 {
    let mut r = (n as f64).sqrt() as i128;
    while r * r > n {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= n {
        r += 1;
    }
    r
}

/// Every combination of one value per axis, the first axis outermost.
fn grid(axes: &[Vec<i64>]) -> Vec<Vec<i64>> {
    axes.iter().fold(vec![vec![]], |acc, axis| {
        acc.iter()
            .flat_map(|prefix| {
                axis.iter().map(move |v| {
                    let mut p = prefix.clone();
                    p.push(*v);
                    p
                })
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops;
    use crate::transfer::{distance, extents};

    #[test]
    fn representatives_are_log_spaced_with_both_ends() {
        let r = parse("matmul(m=1..512,n=768,k=768)").unwrap();
        assert_eq!(r.spec(), "matmul(m=1..512,n=768,k=768)");
        let reps = r.representatives();
        assert_eq!(reps, [[1], [2], [4], [6], [12], [32], [128], [512]]);
        let r = parse("dense(m=16..512,n=768,k=768,bias=1,relu=0)").unwrap();
        assert_eq!(r.representatives(), [[16], [48], [192], [512]]);
        // A narrow range: its two ends; a point: itself.
        let r = parse("matmul(m=100..120,n=8,k=8)").unwrap();
        assert_eq!(r.representatives(), [[100], [120]]);
        let r = parse("matmul(m=7..7,n=8,k=8)").unwrap();
        assert_eq!(r.representatives(), [[7]]);
        // Two extents: a grid of at most 8, both corners in.
        let r = parse("batch_matmul(b=1..64,m=16..512,n=64,k=64)").unwrap();
        let reps = r.representatives();
        assert!(
            reps.len() <= MAX_REPRESENTATIVES && reps.len() >= 4,
            "{reps:?}"
        );
        assert!(reps.contains(&vec![1, 16]) && reps.contains(&vec![64, 512]));
        r.check_representatives(&reps).unwrap();
        // Positional ranges and defaults: the canonical spec names everything.
        let r = parse("dense(16..512, 768, 768)").unwrap();
        assert_eq!(r.spec(), "dense(m=16..512,n=768,k=768,bias=1,relu=1)");
        assert_eq!(r.spec_at(&[32]), "dense(m=32,n=768,k=768,bias=1,relu=1)");
    }

    /// Below `DENSE_BELOW` one representative per octave (the matrix-vector m=1 no longer
    /// serves m=2), above it one per two; whatever the range: both ends in, ascending, distinct,
    /// within the cap.
    #[test]
    fn small_extents_get_denser_representatives_within_the_cap() {
        assert_eq!(points(1, 64, point_count(1, 64)), [1, 2, 4, 8, 16, 64]);
        assert_eq!(points(1, 8, point_count(1, 8)), [1, 2, 4, 8]);
        assert_eq!(points(2, 4, point_count(2, 4)), [2, 4]);
        // Above it, as before: one per two octaves.
        assert_eq!(points(16, 64, point_count(16, 64)), [16, 64]);
        assert_eq!(points(16, 1024, point_count(16, 1024)), [16, 64, 256, 1024]);
        let r = parse("dense(m=1..64,n=3072,k=768)").unwrap();
        assert_eq!(r.representatives(), [[1], [2], [4], [8], [16], [64]]);
        let mut lows: Vec<i64> = (1..=40).collect();
        lows.extend([64, 100, 1000, 1 << 19]);
        for &lo in &lows {
            for hi in [lo, lo + 1, 2 * lo, 16, 17, 64, 100, 512, 4096, 1 << 20] {
                if hi < lo {
                    continue;
                }
                let p = points(lo, hi, point_count(lo, hi));
                assert_eq!((p[0], p[p.len() - 1]), (lo, hi), "{lo}..{hi}: {p:?}");
                assert!(p.windows(2).all(|w| w[0] < w[1]), "{lo}..{hi}: {p:?}");
                assert!(p.len() <= MAX_REPRESENTATIVES, "{lo}..{hi}: {p:?}");
                // Uncapped, no octave below 16 is skipped (rounding aside: 2.5x).
                if warp(hi as f64) - warp(lo as f64) <= 2.0 * (MAX_REPRESENTATIVES - 1) as f64 {
                    for w in p.windows(2).filter(|w| w[1] <= DENSE_BELOW) {
                        assert!(w[1] as f64 <= 2.5 * w[0] as f64, "{lo}..{hi}: {p:?}");
                    }
                }
            }
        }
        // Two ranged extents: still a grid of at most 8 with every corner.
        let r = parse("batch_matmul(b=1..16,m=1..64,n=64,k=64)").unwrap();
        let reps = r.representatives();
        assert!(reps.len() <= MAX_REPRESENTATIVES, "{reps:?}");
        for corner in [[1, 1], [1, 64], [16, 1], [16, 64]] {
            assert!(reps.contains(&corner.to_vec()), "{reps:?}");
        }
        r.check_representatives(&reps).unwrap();
    }

    #[test]
    fn bad_ranges_are_refused_with_the_reason() {
        for (spec, want) in [
            ("matmul(m=512..1,n=8,k=8)", "is empty"),
            ("matmul(m=0..8,n=8,k=8)", "out of bounds"),
            ("matmul(b=1..4,m=8,n=8,k=8)", "not one of its extents"),
            ("dense(m=8,n=8,k=8,bias=0..1)", "not one of its extents"),
            ("batch_matmul(b=1..2,m=1..2,n=1..2,k=8)", "3 ranged extents"),
            ("matmul(m=8,n=8,k=8)", "has no range"),
            ("matmul(m=1..x,n=8,k=8)", "integer"),
            ("C[i,j] += A[i,k] where i<1..8", "not a library operator"),
            ("nosuchop(m=1..8)", "unknown operator"),
            ("matmul(m=1..8,m=8,n=8,k=8)", "twice"),
            ("matmul(m=1..8,n=8)", "missing parameter 'k'"),
        ] {
            let e = parse(spec).expect_err(spec).to_string();
            assert!(e.contains(want), "{spec}: {e}");
        }
    }

    #[test]
    fn the_dispatch_table_serves_each_shape_from_its_nearest_representative() {
        let r = parse("matmul(m=1..512,n=64,k=64)").unwrap();
        let reps = r.representatives();
        let cells = r.dispatch(&reps);
        // The cells tile the range, in order, without gaps.
        assert_eq!(cells[0].bounds[0].0, 1);
        assert_eq!(cells.last().unwrap().bounds[0].1, 512);
        for w in cells.windows(2) {
            assert_eq!(w[0].bounds[0].1 + 1, w[1].bounds[0].0);
        }
        // Every shape's server is a representative nearest it by the transfer distance.
        for m in 1..=512 {
            let i = r.serving(&reps, &[m]).unwrap();
            let me = extents(&r.dag_at(&[m]).unwrap());
            let d = |v: &[i64]| distance(&me, &extents(&r.dag_at(v).unwrap())).unwrap();
            let best = reps.iter().map(|v| d(v)).fold(f64::INFINITY, f64::min);
            assert!(d(&reps[i]) <= best + 1e-9, "m={m}: {:?}", reps[i]);
        }
        assert_eq!(r.serving(&reps, &[513]), None);
    }

    #[test]
    fn a_shape_is_recognised_as_in_the_range_or_not() {
        let r = parse("conv2d_nchw(n=1,c=16,h=8..64,w=8..64,f=16,pad=1)").unwrap();
        let dag = ops::conv2d_nchw(
            1,
            16,
            24,
            40,
            16,
            ops::Window::square(3, 1, 1),
            false,
            false,
        )
        .unwrap();
        assert_eq!(r.values_of(&dag), Some(vec![24, 40]));
        // Another fixed parameter, or outside the bounds: not of the range.
        let shape = |s: &str| OpSpec::parse(s).unwrap().dag().unwrap();
        let other = shape("conv2d_nchw(n=1,c=16,h=24,w=40,f=32,pad=1)");
        assert_eq!(r.values_of(&other), None);
        let outside = shape("conv2d_nchw(n=1,c=16,h=80,w=40,f=16,pad=1)");
        assert_eq!(r.values_of(&outside), None);
    }

    #[test]
    fn stored_representatives_must_be_a_grid_in_the_range() {
        let r = parse("batch_matmul(b=1..8,m=16..64,n=8,k=8)").unwrap();
        assert!(
            r.check_representatives(&[vec![1, 16], vec![8, 64]])
                .is_err()
        );
        assert!(
            r.check_representatives(&[vec![1, 16], vec![1, 99]])
                .is_err()
        );
        assert!(
            r.check_representatives(&[vec![1, 16], vec![1, 16]])
                .is_err()
        );
        assert!(r.check_representatives(&[]).is_err());
        r.check_representatives(&[vec![1, 16], vec![1, 64], vec![8, 16], vec![8, 64]])
            .unwrap();
        assert_eq!(nice(42.2), 48);
        assert_eq!(nice(147.0), 128);
        assert_eq!(isqrt(48), 6);
    }

    /// A range reads `layout_free=` as an op spec does and prints in the op spec's canonical
    /// form, which parses back to the same range.
    #[test]
    fn ranges_take_options_and_print_canonically() {
        let r = ShapeRange::parse("matmul(m=1..512,n=768,k=768)").unwrap();
        assert_eq!(r.to_string(), "matmul(m=1..512,n=768,k=768,layout_free=B)");
        assert_eq!(r.options().layout_free, ["B"]);
        let r = ShapeRange::parse(" dense(16..512, 768, 768, bias=1, layout_free=none) ").unwrap();
        assert_eq!(
            r.to_string(),
            "dense(m=16..512,n=768,k=768,layout_free=none)"
        );
        assert!(r.options().is_empty());
        // The stored identity is as it was: defaults written out, options apart.
        assert_eq!(r.spec(), "dense(m=16..512,n=768,k=768,bias=1,relu=1)");
        for text in [
            "matmul(m=1..512,n=768,k=768)",
            "dense(16..512, 768, 768, bias=1, layout_free=none)",
            "batch_matmul(b=1..64,m=16..512,n=64,k=64)",
            "conv2d_nchw(n=1,c=16,h=8..64,w=8..64,f=16,pad=1,layout_free=data+kernel)",
            "softmax(m=1..128,n=1000)",
        ] {
            let r = ShapeRange::parse(text).unwrap();
            let printed = r.to_string();
            let back = ShapeRange::parse(&printed).unwrap();
            assert_eq!(back, r, "{text}");
            assert_eq!(back.to_string(), printed);
            assert_eq!(back.options(), r.options());
            assert_eq!(back.representatives(), r.representatives());
        }
        // Each shape of the range is an op spec with the range's options.
        let r = ShapeRange::parse("matmul(m=1..64,n=8,k=8,layout_free=A+B)").unwrap();
        let one = r.op_spec_at(&[4]).unwrap();
        assert_eq!(one.to_string(), "matmul(m=4,n=8,k=8,layout_free=A+B)");
        assert_eq!(
            one.task().unwrap().key,
            crate::task::Task::new(r.dag_at(&[4]).unwrap(), "x")
                .with_options(&r.options())
                .unwrap()
                .key
        );
        assert_eq!(r.spec_at(&[4]), "matmul(m=4,n=8,k=8)");
        // Typed options follow the op spec's rule.
        let typed = WorkloadOptions {
            layout_free: vec!["A".into()],
        };
        let r = ShapeRange::parse("matmul(m=1..64,n=8,k=8)").unwrap();
        assert_eq!(r.clone().with_options(&typed).unwrap().options(), typed);
        let e = ShapeRange::parse("matmul(m=1..64,n=8,k=8,layout_free=none)")
            .unwrap()
            .with_options(&typed)
            .unwrap_err()
            .to_string();
        assert!(e.contains("give it in one place"), "{e}");
        assert_ne!(
            ShapeRange::parse("matmul(m=1..64,n=8,k=8,layout_free=none)").unwrap(),
            r
        );
    }

    /// Ranges and op specs are split by the one tokenizer: the same text is refused for the
    /// same reason; a range's `layout_free=` names inputs as an op spec's does.
    #[test]
    fn ranges_and_op_specs_share_their_syntax() {
        for (range, spec, want) in [
            (
                "matmul(m=1..8,n=8,k=8",
                "matmul(m=1,n=8,k=8",
                "expected ')' at the end",
            ),
            (
                "matmul(m=1..8,,n=8,k=8)",
                "matmul(m=1,,n=8,k=8)",
                "argument 2 is empty",
            ),
            (
                "matmul(m=1..8,n=8,k=8,)",
                "matmul(m=1,n=8,k=8,)",
                "argument 4 is empty",
            ),
            (
                "matmul(m=1..8,n=8,k=8,layout_free=Z)",
                "matmul(m=1,n=8,k=8,layout_free=Z)",
                "`Z` is not an input of matmul (its inputs: A, B)",
            ),
            (
                "matmul(m=1..8,n=8,8)",
                "matmul(m=1,n=8,8)",
                "a positional value cannot follow a named one",
            ),
        ] {
            let r = ShapeRange::parse(range).unwrap_err().to_string();
            let s = OpSpec::parse(spec).unwrap_err().to_string();
            assert!(r.contains(want), "{range}: {r}");
            assert!(s.contains(want), "{spec}: {s}");
        }
        // A range's layout, as an op spec's, is written in it.
        assert_eq!(
            parse("matmul(m=1..8,n=8,k=8,layout_free=none)")
                .unwrap()
                .to_string(),
            "matmul(m=1..8,n=8,k=8,layout_free=none)"
        );
        assert_eq!(
            parse("matmul(m=1..8,n=8,k=8)").unwrap(),
            ShapeRange::parse("matmul(m=1..8,n=8,k=8)").unwrap()
        );
    }
}
