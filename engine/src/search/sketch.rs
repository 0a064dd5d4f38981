//! Sketches: the structure of a schedule (which stages are inlined, which are tiled, with
//! which fusion), without its numbers. Annotation ([`super::annotate`]) fills in the numbers.
//!
//! As in Ansor, stages are visited from the output backwards and an ordered list of rules is
//! tried on each; a rule may branch (several sketches) and may stop the rules after it. The
//! rules are values behind [`SketchRule`], so a target can bring its own list and a user can
//! add one; [`cpu_rules`] is Ansor's CPU order.

use crate::ir::{ComputeDag, Expr};

/// What a sketch does with one stage of the DAG (indices are the DAG's, before cache writes).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StagePlan {
    /// An input: nothing to schedule.
    Placeholder,
    /// Not decided yet (only while sketches are generated).
    Unset,
    /// Inlined into its consumers.
    Inline,
    /// Multi-level `SSRSRS` tiling, optionally fused with a consumer.
    Tile(Fusion),
    /// Tiled along with its producer (the `Tile(Fusion::Consumer)` stage that names it).
    FusedConsumer { producer: usize },
    /// No structural change: annotation picks its compute location, parallel, vectorize and
    /// unroll.
    Skip,
    /// The reduction is factored (`rfactor`) into vector partial results and their
    /// combination; annotation picks the factor and places both stages.
    Rfactor,
    /// A window reduction (pooling) as register tiles of output rows: the window loops outside
    /// a few rows by a vector of columns, the outer rows and channels parallel (see
    /// [`SketchContext::is_window_reduction`]); annotation picks the tile.
    RowTile,
    /// The same row tile computed at the column-tile loop of its single elementwise consumer
    /// (an average pool's division), which is tiled alike and planned `FusedConsumer`.
    RowTileFused { consumer: usize },
}

/// How a tiled stage shares loops with the stage after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fusion {
    /// Tiled at root on its own.
    None,
    /// Computed into a local accumulator (cache_write) that is computed at `level` (1 or 2)
    /// of the copy-out's tile loops.
    CacheWrite { level: usize },
    /// Computed at `level` (1 or 2) of the tile loops of its single elementwise consumer.
    Consumer { consumer: usize, level: usize },
}

/// One plan per DAG stage.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sketch {
    pub plans: Vec<StagePlan>,
}

impl Sketch {
    /// A one-line summary for logs and tests, e.g. `C:tile+cw@2`.
    pub fn describe(&self, dag: &ComputeDag) -> String {
        let mut parts = vec![];
        for (s, p) in self.plans.iter().enumerate() {
            let name = &dag.stages[s].name;
            let what = match p {
                StagePlan::Placeholder | StagePlan::Unset => continue,
                StagePlan::Inline => "inline".to_string(),
                StagePlan::Tile(Fusion::None) => "tile".to_string(),
                StagePlan::Tile(Fusion::CacheWrite { level }) => format!("tile+cw@{level}"),
                StagePlan::Tile(Fusion::Consumer { consumer, level }) => {
                    format!("tile+fuse({})@{level}", dag.stages[*consumer].name)
                }
                StagePlan::FusedConsumer { .. } => "fused".to_string(),
                StagePlan::Skip => "skip".to_string(),
                StagePlan::Rfactor => "rfactor".to_string(),
                StagePlan::RowTile => "rowtile".to_string(),
                StagePlan::RowTileFused { consumer } => {
                    format!("rowtile+fuse({})", dag.stages[*consumer].name)
                }
            };
            parts.push(format!("{name}:{what}"));
        }
        parts.join(" ")
    }
}

/// What a rule does with a stage of a partial sketch.
pub enum RuleOutcome {
    /// The rule does not apply; the next one is tried.
    Pass,
    /// These sketches continue, and so does the next rule on the unchanged sketch.
    Apply(Vec<Sketch>),
    /// These sketches continue; no later rule is tried.
    ApplyAndSkipRest(Vec<Sketch>),
}

/// Facts about the DAG that rules share.
pub struct SketchContext<'a> {
    pub dag: &'a ComputeDag,
    pub consumers: Vec<Vec<usize>>,
    pub outputs: Vec<usize>,
}

impl<'a> SketchContext<'a> {
    pub fn new(dag: &'a ComputeDag) -> Self {
        SketchContext {
            dag,
            consumers: dag.consumers(),
            outputs: dag.outputs(),
        }
    }

    /// Whether the stage has data reuse worth multi-level tiling: a reduction some input of
    /// which does not vary along a space axis longer than 1 (matmul's A along j, a conv's
    /// filter along y and x). Ansor's NeedsMultiLevelTiling, on the DAG.
    pub fn needs_tiling(&self, s: usize) -> bool {
        let stage = &self.dag.stages[s];
        if !stage.is_reduction() {
            return false;
        }
        let space = stage.space();
        let mut reuse = false;
        if let Some(body) = stage.body() {
            body.visit_loads(&mut |_, idx| {
                for (a, ax) in space.iter().enumerate() {
                    if ax.extent > 1 && idx.iter().all(|e| e.coef(a) == 0) {
                        reuse = true;
                    }
                }
            });
        }
        reuse
    }

    /// Whether the one-axis reduction `s` streams an operand: some input is read at a
    /// different element at every point of the space (it varies along every space axis longer
    /// than 1: a matrix-vector product's matrix), with the reduction axis as its contiguous
    /// last index. Tiling cannot reuse that operand, and vectorizing a space axis reads it with
    /// a stride (a gather per lane); factoring the reduction reads it in vector loads, each
    /// element once.
    pub fn streams_along_reduction(&self, s: usize) -> bool {
        let stage = &self.dag.stages[s];
        let [_] = stage.reduce_axes() else {
            return false;
        };
        let space = stage.space();
        let k = space.len();
        let mut streams = false;
        if let Some(body) = stage.body() {
            body.visit_loads(&mut |_, idx| {
                let Some((last, rest)) = idx.split_last() else {
                    return;
                };
                let contiguous = last.coef(k) == 1 && rest.iter().all(|e| e.coef(k) == 0);
                let no_reuse = space
                    .iter()
                    .enumerate()
                    .all(|(a, ax)| ax.extent == 1 || idx.iter().any(|e| e.coef(a) != 0));
                streams |= contiguous && no_reuse;
            });
        }
        streams
    }

    /// Whether `s` is a window reduction (a pooling): a reduction without reuse to tile for,
    /// over a short window (at most [`WINDOW_MAX`] points), with at least two space axes, every
    /// input read along the last space axis at a step of 1 or 2 in its own last index only (or
    /// not at all). Its output row's columns then make vectors of contiguous or stride-2 loads,
    /// the window loops can go outside them, and a few rows of running results stay in
    /// registers; vectorizing any other axis reads the input with a stride of a row or more.
    pub fn is_window_reduction(&self, s: usize) -> bool {
        let stage = &self.dag.stages[s];
        let ns = stage.space().len();
        let window: i64 = stage.reduce_axes().iter().map(|a| a.extent).product();
        if !stage.is_reduction() || self.needs_tiling(s) || ns < 2 || window > WINDOW_MAX {
            return false;
        }
        let x = ns - 1;
        let (mut ok, mut lane) = (true, false);
        if let Some(body) = stage.body() {
            body.visit_loads(&mut |_, idx| {
                let Some((last, rest)) = idx.split_last() else {
                    return;
                };
                ok &= rest.iter().all(|e| e.coef(x) == 0) && matches!(last.coef(x), 0..=2);
                lane |= last.coef(x) != 0;
            });
        }
        ok && lane
    }

    /// The consumers of `s` once inlined stages are looked through, under `sketch`'s plans.
    pub fn effective_consumers(&self, sketch: &Sketch, s: usize) -> Vec<usize> {
        let mut out = vec![];
        for &c in &self.consumers[s] {
            if sketch.plans[c] == StagePlan::Inline {
                for cc in self.effective_consumers(sketch, c) {
                    if !out.contains(&cc) {
                        out.push(cc);
                    }
                }
            } else if !out.contains(&c) {
                out.push(c);
            }
        }
        out
    }

    /// Whether every read of `s` by `c` is `s[i0, i1, ...]` with `c`'s own space axes, and `c`
    /// is an elementwise stage of the same shape.
    fn reads_elementwise(&self, s: usize, c: usize) -> bool {
        let (st, ct) = (&self.dag.stages[s], &self.dag.stages[c]);
        if ct.is_reduction() || ct.space().len() != st.space().len() {
            return false;
        }
        if ct
            .space()
            .iter()
            .zip(st.space())
            .any(|(a, b)| a.extent != b.extent)
        {
            return false;
        }
        let mut ok = true;
        if let Some(body) = ct.body() {
            visit_loads_of(body, s, &mut |idx| {
                let identity = idx.len() == st.space().len()
                    && idx
                        .iter()
                        .enumerate()
                        .all(|(k, e)| e.offset == 0 && e.terms.len() == 1 && e.terms[0] == (k, 1));
                ok &= identity;
            });
        }
        ok
    }

    /// Ansor's "single elementwise matched consumer": the one effective consumer of `s`, when
    /// it and every inlined stage on the way read `s` elementwise and it is not yet planned.
    pub fn fusible_consumer(&self, sketch: &Sketch, s: usize) -> Option<usize> {
        let eff = self.effective_consumers(sketch, s);
        let [c] = eff[..] else { return None };
        if sketch.plans[c] != StagePlan::Skip {
            return None;
        }
        // Walk the inline chain from s to c: each hop must be elementwise.
        let mut frontier = vec![s];
        while let Some(x) = frontier.pop() {
            for &y in &self.consumers[x] {
                if !self.reads_elementwise(x, y) {
                    return None;
                }
                if y != c {
                    frontier.push(y);
                }
            }
        }
        Some(c)
    }
}

fn visit_loads_of(e: &Expr, tensor: usize, f: &mut impl FnMut(&[crate::ir::Affine])) {
    e.visit_loads(&mut |t, idx| {
        if t == tensor {
            f(idx)
        }
    });
}

/// A sketch generation rule.
pub trait SketchRule: Send + Sync {
    fn name(&self) -> &'static str;
    /// Decides stage `s` of `sketch` (every later stage is decided already).
    fn apply(&self, ctx: &SketchContext, sketch: &Sketch, s: usize) -> RuleOutcome;
}

fn with_plan(sketch: &Sketch, s: usize, plan: StagePlan) -> Sketch {
    let mut out = sketch.clone();
    out.plans[s] = plan;
    out
}

/// Inlines cheap producers: not an output, not a reduction (padding, bias, activations).
/// Padding and stages with transcendental ops also keep a branch where they are materialized.
///
/// Padding also keeps a branch where it is materialized (left to annotation, which computes it
/// at the root or inside a loop of its consumer): inlined, it puts a bounds test on every load
/// of the innermost loop, which GCC does not vectorize well. Measured on one conv2d 3x3 tile:
/// 13.9 GFLOP/s inlined, 44.4 materialized at the root.
pub struct AlwaysInline;

/// `select(in range, src[...], constant)`: a padding stage.
fn is_padding(stage: &crate::ir::Stage) -> bool {
    use crate::ir::{Expr, StageKind};
    match &stage.kind {
        StageKind::Compute {
            reduce: None,
            body: Expr::Select(_, a, b),
            ..
        } => matches!((&**a, &**b), (Expr::Load(..), Expr::Const(_))),
        _ => false,
    }
}

/// Whether `e` calls a transcendental function (a libm call per element, unless vectorized).
fn has_expensive_op(e: &Expr) -> bool {
    use crate::ir::UnaryOp;
    e.any_unary(&|op| {
        matches!(
            op,
            UnaryOp::Exp | UnaryOp::Log | UnaryOp::Tanh | UnaryOp::Sigmoid | UnaryOp::Erf
        )
    })
}

impl SketchRule for AlwaysInline {
    fn name(&self) -> &'static str {
        "always-inline"
    }
    fn apply(&self, ctx: &SketchContext, sketch: &Sketch, s: usize) -> RuleOutcome {
        let stage = &ctx.dag.stages[s];
        if stage.is_reduction() || ctx.outputs.contains(&s) {
            return RuleOutcome::Pass;
        }
        // A Winograd transform: inlined into the product that reads it, every output channel
        // would compute it again; inlined into an elementwise reader (an output transform into
        // its epilogue), that reader unrolls its selectors (`annotate::selectors`).
        if !super::annotate::selector_axes(stage).is_empty() {
            let skip = with_plan(sketch, s, StagePlan::Skip);
            if ctx.consumers[s]
                .iter()
                .any(|&c| ctx.dag.stages[c].is_reduction())
            {
                return RuleOutcome::ApplyAndSkipRest(vec![skip]);
            }
            let inline = with_plan(sketch, s, StagePlan::Inline);
            return RuleOutcome::ApplyAndSkipRest(vec![inline, skip]);
        }
        let mut out = vec![with_plan(sketch, s, StagePlan::Inline)];
        // Ansor inlines only "strictly inlineable" stages, without expensive ops: inlined into
        // two readers (softmax's exp, read by the row sum and the division), the exp runs twice.
        // Measured on softmax 128x1000: the best inlined kernel 0.8 GFLOP/s, the best random
        // schedule, with exp materialized, 1.3.
        if is_padding(stage) || stage.body().is_some_and(has_expensive_op) {
            out.push(with_plan(sketch, s, StagePlan::Skip));
        }
        RuleOutcome::ApplyAndSkipRest(out)
    }
}

/// A local accumulator for a tiled stage with no consumer to fuse with; computed at level 1 or
/// 2 of the copy-out's tiles.
///
/// Unlike Ansor, the sketch without it does not continue: plain tiling accumulates into the
/// global output, which GCC (our backend) keeps in memory across the reduction loop where LLVM
/// promotes it to registers. Measured on matmul 512 (200 trials each, one machine): the
/// plain sketch topped out at 96 GFLOP/s and, once the model learned that it beats the
/// median local-accumulator candidate, drew the population away from the sketch that reached
/// 185.
pub struct AddCacheWrite;

impl SketchRule for AddCacheWrite {
    fn name(&self) -> &'static str {
        "add-cache-write"
    }
    fn apply(&self, ctx: &SketchContext, sketch: &Sketch, s: usize) -> RuleOutcome {
        if !ctx.needs_tiling(s) || ctx.fusible_consumer(sketch, s).is_some() {
            return RuleOutcome::Pass;
        }
        RuleOutcome::ApplyAndSkipRest(
            [1, 2]
                .iter()
                .map(|&level| with_plan(sketch, s, StagePlan::Tile(Fusion::CacheWrite { level })))
                .collect(),
        )
    }
}

/// Tiling with the single elementwise consumer (bias, relu) fused at level 1 or 2.
pub struct MultiLevelTilingWithFusion;

impl SketchRule for MultiLevelTilingWithFusion {
    fn name(&self) -> &'static str {
        "multi-level-tiling-with-fusion"
    }
    fn apply(&self, ctx: &SketchContext, sketch: &Sketch, s: usize) -> RuleOutcome {
        if !ctx.needs_tiling(s) {
            return RuleOutcome::Pass;
        }
        let Some(c) = ctx.fusible_consumer(sketch, s) else {
            return RuleOutcome::Pass;
        };
        RuleOutcome::ApplyAndSkipRest(
            [1, 2]
                .iter()
                .map(|&level| {
                    let mut k = with_plan(
                        sketch,
                        s,
                        StagePlan::Tile(Fusion::Consumer { consumer: c, level }),
                    );
                    k.plans[c] = StagePlan::FusedConsumer { producer: s };
                    k
                })
                .collect(),
        )
    }
}

/// Plain `SSRSRS` tiling at root.
pub struct MultiLevelTiling;

impl SketchRule for MultiLevelTiling {
    fn name(&self) -> &'static str {
        "multi-level-tiling"
    }
    fn apply(&self, ctx: &SketchContext, sketch: &Sketch, s: usize) -> RuleOutcome {
        if !ctx.needs_tiling(s) {
            return RuleOutcome::Pass;
        }
        RuleOutcome::ApplyAndSkipRest(vec![with_plan(sketch, s, StagePlan::Tile(Fusion::None))])
    }
}

/// Factors a long reduction without tiling reuse (softmax's row max and sum, a norm) into
/// partial results along a vectorizable axis. Without it such a reduction is a scalar loop:
/// GCC does not reorder a float sum to vectorize it. The sketch without rfactor continues too
/// (short rows may not pay for the second pass).
///
/// Ansor fuses all reduction axes first and rfactors stages whose reduction is longer than
/// the core count; ours takes one-axis reductions of at least [`RFACTOR_MIN_EXTENT`], and
/// also tiled ones that stream an operand along the reduction (a matrix-vector product, see
/// [`SketchContext::streams_along_reduction`]): their tiled sketches continue beside it.
pub struct AddRfactor;

/// The shortest reduction [`AddRfactor`] factors: two 8-lane vectors.
pub const RFACTOR_MIN_EXTENT: i64 = 16;

impl SketchRule for AddRfactor {
    fn name(&self) -> &'static str {
        "add-rfactor"
    }
    fn apply(&self, ctx: &SketchContext, sketch: &Sketch, s: usize) -> RuleOutcome {
        let stage = &ctx.dag.stages[s];
        match stage.reduce_axes() {
            [k] if stage.is_reduction()
                && (!ctx.needs_tiling(s) || ctx.streams_along_reduction(s))
                && k.extent >= RFACTOR_MIN_EXTENT =>
            {
                RuleOutcome::Apply(vec![with_plan(sketch, s, StagePlan::Rfactor)])
            }
            _ => RuleOutcome::Pass,
        }
    }
}

/// The longest window [`WindowRowTile`] takes: longer reductions are rfactor's.
pub const WINDOW_MAX: i64 = 64;

/// A window reduction (pooling) as register tiles of output rows, instead of the plain loops
/// of [`SkipStage`] (see [`SketchContext::is_window_reduction`]). The plain sketch does not
/// continue: its window loops sit inside the columns, so GCC's vectorizer gathers a strided
/// row lane by lane, and its search budget is better spent on the row tiles' sizes.
///
/// With a single elementwise consumer (an average pool's division) the tile is also offered
/// computed inside the consumer's tile loops ([`StagePlan::RowTileFused`]): at root, the
/// division is a second parallel pass over the whole map, and on a small map its fork and join
/// cost as much as the pooling (avg_pool 144x14x14, 3x3 stride 2, on one Zen 4: the tuned
/// root form 11.1-11.4 us, the tuned fused form 4.6-5.0 in the same run; 0.48x Ansor before,
/// 0.94x after). The root form continues beside it: on a large map a stage of its own may take
/// a different parallel split.
pub struct WindowRowTile;

impl SketchRule for WindowRowTile {
    fn name(&self) -> &'static str {
        "window-row-tile"
    }
    fn apply(&self, ctx: &SketchContext, sketch: &Sketch, s: usize) -> RuleOutcome {
        if !ctx.is_window_reduction(s) {
            return RuleOutcome::Pass;
        }
        let mut out = vec![with_plan(sketch, s, StagePlan::RowTile)];
        if let Some(c) = ctx.fusible_consumer(sketch, s) {
            let mut k = with_plan(sketch, s, StagePlan::RowTileFused { consumer: c });
            k.plans[c] = StagePlan::FusedConsumer { producer: s };
            out.push(k);
        }
        RuleOutcome::ApplyAndSkipRest(out)
    }
}

/// Leaves the stage to annotation. Always applies, so it ends every list.
pub struct SkipStage;

impl SketchRule for SkipStage {
    fn name(&self) -> &'static str {
        "skip"
    }
    fn apply(&self, _ctx: &SketchContext, sketch: &Sketch, s: usize) -> RuleOutcome {
        RuleOutcome::ApplyAndSkipRest(vec![with_plan(sketch, s, StagePlan::Skip)])
    }
}

/// Ansor's CPU rules, in its order.
pub fn cpu_rules() -> Vec<Box<dyn SketchRule>> {
    vec![
        Box::new(AlwaysInline),
        Box::new(AddRfactor),
        Box::new(AddCacheWrite),
        Box::new(MultiLevelTilingWithFusion),
        Box::new(MultiLevelTiling),
        Box::new(WindowRowTile),
        Box::new(SkipStage),
    ]
}

/// All sketches of `dag` under `rules`, deduplicated, in generation order.
pub fn generate(dag: &ComputeDag, rules: &[Box<dyn SketchRule>]) -> Vec<Sketch> {
    let ctx = SketchContext::new(dag);
    let start = Sketch {
        plans: dag
            .stages
            .iter()
            .map(|st| {
                if st.is_placeholder() {
                    StagePlan::Placeholder
                } else {
                    StagePlan::Unset
                }
            })
            .collect(),
    };
    let mut current = vec![start];
    for s in (0..dag.stages.len()).rev() {
        let mut next: Vec<Sketch> = vec![];
        for sk in current {
            // A consumer already tiled with its producer, or an input: nothing to decide.
            if sk.plans[s] != StagePlan::Unset {
                next.push(sk);
                continue;
            }
            for rule in rules {
                match rule.apply(&ctx, &sk, s) {
                    RuleOutcome::Pass => {}
                    RuleOutcome::Apply(v) => next.extend(v),
                    RuleOutcome::ApplyAndSkipRest(v) => {
                        next.extend(v);
                        break;
                    }
                }
            }
        }
        let mut seen = std::collections::HashSet::new();
        next.retain(|k| seen.insert(k.clone()));
        current = next;
    }
    current
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{self, PoolKind, Window};

    fn describe_all(dag: &ComputeDag) -> Vec<String> {
        generate(dag, &cpu_rules())
            .iter()
            .map(|k| k.describe(dag))
            .collect()
    }

    #[test]
    fn matmul_gets_cache_write_at_both_levels() {
        let dag = ops::matmul(64, 64, 64).unwrap();
        let d = describe_all(&dag);
        assert_eq!(d, vec!["C:tile+cw@1", "C:tile+cw@2"], "{d:?}");
    }

    #[test]
    fn conv_bias_relu_fuses_the_epilogue_and_inlines_padding() {
        let w = Window::square(3, 1, 1);
        let dag = ops::conv2d_nchw(1, 8, 10, 10, 16, w, true, true).unwrap();
        let sketches = generate(&dag, &cpu_rules());
        // Fusion at level 1 or 2, each with the padding inlined or materialized.
        assert_eq!(sketches.len(), 4, "{:?}", describe_all(&dag));
        let pad = dag
            .stages
            .iter()
            .position(|s| s.name.contains("pad"))
            .expect("a padding stage");
        let inlined = sketches
            .iter()
            .filter(|k| k.plans[pad] == StagePlan::Inline)
            .count();
        assert_eq!(inlined, 2, "{:?}", describe_all(&dag));
        // Bias and relu are elementwise: always inlined, never materialized.
        for k in &sketches {
            for (i, st) in dag.stages.iter().enumerate() {
                if i != pad && !st.is_placeholder() && !st.is_reduction() {
                    assert!(
                        !matches!(k.plans[i], StagePlan::Skip),
                        "{}",
                        k.describe(&dag)
                    );
                }
            }
            assert!(
                matches!(k.plans[pad], StagePlan::Inline | StagePlan::Skip),
                "{}",
                k.describe(&dag)
            );
            let tiled: Vec<_> = k
                .plans
                .iter()
                .filter(|p| matches!(p, StagePlan::Tile(Fusion::Consumer { .. })))
                .collect();
            assert_eq!(tiled.len(), 1, "{}", k.describe(&dag));
            let out = *dag.outputs().first().unwrap();
            assert!(matches!(k.plans[out], StagePlan::FusedConsumer { .. }));
        }
    }

    #[test]
    fn plain_conv_gets_cache_write() {
        let w = Window::square(3, 1, 1);
        let dag = ops::conv2d_nchw(1, 8, 10, 10, 16, w, false, false).unwrap();
        let d = describe_all(&dag);
        // Cache write at level 1 or 2, each with the padding inlined or materialized.
        assert_eq!(d.len(), 4, "{d:?}");
        assert!(d.iter().all(|x| x.contains("tile+cw@")), "{d:?}");
    }

    #[test]
    fn softmax_and_pool_have_no_tiling() {
        // Rows of 10: too short for rfactor; exp inlined or (an expensive op) materialized.
        let dag = ops::softmax(4, 10).unwrap();
        let d = describe_all(&dag);
        assert_eq!(
            d,
            vec![
                "row_max:skip exp:inline row_sum:skip softmax:skip",
                "row_max:skip exp:skip row_sum:skip softmax:skip"
            ],
            "{d:?}"
        );
        let w = Window::square(2, 2, 0);
        let dag = ops::pool2d(PoolKind::Max, 1, 2, 8, 8, w).unwrap();
        let sk = generate(&dag, &cpu_rules());
        assert_eq!(sk.len(), 1);
        assert!(!sk[0].plans.iter().any(|p| matches!(p, StagePlan::Tile(_))));
    }

    #[test]
    fn window_reductions_get_row_tiles_only() {
        let w = Window::square;
        // Stride 1 or 2, padded (materialized or inlined) or not: the pool is a row tile.
        for (k, stride, pad) in [(2, 2, 0), (3, 2, 1), (3, 1, 1)] {
            let dag = ops::pool2d(PoolKind::Max, 1, 3, 9, 9, w(k, stride, pad)).unwrap();
            let d = describe_all(&dag);
            assert_eq!(d.len(), if pad > 0 { 2 } else { 1 }, "{d:?}");
            assert!(d.iter().all(|x| x.contains("max_pool:rowtile")), "{d:?}");
            let dag = ops::pool2d(PoolKind::Avg, 1, 3, 9, 9, w(k, stride, pad)).unwrap();
            let d = describe_all(&dag);
            assert!(d.iter().all(|x| x.contains("pool_sum:rowtile")), "{d:?}");
        }
        // Stride 3 would gather its columns; a depthwise conv reuses its filter (tiled); a row
        // reduction has one space axis (rfactor's or plain).
        let d = describe_all(&ops::pool2d(PoolKind::Max, 1, 3, 9, 9, w(3, 3, 0)).unwrap());
        assert!(d.iter().all(|x| !x.contains("rowtile")), "{d:?}");
        let dw = ops::depthwise_conv2d_nchw(1, 4, 10, 10, w(3, 2, 1), false, false).unwrap();
        assert!(describe_all(&dw).iter().all(|x| !x.contains("rowtile")));
        let d = describe_all(&ops::softmax(4, 32).unwrap());
        assert!(d.iter().all(|x| !x.contains("rowtile")), "{d:?}");
    }

    #[test]
    fn long_one_axis_reductions_also_get_rfactor() {
        // Rows of 64: row max and row sum each with and without rfactor (and exp inlined or
        // not).
        let d = describe_all(&ops::softmax(4, 64).unwrap());
        assert_eq!(d.len(), 8, "{d:?}");
        assert!(
            d.contains(&"row_max:rfactor exp:inline row_sum:rfactor softmax:skip".to_string()),
            "{d:?}"
        );
        // Tiled reductions keep their tiling; a two-axis pool is left alone.
        let d = describe_all(&ops::dense(16, 32, 64, true, true).unwrap());
        assert!(d.iter().all(|x| !x.contains("rfactor")), "{d:?}");
        let w = Window::square(4, 4, 0);
        let d = describe_all(&ops::pool2d(PoolKind::Max, 1, 2, 16, 16, w).unwrap());
        assert!(d.iter().all(|x| !x.contains("rfactor")), "{d:?}");
    }

    #[test]
    fn matrix_vector_products_also_get_rfactor() {
        // One row: the weight is streamed along k; the tiled sketches stay beside rfactor.
        let d = describe_all(&ops::dense(1, 32, 64, true, false).unwrap());
        assert!(d.iter().any(|x| x.contains("dense:rfactor")), "{d:?}");
        assert!(d.iter().any(|x| x.contains("tile+fuse")), "{d:?}");
        // Eight rows reuse each weight element eight times: tiling only.
        let d = describe_all(&ops::dense(8, 32, 64, false, false).unwrap());
        assert!(d.iter().all(|x| !x.contains("rfactor")), "{d:?}");
        // A matrix times a vector on the other side reads it with a stride along k.
        let d = describe_all(&ops::matmul(1, 32, 64).unwrap());
        assert!(d.iter().all(|x| !x.contains("rfactor")), "{d:?}");
    }

    #[test]
    fn dense_bias_relu_fuses() {
        let dag = ops::dense(16, 32, 24, true, true).unwrap();
        let d = describe_all(&dag);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d.iter().all(|x| x.contains("tile+fuse")), "{d:?}");
    }
}
