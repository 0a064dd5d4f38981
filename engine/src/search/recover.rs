//! The decisions behind a schedule the search did not make itself: a resumed job's records, a
//! warm start's seeds adapted from other shapes. The search mutates decisions, not steps, so a
//! measured schedule seeds later populations only once its decisions are known (Ansor seeds
//! its population with every measured state, loaded ones included).
//!
//! Annotation maps (sketch, decisions) to steps; its inverse is found by search. Per sketch, a
//! coordinate ascent from one random draw: each decision in turn takes every value it may hold
//! (every factorization of its extent, every option of a pick), the rest replayed, and keeps
//! the one whose steps agree most with the target's (their longest common subsequence: an
//! option can add or drop a step). A decision usually
//! writes its own steps, so a few passes find them all; what is found counts only when the
//! steps are exactly the target's.

use super::annotate::{
    AnnotateContext, Decider, Decision, MAX_INNERMOST, annotate, factorizations,
};
use super::sketch::Sketch;
use crate::ir::ComputeDag;
use crate::schedule::{Schedule, Step};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Passes of the ascent over all decisions of one sketch.
const PASSES: usize = 3;

/// Ascents per sketch, each from another random draw: an option's meaning can depend on
/// earlier decisions (the parallel degree's on the outer tile lengths), so one ascent can
/// stop short.
const STARTS: u64 = 3;

/// Tile decisions with more alternatives than this are not searched: the target is then left
/// unexplained rather than holding up the search (a 4-level tile of 2^12 has 455).
const MAX_ALTERNATIVES: usize = 4096;

/// The sketch and decisions that annotate to exactly `target`, if the ascent finds them.
pub fn recover(
    dag: &ComputeDag,
    sketches: &[Sketch],
    ctx: &AnnotateContext,
    target: &Schedule,
) -> Option<(usize, Vec<Decision>)> {
    (0..sketches.len()).find_map(|k| recover_in(dag, &sketches[k], ctx, target).map(|d| (k, d)))
}

/// The longest common subsequence of two step lists: steps that agree, wherever a different
/// decision inserted or left out one (an optional vectorize, a fused loop).
fn agreement(steps: &[Step], target: &[Step]) -> usize {
    let mut row = vec![0usize; target.len() + 1];
    for a in steps {
        let mut diag = 0;
        for (j, b) in target.iter().enumerate() {
            let up = row[j + 1];
            row[j + 1] = if a == b { diag + 1 } else { up.max(row[j]) };
            diag = up;
        }
    }
    row[target.len()]
}

/// Annotates `sketch` with `decisions` replayed (an RNG from `seed` draws any that no longer
/// fit): the decisions made and the steps' agreement with `target`, exact or not.
fn replay(
    dag: &ComputeDag,
    sketch: &Sketch,
    ctx: &AnnotateContext,
    decisions: &[Decision],
    target: &[Step],
    seed: u64,
) -> Option<(Vec<Decision>, usize, bool)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut d = Decider::replay(&mut rng, decisions);
    let (s, _) = annotate(dag, sketch, ctx, &mut d).ok()?;
    Some((d.made, agreement(&s.steps, target), s.steps == target))
}

/// The values decision `d` may take.
fn alternatives(d: &Decision) -> Vec<Decision> {
    match d {
        Decision::Tile(f) => {
            let extent = f.iter().product::<i64>();
            let all = factorizations(extent, f.len(), MAX_INNERMOST, MAX_ALTERNATIVES);
            if all.len() > MAX_ALTERNATIVES {
                return vec![];
            }
            all.into_iter().map(Decision::Tile).collect()
        }
        &Decision::Pick { kind, n, .. } => (0..n)
            .map(|index| Decision::Pick { kind, index, n })
            .collect(),
    }
}

fn recover_in(
    dag: &ComputeDag,
    sketch: &Sketch,
    ctx: &AnnotateContext,
    target: &Schedule,
) -> Option<Vec<Decision>> {
    (0..STARTS).find_map(|seed| ascend(dag, sketch, ctx, &target.steps, seed))
}

/// One ascent, from the decisions drawn with `seed`.
fn ascend(
    dag: &ComputeDag,
    sketch: &Sketch,
    ctx: &AnnotateContext,
    target: &[Step],
    seed: u64,
) -> Option<Vec<Decision>> {
    let (mut best, mut score, exact) = replay(dag, sketch, ctx, &[], target, seed)?;
    if exact {
        return Some(best);
    }
    for _ in 0..PASSES {
        let mut improved = false;
        let mut i = 0;
        while i < best.len() {
            for alt in alternatives(&best[i]) {
                // An improvement can change the sketch's path and leave fewer decisions.
                if i >= best.len() {
                    break;
                }
                if alt == best[i] {
                    continue;
                }
                let mut tried = best.clone();
                tried[i] = alt;
                let Some((made, s, exact)) = replay(dag, sketch, ctx, &tried, target, seed) else {
                    continue;
                };
                if exact {
                    return Some(made);
                }
                if s > score {
                    (best, score, improved) = (made, s, true);
                }
            }
            i += 1;
        }
        if !improved {
            return None;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::ComputeDag;
    use crate::ops;
    use crate::search::sketch::{cpu_rules, generate};
    use crate::transfer::adapt;

    const CTX: AnnotateContext = AnnotateContext {
        cores: 2,
        vector_lanes: 16,
        dot_lanes: &[],
    };

    fn library() -> Vec<ComputeDag> {
        vec![
            ops::matmul(64, 48, 96).unwrap(),
            ops::dense(4, 96, 72, true, true).unwrap(),
            ops::conv2d_nchw(1, 8, 14, 14, 16, ops::Window::square(3, 2, 1), true, true).unwrap(),
            ops::depthwise_conv2d_nchw(1, 12, 10, 10, ops::Window::square(3, 1, 1), false, false)
                .unwrap(),
            ops::softmax(24, 40).unwrap(),
        ]
    }

    /// Random draws of every sketch of every operator: nearly all are recovered, and every
    /// recovered one's decisions annotate to it again. (The few missed need two decisions
    /// changed at once: a softmax's two reductions factored alike.)
    #[test]
    fn the_annotators_own_schedules_are_recovered() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let (mut drawn, mut found) = (0, 0);
        for dag in library() {
            let sketches = generate(&dag, &cpu_rules());
            for sk in &sketches {
                for _ in 0..4 {
                    let mut d = Decider::sample(&mut rng);
                    let Ok((target, _)) = annotate(&dag, sk, &CTX, &mut d) else {
                        continue;
                    };
                    drawn += 1;
                    let Some((k, decisions)) = recover(&dag, &sketches, &CTX, &target) else {
                        continue;
                    };
                    found += 1;
                    let mut rng2 = ChaCha8Rng::seed_from_u64(11);
                    let mut again = Decider::replay(&mut rng2, &decisions);
                    let (steps, _) = annotate(&dag, &sketches[k], &CTX, &mut again).unwrap();
                    assert_eq!(steps, target);
                }
            }
        }
        assert!(
            drawn >= 40 && found * 10 >= drawn * 9,
            "{found} of {drawn} recovered"
        );
    }

    /// Schedules adapted from another shape of an operator (a warm start's seeds) are mostly
    /// recovered on the new shape (those that are not could not have been drawn there).
    #[test]
    fn adapted_schedules_are_recovered_on_the_new_shape() {
        for (from, to) in [
            (ops::matmul(64, 48, 96), ops::matmul(128, 96, 48)),
            (
                ops::dense(4, 96, 72, true, false),
                ops::dense(8, 192, 72, true, false),
            ),
        ] {
            let (from, to) = (from.unwrap(), to.unwrap());
            let sketches_from = generate(&from, &cpu_rules());
            let sketches_to = generate(&to, &cpu_rules());
            let mut rng = ChaCha8Rng::seed_from_u64(5);
            let (mut tried, mut found) = (0, 0);
            for sk in &sketches_from {
                for _ in 0..6 {
                    let mut d = Decider::sample(&mut rng);
                    let (s, _) = annotate(&from, sk, &CTX, &mut d).unwrap();
                    let Ok(a) = adapt(&s, &from, &to) else {
                        continue;
                    };
                    tried += 1;
                    let Some((k, decisions)) = recover(&to, &sketches_to, &CTX, &a.schedule) else {
                        continue;
                    };
                    found += 1;
                    let mut rng2 = ChaCha8Rng::seed_from_u64(0);
                    let mut again = Decider::replay(&mut rng2, &decisions);
                    let (steps, _) = annotate(&to, &sketches_to[k], &CTX, &mut again).unwrap();
                    assert_eq!(steps, a.schedule);
                }
            }
            assert!(
                tried > 0 && found * 4 >= tried * 3,
                "{found} of {tried} recovered"
            );
        }
    }
}
