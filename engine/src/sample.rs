//! A random sampler of complete, valid schedules.
//!
//! It walks the stages from the output backwards, as Ansor's sketch rules do, and draws one
//! decision per stage: inline a cheap producer, compute it at a loop of its consumer, or tile it
//! (multi-level `SSRSRS` tiling for reductions, with an optional local accumulator through
//! cache_write), then annotates parallel, vectorize and auto-unroll. Every step kind of the
//! schedule language appears, so the property tests that check generated kernels against the
//! reference cover them all. The Ansor search (sketches, evolution, cost model) builds on
//! richer versions of these rules in its own module.

use crate::ir::ComputeDag;
use crate::lower::{loop_extents, lower};
use crate::schedule::{Annotation, Attach, IterKind, Schedule, State, Step};
use crate::target::Target;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Innermost tile factors stay at or below this (Ansor's limit).
const MAX_INNERMOST: i64 = 64;

/// Iterations an explicitly unrolled loop nest may expand to.
const MAX_UNROLLED_BODY: i64 = 512;

pub struct RandomSampler {
    dag: ComputeDag,
    rng: ChaCha8Rng,
    cores: usize,
    vector_lanes: i64,
    /// Samples thrown away because they did not lower, with the last reason: should stay 0.
    pub rejected: u64,
    pub last_rejection: Option<String>,
}

/// Records steps as it applies them, so that the schedule replays to the same state.
struct Builder {
    state: State,
    steps: Vec<Step>,
}

impl Builder {
    fn apply(&mut self, step: Step) -> Result<(), String> {
        self.state.apply(&step)?;
        self.steps.push(step);
        Ok(())
    }

    fn leaves(&self, s: usize) -> usize {
        self.state.stages[s].leaves.len()
    }

    fn extents(&self, s: usize) -> Result<Vec<i64>, String> {
        let ext = loop_extents(&self.state).map_err(|e| e.to_string())?;
        Ok(ext[s].clone())
    }
}

impl RandomSampler {
    pub fn new(dag: &ComputeDag, target: &Target, seed: u64) -> Self {
        RandomSampler {
            dag: dag.clone(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            cores: target.cores.max(1),
            vector_lanes: i64::from(target.vector_lanes_f32()).max(1),
            rejected: 0,
            last_rejection: None,
        }
    }

    /// One random valid schedule. Invalid draws are retried; after many in a row (a bug in
    /// the rules, never expected) the naive schedule is returned.
    pub fn sample(&mut self) -> Schedule {
        for _ in 0..100 {
            match self.try_sample() {
                Ok(s) => return s,
                Err(e) => {
                    self.rejected += 1;
                    tracing::debug!(reason = %e, "sample rejected");
                    self.last_rejection = Some(e);
                }
            }
        }
        Schedule::default()
    }

    fn try_sample(&mut self) -> Result<Schedule, String> {
        let mut b = Builder {
            state: State::new(&self.dag),
            steps: vec![],
        };
        let mut s = b.state.dag.stages.len();
        while s > 0 {
            s -= 1;
            if b.state.dag.stages[s].is_placeholder() {
                continue;
            }
            self.schedule_stage(&mut b, s)?;
        }
        lower(&b.state).map_err(|e| e.to_string())?;
        Ok(Schedule::new(b.steps))
    }

    /// The stages that read `s` and have loops (inlined readers are looked through).
    fn consumers(st: &State, s: usize) -> Vec<usize> {
        let mut out = vec![];
        for (c, stage) in st.dag.stages.iter().enumerate() {
            if stage.inputs().contains(&s) {
                if st.stages[c].attach == Attach::Inline {
                    for cc in Self::consumers(st, c) {
                        if !out.contains(&cc) {
                            out.push(cc)
                        }
                    }
                } else if !out.contains(&c) {
                    out.push(c);
                }
            }
        }
        out
    }

    fn schedule_stage(&mut self, b: &mut Builder, s: usize) -> Result<(), String> {
        let st = &b.state;
        let stage = &st.dag.stages[s];
        let is_output = st.dag.outputs().contains(&s);
        let consumers = Self::consumers(st, s);
        let single = (consumers.len() == 1).then(|| consumers[0]);
        if stage.is_reduction() {
            let r: f64 = self.rng.r#gen();
            // A local accumulator needs a space loop to live in.
            if r < 0.4 && !stage.space().is_empty() {
                return self.tile_with_cache_write(b, s);
            }
            if let (Some(c), false) = (single, is_output)
                && r < 0.7
                && self.attach(b, s, c)?
            {
                return self.tile_reduction(b, s, false);
            }
            return self.tile_reduction(b, s, true);
        }
        if !is_output {
            let r: f64 = self.rng.r#gen();
            if r < 0.5 {
                return b.apply(Step::ComputeInline { stage: s });
            }
            if let Some(c) = single
                && r < 0.75
                && self.attach(b, s, c)?
            {
                return self.tile_elementwise(b, s, false);
            }
        }
        self.tile_elementwise(b, s, true)
    }

    /// compute_at a random loop of consumer `c` that can hold a stage; false (and nothing
    /// applied) when it has none, so the caller computes the stage at root instead.
    fn attach(&mut self, b: &mut Builder, s: usize, c: usize) -> Result<bool, String> {
        let cst = &b.state.stages[c];
        // Not inside a vectorized loop (invalid) nor inside an unrolled one (the unrolled body
        // would copy the attached stage's nest).
        let first_unrolled = (0..cst.leaves.len())
            .find(|&k| cst.nodes[cst.leaves[k]].ann == Annotation::Unroll)
            .unwrap_or(usize::MAX);
        let choices: Vec<usize> = (0..cst.leaves.len())
            .filter(|&k| {
                cst.nodes[cst.leaves[k]].ann != Annotation::Vectorize && k < first_unrolled
            })
            .collect();
        let Some(&k) = choices.choose(&mut self.rng) else {
            return Ok(false);
        };
        b.apply(Step::ComputeAt {
            stage: s,
            target: c,
            target_iter: k,
        })?;
        Ok(true)
    }

    /// Random factors for splitting `extent` into `parts` loops: the lengths of the inner
    /// `parts - 1` loops, outer to inner. Mostly exact divisors (no guards), sometimes not, so
    /// that guarded code is exercised too.
    fn factors(&mut self, extent: i64, parts: usize) -> Vec<i64> {
        let mut rest = extent;
        let mut lengths = vec![0; parts - 1];
        for k in (0..parts - 1).rev() {
            let cap = if k == parts - 2 {
                MAX_INNERMOST
            } else {
                i64::MAX
            };
            let f = if self.rng.gen_bool(0.1) {
                self.rng.gen_range(1..=rest.clamp(1, 16))
            } else {
                let divs: Vec<i64> = (1..=rest.min(cap)).filter(|d| rest % d == 0).collect();
                *divs.choose(&mut self.rng).expect("1 divides everything")
            };
            lengths[k] = f;
            rest = (rest + f - 1) / f;
        }
        lengths
    }

    /// Splits every loop `axis` (leaf positions, currently one loop per axis) into `parts[a]`
    /// loops; returns the positions of each axis' parts. Splits go from the last axis back so
    /// that earlier positions stay put.
    fn split_axes(
        &mut self,
        b: &mut Builder,
        s: usize,
        parts: &[usize],
    ) -> Result<Vec<Vec<usize>>, String> {
        let ext = b.extents(s)?;
        for a in (0..parts.len()).rev() {
            if parts[a] > 1 {
                let lengths = self.factors(ext[a], parts[a]);
                b.apply(Step::Split {
                    stage: s,
                    iter: a,
                    extent: Some(ext[a]),
                    lengths,
                    inner_to_outer: true,
                })?;
            }
        }
        let mut pos = vec![];
        let mut p = 0;
        for &n in parts {
            pos.push((p..p + n).collect());
            p += n;
        }
        Ok(pos)
    }

    /// `SSRSRS` tiling of a reduction (fewer levels at random), parallel outer loops when at
    /// root, a vectorized innermost space loop, and an auto-unroll pragma.
    fn tile_reduction(&mut self, b: &mut Builder, s: usize, at_root: bool) -> Result<(), String> {
        let stage = &b.state.dag.stages[s];
        let (ns, nr) = (stage.space().len(), stage.reduce_axes().len());
        let s_levels = self.rng.gen_range(2..=4usize);
        let r_levels = self.rng.gen_range(1..=2usize);
        let mut parts = vec![s_levels; ns];
        parts.extend(vec![r_levels; nr]);
        let pos = self.split_axes(b, s, &parts)?;
        // Interleave levels as S0 S1 R0 S2 R1 S3; with fewer levels, the innermost level of
        // each axis still goes innermost and the outer ones outermost.
        let space_slot = |slot: usize| -> Option<usize> {
            match s_levels {
                4 => Some(slot),
                3 => [Some(0), Some(1), None, Some(2)][slot],
                _ => [Some(0), None, None, Some(1)][slot],
            }
        };
        let reduce_slot = |slot: usize| -> Option<usize> {
            if r_levels == 2 {
                Some(slot)
            } else {
                [Some(0), None][slot]
            }
        };
        let pattern: [(bool, usize); 6] = [
            (true, 0),
            (true, 1),
            (false, 0),
            (true, 2),
            (false, 1),
            (true, 3),
        ];
        let mut order = vec![];
        for (space, slot) in pattern {
            let level = if space {
                space_slot(slot)
            } else {
                reduce_slot(slot)
            };
            let axes = if space { 0..ns } else { ns..ns + nr };
            if let Some(l) = level {
                order.extend(axes.map(|a| pos[a][l]));
            }
        }
        for p in pos.iter().flatten() {
            if !order.contains(p) {
                order.push(*p);
            }
        }
        b.apply(Step::Reorder { stage: s, order })?;
        self.annotate(b, s, at_root, ns)
    }

    /// Tiles a stage's space loops in two levels, outer then inner.
    fn tile_elementwise(&mut self, b: &mut Builder, s: usize, at_root: bool) -> Result<(), String> {
        let ns = b.state.dag.stages[s].space().len();
        let n = b.leaves(s);
        if self.rng.gen_bool(0.7) && n > 0 {
            let parts = vec![2; ns];
            let pos = self.split_axes(b, s, &parts)?;
            let order: Vec<usize> = pos
                .iter()
                .map(|p| p[0])
                .chain(pos.iter().map(|p| p[1]))
                .collect();
            b.apply(Step::Reorder { stage: s, order })?;
        }
        self.annotate(b, s, at_root, ns)
    }

    /// cache_write, tile the copy-out's space loops, compute the local stage at one of its
    /// tile loops, and tile the local stage's region.
    fn tile_with_cache_write(&mut self, b: &mut Builder, s: usize) -> Result<(), String> {
        b.apply(Step::CacheWrite { stage: s })?;
        let (local, out) = (s, s + 1);
        let ns = b.state.dag.stages[out].space().len();
        let levels = self.rng.gen_range(2..=3usize);
        let pos = self.split_axes(b, out, &vec![levels; ns])?;
        let mut order = vec![];
        for l in 0..levels {
            order.extend(pos.iter().map(|p| p[l]));
        }
        b.apply(Step::Reorder { stage: out, order })?;
        // Parallel over the outermost space loops, then the local accumulator inside one of
        // the outer tile levels.
        let fused = self.parallelize(b, out, ns)?;
        let after_fuse = b.leaves(out);
        let outer = if fused { 1 } else { ns };
        let attach_at = self.rng.gen_range(0..outer.min(after_fuse));
        let attach_at = if self.rng.gen_bool(0.5) && levels == 3 && outer + ns <= after_fuse {
            outer + ns - 1
        } else {
            attach_at
        };
        if self.rng.gen_bool(0.6) {
            let last = b.leaves(out) - 1;
            self.maybe_vectorize(b, out, last)?;
        }
        b.apply(Step::ComputeAt {
            stage: local,
            target: out,
            target_iter: attach_at,
        })?;
        self.tile_reduction(b, local, false)
    }

    /// Fuses up to all `ns` outermost (space) loops and marks the fused loop parallel when the
    /// work is worth spreading; returns whether it did.
    fn parallelize(&mut self, b: &mut Builder, s: usize, ns: usize) -> Result<bool, String> {
        let ext = b.extents(s)?;
        let st = &b.state.stages[s];
        let mut k = 0;
        let mut prod = 1;
        // Ansor fuses outer space loops until the degree passes cores x 16 (or they run out).
        while k < ns.min(st.leaves.len())
            && st.nodes[st.leaves[k]].kind == IterKind::Space
            && prod < (self.cores as i64) * 16
        {
            prod *= ext[k];
            k += 1;
        }
        if k == 0 || prod < 2 || self.rng.gen_bool(0.15) {
            return Ok(false);
        }
        b.apply(Step::Fuse {
            stage: s,
            iters: (0..k).collect(),
        })?;
        b.apply(Step::Annotate {
            stage: s,
            iter: 0,
            ann: Annotation::Parallel,
        })?;
        Ok(true)
    }

    fn maybe_vectorize(&mut self, b: &mut Builder, s: usize, k: usize) -> Result<(), String> {
        let ext = b.extents(s)?;
        let st = &b.state.stages[s];
        let node = &st.nodes[st.leaves[k]];
        if node.kind == IterKind::Space
            && node.ann == Annotation::None
            && ext[k] > 1
            && ext[k] <= MAX_INNERMOST * self.vector_lanes
        {
            b.apply(Step::Annotate {
                stage: s,
                iter: k,
                ann: Annotation::Vectorize,
            })?;
        }
        Ok(())
    }

    fn annotate(
        &mut self,
        b: &mut Builder,
        s: usize,
        at_root: bool,
        ns: usize,
    ) -> Result<(), String> {
        if at_root {
            self.parallelize(b, s, ns)?;
        }
        let n = b.leaves(s);
        if n > 0 && self.rng.gen_bool(0.8) {
            self.maybe_vectorize(b, s, n - 1)?;
        }
        if n > 1 && self.rng.gen_bool(0.1) {
            // Explicit unrolling of a loop fully unrolls everything inside it too: keep the
            // unrolled body small, or the compiler spends minutes on one kernel.
            let ext = b.extents(s)?;
            let k = self.rng.gen_range(0..n - 1);
            let body: i64 = ext[k..].iter().product();
            let st = &b.state.stages[s];
            if st.nodes[st.leaves[k]].ann == Annotation::None && body <= MAX_UNROLLED_BODY {
                b.apply(Step::Annotate {
                    stage: s,
                    iter: k,
                    ann: Annotation::Unroll,
                })?;
            }
        }
        let step = *[0i64, 16, 64, 512]
            .choose(&mut self.rng)
            .expect("non-empty");
        if step > 0 {
            b.apply(Step::AutoUnroll {
                stage: s,
                iter: 0,
                max_step: step,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{self, PoolKind, Window};

    /// Every draw lowers: the sampler never needs to throw a schedule away.
    #[test]
    fn samples_are_valid_by_construction() {
        let target = Target::detect();
        let w = Window::square(3, 2, 1);
        let dags = [
            ops::matmul(33, 17, 9).unwrap(),
            ops::dense(8, 24, 20, true, true).unwrap(),
            ops::conv2d_nchw(1, 4, 9, 9, 6, w, true, true).unwrap(),
            ops::conv2d_nhwc(2, 9, 9, 4, 6, w, false, true).unwrap(),
            ops::depthwise_conv2d_nchw(1, 5, 10, 10, w, true, false).unwrap(),
            ops::depthwise_conv2d_nhwc(1, 10, 10, 21, w, true, true).unwrap(),
            ops::pool2d(PoolKind::Avg, 1, 3, 9, 9, w).unwrap(),
            ops::softmax(2, 6).unwrap(),
            ops::elementwise(2, 6).unwrap(),
            crate::text::parse("T[i,j] = A[i,j] * 2.0 where i<2, j<6\nS[i] += T[i,j] where i<2, j<6\nO[i] = sigmoid(S[i]) where i<2").unwrap(),
        ];
        for dag in &dags {
            for seed in 0..40 {
                let mut s = RandomSampler::new(dag, &target, seed);
                for _ in 0..5 {
                    let sched = s.sample();
                    assert!(lower(&sched.replay(dag).unwrap()).is_ok());
                }
                assert_eq!(s.rejected, 0, "seed {seed}: {:?}", s.last_rejection);
            }
        }
    }
}
