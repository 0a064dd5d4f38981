//! Annotation: factorizations, replay, and the shapes of the steps it writes.

use super::factor::{at_least_one_vector, whole_vectors};
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

/// Every factorization is listed once: 512 = 2^9 into 4 parts has 220, of which 10 have an
/// innermost factor above 64 (2^7 or more); a limit stops the listing just past it.
#[test]
fn factorizations_are_listed_once_each_within_the_bound() {
    let all = factorizations(512, 4, 64, usize::MAX);
    assert_eq!(all.len(), 210);
    let distinct: std::collections::HashSet<&Vec<i64>> = all.iter().collect();
    assert_eq!(distinct.len(), all.len());
    assert!(
        all.iter()
            .all(|f| f.iter().product::<i64>() == 512 && f[3] <= 64)
    );
    assert!(factorizations(512, 1, 64, usize::MAX).is_empty());
    assert_eq!(factorizations(512, 4, 64, 5).len(), 6);
}

#[test]
fn replay_of_own_decisions_gives_same_steps() {
    let dag = crate::ops::matmul(64, 48, 32).unwrap();
    let sketches = super::super::sketch::generate(&dag, &super::super::sketch::cpu_rules());
    let ctx = AnnotateContext {
        cores: 2,
        vector_lanes: 16,
        dot_lanes: &[],
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

/// The row axis beside rows shorter than a vector is drawn whole at the innermost level about
/// half the time (a 14-row axis: uniform draws put it there one time in 16), and a recorded
/// draw replays as it was.
#[test]
fn a_row_axis_beside_short_rows_is_drawn_whole_innermost_half_the_time() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut whole = 0;
    for _ in 0..400 {
        let mut d = Decider::sample(&mut rng);
        let f = d.tile_inner_whole(14, 4);
        assert_eq!(f.iter().product::<i64>(), 14);
        whole += usize::from(f == [1, 1, 1, 14]);
        let made = d.made;
        let mut other = ChaCha8Rng::seed_from_u64(6);
        let mut again = Decider::replay(&mut other, &made);
        assert_eq!(again.tile_inner_whole(14, 4), f);
    }
    assert!(
        (180..=260).contains(&whole),
        "{whole} of 400 whole innermost"
    );
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
            dot_lanes: &[],
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

#[test]
fn at_least_one_vector_where_no_multiple_exists() {
    // 28 columns on 16 lanes: whole_vectors leaves 4 innermost; the 7 moves in.
    let mut f = vec![1, 7, 1, 1];
    whole_vectors(&mut f, 16);
    assert_eq!(f, vec![1, 7, 1, 1], "no factor of 2 to move");
    let mut f = vec![1, 7, 1, 4];
    at_least_one_vector(&mut f, 16);
    assert_eq!(f, vec![1, 1, 1, 28]);
    let mut f = vec![2, 1, 3, 2];
    at_least_one_vector(&mut f, 16);
    assert_eq!(
        f,
        vec![1, 1, 1, 12],
        "an extent shorter than a vector goes whole innermost"
    );
    let mut f = vec![13, 1, 1];
    at_least_one_vector(&mut f, 16);
    assert_eq!(f, vec![1, 1, 13], "a prime row too");
    let mut f = vec![1, 1, 1, 16];
    at_least_one_vector(&mut f, 16);
    assert_eq!(f, vec![1, 1, 1, 16]);
}

/// The vectorized axis of a tile fills whole vectors wherever its extent has the factors:
/// conv2d's 56-wide rows on 8 lanes (8 or 56 columns innermost, never 1, 2 or 4).
#[test]
fn the_vector_axis_fills_whole_vectors() {
    let ctx = AnnotateContext {
        cores: 2,
        vector_lanes: 8,
        dot_lanes: &[],
    };
    let win = crate::ops::Window::square(3, 1, 1);
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
        dot_lanes: &[],
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

    let win = crate::ops::Window::square(3, 1, 1);
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

    // Stride 2: 16 output columns fill a vector but read the input with a stride (gathers),
    // so the channels and rows are offered too.
    let s2 = crate::ops::Window { stride: 2, ..win };
    let conv = crate::ops::conv2d_nchw(1, 8, 32, 32, 32, s2, false, false).unwrap();
    let picks = vector_picks(&conv);
    assert!(!picks.is_empty());
    assert!(
        picks.iter().all(|(_, n, _)| *n == 3),
        "{:?}",
        picks.iter().map(|p| p.1).collect::<Vec<_>>()
    );
}

/// Softmax's exp, read by the row sum and by the division, may be computed at the division's
/// row loop once the row sum is (the consumers' shared loop), and so may the row max then:
/// one row in L1 between the passes. Every such schedule lowers; exp's buffer is one row.
#[test]
fn producers_may_be_computed_where_all_their_readers_are() {
    use crate::schedule::Attach;
    let dag = crate::ops::softmax(8, 64).unwrap();
    let ctx = AnnotateContext {
        cores: 2,
        vector_lanes: 16,
        dot_lanes: &[],
    };
    let sketches = super::super::sketch::generate(&dag, &super::super::sketch::cpu_rules());
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let (mut exp_at_row, mut max_at_row) = (0, 0);
    for sk in sketches
        .iter()
        .filter(|k| !k.describe(&dag).contains("rfactor"))
    {
        for _ in 0..60 {
            let (sched, state) = annotate(&dag, sk, &ctx, &mut Decider::sample(&mut rng)).unwrap();
            let f =
                crate::lower::lower(&state).unwrap_or_else(|e| panic!("{e}: {}", sched.to_json()));
            let at_div = |name: &str| {
                let s = state
                    .dag
                    .stages
                    .iter()
                    .position(|st| st.name == name)
                    .unwrap();
                matches!(state.stages[s].attach, Attach::At { stage, .. } if state.dag.stages[stage].name == "softmax")
            };
            if at_div("exp") && at_div("row_sum") {
                exp_at_row += 1;
                let exp = f.buffers.iter().find(|b| b.name == "exp").unwrap();
                assert_eq!(exp.shape, [1, 64], "{}", sched.to_json());
            }
            max_at_row += usize::from(at_div("row_max") && at_div("row_sum"));
        }
    }
    assert!(
        exp_at_row > 0 && max_at_row > 0,
        "{exp_at_row} {max_at_row}"
    );
}

/// A max pool's row tile: the window loops outside a few rows of whole-vector columns, whose
/// accumulators fit a 16-register file, the outer loops parallel.
#[test]
fn pooling_row_tiles_put_the_window_outside_the_columns() {
    let win = crate::ops::Window::square(3, 2, 1);
    let dag = crate::ops::pool2d(crate::ops::PoolKind::Max, 1, 8, 40, 112, win).unwrap();
    let ctx = AnnotateContext {
        cores: 2,
        vector_lanes: 16,
        dot_lanes: &[],
    };
    let sketches = super::super::sketch::generate(&dag, &super::super::sketch::cpu_rules());
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    for sk in &sketches {
        for _ in 0..30 {
            let (sched, state) = annotate(&dag, sk, &ctx, &mut Decider::sample(&mut rng)).unwrap();
            let s = state
                .dag
                .stages
                .iter()
                .position(|st| st.name == "max_pool")
                .unwrap();
            let st = &state.stages[s];
            let names: Vec<&str> = st
                .leaves
                .iter()
                .map(|&l| st.nodes[l].name.as_str())
                .collect();
            let n = names.len();
            // ... ry rx | rows | columns (vectorized).
            assert!(
                names[n - 4].starts_with("ry") && names[n - 3].starts_with("rx"),
                "{names:?}: {}",
                sched.to_json()
            );
            let cols = &st.nodes[st.leaves[n - 1]];
            assert_eq!(cols.ann, crate::schedule::Annotation::Vectorize);
            assert_eq!(
                st.nodes[st.leaves[0]].ann,
                crate::schedule::Annotation::Parallel
            );
            let ext = crate::lower::loop_extents(&state).unwrap();
            let (r, c) = (ext[s][n - 2], ext[s][n - 1]);
            assert!(c >= 16, "{c} columns: {}", sched.to_json());
            assert!(
                r * ((c + 15) / 16) <= crate::codegen::max_tile_vectors(16),
                "{r}x{c}"
            );
        }
    }
}
