//! Decisions: every draw of annotation, recorded so that the same sketch with the same
//! decisions replays to the same steps, and a mutation is a change of one decision.

use super::factor::{MAX_INNERMOST, sample_factorization};
use rand::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecisionKind {
    TileSize,
    AxisOrder,
    VectorAxis,
    ComputeLocation,
    Parallel,
    AutoUnroll,
    RowStep,
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
        self.draw_tile(extent, parts, false)
    }

    /// Tile lengths for `extent` in `parts` levels as [`Decider::tile`], but half the fresh
    /// draws put the whole extent at the innermost level (where it is at most
    /// [`MAX_INNERMOST`]): a bias a uniform draw cannot give (it puts a prime extent there one
    /// time in `parts`, a composite one more rarely).
    pub fn tile_inner_whole(&mut self, extent: i64, parts: usize) -> Vec<i64> {
        self.draw_tile(extent, parts, true)
    }

    fn draw_tile(&mut self, extent: i64, parts: usize, inner_whole: bool) -> Vec<i64> {
        let f = match self.next_recorded() {
            Some(Decision::Tile(f))
                if f.len() == parts
                    && f.iter().product::<i64>() == extent
                    && f[parts - 1] <= MAX_INNERMOST =>
            {
                f.clone()
            }
            _ if inner_whole && extent <= MAX_INNERMOST && self.rng.gen_bool(0.5) => {
                let mut f = vec![1; parts];
                f[parts - 1] = extent;
                f
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
