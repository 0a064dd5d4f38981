//! Random annotation: turns a [`Sketch`] into a complete schedule by drawing its numbers (tile
//! sizes, the order of the outer tile loops, compute locations, the parallel degree, the
//! auto-unroll step) and writing the steps that apply them.
//!
//! Every draw goes through a [`Decider`], which records it as a [`Decision`]. The same sketch
//! with the same decisions gives the same steps, so a mutation is a change of one decision and
//! a replay (MetaSchedule's trace-and-decisions idea): the split of a fused consumer and the
//! split of its producer come from one decision and always agree.
//!
//! Schedules are valid by construction for the shapes the rules admit; the caller still
//! lowers each one and counts the rare rejection with its reason.

use super::sketch::{Fusion, Sketch, StagePlan};
use crate::ir::ComputeDag;
use crate::lower::MAX_UNROLLED_STEPS;
use crate::schedule::{Annotation, Attach, Schedule, State, Step};
use rand::Rng;

/// Innermost tile factors stay at or below this (Ansor's `max_innermost_split_factor`).
pub const MAX_INNERMOST: i64 = 64;

/// The auto-unroll steps sampled on CPU. Ansor's are 0, 16, 64 and 512; ours stop at
/// [`MAX_UNROLLED_STEPS`] (what GCC compiles in reasonable time), so 512 would only repeat 64.
pub const AUTO_UNROLL_STEPS: [i64; 4] = [0, 16, 32, MAX_UNROLLED_STEPS];

/// Space axes are cut into this many tile levels (`SSRSRS` has four S), reduction axes into two.
const SPACE_LEVELS: usize = 4;
const REDUCE_LEVELS: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecisionKind {
    TileSize,
    AxisOrder,
    VectorAxis,
    ComputeLocation,
    Parallel,
    AutoUnroll,
}

/// One recorded draw.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Decision {
    /// A perfect factorization of an extent into tile lengths, outermost first.
    Tile(Vec<i64>),
    /// Option `index` of `n`.
    Pick {
        kind: DecisionKind,
        index: usize,
        n: usize,
    },
}

impl Decision {
    pub fn kind(&self) -> DecisionKind {
        match self {
            Decision::Tile(_) => DecisionKind::TileSize,
            Decision::Pick { kind, .. } => *kind,
        }
    }
}

/// Draws decisions, replaying recorded ones where they still fit.
pub struct Decider<'a, R: Rng> {
    rng: &'a mut R,
    replay: &'a [Decision],
    pos: usize,
    pub made: Vec<Decision>,
}

impl<'a, R: Rng> Decider<'a, R> {
    /// Fresh random decisions.
    pub fn sample(rng: &'a mut R) -> Self {
        Decider::replay(rng, &[])
    }

    /// Replays `decisions` in order; a decision that no longer fits is drawn afresh.
    pub fn replay(rng: &'a mut R, decisions: &'a [Decision]) -> Self {
        Decider {
            rng,
            replay: decisions,
            pos: 0,
            made: vec![],
        }
    }

    fn next_recorded(&mut self) -> Option<&'a Decision> {
        let d = self.replay.get(self.pos);
        self.pos += 1;
        d
    }

    /// Tile lengths for `extent` in `parts` levels, outermost first.
    pub fn tile(&mut self, extent: i64, parts: usize) -> Vec<i64> {
        let f = match self.next_recorded() {
            Some(Decision::Tile(f))
                if f.len() == parts
                    && f.iter().product::<i64>() == extent
                    && f[parts - 1] <= MAX_INNERMOST =>
            {
                f.clone()
            }
            _ => sample_factorization(self.rng, extent, parts, MAX_INNERMOST),
        };
        self.made.push(Decision::Tile(f.clone()));
        f
    }

    /// One of `n` options; `fresh` draws it when there is nothing to replay.
    pub fn pick(
        &mut self,
        kind: DecisionKind,
        n: usize,
        fresh: impl FnOnce(&mut R) -> usize,
    ) -> usize {
        let index = match self.next_recorded() {
            Some(&Decision::Pick { kind: k, index, .. }) if k == kind && index < n => index,
            _ => fresh(self.rng).min(n.saturating_sub(1)),
        };
        self.made.push(Decision::Pick { kind, index, n });
        index
    }
}

/// Prime factors with multiplicity, ascending.
pub fn prime_factors(mut n: i64) -> Vec<i64> {
    let mut out = vec![];
    let mut p = 2;
    while p * p <= n {
        while n % p == 0 {
            out.push(p);
            n /= p;
        }
        p += 1;
    }
    if n > 1 {
        out.push(n);
    }
    out
}

/// A factorization of `extent` into `parts` ordered factors, uniform over all of them (each
/// prime's exponent is spread by a uniform composition), redrawn while the innermost factor
/// exceeds `max_inner`.
pub fn sample_factorization<R: Rng>(
    rng: &mut R,
    extent: i64,
    parts: usize,
    max_inner: i64,
) -> Vec<i64> {
    let primes = prime_factors(extent.max(1));
    let mut groups: Vec<(i64, usize)> = vec![];
    for p in primes {
        match groups.last_mut() {
            Some((q, e)) if *q == p => *e += 1,
            _ => groups.push((p, 1)),
        }
    }
    let mut f = vec![1i64; parts];
    for _ in 0..32 {
        f = vec![1; parts];
        for &(p, e) in &groups {
            // A uniform composition of e into `parts` non-negative parts: choose parts - 1 bar
            // positions among e + parts - 1 slots.
            let slots = e + parts - 1;
            let mut bars: Vec<usize> = rand::seq::index::sample(rng, slots, parts - 1).into_vec();
            bars.sort_unstable();
            let mut prev = 0;
            for (k, &b) in bars.iter().chain(std::iter::once(&slots)).enumerate() {
                let count = b - prev;
                f[k] *= p.pow(count as u32);
                prev = b + 1;
            }
        }
        if f[parts - 1] <= max_inner {
            return f;
        }
    }
    // Move factors out of the innermost level until it fits.
    while f[parts - 1] > max_inner {
        let p = prime_factors(f[parts - 1])[0];
        f[parts - 1] /= p;
        f[0] *= p;
    }
    f
}

/// Moves factors of the outer levels of `f` (innermost first) into its innermost length until
/// that is a multiple of `lanes`, within [`MAX_INNERMOST`]; stops where the extent cannot give
/// more. A deterministic function of the drawn factorization, so replays agree.
fn whole_vectors(f: &mut [i64], lanes: i64) {
    let inner = f.len() - 1;
    let mut need = lanes.max(1);
    let mut have = f[inner];
    // The part of `lanes` the innermost length lacks.
    for p in prime_factors(lanes.max(1)) {
        if have % p == 0 {
            have /= p;
            need /= p;
        }
    }
    for p in prime_factors(need) {
        let Some(l) = (0..inner).rev().find(|&l| f[l] % p == 0) else {
            return;
        };
        if f[inner] * p > MAX_INNERMOST {
            return;
        }
        f[l] /= p;
        f[inner] *= p;
    }
}

/// What annotation needs of the target.
#[derive(Debug, Clone, Copy)]
pub struct AnnotateContext {
    pub cores: i64,
    pub vector_lanes: i64,
}

/// The steps under construction and the state they lead to.
struct Gen {
    state: State,
    steps: Vec<Step>,
    /// Current stage index of every stage of the original DAG (cache writes insert stages).
    cur: Vec<usize>,
}

impl Gen {
    fn apply(&mut self, step: Step) -> Result<(), String> {
        self.state
            .apply(&step)
            .map_err(|e| format!("{}: {e}", step.to_json()))?;
        self.steps.push(step);
        Ok(())
    }

    fn leaves(&self, t: usize) -> usize {
        self.state.stages[t].leaves.len()
    }

    fn ann(&self, t: usize, k: usize) -> Annotation {
        let st = &self.state.stages[t];
        st.nodes[st.leaves[k]].ann
    }

    /// The loops of `c` a producer may be computed in: not a vectorized loop, and not under an
    /// unrolled one, whose body would copy the producer's nest.
    fn attach_spots(&self, c: usize) -> Vec<usize> {
        (0..self.leaves(c))
            .take_while(|&k| self.ann(c, k) != Annotation::Unroll)
            .filter(|&k| self.ann(c, k) != Annotation::Vectorize)
            .collect()
    }

    /// Consumers of current stage `t` with loops (inlined readers looked through).
    fn consumers(&self, t: usize) -> Vec<usize> {
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

/// The orders the outer tile loops may take: identity first, then reversed and, for up to
/// three axes, every other permutation (e.g. matmul's j-panel-major order).
fn axis_orders(ns: usize) -> Vec<Vec<usize>> {
    let id: Vec<usize> = (0..ns).collect();
    let mut out = vec![id.clone()];
    if ns <= 1 {
        return out;
    }
    let mut rev = id.clone();
    rev.reverse();
    out.push(rev);
    if ns == 3 {
        for p in [[0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1]] {
            out.push(p.to_vec());
        }
    } else if ns >= 4 {
        let mut swap = id.clone();
        swap.swap(ns - 2, ns - 1);
        out.push(swap);
    }
    out
}

/// Ansor's parallel rule: fuse outer loops until the degree reaches `cores * 16`.
fn default_fuse_count(extents: &[i64], cores: i64) -> usize {
    let mut prod = 1;
    for (k, e) in extents.iter().enumerate() {
        prod *= e;
        if prod >= cores * 16 {
            return k + 1;
        }
    }
    extents.len()
}

/// Annotates `sketch` of `dag` into steps and the state they give.
pub fn annotate<R: Rng>(
    dag: &ComputeDag,
    sketch: &Sketch,
    ctx: &AnnotateContext,
    d: &mut Decider<R>,
) -> Result<(Schedule, State), String> {
    let mut g = Gen {
        state: State::new(dag),
        steps: vec![],
        cur: (0..dag.stages.len()).collect(),
    };
    let outputs = dag.outputs();
    for s in (0..dag.stages.len()).rev() {
        match &sketch.plans[s] {
            StagePlan::Placeholder | StagePlan::Unset | StagePlan::FusedConsumer { .. } => {}
            StagePlan::Inline => g.apply(Step::ComputeInline { stage: g.cur[s] })?,
            StagePlan::Tile(f) => tile(&mut g, dag, s, *f, ctx, d)?,
            StagePlan::Skip => skip(&mut g, dag, s, outputs.contains(&s), ctx, d)?,
            StagePlan::Rfactor => rfactor(&mut g, dag, s, outputs.contains(&s), ctx, d)?,
        }
    }
    Ok((Schedule::new(g.steps), g.state))
}

fn pick_unroll<R: Rng>(g: &mut Gen, t: usize, d: &mut Decider<R>) -> Result<(), String> {
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
fn vectorize(g: &mut Gen, t: usize, k: usize, extent: i64) -> Result<(), String> {
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

/// Fuses the first `k` loops of `t` and marks the result parallel (when it has work to share).
fn parallel(g: &mut Gen, t: usize, k: usize, extents: &[i64]) -> Result<(), String> {
    if k == 0 || extents[..k].iter().product::<i64>() < 2 {
        return Ok(());
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
    })
}

/// Splits axis loops `0..lens.len()` of `t` (one loop per axis, in axis order) into the given
/// inner lengths, last axis first so that earlier positions stay put.
fn split_axes(g: &mut Gen, t: usize, extents: &[i64], lens: &[Vec<i64>]) -> Result<(), String> {
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

fn tile<R: Rng>(
    g: &mut Gen,
    dag: &ComputeDag,
    s: usize,
    fusion: Fusion,
    ctx: &AnnotateContext,
    d: &mut Decider<R>,
) -> Result<(), String> {
    let stage = &dag.stages[s];
    let space: Vec<i64> = stage.space().iter().map(|a| a.extent).collect();
    let reduce: Vec<i64> = stage.reduce_axes().iter().map(|a| a.extent).collect();
    let (ns, nr) = (space.len(), reduce.len());
    let mut p: Vec<Vec<i64>> = space.iter().map(|&e| d.tile(e, SPACE_LEVELS)).collect();
    let r: Vec<Vec<i64>> = reduce.iter().map(|&e| d.tile(e, REDUCE_LEVELS)).collect();
    let orders = axis_orders(ns);
    let oi = d.pick(DecisionKind::AxisOrder, orders.len(), |rng| {
        rng.gen_range(0..orders.len())
    });
    let order0 = &orders[oi];
    // The axis innermost in the register tile, vectorized: the last one (Ansor's only choice)
    // or, half the time when the last axis cannot fill whole vectors, another axis of the
    // stage. A conv2d NCHW tile vectorized over output channels runs at full vector width
    // where its 56-wide rows fit only 8-lane vectors (measured on AVX-512: 150 against 119
    // GFLOP/s); lowering lays the local accumulator out in the tile's order so that it stays
    // contiguous. Where the last axis does fill vectors (matmul's columns) the others only
    // dilute the space with strided tiles.
    let mut options = vec![ns - 1];
    if space[ns - 1] % ctx.vector_lanes.max(1) != 0 {
        options.extend((0..ns - 1).filter(|&a| space[a] > 1));
    }
    let vi = d.pick(DecisionKind::VectorAxis, options.len(), |rng| {
        if options.len() == 1 || rng.gen_bool(0.5) {
            0
        } else {
            rng.gen_range(1..options.len())
        }
    });
    let va = options[vi];
    // The vectorized axis fills whole vectors where its factors allow: a partial vector
    // leaves lanes idle in every FMA of the tile (on 8-lane AVX2 a conv2d NCHW tile's
    // innermost 1, 2 or 4 columns of 56, five draws in eight, could not be register tiles), and
    // on another axis than the last it is a strided tile besides.
    whole_vectors(&mut p[va], ctx.vector_lanes);
    let inner_axes: Vec<usize> = (0..ns).filter(|&a| a != va).chain([va]).collect();

    let (t, consumer, level) = match fusion {
        Fusion::None => (g.cur[s], None, 0),
        Fusion::CacheWrite { level } => {
            let cs = g.cur[s];
            g.apply(Step::CacheWrite { stage: cs })?;
            for c in g.cur.iter_mut().skip(s) {
                *c += 1;
            }
            (cs, Some(cs + 1), level)
        }
        Fusion::Consumer { consumer, level } => (g.cur[s], Some(g.cur[consumer]), level),
    };

    let Some(c) = consumer else {
        // Plain SSRSRS at root: S0 S1 R0 S2 R1 S3.
        let mut lens: Vec<Vec<i64>> = p.iter().map(|f| f[1..].to_vec()).collect();
        lens.extend(r.iter().map(|f| f[1..].to_vec()));
        let all: Vec<i64> = space.iter().chain(&reduce).copied().collect();
        split_axes(g, t, &all, &lens)?;
        let sp = |a: usize, l: usize| a * SPACE_LEVELS + l;
        let rp = |b: usize, l: usize| ns * SPACE_LEVELS + b * REDUCE_LEVELS + l;
        let mut order: Vec<usize> = order0.iter().map(|&a| sp(a, 0)).collect();
        order.extend((0..ns).map(|a| sp(a, 1)));
        order.extend((0..nr).map(|b| rp(b, 0)));
        order.extend((0..ns).map(|a| sp(a, 2)));
        order.extend((0..nr).map(|b| rp(b, 1)));
        order.extend(inner_axes.iter().map(|&a| sp(a, 3)));
        g.apply(Step::Reorder { stage: t, order })?;
        let outer: Vec<i64> = order0
            .iter()
            .map(|&a| p[a][0])
            .chain((0..ns).map(|a| p[a][1]))
            .collect();
        let k = pick_parallel(d, &outer, ctx);
        parallel(g, t, k, &outer)?;
        let last = g.leaves(t) - 1;
        vectorize(g, t, last, p[va][3])?;
        return pick_unroll(g, t, d);
    };

    // The consumer's loops: level 0 and (for level 2) level 1 of each axis, then the rest.
    let parts = level + 1;
    let lens: Vec<Vec<i64>> = p
        .iter()
        .map(|f| {
            if level == 2 {
                vec![f[1], f[2] * f[3]]
            } else {
                vec![f[1] * f[2] * f[3]]
            }
        })
        .collect();
    split_axes(g, c, &space, &lens)?;
    let cp = |a: usize, l: usize| a * parts + l;
    let mut order: Vec<usize> = order0.iter().map(|&a| cp(a, 0)).collect();
    for l in 1..parts {
        order.extend((0..ns).map(|a| cp(a, l)));
    }
    g.apply(Step::Reorder { stage: c, order })?;
    // Parallel over outer tile loops, never past the loop the tiled stage is computed at.
    let outer: Vec<i64> = order0
        .iter()
        .map(|&a| p[a][0])
        .chain((0..ns).filter(|_| level == 2).map(|a| p[a][1]))
        .collect();
    let k = pick_parallel(d, &outer, ctx);
    parallel(g, c, k, &outer)?;
    let fused = if k > 1 && outer[..k].iter().product::<i64>() >= 2 {
        k - 1
    } else {
        0
    };
    let last = g.leaves(c) - 1;
    let rest_last = lens[ns - 1].last().copied().unwrap_or(1);
    vectorize(g, c, last, rest_last)?;
    g.apply(Step::ComputeAt {
        stage: t,
        target: c,
        target_iter: level * ns - 1 - fused,
    })?;

    // The tiled stage inside: (S1) R0 S2 R1 S3 over its region.
    let inner_lens: Vec<Vec<i64>> = p
        .iter()
        .map(|f| {
            if level == 2 {
                vec![f[3]]
            } else {
                vec![f[2], f[3]]
            }
        })
        .chain(r.iter().map(|f| vec![f[1]]))
        .collect();
    let region: Vec<i64> = p
        .iter()
        .map(|f| f[level..].iter().product())
        .chain(reduce.iter().copied())
        .collect();
    split_axes(g, t, &region, &inner_lens)?;
    let sl = SPACE_LEVELS - level; // space levels inside: 2 (level 2) or 3 (level 1)
    let sp = |a: usize, l: usize| a * sl + l;
    let rp = |b: usize, l: usize| ns * sl + b * REDUCE_LEVELS + l;
    let mut order = vec![];
    if level == 1 {
        order.extend((0..ns).map(|a| sp(a, 0)));
    }
    order.extend((0..nr).map(|b| rp(b, 0)));
    order.extend((0..ns).map(|a| sp(a, sl - 2)));
    order.extend((0..nr).map(|b| rp(b, 1)));
    order.extend(inner_axes.iter().map(|&a| sp(a, sl - 1)));
    g.apply(Step::Reorder { stage: t, order })?;
    let last = g.leaves(t) - 1;
    vectorize(g, t, last, p[va][3])?;
    pick_unroll(g, t, d)
}

fn pick_parallel<R: Rng>(d: &mut Decider<R>, outer: &[i64], ctx: &AnnotateContext) -> usize {
    if outer.is_empty() {
        return 0;
    }
    let default = default_fuse_count(outer, ctx.cores);
    1 + d.pick(DecisionKind::Parallel, outer.len(), |_| default - 1)
}

fn skip<R: Rng>(
    g: &mut Gen,
    dag: &ComputeDag,
    s: usize,
    is_output: bool,
    ctx: &AnnotateContext,
    d: &mut Decider<R>,
) -> Result<(), String> {
    let stage = &dag.stages[s];
    let t = g.cur[s];
    let space: Vec<i64> = stage.space().iter().map(|a| a.extent).collect();
    let reduction = stage.is_reduction();
    if !is_output {
        // Root, or inside one loop of the single consumer.
        let cons = g.consumers(t);
        let mut spots = vec![];
        if let [c] = cons[..] {
            spots.extend(g.attach_spots(c).into_iter().map(|k| (c, k)));
        }
        let i = d.pick(DecisionKind::ComputeLocation, spots.len() + 1, |r| {
            r.gen_range(0..=spots.len())
        });
        if i > 0 {
            let (c, k) = spots[i - 1];
            g.apply(Step::ComputeAt {
                stage: t,
                target: c,
                target_iter: k,
            })?;
            let n = g.leaves(t);
            if n > 0 {
                let e = *stage.axis_extents().last().unwrap_or(&1);
                vectorize(g, t, n - 1, e)?;
            }
            if reduction {
                pick_unroll(g, t, d)?;
            }
            return Ok(());
        }
    }
    let k = pick_parallel(d, &space, ctx);
    parallel(g, t, k, &space)?;
    let n = g.leaves(t);
    if n > 0 {
        let e = *stage.axis_extents().last().unwrap_or(&1);
        vectorize(g, t, n - 1, e)?;
    }
    if reduction {
        pick_unroll(g, t, d)?;
    }
    Ok(())
}

/// A one-axis reduction factored into partial results: the reduction axis splits into
/// `ko * factor + ki` (the factorization is a tile decision, so mutation moves factors between
/// the two), `<stage>.rf` reduces `ko` for each `ki` with `ki` innermost and vectorized, and the
/// stage combines the `factor` partials. A factor of 1 leaves the stage as [`skip`] does.
fn rfactor<R: Rng>(
    g: &mut Gen,
    dag: &ComputeDag,
    s: usize,
    is_output: bool,
    ctx: &AnnotateContext,
    d: &mut Decider<R>,
) -> Result<(), String> {
    let stage = &dag.stages[s];
    let ns = stage.space().len();
    let [k] = stage.reduce_axes() else {
        return Err(format!(
            "rfactor of {}: one reduction axis expected",
            stage.name
        ));
    };
    let f = d.tile(k.extent, 2);
    if f[1] < 2 {
        return skip(g, dag, s, is_output, ctx, d);
    }
    let rf = g.cur[s];
    g.apply(Step::Rfactor {
        stage: rf,
        axis: ns,
        factor: f[1],
    })?;
    for c in g.cur.iter_mut().skip(s) {
        *c += 1;
    }
    // The combination first (it is the partials' consumer), placed as any skipped stage.
    skip(g, dag, s, is_output, ctx, d)?;
    let comb = g.cur[s];
    // Partials: `space.. ki ko` becomes `space.. ko ki`.
    g.apply(Step::Reorder {
        stage: rf,
        order: (0..ns).chain([ns + 1, ns]).collect(),
    })?;
    // Root, or inside a space loop of the combination where a producer may go.
    let spots: Vec<usize> = g
        .attach_spots(comb)
        .into_iter()
        .filter(|&j| {
            let st = &g.state.stages[comb];
            st.nodes[st.leaves[j]].kind == crate::schedule::IterKind::Space
        })
        .collect();
    let i = d.pick(DecisionKind::ComputeLocation, spots.len() + 1, |r| {
        r.gen_range(0..=spots.len())
    });
    if i > 0 {
        g.apply(Step::ComputeAt {
            stage: rf,
            target: comb,
            target_iter: spots[i - 1],
        })?;
    } else {
        let space: Vec<i64> = stage.space().iter().map(|a| a.extent).collect();
        let p = pick_parallel(d, &space, ctx);
        parallel(g, rf, p, &space)?;
    }
    let n = g.leaves(rf);
    vectorize(g, rf, n - 1, f[1])?;
    pick_unroll(g, rf, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn factorizations_are_perfect_and_bounded() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for extent in [1, 2, 7, 12, 56, 64, 512, 1000, 1024, 97] {
            for _ in 0..50 {
                let f = sample_factorization(&mut rng, extent, 4, 64);
                assert_eq!(f.iter().product::<i64>(), extent, "{f:?}");
                assert!(f[3] <= 64, "{f:?}");
            }
        }
        // Uniform over factorizations: 512 = 2^9 into 4 parts has 220; a few hundred draws see
        // many distinct ones, and the innermost reaches 32 or more sometimes.
        let draws: std::collections::HashSet<Vec<i64>> = (0..400)
            .map(|_| sample_factorization(&mut rng, 512, 4, 64))
            .collect();
        assert!(draws.len() > 100, "{}", draws.len());
        assert!(draws.iter().any(|f| f[3] >= 32));
    }

    #[test]
    fn replay_of_own_decisions_gives_same_steps() {
        let dag = crate::ops::matmul(64, 48, 32).unwrap();
        let sketches = super::super::sketch::generate(&dag, &super::super::sketch::cpu_rules());
        let ctx = AnnotateContext {
            cores: 2,
            vector_lanes: 16,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for sk in &sketches {
            for _ in 0..20 {
                let mut d = Decider::sample(&mut rng);
                let (sched, _) = annotate(&dag, sk, &ctx, &mut d).unwrap();
                let made = d.made;
                let mut rng2 = ChaCha8Rng::seed_from_u64(99);
                let mut d2 = Decider::replay(&mut rng2, &made);
                let (again, _) = annotate(&dag, sk, &ctx, &mut d2).unwrap();
                assert_eq!(sched, again);
                assert_eq!(made, d2.made);
            }
        }
    }

    use crate::lower::{LoopKind, Stmt, Var};

    /// Calls `f` with every loop under `stmts` (variable, extent, kind, body), outermost first:
    /// the tests below read the lowered nest through it.
    fn for_each_loop<F: FnMut(Var, i64, LoopKind, &[Stmt])>(stmts: &[Stmt], f: &mut F) {
        for s in stmts {
            match s {
                Stmt::For {
                    var,
                    extent,
                    kind,
                    body,
                } => {
                    f(*var, *extent, *kind, body);
                    for_each_loop(body, f);
                }
                Stmt::Alloc { body, .. } | Stmt::Guard { body, .. } => for_each_loop(body, f),
                Stmt::Let { .. } | Stmt::Store { .. } => {}
            }
        }
    }

    fn vectorized_extents(stmts: &[Stmt]) -> Vec<i64> {
        let mut out = vec![];
        for_each_loop(stmts, &mut |_, extent, kind, _| {
            if kind == LoopKind::Vectorized {
                out.push(extent);
            }
        });
        out
    }

    /// An untiled stage streams its rows vectorized whatever their length: in an elementwise
    /// chain over rows of 1040 (more than 64 vectors of 8 or 16 lanes), every space loop over a
    /// whole row (a stage not fused into its parallel loop) is vectorized.
    #[test]
    fn long_untiled_rows_are_vectorized() {
        // Whether a store under `stmts` is indexed by `v` (a space loop of its stage).
        fn indexes(stmts: &[Stmt], v: Var) -> bool {
            stmts.iter().any(|s| match s {
                Stmt::For { body, .. } | Stmt::Alloc { body, .. } | Stmt::Guard { body, .. } => {
                    indexes(body, v)
                }
                Stmt::Store { index, .. } => {
                    let mut vs = vec![];
                    index.vars(&mut vs);
                    vs.contains(&v)
                }
                Stmt::Let { .. } => false,
            })
        }
        let dag = crate::ops::elementwise(128, 1040).unwrap();
        let sketches = super::super::sketch::generate(&dag, &super::super::sketch::cpu_rules());
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut rows = 0;
        for lanes in [8, 16] {
            let ctx = AnnotateContext {
                cores: 2,
                vector_lanes: lanes,
            };
            for sk in &sketches {
                for _ in 0..10 {
                    let mut d = Decider::sample(&mut rng);
                    let (sched, state) = annotate(&dag, sk, &ctx, &mut d).unwrap();
                    // The kinds of the space loops over whole rows.
                    let mut kinds = vec![];
                    let body = crate::lower::lower(&state).unwrap().body;
                    for_each_loop(&body, &mut |var, extent, kind, body| {
                        if extent == 1040 && indexes(body, var) {
                            kinds.push(kind);
                        }
                    });
                    rows += kinds.len();
                    assert!(
                        kinds.iter().all(|k| *k == LoopKind::Vectorized),
                        "{kinds:?}: {}",
                        sched.to_json()
                    );
                }
            }
        }
        assert!(rows > 0, "no whole-row loop in any sketch");
    }

    #[test]
    fn whole_vectors_moves_factors_inward() {
        let mut f = vec![1, 4, 2, 8];
        whole_vectors(&mut f, 16);
        assert_eq!(f, vec![1, 4, 1, 16]);
        let mut f = vec![2, 1, 1, 3];
        whole_vectors(&mut f, 16);
        assert_eq!(f, vec![1, 1, 1, 6], "takes what the extent has");
        let mut f = vec![1, 2, 1, 48];
        whole_vectors(&mut f, 16);
        assert_eq!(f, vec![1, 2, 1, 48], "already whole");
        let mut f = vec![8, 1, 1, 56];
        whole_vectors(&mut f, 16);
        assert_eq!(f, vec![8, 1, 1, 56], "would exceed the innermost limit");
    }

    /// The vectorized axis of a tile fills whole vectors wherever its extent has the factors:
    /// conv2d's 56-wide rows on 8 lanes (8 or 56 columns innermost, never 1, 2 or 4).
    #[test]
    fn the_vector_axis_fills_whole_vectors() {
        let ctx = AnnotateContext {
            cores: 2,
            vector_lanes: 8,
        };
        let win = crate::ops::Window {
            kh: 3,
            kw: 3,
            stride: 1,
            pad: 1,
            dilation: 1,
        };
        let conv = crate::ops::conv2d_nchw(1, 16, 56, 56, 16, win, false, false).unwrap();
        let sketches = super::super::sketch::generate(&conv, &super::super::sketch::cpu_rules());
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let mut loops = 0;
        for sk in &sketches {
            for _ in 0..20 {
                let mut d = Decider::sample(&mut rng);
                let (sched, state) = annotate(&conv, sk, &ctx, &mut d).unwrap();
                // The multi-level tiled stage (the conv or its local accumulator).
                let Some(t) = state.stages.iter().position(|s| s.leaves.len() > 8) else {
                    continue;
                };
                // Extents of the vectorized loops of stage `t`.
                let mut ext = vec![];
                let body = crate::lower::lower(&state).unwrap().body;
                for_each_loop(&body, &mut |var, extent, kind, _| {
                    if kind == LoopKind::Vectorized
                        && matches!(var, Var::Loop { stage, .. } if stage == t)
                    {
                        ext.push(extent);
                    }
                });
                loops += ext.len();
                assert!(
                    ext.iter().all(|e| e % 8 == 0),
                    "{ext:?}: {}",
                    sched.to_json()
                );
            }
        }
        assert!(loops > 0);
    }

    /// The register tile's vectorized axis is a choice only where the last axis does not
    /// fill whole vectors: matmul's 64 columns are always the vector axis; conv2d's 56-wide
    /// rows leave the output channels (or rows) to vectorize in some draws, and then the
    /// vectorized loop of the tiled stage walks that axis.
    #[test]
    fn vector_axis_is_offered_only_where_the_last_axis_leaves_partial_vectors() {
        let ctx = AnnotateContext {
            cores: 2,
            vector_lanes: 16,
        };
        let vector_picks = |dag: &ComputeDag| {
            let sketches = super::super::sketch::generate(dag, &super::super::sketch::cpu_rules());
            let mut rng = ChaCha8Rng::seed_from_u64(5);
            let mut out = vec![];
            for sk in &sketches {
                for _ in 0..40 {
                    let mut d = Decider::sample(&mut rng);
                    let (_, state) = annotate(dag, sk, &ctx, &mut d).unwrap();
                    for m in d.made {
                        if let Decision::Pick {
                            kind: DecisionKind::VectorAxis,
                            index,
                            n,
                        } = m
                        {
                            out.push((index, n, state.clone()));
                        }
                    }
                }
            }
            out
        };
        let mm = vector_picks(&crate::ops::matmul(64, 64, 64).unwrap());
        assert!(!mm.is_empty());
        assert!(mm.iter().all(|(i, n, _)| (*i, *n) == (0, 1)));

        let win = crate::ops::Window {
            kh: 3,
            kw: 3,
            stride: 1,
            pad: 1,
            dilation: 1,
        };
        let conv = crate::ops::conv2d_nchw(1, 8, 14, 14, 32, win, false, false).unwrap();
        let picks = vector_picks(&conv);
        // Options: x (the last), then the channels and the rows (the batch of 1 is no option).
        assert!(picks.iter().all(|(_, n, _)| *n == 3));
        let others = picks.iter().filter(|(i, _, _)| *i > 0).count();
        assert!(
            others > picks.len() / 4 && others < picks.len() * 3 / 4,
            "{others}"
        );
        // A channel pick vectorizes whole vectors of channels (32 filters, 16 lanes).
        for (_, _, st) in picks.iter().filter(|(i, _, _)| *i == 1) {
            let f = crate::lower::lower(st).unwrap();
            let vec_loops = vectorized_extents(&f.body);
            assert!(!vec_loops.is_empty());
            assert!(vec_loops.iter().any(|e| e % 16 == 0), "{vec_loops:?}");
        }
        // A channel pick puts a channel loop innermost in the tiled stage.
        let (_, _, st) = picks.iter().find(|(i, _, _)| *i == 1).unwrap();
        let tiled = st
            .stages
            .iter()
            .find(|s| s.leaves.len() > 8)
            .expect("a multi-level tiled stage");
        let inner = &tiled.nodes[*tiled.leaves.last().unwrap()];
        assert!(inner.name.starts_with('j'), "{}", inner.name);
    }
}
