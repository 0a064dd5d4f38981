//! A reduction's initialization that an integer or dot tile makes in its registers.
//!
//! Lowering writes a reduction as a nest storing the identity (its initialization), then the
//! reduction's loops. A tile holding the whole reduction in its band then loads accumulators
//! the nest has just stored. With a short reduction the nest and the loads weigh as much as
//! the products: a 1x1 convolution over 16 input channels is 4 dot-product steps per
//! accumulator, beside a zero store, a load and a store. Where the nest stores exactly the
//! accumulators that the tile's executions after it compute, each once, the nest is not
//! written and the tile starts from the constant.

use super::regtile::perfect_nest;
use crate::lower::{Lin, Stmt, VExpr, Var};

/// A tile's accumulators: the buffer and index of its store, and its space loops (the vector
/// loop included), outermost first.
pub(super) struct Accumulators<'s> {
    pub(super) buf: usize,
    pub(super) index: &'s Lin,
    pub(super) loops: Vec<(Var, i64)>,
}

impl<'s> Accumulators<'s> {
    /// A tile's accumulators from its store and its loops.
    pub(super) fn of(buf: usize, index: &'s Lin, tile: &[(Var, i64)], lane: (Var, i64)) -> Self {
        let loops = tile.iter().copied().chain([lane]).collect();
        Accumulators { buf, index, loops }
    }
}

/// A perfect nest that stores one constant: its loops (outermost first), the store's index and
/// the constant.
pub(super) struct ConstantNest<'s> {
    pub(super) loops: Vec<(Var, i64)>,
    pub(super) index: &'s Lin,
    pub(super) value: f64,
}

/// `s` as a [`ConstantNest`] into `buf`, if it is one.
pub(super) fn constant_nest(s: &Stmt, buf: usize) -> Option<ConstantNest<'_>> {
    let (loops, inner) = perfect_nest(s, |_| false);
    match inner {
        Stmt::Store {
            buf: b,
            index,
            value: VExpr::Const(c),
            reduce: None,
        } if *b == buf => Some(ConstantNest {
            loops: loops.iter().map(|l| (l.0, l.1)).collect(),
            index,
            value: *c,
        }),
        _ => None,
    }
}

/// The tile that `next` reaches through a perfect chain of loops (`tile_at` says which
/// statements are tiles, and their accumulators), and the constant that `init` stores into
/// exactly the accumulators the chain's executions of the tile compute: (the tile's key, the
/// constant). Then `init` need not be written.
///
/// - `init` stores with the tile's index (lowering gives the initialization the reduction's
///   index and loop variables).
/// - Every loop of the chain with more than one iteration is a variable of that index, so no
///   accumulator is computed twice (a reduction loop outside the band would accumulate).
/// - `init`'s loops of more than one iteration are the chain's and the tile's, of the same
///   extents; loops of one iteration sit at 0 on either side.
pub(super) fn fresh_init<'t>(
    init: &Stmt,
    next: &Stmt,
    tile_at: impl Fn(*const Stmt) -> Option<Accumulators<'t>>,
) -> Option<(*const Stmt, f64)> {
    let (chain, inner) = perfect_nest(next, |s| tile_at(s as *const Stmt).is_some());
    let key = inner as *const Stmt;
    let acc = tile_at(key)?;
    let nest = constant_nest(init, acc.buf)?;
    if nest.index != acc.index {
        return None;
    }
    let mut used = vec![];
    acc.index.vars(&mut used);
    if chain.iter().any(|l| l.1 > 1 && !used.contains(&l.0)) {
        return None;
    }
    let live = |l: &(Var, i64)| l.1 > 1;
    let mine: Vec<(Var, i64)> = nest.loops.iter().copied().filter(live).collect();
    let theirs: Vec<(Var, i64)> = chain
        .iter()
        .map(|l| (l.0, l.1))
        .chain(acc.loops)
        .filter(live)
        .collect();
    let same = mine.len() == theirs.len() && mine.iter().all(|l| theirs.contains(l));
    same.then_some((key, nest.value))
}
