//! The loop state of a schedule: per stage, its iterators (the relation graph of splits and
//! fuses over the stage's axes), the current loop order, annotations and compute location.
//!
//! Steps change structure only. Extents of split loops are derived at lowering time by bound
//! inference, because an attached stage's extents depend on where it is attached (as in Ansor's
//! InferBound); so a state is always a pure function of (DAG, steps).

use super::step::{Annotation, Step};
use crate::ir::{Affine, Axis, ComputeDag, Expr, StageKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IterKind {
    Space,
    Reduce,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IterNode {
    pub name: String,
    pub kind: IterKind,
    pub ann: Annotation,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Relation {
    /// `parent = sum(outs[k] * stride_k)`; `lengths` as in [`Step::Split`].
    Split {
        parent: usize,
        outs: Vec<usize>,
        lengths: Vec<i64>,
        inner_to_outer: bool,
    },
    /// `out = mixed-radix(ins)`, outermost first.
    Fuse { ins: Vec<usize>, out: usize },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Attach {
    Root,
    Inline,
    /// Inside the loop of iterator node `node` of stage `stage`.
    At {
        stage: usize,
        node: usize,
    },
}

/// The loop structure of one stage. Nodes `0..n_axes` are the stage's axes (space, then
/// reduction); later nodes come from splits and fuses.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StageState {
    pub nodes: Vec<IterNode>,
    pub relations: Vec<Relation>,
    /// Current loops, outermost first (node ids).
    pub leaves: Vec<usize>,
    pub attach: Attach,
    pub auto_unroll_max_step: i64,
}

impl StageState {
    fn for_stage(space: &[Axis], reduce: &[Axis]) -> StageState {
        let mut nodes: Vec<IterNode> = space
            .iter()
            .map(|a| IterNode {
                name: a.name.clone(),
                kind: IterKind::Space,
                ann: Annotation::None,
            })
            .collect();
        nodes.extend(reduce.iter().map(|a| IterNode {
            name: a.name.clone(),
            kind: IterKind::Reduce,
            ann: Annotation::None,
        }));
        StageState {
            leaves: (0..nodes.len()).collect(),
            nodes,
            relations: vec![],
            attach: Attach::Root,
            auto_unroll_max_step: 0,
        }
    }

    pub fn n_axes(&self, dag_stage: &crate::ir::Stage) -> usize {
        dag_stage.space().len() + dag_stage.reduce_axes().len()
    }
}

#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum ScheduleError {
    #[error("step {index} ({step}): {msg}")]
    Step {
        index: usize,
        step: String,
        msg: String,
    },
    #[error("invalid schedule: {0}")]
    Invalid(String),
    #[error("malformed schedule JSON: {0}")]
    Json(String),
}

/// A DAG (possibly grown by cache writes) with the loop state of each of its stages.
#[derive(Debug, Clone, PartialEq)]
pub struct State {
    pub dag: ComputeDag,
    pub stages: Vec<StageState>,
}

impl State {
    /// The naive state: every stage at root, its loops in axis order.
    pub fn new(dag: &ComputeDag) -> State {
        let stages = dag
            .stages
            .iter()
            .map(|s| StageState::for_stage(s.space(), s.reduce_axes()))
            .collect();
        State {
            dag: dag.clone(),
            stages,
        }
    }

    /// Replays steps on the naive state of `dag`.
    pub fn replay(dag: &ComputeDag, steps: &[Step]) -> Result<State, ScheduleError> {
        let mut st = State::new(dag);
        for (i, s) in steps.iter().enumerate() {
            st.apply(s).map_err(|msg| ScheduleError::Step {
                index: i,
                step: s.to_json().to_string(),
                msg,
            })?;
        }
        Ok(st)
    }

    fn compute_stage(&self, s: usize) -> Result<&StageState, String> {
        let st = self
            .stages
            .get(s)
            .ok_or_else(|| format!("no stage {s} (the DAG has {})", self.stages.len()))?;
        if self.dag.stages[s].is_placeholder() {
            return Err(format!(
                "stage {s} ({}) is an input and has no loops",
                self.dag.stages[s].name
            ));
        }
        Ok(st)
    }

    fn leaf(&self, s: usize, iter: usize) -> Result<usize, String> {
        let st = self.compute_stage(s)?;
        if st.attach == Attach::Inline {
            return Err(format!(
                "stage {s} ({}) is inlined and has no loops",
                self.dag.stages[s].name
            ));
        }
        st.leaves
            .get(iter)
            .copied()
            .ok_or_else(|| format!("stage {s} has {} loops, no loop {iter}", st.leaves.len()))
    }

    /// Whether another stage is computed inside loop `node` of stage `s`.
    fn has_attached(&self, s: usize, node: usize) -> bool {
        self.stages
            .iter()
            .any(|o| o.attach == Attach::At { stage: s, node })
    }

    /// Applies one step; the error says why it does not apply.
    pub fn apply(&mut self, step: &Step) -> Result<(), String> {
        match step {
            Step::Split {
                stage,
                iter,
                lengths,
                inner_to_outer,
                ..
            } => {
                let node = self.leaf(*stage, *iter)?;
                if lengths.is_empty() || lengths.iter().any(|&l| l < 1) {
                    return Err(format!(
                        "split lengths must be positive and not empty, got {lengths:?}"
                    ));
                }
                if lengths
                    .iter()
                    .try_fold(1i64, |acc, &l| acc.checked_mul(l))
                    .is_none_or(|p| p > 1 << 31)
                {
                    return Err("split lengths overflow".into());
                }
                if self.has_attached(*stage, node) {
                    return Err("a stage is computed at this loop; split before compute_at".into());
                }
                let st = &mut self.stages[*stage];
                let parent = st.nodes[node].clone();
                if parent.ann != Annotation::None {
                    return Err("an annotated loop cannot be split".into());
                }
                let first = st.nodes.len();
                let outs: Vec<usize> = (first..first + lengths.len() + 1).collect();
                for k in 0..outs.len() {
                    st.nodes.push(IterNode {
                        name: format!("{}.{k}", parent.name),
                        kind: parent.kind,
                        ann: Annotation::None,
                    });
                }
                st.leaves.splice(*iter..*iter + 1, outs.iter().copied());
                st.relations.push(Relation::Split {
                    parent: node,
                    outs,
                    lengths: lengths.clone(),
                    inner_to_outer: *inner_to_outer,
                });
            }
            Step::Reorder { stage, order } => {
                let n = self.compute_stage(*stage)?.leaves.len();
                self.leaf(*stage, 0)?;
                let mut seen = vec![false; n];
                if order.len() != n
                    || order
                        .iter()
                        .any(|&o| o >= n || std::mem::replace(&mut seen[o], true))
                {
                    return Err(format!(
                        "reorder needs a permutation of 0..{n}, got {order:?}"
                    ));
                }
                let st = &mut self.stages[*stage];
                st.leaves = order.iter().map(|&o| st.leaves[o]).collect();
            }
            Step::Fuse { stage, iters } => {
                if iters.is_empty() {
                    return Err("fuse needs at least one loop".into());
                }
                if iters.windows(2).any(|w| w[1] != w[0] + 1) {
                    return Err(format!("fused loops must be consecutive, got {iters:?}"));
                }
                let nodes: Vec<usize> = iters
                    .iter()
                    .map(|&i| self.leaf(*stage, i))
                    .collect::<Result<_, _>>()?;
                if iters.len() == 1 {
                    return Ok(());
                }
                let st = &self.stages[*stage];
                if nodes.iter().any(|&n| st.nodes[n].ann != Annotation::None) {
                    return Err("annotated loops cannot be fused".into());
                }
                let kind = st.nodes[nodes[0]].kind;
                // A loop that mixes space and reduction would leave the reduction's
                // initialisation without loops to run in.
                if nodes.iter().any(|&n| st.nodes[n].kind != kind) {
                    return Err("space and reduction loops cannot be fused together".into());
                }
                let name = nodes
                    .iter()
                    .map(|&n| st.nodes[n].name.as_str())
                    .collect::<Vec<_>>()
                    .join("@");
                let st = &mut self.stages[*stage];
                let out = st.nodes.len();
                st.nodes.push(IterNode {
                    name,
                    kind,
                    ann: Annotation::None,
                });
                st.leaves.splice(iters[0]..=iters[iters.len() - 1], [out]);
                st.relations.push(Relation::Fuse {
                    ins: nodes.clone(),
                    out,
                });
                // A stage computed at one of the fused loops is computed at the fused loop, as
                // Ansor's fuse moves its attach points (its CPU sketches fuse the consumer's
                // outer tile after compute_at); at the innermost one, that is the same place.
                let s = *stage;
                for o in &mut self.stages {
                    if matches!(o.attach, Attach::At { stage, node } if stage == s && nodes.contains(&node))
                    {
                        o.attach = Attach::At {
                            stage: s,
                            node: out,
                        };
                    }
                }
            }
            Step::Annotate { stage, iter, ann } => {
                let node = self.leaf(*stage, *iter)?;
                let st = &mut self.stages[*stage];
                let kind = st.nodes[node].kind;
                if matches!(ann, Annotation::Parallel | Annotation::Vectorize)
                    && kind != IterKind::Space
                {
                    return Err(format!(
                        "only space loops can be {}, this one is {kind:?}",
                        if *ann == Annotation::Parallel {
                            "parallel"
                        } else {
                            "vectorized"
                        }
                    ));
                }
                st.nodes[node].ann = *ann;
            }
            Step::ComputeAt {
                stage,
                target,
                target_iter,
            } => {
                self.compute_stage(*stage)?;
                if stage == target {
                    return Err("a stage cannot be computed at itself".into());
                }
                let node = self.leaf(*target, *target_iter)?;
                if self.dag.outputs().contains(stage) {
                    return Err("an output stage stays at root".into());
                }
                let here = Attach::At {
                    stage: *target,
                    node,
                };
                let readers_here = (0..self.stages.len()).any(|c| {
                    self.stages[c].attach == here && self.reads_through_inlined(c, *stage)
                });
                if !self.reads_through_inlined(*target, *stage) && !readers_here {
                    return Err(format!(
                        "stage {target} does not read stage {stage}, nor does a stage computed at that loop"
                    ));
                }
                self.stages[*stage].attach = Attach::At {
                    stage: *target,
                    node,
                };
            }
            Step::ComputeInline { stage } => {
                self.compute_stage(*stage)?;
                let s = &self.dag.stages[*stage];
                if s.is_reduction() {
                    return Err("a reduction cannot be inlined".into());
                }
                if self.dag.outputs().contains(stage) {
                    return Err("an output stage cannot be inlined".into());
                }
                if self
                    .stages
                    .iter()
                    .any(|o| matches!(o.attach, Attach::At { stage: t, .. } if t == *stage))
                {
                    return Err("another stage is computed inside this one".into());
                }
                self.stages[*stage].attach = Attach::Inline;
            }
            Step::ComputeRoot { stage } => {
                self.compute_stage(*stage)?;
                self.stages[*stage].attach = Attach::Root;
            }
            Step::CacheWrite { stage } => self.cache_write(*stage)?,
            Step::Rfactor {
                stage,
                axis,
                factor,
            } => self.rfactor(*stage, *axis, *factor)?,
            Step::AutoUnroll {
                stage,
                iter,
                max_step,
            } => {
                self.leaf(*stage, *iter)?;
                if !(0..=4096).contains(max_step) {
                    return Err(format!(
                        "auto_unroll_max_step must be in 0..=4096, got {max_step}"
                    ));
                }
                self.stages[*stage].auto_unroll_max_step = *max_step;
            }
        }
        Ok(())
    }

    /// Whether `consumer` reads `producer`, directly or through inlined stages.
    fn reads_through_inlined(&self, consumer: usize, producer: usize) -> bool {
        self.dag.stages[consumer].inputs().iter().any(|&t| {
            t == producer
                || (self.stages[t].attach == Attach::Inline
                    && self.reads_through_inlined(t, producer))
        })
    }

    /// Whether stage `s` has no step applied yet (steps that grow the DAG come first).
    fn untouched(&self, s: usize) -> Result<bool, String> {
        let st = self.compute_stage(s)?;
        Ok(st.relations.is_empty()
            && st.attach == Attach::Root
            && st.leaves == (0..st.nodes.len()).collect::<Vec<_>>())
    }

    /// Inserts `new` as stage `s`, moving stage `s` and every later one up by one. Stage `s`
    /// has just been rewritten to read `new` as stage `s`; the reads of later stages of stages
    /// >= `s`, and attachments to them, move up with them.
    fn insert_stage(&mut self, s: usize, new: crate::ir::Stage) {
        for later in &mut self.dag.stages[s + 1..] {
            if let StageKind::Compute { body, .. } = &mut later.kind {
                *body = body.map_loads(&mut |t, idx| {
                    Expr::Load(if t >= s { t + 1 } else { t }, idx.to_vec())
                });
            }
        }
        for o in &mut self.stages {
            if let Attach::At { stage, .. } = &mut o.attach
                && *stage >= s
            {
                *stage += 1;
            }
        }
        self.stages
            .insert(s, StageState::for_stage(new.space(), new.reduce_axes()));
        self.dag.stages.insert(s, new);
    }

    /// See [`Step::Rfactor`].
    fn rfactor(&mut self, s: usize, axis: usize, factor: i64) -> Result<(), String> {
        if !self.untouched(s)? {
            return Err("rfactor comes before any other step on its stage".into());
        }
        let orig = self.dag.stages[s].clone();
        let StageKind::Compute {
            space,
            reduce_axes,
            reduce: Some(op),
            body,
        } = &orig.kind
        else {
            return Err(format!("stage {s} ({}) is not a reduction", orig.name));
        };
        let ns = space.len();
        let Some(r) = axis.checked_sub(ns).filter(|&r| r < reduce_axes.len()) else {
            return Err(format!(
                "axis {axis} is not a reduction axis of {} (those are {ns}..{})",
                orig.name,
                ns + reduce_axes.len()
            ));
        };
        let k = &reduce_axes[r];
        if factor < 2 || k.extent % factor != 0 {
            return Err(format!(
                "rfactor needs a factor of at least 2 that divides {} ({}), got {factor}",
                k.extent, k.name
            ));
        }
        // The partial stage's axes: the space axes, the factored part `ki`; then the reduction
        // axes with `ko` in place of the axis. The axis is `ko * factor + ki`.
        let ki = Axis {
            name: format!("{}_in", k.name),
            extent: factor,
        };
        let mut rf_space = space.clone();
        rf_space.push(ki.clone());
        let mut rf_reduce = reduce_axes.clone();
        rf_reduce[r] = Axis {
            name: format!("{}_out", k.name),
            extent: k.extent / factor,
        };
        let by: Vec<Affine> = (0..ns)
            .map(Affine::axis)
            .chain((0..reduce_axes.len()).map(|j| {
                if j == r {
                    Affine::new(vec![(ns + 1 + j, factor), (ns, 1)], 0)
                } else {
                    Affine::axis(ns + 1 + j)
                }
            }))
            .collect();
        let partial = crate::ir::Stage {
            name: format!("{}.rf", orig.name),
            shape: rf_space.iter().map(|a| a.extent).collect(),
            dtype: orig.dtype,
            data: orig.data,
            kind: StageKind::Compute {
                space: rf_space,
                reduce_axes: rf_reduce,
                reduce: Some(*op),
                body: body.substitute_axes(&by),
            },
        };
        let combine = crate::ir::Stage {
            kind: StageKind::Compute {
                space: space.clone(),
                reduce_axes: vec![ki],
                reduce: Some(*op),
                body: Expr::Load(s, (0..=ns).map(Affine::axis).collect()),
            },
            ..orig.clone()
        };
        self.stages[s] = StageState::for_stage(combine.space(), combine.reduce_axes());
        self.dag.stages[s] = combine;
        self.insert_stage(s, partial);
        Ok(())
    }

    fn cache_write(&mut self, s: usize) -> Result<(), String> {
        if !self.untouched(s)? {
            return Err("cache_write comes before any other step on its stage".into());
        }
        let orig = self.dag.stages[s].clone();
        let StageKind::Compute { space, .. } = &orig.kind else {
            unreachable!("checked by compute_stage")
        };
        let mut local = orig.clone();
        local.name = format!("{}.local", orig.name);
        let copy = crate::ir::Stage {
            kind: StageKind::Compute {
                space: space.clone(),
                reduce_axes: vec![],
                reduce: None,
                body: Expr::Load(s, (0..space.len()).map(Affine::axis).collect()),
            },
            ..orig.clone()
        };
        self.stages[s] = StageState::for_stage(space, &[]);
        self.dag.stages[s] = copy;
        self.insert_stage(s, local);
        Ok(())
    }
}
