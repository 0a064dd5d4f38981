//! A register tile whose window columns read one strided row: a pooling's or a depthwise
//! convolution's tile with stride-2 columns, its taps' loads shared. Each output vector of
//! `lanes` columns covers `2 * lanes` input columns, read as two contiguous vectors per window
//! row (a pair); the taps are the pair's evens and odds, and a tap one column left or right of
//! the pair is the evens or odds shifted in by one lane from the pair beside (`TH_SHUFFLE2`).
//!
//! The plain tile form (`regtile`) reads each tap as two vector loads and a shuffle per output
//! vector: a 3x3 stride-2 window takes 18 loads and 9 shuffles, loads at odd offsets from the
//! rows that cross cache lines. Here it takes 6 loads, at even offsets (aligned when the rows
//! are): a depthwise convolution 9 shuffles (evens, odds and a shift per window row), a max or
//! min pool 3, as it reduces the window's rows first, on the pairs, and takes the columns once
//! after the band. Rows first is exact for max and min, not for a float sum, which keeps the
//! plain form's order (rows, then columns). Hand kernels of the 64x112x112 max pool on a Zen 4
//! (AVX-512, 2 threads, one run): the plain form 74.6 us, rows first on aligned pairs 23.2 us,
//! a stream of the same bytes 24.5 us (docs/experiments/2026-11-29-pool-columns-zen4.md).
//!
//! A weighted tile (a depthwise convolution's) computes in the in-lane order of
//! `masked::in_lane_order` where the target has one (AVX-512): its evens and odds are then
//! `vshufps`, which a Zen 4 issues beside the FMAs, where `vpermt2ps` takes their pipes (8 FMAs
//! and 8 `vpermt2ps` on independent registers took 16 cycles, with 8 `vshufps` 8.3). The shifts
//! stay two-vector shuffles, in that order; the accumulators are moved into it and back where
//! they meet memory. A 3x3 stride-2 row by hand, 21.01 -> 19.05 us
//! (docs/experiments/2026-11-29-in-lane-zen4.md).
//!
//! The tile qualifies when its value is such a load, bare or under a select on a range of the
//! lane (inlined padding), or its product with a value equal in every lane (a weight); when the
//! innermost band loop (the window's columns) steps the load's index by one and moves the
//! select's lane bounds as two lanes' worth of index would (then every input element's
//! validity is one condition, whichever tap reads it); and when its vectors fit the registers.

use super::init::{ConstantNest, constant_nest};
use super::lanes::{cond_uses, lane_coef, uses};
use super::peel::lane_range;
use super::regtile::{RegTile, map_cond, map_lins, perfect_nest, tile_points};
use super::writer::{Gen, float_literal, vload, vstore};
use crate::ir::{BinaryOp, ReduceOp};
use crate::lower::{Lin, Stmt, VCond, VExpr, Var};
use std::collections::HashMap;

/// A tile written with its window's columns shared.
#[derive(Debug, Clone)]
pub(super) struct ColumnShare<'s> {
    /// The window's column loop (the band's innermost) and its extent.
    pub cols: (Var, i64),
    /// Where each output vector's pair starts, in elements from its first tap: 0 or 1,
    /// whichever makes the index's constant even (a pooling's padding of 1 puts the first tap
    /// one before an aligned row's start: the pair starts at the row).
    pub start: i64,
    pub buf: usize,
    pub index: &'s Lin,
    /// The select's condition and the constant outside it (padding), if any.
    pub cond: Option<&'s VCond>,
    pub fill: f64,
    /// What multiplies the load, equal in every lane (a depthwise convolution's weight).
    pub scale: Option<&'s VExpr>,
    /// A max or min of the bare load: the pairs are reduced over the band, the columns after.
    pub rows_first: bool,
}

/// How a tap reaches its lanes from the pairs: which of their halves of lanes (0 the evens, 1
/// the odds), shifted by how many lanes (negative: from the pair before).
pub(super) fn tap(col: i64, start: i64) -> (i64, usize) {
    let d = col - start;
    (d.div_euclid(2), d.rem_euclid(2) as usize)
}

/// The identity of `op`: what a reduction starts from.
pub(super) fn identity(op: ReduceOp) -> f64 {
    match op {
        ReduceOp::Max => f64::NEG_INFINITY,
        ReduceOp::Min => f64::INFINITY,
        ReduceOp::Sum => 0.0,
    }
}

/// The column-shared form of `t`, if it qualifies (see the module doc).
pub(super) fn plan<'s>(t: &RegTile<'s>, lanes: i64, registers: i64) -> Option<ColumnShare<'s>> {
    let lane = t.lane.0;
    let &(cols, width, _) = t.band.last()?;
    // One column takes nothing from sharing; past `lanes` a shift would reach two pairs on.
    if !(2..=lanes).contains(&width) {
        return None;
    }
    let (shared, scale) = match t.value {
        VExpr::Binary(BinaryOp::Mul, a, b) if !uses(b, lane) => (&**a, Some(&**b)),
        VExpr::Binary(BinaryOp::Mul, a, b) if !uses(a, lane) => (&**b, Some(&**a)),
        v => (v, None),
    };
    let (cond, load, fill) = match shared {
        VExpr::Load { .. } => (None, shared, identity(t.op)),
        VExpr::Select(c, a, b) => match **b {
            VExpr::Const(fill) => (Some(&**c), &**a, fill),
            _ => return None,
        },
        _ => return None,
    };
    let VExpr::Load { buf, index } = load else {
        return None;
    };
    if lane_coef(index, lane) != Some(2) || lane_coef(index, cols) != Some(1) {
        return None;
    }
    if let Some(c) = cond {
        let range = lane_range(c, lane)?;
        // Each bound moves with `2 * lane + col`: an element is in range or not, whichever tap.
        for lc in &range.lane {
            if lane_coef(&lc.rest, cols).map(|k| 2 * k) != Some(lc.k) {
                return None;
            }
        }
        if range.invariant.iter().any(|c| cond_uses(c, cols)) {
            return None;
        }
    }
    let rows_first = scale.is_none() && matches!(t.op, ReduceOp::Max | ReduceOp::Min);
    let groups = (t.lane.1 + lanes - 1) / lanes;
    let points: i64 = t.tile.iter().map(|l| l.1).product();
    // A pair per output vector and one beside the row; the accumulators (rows first: loaded
    // after the band); two for the shuffles' results.
    let pairs = 2 * points * (groups + 1);
    let accumulators = if rows_first { 0 } else { points * groups };
    if pairs + accumulators + 2 > registers {
        return None;
    }
    Some(ColumnShare {
        cols: (cols, width),
        start: index.c.rem_euclid(2),
        buf: *buf,
        index,
        cond,
        fill,
        scale,
        rows_first,
    })
}

/// The pairs one output row needs, as offsets in pairs from its first output vector's: one
/// before it when a tap shifts in from the left, one after the last when a tap shifts in from
/// the right.
pub(super) fn pairs(groups: i64, width: i64, start: i64) -> std::ops::RangeInclusive<i64> {
    let shifts: Vec<i64> = (0..width).map(|c| tap(c, start).0).collect();
    let before = i64::from(shifts.iter().any(|&q| q < 0));
    let after = i64::from(shifts.iter().any(|&q| q > 0));
    -before..=groups - 1 + after
}

/// The condition `c` on the input element `offset + k` from a row's first tap, as a condition
/// on `k` written in the column variable `cols` (the lane at 0): what a pair's half at
/// `offset` masks.
pub(super) fn element_cond(c: &VCond, lane: Var, cols: Var, offset: i64) -> VCond {
    map_cond(c, &|l: &Lin| {
        l.substitute(&|v| {
            if v == lane {
                Some(Lin::constant(0))
            } else if v == cols {
                Some(Lin::var(cols).add_const(offset))
            } else {
                None
            }
        })
    })
}

/// The constant `init` stores into exactly the accumulators of `t`, if it does: a perfect nest
/// whose loops of more than one iteration are the tile's (its space loops, then the lane, of
/// the same extents) and whose store, its loops renamed to the tile's, has the tile's index.
pub(super) fn init_value(init: &Stmt, t: &RegTile) -> Option<f64> {
    let ConstantNest {
        loops,
        index,
        value: c,
    } = constant_nest(init, t.buf)?;
    let live = |l: &&(Var, i64)| l.1 > 1;
    let mine: Vec<&(Var, i64)> = loops.iter().filter(live).collect();
    let tiles: Vec<&(Var, i64)> = t.tile.iter().chain([&t.lane]).filter(live).collect();
    if mine.len() != tiles.len() || mine.iter().zip(&tiles).any(|(a, b)| a.1 != b.1) {
        return None;
    }
    // Loops of one iteration are at 0 on either side.
    let renamed = index.substitute(&|v| match mine.iter().position(|l| l.0 == v) {
        Some(k) => Some(Lin::var(tiles[k].0)),
        None => loops.iter().any(|l| l.0 == v).then(|| Lin::constant(0)),
    });
    let ones = |v: Var| {
        t.tile
            .iter()
            .any(|l| l.0 == v && l.1 == 1)
            .then(|| Lin::constant(0))
    };
    (renamed == t.index.substitute(&ones)).then_some(c)
}

/// The tile starting fresh (column-shared or row-packed: `starts_fresh`) that `next` reaches
/// through a perfect chain of loops, each of which gives the tile fresh accumulators, and the
/// constant `init` fills that tile's whole buffer with: (the tile's key, the constant). Such a
/// tile starts from the constant instead of loading what `init` stored (a cache-write buffer
/// zeroed whole, then computed tile by tile: the stores of a partial vector do not forward to
/// the tile's whole-vector load). Every loop of the chain with more than one iteration must be
/// a space loop of the tile's store, so no accumulator is updated by two executions of the
/// tile; and `init`, the tiles and the buffer must count the same elements, so the tiles cover
/// what `init` wrote. `init` is still written: it is only not read back.
pub(super) fn init_before_chain(
    init: &Stmt,
    next: &Stmt,
    tiles: &HashMap<*const Stmt, RegTile>,
    starts_fresh: impl Fn(&*const Stmt) -> bool,
    elems: impl Fn(usize) -> i64,
) -> Option<(*const Stmt, f64)> {
    let is_tile = |s: &Stmt| starts_fresh(&(s as *const Stmt));
    let (chain, inner) = perfect_nest(next, is_tile);
    let key = inner as *const Stmt;
    if !is_tile(inner) {
        return None;
    }
    let t = tiles.get(&key)?;
    let nest = constant_nest(init, t.buf)?;
    let written: i64 = nest.loops.iter().map(|l| l.1).product();
    let mut space = vec![];
    t.index.vars(&mut space);
    if chain.iter().any(|(v, n, _)| *n > 1 && !space.contains(v)) {
        return None;
    }
    let tiled: i64 = chain.iter().map(|c| c.1).product::<i64>()
        * t.tile.iter().map(|l| l.1).product::<i64>()
        * t.lane.1;
    (!chain.is_empty() && written == tiled && tiled == elems(t.buf)).then_some((key, nest.value))
}

/// One half of a pair: `lanes` elements from `offset` (from its row's first tap), of which
/// `[lo, hi)` are in the row's span, for tile point `point`.
struct Half {
    point: usize,
    pair: i64,
    half: i64,
    offset: i64,
    lo: i64,
    hi: i64,
    name: String,
}

/// `l` at a tile point, the lane at `first` and the columns at `col` (when given).
pub(super) fn at_point(
    l: &Lin,
    point: &[(Var, i64)],
    lane: (Var, i64),
    col: Option<(Var, i64)>,
) -> Lin {
    l.substitute(&|v| {
        if v == lane.0 {
            Some(Lin::constant(lane.1))
        } else if let Some((_, k)) = col.filter(|c| c.0 == v) {
            Some(Lin::constant(k))
        } else {
            point.iter().find(|p| p.0 == v).map(|p| Lin::constant(p.1))
        }
    })
}

impl Gen<'_> {
    /// Writes `t` as `w`. Rows first: the pairs' halves start at the op's identity and take
    /// the max (min) of one vector per window row in the band; after it each output vector
    /// combines its accumulator with its taps. Otherwise the accumulators stay in registers
    /// across the band, and each band step loads the pairs and adds each tap (times its
    /// weight) to them, column by column: the plain form's order.
    /// `init`: the constant the accumulators start from instead of being loaded.
    pub(super) fn column_share_tile(&mut self, t: &RegTile, w: &ColumnShare, init: Option<f64>) {
        let lanes = self.lanes;
        let (lane, extent) = t.lane;
        let width = w.cols.1;
        let acc = self.names.bufs[t.buf].clone();
        let ident = format!("((th_vf){{0}} + {})", float_literal(identity(t.op)));
        let groups = (extent + lanes - 1) / lanes;
        // The elements a row's taps read, from its first: 2 per output column and the window.
        let span = 2 * (extent - 1) + width;
        let points = tile_points(&t.tile);
        // The accumulators, by point and group: (name, index, lanes used).
        let mut regs = vec![];
        for point in &points {
            for g in 0..groups {
                let (first, used) = (g * lanes, lanes.min(extent - g * lanes));
                let name = self.names.fresh(&format!("{acc}_r{}", regs.len()));
                let index = self.lin(&at_point(t.index, point, (lane, first), None));
                regs.push((name, format!("&{acc}[{index}]"), used));
            }
        }
        // A weighted tile (a depthwise convolution's) computes in the in-lane order, where the
        // target has one: its FMAs and the shuffles then issue side by side. A max pool's
        // columns are not FMA-bound, and the order's permutation at the store cost it 3-4%.
        let order = self.in_lane.clone().filter(|_| w.scale.is_some());
        let in_lane = order.is_some();
        let start = |at: &str, used: i64| match init {
            Some(c) => format!("((th_vf){{0}} + {})", float_literal(c)),
            None if in_lane => format!("TH_TO_IL({})", vload(at, used, lanes)),
            None => vload(at, used, lanes),
        };
        let mut halves = vec![];
        for point in 0..points.len() {
            for pair in pairs(groups, width, w.start) {
                for half in 0..2 {
                    let offset = w.start + 2 * lanes * pair + lanes * half;
                    let (lo, hi) = ((-offset).max(0), (span - offset).min(lanes));
                    if lo < hi {
                        let name = self.names.fresh(&format!("{acc}_w{}", halves.len()));
                        halves.push(Half {
                            point,
                            pair,
                            half,
                            offset,
                            lo,
                            hi,
                            name,
                        });
                    }
                }
            }
        }
        self.line("{");
        self.depth += 1;
        if w.rows_first {
            for h in &halves {
                self.line(&format!("th_vf {} = {ident};", h.name));
            }
        } else {
            for (r, at, used) in &regs {
                self.line(&format!("th_vf {r} = {};", start(at, *used)));
            }
        }
        let band = &t.band[..t.band.len() - 1];
        for &(v, n, kind) in band {
            let name = self.var(v);
            self.open_loop(&name, n, kind);
            self.depth += 1;
        }
        for h in &halves {
            let load = self.half_load(t, w, &points[h.point], h);
            if w.rows_first {
                let op = vop(t.op);
                self.line(&format!("{} = {op}({}, {load});", h.name, h.name));
            } else {
                self.line(&format!("const th_vf {} = {load};", h.name));
            }
        }
        if !w.rows_first {
            self.column_updates(t, w, &points, &halves, &regs, order.as_deref());
        }
        for _ in band {
            self.depth -= 1;
            self.line("}");
        }
        if w.rows_first {
            for (r, at, used) in &regs {
                self.line(&format!("th_vf {r} = {};", start(at, *used)));
            }
            self.column_updates(t, w, &points, &halves, &regs, order.as_deref());
        }
        for (r, at, used) in &regs {
            let v = if in_lane {
                format!("TH_FROM_IL({r})")
            } else {
                r.clone()
            };
            self.line(&vstore(at, &v, *used, lanes));
        }
        self.depth -= 1;
        self.line("}");
    }

    /// The C that loads half `h` at tile point `point`: under a mask of its elements in the
    /// row's span and, with a select, in its range (the constant outside).
    fn half_load(
        &mut self,
        t: &RegTile,
        w: &ColumnShare,
        point: &[(Var, i64)],
        h: &Half,
    ) -> String {
        let (lane, cols) = (t.lane.0, w.cols.0);
        let at = self.lin(&at_point(w.index, point, (lane, 0), Some((cols, h.offset))));
        let at = format!("&{}[{at}]", self.names.bufs[w.buf]);
        let fill = float_literal(w.fill);
        let Some(c) = w.cond else {
            return if h.lo == 0 && h.hi == self.lanes {
                format!("th_vload({at})")
            } else {
                format!("th_vloadm({at}, th_rangemask({}, {}), {fill})", h.lo, h.hi)
            };
        };
        let c = map_cond(c, &|l: &Lin| {
            l.substitute(&|v| point.iter().find(|p| p.0 == v).map(|p| Lin::constant(p.1)))
        });
        let c = element_cond(&c, lane, cols, h.offset);
        let range = lane_range(&c, cols).expect("plan checked that the bounds move with cols");
        let mask = self.range_mask(&range, (h.lo, h.hi), 0);
        format!("th_vloadm({at}, {mask}, {fill})")
    }

    /// Each accumulator updated with its taps, column by column: the evens and odds of the
    /// pairs named once, a tap outside its own pair shifted in from the one beside.
    fn column_updates(
        &mut self,
        t: &RegTile,
        w: &ColumnShare,
        points: &[Vec<(Var, i64)>],
        halves: &[Half],
        regs: &[(String, String, i64)],
        order: Option<&[i64]>,
    ) {
        let lanes = self.lanes;
        let (cols, width) = w.cols;
        let acc = self.names.bufs[t.buf].clone();
        let ident = format!("((th_vf){{0}} + {})", float_literal(identity(t.op)));
        let groups = regs.len() / points.len();
        let mut parts: HashMap<(usize, i64, usize), String> = HashMap::new();
        let mut part = |g: &mut Gen<'_>, point: usize, pair: i64, parity: usize| -> String {
            if let Some(n) = parts.get(&(point, pair, parity)) {
                return n.clone();
            }
            let half = |k: i64| {
                halves
                    .iter()
                    .find(|h| h.point == point && h.pair == pair && h.half == k)
                    .map_or(ident.clone(), |h| h.name.clone())
            };
            let f = if parity == 0 { "TH_EVENS" } else { "TH_ODDS" };
            let il = if order.is_some() { "_IL" } else { "" };
            let name = g.names.fresh(&format!("{acc}_p"));
            g.line(&format!(
                "const th_vf {name} = {f}{il}({}, {});",
                half(0),
                half(1)
            ));
            parts.insert((point, pair, parity), name.clone());
            name
        };
        // Lane x of the result is lane `k + x` of the two vectors' lanes, one after the other;
        // in the in-lane order both the result's lanes and its sources' are permuted.
        let lanes_from = |k: i64| -> String {
            let v: Vec<String> = (0..lanes)
                .map(|j| match order {
                    None => (k + j).to_string(),
                    Some(o) => {
                        let (from, x) = ((k + o[j as usize]) / lanes, (k + o[j as usize]) % lanes);
                        let at = o.iter().position(|&y| y == x).expect("a permutation") as i64;
                        (from * lanes + at).to_string()
                    }
                })
                .collect();
            v.join(", ")
        };
        for (pi, point) in points.iter().enumerate() {
            for g in 0..groups {
                let r = regs[pi * groups + g].0.clone();
                for c in 0..width {
                    let (shift, parity) = tap(c, w.start);
                    let here = part(self, pi, g as i64, parity);
                    let v = match shift {
                        0 => here,
                        s if s > 0 => {
                            let next = part(self, pi, g as i64 + 1, parity);
                            format!("TH_SHUFFLE2({here}, {next}, {})", lanes_from(s))
                        }
                        s => {
                            let before = part(self, pi, g as i64 - 1, parity);
                            format!("TH_SHUFFLE2({before}, {here}, {})", lanes_from(lanes + s))
                        }
                    };
                    let v = match w.scale {
                        Some(e) => {
                            let e = map_lins(e, &|l| {
                                at_point(l, point, (t.lane.0, 0), Some((cols, c)))
                            });
                            format!("({v} * {})", self.value(&e))
                        }
                        None => v,
                    };
                    self.line(&match t.op {
                        ReduceOp::Sum => format!("{r} = {r} + {v};"),
                        op => format!("{r} = {}({r}, {v});", vop(op)),
                    });
                }
            }
        }
    }
}

/// The vector helper of a max or min.
fn vop(op: ReduceOp) -> &'static str {
    if op == ReduceOp::Min {
        "th_vmin"
    } else {
        "th_vmax"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taps_are_evens_odds_and_their_shifts() {
        // A 3-wide window whose first tap is at an odd offset: start 1, the pair holds taps 1
        // and 2 as evens and odds, tap 0 is the odds shifted in from the pair before.
        assert_eq!(tap(0, 1), (-1, 1));
        assert_eq!(tap(1, 1), (0, 0));
        assert_eq!(tap(2, 1), (0, 1));
        assert_eq!(pairs(4, 3, 1), -1..=3);
        // At an even offset: taps 0 and 1 are the pair's, tap 2 the evens shifted from after.
        assert_eq!(tap(2, 0), (1, 0));
        assert_eq!(pairs(4, 3, 0), 0..=4);
        assert_eq!(pairs(1, 2, 0), 0..=0);
    }
}
