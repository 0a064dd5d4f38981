//! The steps under construction and the state they lead to, with the annotations every stage
//! plan ends with: split, parallel, vectorize and auto-unroll.

use super::decision::{Decider, DecisionKind};
use crate::lower::MAX_UNROLLED_STEPS;
use crate::schedule::{Annotation, Attach, State, Step};
use rand::Rng;

/// The auto-unroll steps sampled on CPU. Ansor's are 0, 16, 64 and 512; ours stop at
/// [`MAX_UNROLLED_STEPS`] (what GCC compiles in reasonable time), so 512 would only repeat 64.
pub const AUTO_UNROLL_STEPS: [i64; 4] = [0, 16, 32, MAX_UNROLLED_STEPS];

/// What annotation needs of the target.
#[derive(Debug, Clone, Copy)]
pub struct AnnotateContext {
    pub cores: i64,
    pub vector_lanes: i64,
    /// The vector widths (i32 lanes, widest first) at which the code generator writes the
    /// target's 8-bit dot-product instruction (`Target::int8_dot_lanes`); integer reductions
    /// whose output channels fill one of them end in a loop of 4 for it (see `tile`). Empty:
    /// none.
    pub dot_lanes: &'static [i64],
}

impl AnnotateContext {
    pub fn for_target(target: &crate::target::Target) -> AnnotateContext {
        AnnotateContext {
            cores: target.cores.max(1) as i64,
            vector_lanes: i64::from(target.vector_lanes_f32()).max(1),
            dot_lanes: target.int8_dot_lanes(),
        }
    }
}

/// The steps under construction and the state they lead to.
pub(super) struct Gen {
    pub(super) state: State,
    pub(super) steps: Vec<Step>,
    /// Current stage index of every stage of the original DAG (cache writes insert stages).
    pub(super) cur: Vec<usize>,
    /// Whether the sketch computes reductions by rfactor, which a row-wise output may then
    /// take a few rows at a time (see [`super::row_step`]).
    pub(super) rows_hosted: bool,
    /// The loop taking several rows per step, when one does: (DAG stage, iterator node).
    pub(super) row_step: Option<(usize, usize)>,
    /// The DAG stages the sketch inlines (readers are annotated before their producers).
    pub(super) inlined: Vec<bool>,
}

impl Gen {
    pub(super) fn apply(&mut self, step: Step) -> Result<(), String> {
        self.state
            .apply(&step)
            .map_err(|e| format!("{}: {e}", step.to_json()))?;
        self.steps.push(step);
        Ok(())
    }
    pub(super) fn leaves(&self, t: usize) -> usize {
        self.state.stages[t].leaves.len()
    }
    pub(super) fn ann(&self, t: usize, k: usize) -> Annotation {
        let st = &self.state.stages[t];
        st.nodes[st.leaves[k]].ann
    }
    /// The loops of `c` a producer may be computed in: not a vectorized loop, and not under an
    /// unrolled one, whose body would copy the producer's nest.
    pub(super) fn attach_spots(&self, c: usize) -> Vec<usize> {
        (0..self.leaves(c))
            .take_while(|&k| self.ann(c, k) != Annotation::Unroll)
            .filter(|&k| self.ann(c, k) != Annotation::Vectorize)
            .collect()
    }
    /// The loop of a stage `h` at which every consumer in `cons` other than `h` itself is
    /// computed, as (h, loop position), when there is one: a producer may be computed there
    /// too, before them (Ansor's "compute at the consumer's attach point"). Softmax's exp is
    /// read by the row sum and by the division: with the row sum at the division's row loop,
    /// exp computed there is one row in L1, where at root it is a pass over memory and inlined
    /// it is computed twice.
    pub(super) fn shared_spot(&self, cons: &[usize]) -> Option<(usize, usize)> {
        let (h, node) = cons
            .iter()
            .find_map(|&c| match self.state.stages[c].attach {
                Attach::At { stage, node } => Some((stage, node)),
                _ => None,
            })?;
        let here = Attach::At { stage: h, node };
        if !cons
            .iter()
            .all(|&c| c == h || self.state.stages[c].attach == here)
        {
            return None;
        }
        let k = self.state.stages[h]
            .leaves
            .iter()
            .position(|&l| l == node)?;
        Some((h, k))
    }
    /// Consumers of current stage `t` with loops (inlined readers looked through).
    pub(super) fn consumers(&self, t: usize) -> Vec<usize> {
        let mut out = vec![];
        for (c, stage) in self.state.dag.stages.iter().enumerate() {
            if stage.inputs().contains(&t) {
                if self.state.stages[c].attach == Attach::Inline {
                    for cc in self.consumers(c) {
                        if !out.contains(&cc) {
                            out.push(cc);
                        }
                    }
                } else if !out.contains(&c) {
                    out.push(c);
                }
            }
        }
        out
    }
}

/// Ansor's parallel rule: fuse outer loops until the degree reaches `cores * 16`.
pub(super) fn default_fuse_count(extents: &[i64], cores: i64) -> usize {
    let mut prod = 1;
    for (k, e) in extents.iter().enumerate() {
        prod *= e;
        if prod >= cores * 16 {
            return k + 1;
        }
    }
    extents.len()
}

pub(super) fn pick_unroll<R: Rng>(g: &mut Gen, t: usize, d: &mut Decider<R>) -> Result<(), String> {
    let i = d.pick(DecisionKind::AutoUnroll, AUTO_UNROLL_STEPS.len(), |r| {
        r.gen_range(0..AUTO_UNROLL_STEPS.len())
    });
    let max_step = AUTO_UNROLL_STEPS[i];
    if max_step > 0 {
        g.apply(Step::AutoUnroll {
            stage: t,
            iter: 0,
            max_step,
        })?;
    }
    Ok(())
}

/// Vectorizes loop `k` of `t` when it is a free space loop longer than one. No upper bound:
/// a tiled stage's innermost loop is at most [`MAX_INNERMOST`] by its sampling already, and an
/// untiled one (an elementwise stage at root, a row of softmax) streams whatever its length;
/// left scalar above 64 vectors, softmax 128x1000's exp loop ran scalar on 8-lane AVX2 (the
/// search's best 2.6 GFLOP/s, 13.8 vectorized; the best random schedule 6.4), vectorized on
/// 16-lane AVX-512.
pub(super) fn vectorize(g: &mut Gen, t: usize, k: usize, extent: i64) -> Result<(), String> {
    let st = &g.state.stages[t];
    let node = &st.nodes[st.leaves[k]];
    if node.kind == crate::schedule::IterKind::Space && node.ann == Annotation::None && extent > 1 {
        g.apply(Step::Annotate {
            stage: t,
            iter: k,
            ann: Annotation::Vectorize,
        })?;
    }
    Ok(())
}

/// Fuses the first `k` loops of `t` and marks the result parallel (when it has work to share);
/// returns how many loops the fuse removed (`k - 1`, or 0), so that a caller can find a loop
/// further in.
pub(super) fn parallel(g: &mut Gen, t: usize, k: usize, extents: &[i64]) -> Result<usize, String> {
    if k == 0 || extents[..k].iter().product::<i64>() < 2 {
        return Ok(0);
    }
    if k > 1 {
        g.apply(Step::Fuse {
            stage: t,
            iters: (0..k).collect(),
        })?;
    }
    g.apply(Step::Annotate {
        stage: t,
        iter: 0,
        ann: Annotation::Parallel,
    })?;
    Ok(k - 1)
}

/// Splits axis loops `0..lens.len()` of `t` (one loop per axis, in axis order) into the given
/// inner lengths, last axis first so that earlier positions stay put.
pub(super) fn split_axes(
    g: &mut Gen,
    t: usize,
    extents: &[i64],
    lens: &[Vec<i64>],
) -> Result<(), String> {
    for a in (0..lens.len()).rev() {
        g.apply(Step::Split {
            stage: t,
            iter: a,
            extent: Some(extents[a]),
            lengths: lens[a].clone(),
            inner_to_outer: true,
        })?;
    }
    Ok(())
}

pub(super) fn pick_parallel<R: Rng>(
    d: &mut Decider<R>,
    outer: &[i64],
    ctx: &AnnotateContext,
) -> usize {
    if outer.is_empty() {
        return 0;
    }
    let default = default_fuse_count(outer, ctx.cores);
    1 + d.pick(DecisionKind::Parallel, outer.len(), |_| default - 1)
}
