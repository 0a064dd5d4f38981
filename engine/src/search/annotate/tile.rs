//! Multi-level tiling (`SSRSRS`), with or without a fused consumer, and with or without a
//! local accumulator (cache_write).

use super::decision::{Decider, DecisionKind};
use super::factor::{at_least_one_vector, whole_vectors};
use super::steps::{
    AnnotateContext, Gen, parallel, pick_parallel, pick_unroll, split_axes, vectorize,
};
use crate::ir::ComputeDag;
use crate::schedule::Step;
use crate::search::sketch::Fusion;
use rand::Rng;

/// Space axes are cut into this many tile levels (`SSRSRS` has four S), reduction axes into two.
const SPACE_LEVELS: usize = 4;

const REDUCE_LEVELS: usize = 2;

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

/// Products summed 4 at a time by an 8-bit dot-product instruction (`vpdpbusd`, `sdot`).
const DOT: i64 = 4;

/// The vector width (i32 lanes) at which an integer sum of `stage` (`ns` space axes) can end
/// in a loop of [`DOT`] that the code generator writes as dot-product instructions
/// (`codegen::dot`), if any: its last reduction axis is a multiple of 4 and read contiguously
/// (the last index, alone) by an input that the last space axis, the vector axis, does not
/// move; that input's 4 bytes are then broadcast and the other input's (the packed weight) 4
/// bytes per lane are read in the order the loops walk them (the reduction's 4 innermost).
/// The vector axis must fill whole vectors of the width: a tile of a partial vector is no dot
/// tile, and the loop of 4 inside its vector loop would leave GCC a reduction inside
/// `omp simd` (a 5x5 conv with 120 output channels on AVX-512: 14 ms against 0.27 ms in f32).
/// The widest width the axis fills is taken; a narrower one (256-bit vectors on an AVX-512
/// target) serves 24, 40 or 1000 output channels.
fn dot_reduction(stage: &crate::ir::Stage, ns: usize, ctx: &AnnotateContext) -> Option<i64> {
    let nr = stage.reduce_axes().len();
    let crate::ir::StageKind::Compute {
        reduce: Some(crate::ir::ReduceOp::Sum),
        ..
    } = stage.kind
    else {
        return None;
    };
    let channels = stage.space()[ns - 1].extent;
    let width = ctx.dot_lanes.iter().copied().find(|&w| channels % w == 0)?;
    if stage.dtype != crate::ir::DType::I32
        || nr == 0
        || stage.reduce_axes()[nr - 1].extent % DOT != 0
    {
        return None;
    }
    let dot = ns + nr - 1;
    let mut broadcast = false;
    if let Some(body) = stage.body() {
        body.visit_loads(&mut |_, idx| {
            let Some((last, rest)) = idx.split_last() else {
                return;
            };
            broadcast |= last.coef(dot) == 1
                && rest.iter().all(|e| e.coef(dot) == 0)
                && idx.iter().all(|e| e.coef(ns - 1) == 0);
        });
    }
    broadcast.then_some(width)
}

/// Whether some read of `stage` steps more than one element per step of its axis `a`.
fn strided_along(stage: &crate::ir::Stage, a: usize) -> bool {
    let mut strided = false;
    if let Some(body) = stage.body() {
        body.visit_loads(&mut |_, idx| {
            strided |= idx.iter().any(|e| e.coef(a).abs() > 1);
        });
    }
    strided
}

pub(super) fn tile<R: Rng>(
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
    // Rows shorter than a vector: half the draws put the whole row axis (the one before the
    // last) innermost, a tile of whole rows that the code generator packs into the lanes
    // (`codegen::rows`: a 7x7 map in 4 vectors, not 7). Drawn uniformly, a 14-row axis lands
    // there one time in 16.
    let short_rows = ns >= 2 && (2..ctx.vector_lanes).contains(&space[ns - 1]);
    let mut p: Vec<Vec<i64>> = space
        .iter()
        .enumerate()
        .map(|(a, &e)| {
            if short_rows && a + 2 == ns {
                d.tile_inner_whole(e, SPACE_LEVELS)
            } else {
                d.tile(e, SPACE_LEVELS)
            }
        })
        .collect();
    // An integer sum for a dot-product instruction: its last reduction axis is tiled over a
    // quarter of its length, and its 4 innermost products become a loop inside the vector
    // loop (the instruction's operands; the weight is packed in that order).
    let dot_width = dot_reduction(stage, ns, ctx);
    let dot = dot_width.is_some();
    let r: Vec<Vec<i64>> = reduce
        .iter()
        .enumerate()
        .map(|(b, &e)| {
            let e = if dot && b == nr - 1 { e / DOT } else { e };
            d.tile(e, REDUCE_LEVELS)
        })
        .collect();
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
    // dilute the space with strided tiles. A last axis some input is read along with a stride
    // (a stride-2 conv's rows) makes gathers of its vectors: the others are offered then too.
    let mut options = vec![ns - 1];
    if !dot && (space[ns - 1] % ctx.vector_lanes.max(1) != 0 || strided_along(stage, ns - 1)) {
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
    let lanes = dot_width.unwrap_or(ctx.vector_lanes);
    whole_vectors(&mut p[va], lanes);
    at_least_one_vector(&mut p[va], lanes);
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
        if dot {
            lens[ns + nr - 1].push(DOT);
        }
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
        if dot {
            // The dot axis is the last reduction axis: its loop of 4 is the last leaf.
            order.push(rp(nr, 0));
        }
        g.apply(Step::Reorder { stage: t, order })?;
        let outer: Vec<i64> = order0
            .iter()
            .map(|&a| p[a][0])
            .chain((0..ns).map(|a| p[a][1]))
            .collect();
        let k = pick_parallel(d, &outer, ctx);
        parallel(g, t, k, &outer)?;
        let last = g.leaves(t) - 1 - usize::from(dot);
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
    let fused = parallel(g, c, k, &outer)?;
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
        .chain(r.iter().enumerate().map(|(b, f)| {
            if dot && b == nr - 1 {
                vec![f[1], DOT]
            } else {
                vec![f[1]]
            }
        }))
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
    if dot {
        order.push(rp(nr, 0));
    }
    g.apply(Step::Reorder { stage: t, order })?;
    let last = g.leaves(t) - 1 - usize::from(dot);
    vectorize(g, t, last, p[va][3])?;
    pick_unroll(g, t, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::OpSpec;
    use crate::target::{Target, TargetOverrides};

    /// A sum ends in the dot-product loop of 4 only where the vector axis fills whole vectors
    /// of a width the target writes the instruction at, the widest such.
    #[test]
    fn the_dot_loop_needs_whole_vectors() {
        let target = |features: &[&str]| {
            Target::detect().with_overrides(&TargetOverrides {
                features: Some(features.iter().map(|f| f.to_string()).collect()),
                ..Default::default()
            })
        };
        let with_vl = target(&["avx2", "fma", "avx512f", "avx512vl", "avx512vnni"]);
        let without_vl = target(&["avx2", "fma", "avx512f", "avx512vnni"]);
        let dot = |t: &Target, spec: &str| {
            let ctx = AnnotateContext::for_target(t);
            assert_eq!(ctx.vector_lanes, 16);
            let dag = OpSpec::parse(spec).unwrap().dag().unwrap();
            let conv = dag.stages.iter().find(|s| s.name == "conv").unwrap();
            dot_reduction(conv, conv.space().len(), &ctx)
        };
        let conv = |f: i64| format!("conv2d_nhwc(1,13,13,40,{f},kh=5,kw=5,pad=2,dtype=u8i8)");
        assert_eq!(dot(&with_vl, &conv(128)), Some(16));
        assert_eq!(dot(&with_vl, &conv(120)), Some(8));
        assert_eq!(dot(&with_vl, &conv(20)), None);
        assert_eq!(dot(&without_vl, &conv(128)), Some(16));
        assert_eq!(dot(&without_vl, &conv(120)), None);
        assert_eq!(
            dot(&with_vl, "conv2d_nhwc(1,13,13,40,128,kh=5,kw=5,pad=2)"),
            None
        );
    }
}
