//! The loop nest around a statement: the walker's state (enclosing loops, allocations, guards
//! and region starts) and the questions asked of it (which loops an index uses, a variable's
//! range, a loop's depth).

use super::layout::StoreFeatures;
use super::lets::Lets;
use tunehub_engine::lower::{Atom, Lin, LoopKind, LoweredFunc, Var};

/// A set of enclosing loops by depth. Schedules nest a few dozen loops at most (every axis
/// split into a few levels); deeper nests are refused rather than silently mis-described.
pub(super) type LoopSet = u128;

pub(super) const MAX_DEPTH: usize = LoopSet::BITS as usize;

pub(super) const NOT_ENCLOSING: u8 = u8::MAX;

#[derive(Clone, Copy)]
pub(super) struct Loop {
    pub(super) var: Var,
    pub(super) extent: i64,
    pub(super) kind: LoopKind,
    /// The body is one statement (a perfect nest goes on below).
    pub(super) perfect: bool,
}

pub(super) struct Walker<'a> {
    pub(super) func: &'a LoweredFunc,
    /// Fill in buffer names (for inspection; the model's path skips the allocations).
    pub(super) names: bool,
    /// Enclosing loops, outermost first.
    pub(super) loops: Vec<Loop>,
    /// `depth[stage][node]`: where the loop of that iterator sits in `loops` (`NOT_ENCLOSING`
    /// otherwise), so that variable lookups do not scan the nest.
    pub(super) depth: Vec<Vec<u8>>,
    /// Region starts, already in terms of loop variables.
    pub(super) lets: Lets,
    /// Enclosing allocations: buffer and the product of extents around the `Alloc`.
    pub(super) allocs: Vec<(usize, f64)>,
    /// Left-hand sides of enclosing guard conditions.
    pub(super) guards: Vec<&'a Lin>,
    pub(super) out: Vec<StoreFeatures>,
}

impl<'a> Walker<'a> {
    pub(super) fn outer_prod(&self) -> f64 {
        self.loops.iter().map(|l| l.extent as f64).product()
    }
    /// The enclosing loops whose variables `l` uses, as a bit set.
    pub(super) fn loops_in(&self, l: &Lin) -> LoopSet {
        l.terms
            .iter()
            .fold(0, |set, (a, _)| set | self.atom_loops(a))
    }
    pub(super) fn atom_loops(&self, a: &Atom) -> LoopSet {
        match a {
            Atom::Var(v) => self.depth_of(*v).map_or(0, |i| 1 << i),
            Atom::Div(x, _) | Atom::Mod(x, _) => self.loops_in(x),
            Atom::Max(x, y) | Atom::Min(x, y) => self.loops_in(x) | self.loops_in(y),
        }
    }
    /// Range of a variable when loops `lvl..` vary and everything else is at 0.
    pub(super) fn var_range(&self, w: Var, lvl: usize) -> (i64, i64) {
        match self.depth_of(w) {
            Some(d) if d >= lvl => (0, self.loops[d].extent - 1),
            _ => (0, 0),
        }
    }
    /// The position in `loops` of the loop whose variable is `v`, if it encloses the walk.
    pub(super) fn depth_of(&self, v: Var) -> Option<usize> {
        let Var::Loop { stage, node } = v else {
            return None;
        };
        let d = *self.depth.get(stage)?.get(node)?;
        (d != NOT_ENCLOSING).then_some(d as usize)
    }
    pub(super) fn set_depth(&mut self, v: Var, d: u8) {
        let Var::Loop { stage, node } = v else {
            return;
        };
        if self.depth.len() <= stage {
            self.depth.resize(stage + 1, vec![]);
        }
        let row = &mut self.depth[stage];
        if row.len() <= node {
            row.resize(node + 1, NOT_ENCLOSING);
        }
        row[node] = d;
    }
    /// Local stride of `ix` along loop `i`: the step from iteration 0 to 1 with the others at
    /// 0, or the mean step over the loop when that first step is 0 (a variable under a
    /// division). 0 when the loop does not change the index.
    pub(super) fn stride(&self, ix: &Lin, uses: LoopSet, i: usize) -> f64 {
        let l = self.loops[i];
        if l.extent <= 1 || uses >> i & 1 == 0 {
            return 0.0;
        }
        if ix.terms.iter().all(|(a, _)| matches!(a, Atom::Var(_))) {
            // Linear: the coefficient of the loop's variable.
            return ix.var_coef(l.var).abs() as f64;
        }
        let at = |x: i64| ix.range(&|w| if w == l.var { (x, x) } else { (0, 0) }).0;
        let first = (at(1) - at(0)).abs() as f64;
        if first > 0.0 {
            first
        } else {
            (at(l.extent - 1) - at(0)).abs() as f64 / (l.extent - 1) as f64
        }
    }
}
