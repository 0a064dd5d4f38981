//! Analysis before emission, as Ansor's InferBound does it on CPU: inlined bodies substituted,
//! attachments checked, and the region every stage computes (its extent per axis, and its start
//! in the enclosing loops of its consumer).

use super::iexpr::{Lin, Var, VarMap};
use super::program::Buffer;
use crate::ir::{Affine, ComputeDag, Expr};
use crate::schedule::{Attach, Relation, ScheduleError, State};
use std::collections::HashMap;

/// What bound inference found for one stage.
#[derive(Debug, Clone)]
pub(super) struct StageInfo {
    /// Extent of each axis (space then reduce): the region for an attached stage.
    pub(super) root_ext: Vec<i64>,
    /// Start of each space axis (a `Lo` variable for attached stages, 0 at root).
    pub(super) lo: Vec<Lin>,
    /// Definitions of the `Lo` variables.
    pub(super) lo_def: Vec<Lin>,
    pub(super) node_ext: Vec<i64>,
    /// Value of every node relative to the region start, in the stage's loop variables.
    pub(super) node_val: Vec<Lin>,
    pub(super) guards: Vec<(Lin, i64)>,
}

pub(super) struct Lowerer<'a> {
    pub(super) state: &'a State,
    pub(super) dag: &'a ComputeDag,
    /// Bodies with inlined stages substituted.
    pub(super) eff: Vec<Option<Expr>>,
    pub(super) info: Vec<Option<StageInfo>>,
    pub(super) buf_of: Vec<Option<usize>>,
    pub(super) buffers: Vec<Buffer>,
    pub(super) ranges: VarMap<(i64, i64)>,
    pub(super) attached: HashMap<(usize, usize), Vec<usize>>,
}

pub(super) fn invalid(msg: impl Into<String>) -> ScheduleError {
    ScheduleError::Invalid(msg.into())
}

/// Runs the analyses lowering and samplers share: inlining, attachment checks, bound inference.
pub(super) fn analyze(state: &State) -> Result<Lowerer<'_>, ScheduleError> {
    let dag = &state.dag;
    let n = dag.stages.len();
    let mut lw = Lowerer {
        state,
        dag,
        eff: vec![None; n],
        info: vec![None; n],
        buf_of: vec![None; n],
        buffers: vec![],
        ranges: VarMap::default(),
        attached: HashMap::new(),
    };
    lw.inline_bodies()?;
    lw.check_attachments()?;
    for s in (0..n).rev() {
        if lw.eff[s].is_some() {
            lw.infer(s)?;
        }
    }
    Ok(lw)
}

impl Lowerer<'_> {
    fn inline_bodies(&mut self) -> Result<(), ScheduleError> {
        for (s, stage) in self.dag.stages.iter().enumerate() {
            let Some(body) = stage.body() else { continue };
            let mut err = None;
            let e = body.map_loads(&mut |t, idx| {
                if self.state.stages[t].attach == Attach::Inline {
                    match &self.eff[t] {
                        Some(b) => b.substitute_axes(idx),
                        None => {
                            err = Some(invalid(format!(
                                "inlined stage {} has no body",
                                self.dag.stages[t].name
                            )));
                            Expr::Const(0.0)
                        }
                    }
                } else {
                    Expr::Load(t, idx.to_vec())
                }
            });
            if let Some(e) = err {
                return Err(e);
            }
            self.eff[s] = Some(e);
        }
        // Inlined stages keep their body for substitution only; they get no loops.
        for (s, st) in self.state.stages.iter().enumerate() {
            if st.attach == Attach::Inline {
                self.eff[s] = None;
            }
        }
        Ok(())
    }
    fn check_attachments(&mut self) -> Result<(), ScheduleError> {
        let outputs = self.dag.outputs();
        let mut consumers: Vec<Vec<usize>> = vec![vec![]; self.dag.stages.len()];
        for (s, e) in self.eff.iter().enumerate() {
            if let Some(e) = e {
                e.visit_loads(&mut |t, _| {
                    if !consumers[t].contains(&s) {
                        consumers[t].push(s)
                    }
                });
            }
        }
        for (s, st) in self.state.stages.iter().enumerate() {
            let name = &self.dag.stages[s].name;
            match st.attach {
                Attach::Inline if outputs.contains(&s) => {
                    return Err(invalid(format!("output {name} cannot be inlined")));
                }
                Attach::At { stage: c, node } => {
                    if outputs.contains(&s) {
                        return Err(invalid(format!("output {name} must be computed at root")));
                    }
                    // Its readers: the stage it is computed at, and stages computed at the
                    // same loop after it (softmax's exp, read by the row sum computed at the
                    // division's row loop and by the division), whose whole region it covers.
                    let here = Attach::At { stage: c, node };
                    let readers_here = consumers[s]
                        .iter()
                        .all(|&x| x == c || self.state.stages[x].attach == here);
                    if consumers[s].is_empty() || !readers_here {
                        return Err(invalid(format!(
                            "{name} is computed at {}, but is read by {:?}",
                            self.dag.stages[c].name,
                            consumers[s]
                                .iter()
                                .map(|&x| &self.dag.stages[x].name)
                                .collect::<Vec<_>>()
                        )));
                    }
                    if self.eff[c].is_none() {
                        return Err(invalid(format!(
                            "{name} is computed at {}, which has no loops",
                            self.dag.stages[c].name
                        )));
                    }
                    if !self.state.stages[c].leaves.contains(&node) {
                        return Err(invalid(format!(
                            "{name} is computed at a loop {} no longer has",
                            self.dag.stages[c].name
                        )));
                    }
                    self.attached.entry((c, node)).or_default().push(s);
                }
                _ => {}
            }
        }
        Ok(())
    }
    fn range_of(&self) -> impl Fn(Var) -> (i64, i64) + '_ {
        |v| self.ranges.get(&v).copied().unwrap_or((0, 0))
    }
    /// Bound inference for stage `s`; its consumer (if attached) is already done.
    fn infer(&mut self, s: usize) -> Result<(), ScheduleError> {
        let stage = &self.dag.stages[s];
        let st = &self.state.stages[s];
        let n_space = stage.space().len();
        let mut root_ext: Vec<i64> = stage.axis_extents();
        let mut lo: Vec<Lin> = vec![Lin::constant(0); n_space];
        let mut lo_def = vec![];
        if let Attach::At { stage: c, node } = st.attach {
            let (lo_r, ext_r) = self.region(s, c, node)?;
            for d in 0..n_space {
                root_ext[d] = ext_r[d];
                // A constant start needs no variable.
                if lo_r[d].as_const().is_some() {
                    lo[d] = lo_r[d].clone();
                    continue;
                }
                let v = Var::Lo { stage: s, dim: d };
                let r = lo_r[d].range(&self.range_of());
                self.ranges.insert(v, r);
                lo[d] = Lin::var(v);
            }
            lo_def = lo_r;
        }
        // Extents forward through the relations.
        let mut node_ext = vec![0i64; st.nodes.len()];
        node_ext[..root_ext.len()].copy_from_slice(&root_ext);
        let mut guards: Vec<(Lin, i64)> = vec![];
        let mut split_guards = vec![];
        for rel in &st.relations {
            match rel {
                Relation::Split {
                    parent,
                    outs,
                    lengths,
                    inner_to_outer,
                } => {
                    let e = node_ext[*parent];
                    let prod: i64 = lengths.iter().product();
                    let rest = (e + prod - 1) / prod;
                    for (k, &o) in outs.iter().enumerate() {
                        node_ext[o] = if *inner_to_outer {
                            if k == 0 { rest } else { lengths[k - 1] }
                        } else if k < lengths.len() {
                            lengths[k]
                        } else {
                            rest
                        };
                    }
                    if rest * prod != e {
                        split_guards.push(*parent);
                    }
                }
                Relation::Fuse { ins, out } => {
                    node_ext[*out] = ins.iter().map(|&i| node_ext[i]).product();
                }
            }
        }
        let mut node_val = vec![Lin::constant(0); st.nodes.len()];
        for &l in &st.leaves {
            node_val[l] = Lin::var(Var::Loop { stage: s, node: l });
            self.ranges
                .insert(Var::Loop { stage: s, node: l }, (0, node_ext[l] - 1));
        }
        for rel in st.relations.iter().rev() {
            match rel {
                Relation::Split { parent, outs, .. } => {
                    let mut v = Lin::constant(0);
                    let mut stride = 1;
                    for &o in outs.iter().rev() {
                        v = v.add(&node_val[o].scale(stride));
                        stride *= node_ext[o];
                    }
                    node_val[*parent] = v;
                }
                Relation::Fuse { ins, out } => {
                    let mut stride = 1;
                    for (j, &i) in ins.iter().enumerate().rev() {
                        let q = node_val[*out].div(stride);
                        node_val[i] = if j == 0 { q } else { q.rem(node_ext[i]) };
                        stride *= node_ext[i];
                    }
                }
            }
        }
        for p in split_guards {
            guards.push((node_val[p].clone(), node_ext[p]));
        }
        // A region may reach past the tensor's edge where the consumer's tile does.
        for (d, l) in lo.iter().enumerate() {
            let (_, max_lo) = l.range(&self.range_of());
            if max_lo + root_ext[d] > stage.shape[d] {
                guards.push((l.add(&node_val[d]), stage.shape[d]));
            }
        }
        self.info[s] = Some(StageInfo {
            root_ext,
            lo,
            lo_def,
            node_ext,
            node_val,
            guards,
        });
        Ok(())
    }
    /// The region of stage `s` read inside loop `node` of its consumer `c`: a start per
    /// dimension (in `c`'s enclosing loops) and a constant extent.
    fn region(
        &self,
        s: usize,
        c: usize,
        node: usize,
    ) -> Result<(Vec<Lin>, Vec<i64>), ScheduleError> {
        let cinfo = self.info[c].as_ref().expect("consumers are inferred first");
        let cst = &self.state.stages[c];
        let pos = cst
            .leaves
            .iter()
            .position(|&l| l == node)
            .expect("checked in check_attachments");
        // (start, extent) of every node of c, with loops up to `pos` fixed.
        let mut r: Vec<(Lin, i64)> = vec![(Lin::constant(0), 1); cst.nodes.len()];
        for (k, &l) in cst.leaves.iter().enumerate() {
            r[l] = if k <= pos {
                (Lin::var(Var::Loop { stage: c, node: l }), 1)
            } else {
                (Lin::constant(0), cinfo.node_ext[l])
            };
        }
        for rel in cst.relations.iter().rev() {
            match rel {
                Relation::Split { parent, outs, .. } => {
                    let (mut lo, mut span, mut stride) = (Lin::constant(0), 0i64, 1i64);
                    for &o in outs.iter().rev() {
                        lo = lo.add(&r[o].0.scale(stride));
                        span += (r[o].1 - 1) * stride;
                        stride *= cinfo.node_ext[o];
                    }
                    r[*parent] = (lo, (span + 1).min(cinfo.node_ext[*parent]));
                }
                Relation::Fuse { ins, out } => {
                    let (flo, fext) = r[*out].clone();
                    let mut stride = 1;
                    for (j, &i) in ins.iter().enumerate().rev() {
                        let e = cinfo.node_ext[i];
                        r[i] = if fext == 1 {
                            let q = flo.div(stride);
                            (if j == 0 { q } else { q.rem(e) }, 1)
                        } else if j == 0 {
                            let extra = if flo.as_const() == Some(0) { 1 } else { 2 };
                            (flo.div(stride), e.min((fext - 1) / stride + extra))
                        } else {
                            (Lin::constant(0), e)
                        };
                        stride *= e;
                    }
                }
            }
        }
        // Absolute axis ranges of c.
        let n_axes = self.dag.stages[c].axis_extents().len();
        let axes: Vec<(Lin, i64)> = (0..n_axes)
            .map(|a| {
                (
                    cinfo.lo.get(a).map_or(r[a].0.clone(), |l| l.add(&r[a].0)),
                    r[a].1,
                )
            })
            .collect();
        let shape = &self.dag.stages[s].shape;
        let mut region: Option<Vec<(Lin, i64)>> = None;
        let mut visit_with = |idx: &[Affine], axes: &[(Lin, i64)]| {
            let this: Vec<(Lin, i64)> = idx.iter().map(|a| affine_range(a, axes)).collect();
            region = Some(match region.take() {
                None => this,
                Some(prev) => prev
                    .into_iter()
                    .zip(this)
                    .enumerate()
                    .map(|(d, ((l1, e1), (l2, e2)))| match l2.sub(&l1).as_const() {
                        Some(k) => {
                            let start = k.min(0);
                            let end = e1.max(k + e2);
                            (if k < 0 { l2 } else { l1 }, end - start)
                        }
                        // Starts that differ by a non-constant: take the whole dimension.
                        None => (Lin::constant(0), shape[d]),
                    })
                    .collect(),
            });
        };
        self.eff[c]
            .as_ref()
            .expect("attached to a computed stage")
            .visit_loads(&mut |t, idx| {
                if t == s {
                    visit_with(idx, &axes)
                }
            });
        // Readers computed at the same loop (see `check_attachments`) read all of their own
        // region: its start as defined in c's loops (their `Lo` variables come later).
        let here = Attach::At { stage: c, node };
        for (x, xst) in self.state.stages.iter().enumerate() {
            if x == s || xst.attach != here {
                continue;
            }
            let (Some(xe), Some(xi)) = (self.eff[x].as_ref(), self.info[x].as_ref()) else {
                continue;
            };
            let axes: Vec<(Lin, i64)> = xi
                .root_ext
                .iter()
                .enumerate()
                .map(|(a, &e)| (xi.lo_def.get(a).cloned().unwrap_or(Lin::constant(0)), e))
                .collect();
            xe.visit_loads(&mut |t, idx| {
                if t == s {
                    visit_with(idx, &axes)
                }
            });
        }
        let region = region.ok_or_else(|| {
            invalid(format!(
                "{} does not read {}",
                self.dag.stages[c].name, self.dag.stages[s].name
            ))
        })?;
        let mut los = vec![];
        let mut exts = vec![];
        for (d, (lo, ext)) in region.into_iter().enumerate() {
            let (min_lo, _) = lo.range(&self.range_of());
            let lo = if min_lo < 0 {
                lo.maximum(&Lin::constant(0))
            } else {
                lo
            };
            los.push(lo);
            exts.push(ext.min(shape[d]));
        }
        Ok((los, exts))
    }
}

/// Start and extent of an affine index over axes given as (start, extent).
fn affine_range(a: &Affine, axes: &[(Lin, i64)]) -> (Lin, i64) {
    let mut lo = Lin::constant(a.offset);
    let mut span = 0;
    for &(x, c) in &a.terms {
        let (l, e) = &axes[x];
        if c >= 0 {
            lo = lo.add(&l.scale(c));
        } else {
            lo = lo.add(&l.add_const(e - 1).scale(c));
        }
        span += c.abs() * (e - 1);
    }
    (lo, span + 1)
}

/// Extents of the current loops of every stage, outermost first, as bound inference sees
/// them (an attached stage's loops cover its region): what a sampler needs to pick split
/// factors. Inlined stages and inputs have none.
pub fn loop_extents(state: &State) -> Result<Vec<Vec<i64>>, ScheduleError> {
    let lw = analyze(state)?;
    Ok(lw
        .info
        .iter()
        .enumerate()
        .map(|(s, i)| {
            i.as_ref().map_or_else(Vec::new, |i| {
                state.stages[s]
                    .leaves
                    .iter()
                    .map(|&l| i.node_ext[l])
                    .collect()
            })
        })
        .collect())
}
