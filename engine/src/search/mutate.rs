//! Mutations of an annotated schedule's decisions. A mutated candidate is the same sketch
//! replayed with one decision changed, so it stays consistent (a fused consumer's split follows
//! its producer's) and valid by construction.

use super::annotate::{Decision, DecisionKind, MAX_INNERMOST, prime_factors};
use rand::Rng;

/// Relative weights of the mutation kinds. Ansor's defaults for the four it has (tile size
/// 0.90, compute location 0.05, auto-unroll 0.04, parallel 0.01); the order of the outer tile
/// loops, the vectorized axis and the rows per step are ours and get a small share.
#[derive(Debug, Clone, Copy)]
pub struct MutationWeights {
    pub tile_size: f64,
    pub compute_location: f64,
    pub auto_unroll: f64,
    pub parallel: f64,
    pub axis_order: f64,
    pub vector_axis: f64,
    pub row_step: f64,
}

impl Default for MutationWeights {
    fn default() -> Self {
        MutationWeights {
            tile_size: 0.90,
            compute_location: 0.05,
            auto_unroll: 0.04,
            parallel: 0.01,
            axis_order: 0.03,
            vector_axis: 0.03,
            row_step: 0.03,
        }
    }
}

impl MutationWeights {
    fn of(&self, kind: DecisionKind) -> f64 {
        match kind {
            DecisionKind::TileSize => self.tile_size,
            DecisionKind::ComputeLocation => self.compute_location,
            DecisionKind::AutoUnroll => self.auto_unroll,
            DecisionKind::Parallel => self.parallel,
            DecisionKind::AxisOrder => self.axis_order,
            DecisionKind::VectorAxis => self.vector_axis,
            DecisionKind::RowStep => self.row_step,
        }
    }
}

/// Whether a decision has an alternative at all.
fn mutable(d: &Decision) -> bool {
    match d {
        Decision::Tile(f) => f.iter().filter(|&&x| x > 1).count() > 0 && f.len() > 1,
        Decision::Pick { n, .. } => *n > 1,
    }
}

/// Moves one prime factor of one tile level to another level (Ansor's MutateTileSize),
/// keeping the innermost level within [`MAX_INNERMOST`].
fn mutate_tile<R: Rng>(f: &[i64], rng: &mut R) -> Option<Vec<i64>> {
    for _ in 0..8 {
        let src: Vec<usize> = (0..f.len()).filter(|&k| f[k] > 1).collect();
        let from = src[rng.gen_range(0..src.len())];
        let primes = prime_factors(f[from]);
        let p = primes[rng.gen_range(0..primes.len())];
        let mut to = rng.gen_range(0..f.len() - 1);
        if to >= from {
            to += 1;
        }
        let mut g = f.to_vec();
        g[from] /= p;
        g[to] *= p;
        if g[f.len() - 1] <= MAX_INNERMOST {
            return Some(g);
        }
    }
    None
}

/// One mutation of `decisions`: a decision chosen by kind weight, then changed. `None` when
/// nothing can change.
pub fn mutate<R: Rng>(
    decisions: &[Decision],
    weights: &MutationWeights,
    rng: &mut R,
) -> Option<Vec<Decision>> {
    let candidates: Vec<usize> = (0..decisions.len())
        .filter(|&i| mutable(&decisions[i]) && weights.of(decisions[i].kind()) > 0.0)
        .collect();
    if candidates.is_empty() {
        return None;
    }
    // Pick a kind by weight among the kinds present, then a decision of that kind uniformly,
    // so that a schedule with many tile decisions does not starve the other kinds.
    let mut kinds: Vec<DecisionKind> = vec![];
    for &i in &candidates {
        let k = decisions[i].kind();
        if !kinds.contains(&k) {
            kinds.push(k);
        }
    }
    let total: f64 = kinds.iter().map(|&k| weights.of(k)).sum();
    let mut x = rng.r#gen::<f64>() * total;
    let mut kind = kinds[kinds.len() - 1];
    for &k in &kinds {
        x -= weights.of(k);
        if x < 0.0 {
            kind = k;
            break;
        }
    }
    let of_kind: Vec<usize> = candidates
        .into_iter()
        .filter(|&i| decisions[i].kind() == kind)
        .collect();
    let i = of_kind[rng.gen_range(0..of_kind.len())];
    let new = match &decisions[i] {
        Decision::Tile(f) => Decision::Tile(mutate_tile(f, rng)?),
        &Decision::Pick { kind, index, n } => {
            let mut j = rng.gen_range(0..n - 1);
            if j >= index {
                j += 1;
            }
            Decision::Pick { kind, index: j, n }
        }
    };
    let mut out = decisions.to_vec();
    out[i] = new;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn tile_mutation_keeps_the_product_and_the_bound() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut f = vec![4, 2, 8, 8];
        for _ in 0..500 {
            if let Some(g) = mutate_tile(&f, &mut rng) {
                assert_eq!(g.iter().product::<i64>(), 512);
                assert!(g[3] <= MAX_INNERMOST);
                assert_ne!(g, f);
                f = g;
            }
        }
    }

    #[test]
    fn mutation_changes_exactly_one_decision() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let ds = vec![
            Decision::Tile(vec![2, 4, 8, 8]),
            Decision::Pick {
                kind: DecisionKind::AutoUnroll,
                index: 1,
                n: 4,
            },
            Decision::Pick {
                kind: DecisionKind::Parallel,
                index: 0,
                n: 1,
            },
        ];
        for _ in 0..200 {
            let m = mutate(&ds, &MutationWeights::default(), &mut rng).unwrap();
            let changed = ds.iter().zip(&m).filter(|(a, b)| a != b).count();
            assert_eq!(changed, 1);
            assert_eq!(m[2], ds[2], "a one-option pick never changes");
        }
    }
}
