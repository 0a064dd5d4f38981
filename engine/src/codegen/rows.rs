//! Rows packed into lanes: a register tile whose output rows are shorter than a vector (a 7-,
//! 13- or 14-wide map on 16 lanes) and contiguous in memory, written with its vectors running
//! over the tile's rows one after the other instead of one partial vector per row. A 7x7 map
//! is then 4 vectors (49 of 64 lanes), not 7 (49 of 112): fewer loads and FMAs per output.
//!
//! It qualifies when the tile's innermost space loop is the row loop `y`, the vector loop `x`
//! covers a whole row, and every index that moves along the lanes moves along the rows by one
//! row's width (`W * y + x` in the output and in each vector operand: a stride-1 window whose
//! input rows are as wide as its output's, as padding of `(k - 1) * d / 2` gives). Then lane
//! `l` of the vector starting at `first` is row `(first + l) / W`, column `(first + l) % W`,
//! and each vector operand is one contiguous load.
//!
//! What is no longer a range of the lane is an inlined padding's condition: it holds on a
//! lane pattern, row by row. The tile writes it as a literal mask, decided lane by lane from
//! the bounds of every other variable it reads, with the window loops it reads written once per
//! value (`unrolled`). Where the bounds do not decide a mask (the row tile starts where an
//! outer loop says), the tile keeps the plain form. Lanes whose mask is clear are never read
//! (a masked load), so a tap before the map's first row reads nothing out of the buffer; a
//! vector whose every lane is padding is no update at all. On AVX-512 the taps of a window's
//! row are shifted out of vectors loaded once instead (`anchors`).
//!
//! A window read with stride 2 (`2R * y + 2x`, rows of pitch `R`) packs too, on AVX-512 only:
//! its taps are then shifts of the input's four phases (`phases`), never loads.
//!
//! Measured by hand on a Zen 4 (AVX-512, 2 threads), the depthwise 5x5 on 240 channels of 7x7:
//! the tuned plain tile 14.9-15.9 us, packed rows with masks read from a table 8.8 us, with
//! literal masks 6.0 us (docs/experiments/2026-12-05-rows-in-lanes.md).

use super::anchors::Anchors;
use super::lanes::{cond_uses, lane_coef, uses};
use super::phases::{PhaseNames, Phases};
use super::regtile::{RegTile, groups, map_cond, map_lins, tile_points};
use super::writer::{
    Gen, Operands, accumulate, accumulated, float_literal, vector_arithmetic, vector_select, vload,
    vstore,
};
use crate::ir::{BinaryOp, CmpOp, UnaryOp};
use crate::lower::{Lin, LoopKind, LoweredFunc, Stmt, VCond, VExpr, Var, VarMap};

/// At most this many band iterations written out one by one: a 7x7 window.
const MAX_UNROLLED: i64 = 49;

/// A tile written with its rows packed into lanes.
#[derive(Debug, Clone)]
pub(super) struct RowPack {
    /// The tile's row loop (its innermost space loop) and its extent.
    pub rows: (Var, i64),
    /// The band loops the masks read, written once per value.
    pub unrolled: Vec<Var>,
    /// Bounds of the other variables the masks read (loops around the tile, region starts).
    pub bounds: VarMap<(i64, i64)>,
    /// Where the window is read with stride 2: the phases its taps are shifted out of.
    pub phases: Option<Phases>,
}

/// The packed form of `t`, if it qualifies (see the module doc), for vectors of `lanes` and
/// a register file of `registers`; a window read with stride 2 only where the target shifts
/// across two vectors (`aligns`).
pub(super) fn plan(
    t: &RegTile,
    func: &LoweredFunc,
    lanes: i64,
    (aligns, registers): (bool, i64),
) -> Option<RowPack> {
    let (lane, width) = t.lane;
    let &(y, rows) = t.tile.last()?;
    if width >= lanes || rows < 2 || lane_coef(t.index, y) != Some(width) {
        return None;
    }
    let mut conds = vec![];
    let mut reads = Reads::default();
    if !packs(t.value, lane, y, width, &mut conds, &mut reads) {
        return None;
    }
    let strided = reads.strided;
    if strided && (reads.contiguous || !aligns) {
        return None;
    }
    let mut read = vec![];
    for c in &conds {
        cond_vars(c, &mut read);
    }
    let unrolled: Vec<Var> = t
        .band
        .iter()
        .filter(|b| read.contains(&b.0))
        .map(|b| b.0)
        .collect();
    let count: i64 = t
        .band
        .iter()
        .filter(|b| unrolled.contains(&b.0))
        .map(|b| b.1)
        .product();
    if count > MAX_UNROLLED {
        return None;
    }
    let lets = lets(&func.body);
    let inside: Vec<Var> = t.tile.iter().map(|l| l.0).chain([lane]).collect();
    let bounds = read
        .iter()
        .filter(|v| !inside.contains(v) && !unrolled.contains(v))
        .map(|&v| (v, var_bounds(v, func, &lets, 0)))
        .collect();
    let mut p = RowPack {
        rows: (y, rows),
        unrolled,
        bounds,
        phases: None,
    };
    // Every mask the tile will write must be decided.
    let points = tile_points(&t.tile[..t.tile.len() - 1]);
    let band: Vec<(Var, i64)> = t
        .band
        .iter()
        .filter(|b| p.unrolled.contains(&b.0))
        .map(|b| (b.0, b.1))
        .collect();
    for fixed in tile_points(&band) {
        for point in &points {
            let at = |l: &Lin| constants(l, &[point, &fixed]);
            for c in &conds {
                let c = map_cond(c, &at);
                for g in groups(rows * width, lanes) {
                    p.mask(&c, t, g)?;
                }
            }
        }
    }
    if strided {
        p.phases = Some(p.spread_phases(t, lanes, registers)?);
    }
    Some(p)
}

impl RowPack {
    /// The phases of a stride-2 tile's taps, its band written out from the outermost loop that
    /// leaves the phases in the registers: a tap is a constant shift of them only where the
    /// window is written out from the outermost loop the masks read in (the loops outside it
    /// move the phases' base); further out, more taps share the phases' loads and shuffles (a
    /// pool without padding: every tap, not one at a time), up to `MAX_UNROLLED` iterations.
    fn spread_phases(&mut self, t: &RegTile, lanes: i64, registers: i64) -> Option<Phases> {
        let masked = t.band.iter().position(|b| self.unrolled.contains(&b.0));
        let last = masked.unwrap_or(t.band.len());
        let first = (0..=last)
            .find(|&i| t.band[i..].iter().map(|b| b.1).product::<i64>() <= MAX_UNROLLED)?;
        let read = self.unrolled.clone();
        (first..=last).find_map(|i| {
            self.unrolled = t
                .band
                .iter()
                .enumerate()
                .filter(|(j, b)| *j >= i || read.contains(&b.0))
                .map(|(_, b)| b.0)
                .collect();
            self.phases(t, i, lanes, registers)
        })
    }
}

/// The lane-varying loads a packed value reads: contiguous ones, and ones at stride 2.
#[derive(Debug, Default)]
struct Reads {
    contiguous: bool,
    strided: bool,
}

impl RowPack {
    /// Pushes `e`'s lane-varying loads over the vector `group` (`e` with its tile point and
    /// unrolled loops fixed), each with the lanes it needs: its select's mask, or all. `None`
    /// where a load is read only under a condition equal in every lane (hoisted into anchors
    /// or phases, it would be read where the condition fails).
    pub(super) fn vector_loads(
        &self,
        e: &VExpr,
        t: &RegTile,
        group: (i64, i64),
        out: &mut Vec<(usize, Lin, u32)>,
    ) -> Option<()> {
        let (lane, y) = (t.lane.0, self.rows.0);
        if !uses(e, lane) && !uses(e, y) {
            return Some(());
        }
        match e {
            VExpr::Load { buf, index } => out.push((*buf, index.clone(), (1u32 << group.1) - 1)),
            VExpr::Unary(UnaryOp::Neg, a) => self.vector_loads(a, t, group, out)?,
            VExpr::Binary(_, a, b) => {
                self.vector_loads(a, t, group, out)?;
                self.vector_loads(b, t, group, out)?;
            }
            VExpr::Select(c, a, _) if cond_uses(c, lane) || cond_uses(c, y) => {
                let VExpr::Load { buf, index } = &**a else {
                    unreachable!("packs admits a load under a select of a constant only")
                };
                let m = self.mask(c, t, group)?;
                if m != 0 {
                    out.push((*buf, index.clone(), m));
                }
            }
            _ => return None,
        }
        Some(())
    }
}

/// Whether `e` has the packed form: what varies along the lanes or the rows is an
/// arithmetic of loads at `W * y + x` (or at `2R * y + 2x`, a window read with stride 2 on
/// rows of pitch `R`: see `phases`), bare or under a select of a constant (padding), whose
/// conditions are pushed to `conds`. Anything else reading `x` or `y` does not pack.
fn packs<'e>(
    e: &'e VExpr,
    x: Var,
    y: Var,
    width: i64,
    conds: &mut Vec<&'e VCond>,
    reads: &mut Reads,
) -> bool {
    if !uses(e, x) && !uses(e, y) {
        return true;
    }
    let mut load = |index: &Lin| match (lane_coef(index, x), lane_coef(index, y)) {
        (Some(1), Some(r)) if r == width => {
            reads.contiguous = true;
            true
        }
        (Some(2), Some(r)) if r > 0 && r % 2 == 0 => {
            reads.strided = true;
            true
        }
        _ => false,
    };
    match e {
        VExpr::Load { index, .. } => load(index),
        VExpr::Unary(UnaryOp::Neg, a) => packs(a, x, y, width, conds, reads),
        VExpr::Binary(BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div, a, b) => {
            packs(a, x, y, width, conds, reads) && packs(b, x, y, width, conds, reads)
        }
        VExpr::Select(c, a, b) if cond_uses(c, x) || cond_uses(c, y) => {
            let (VExpr::Load { index, .. }, VExpr::Const(_)) = (&**a, &**b) else {
                return false;
            };
            conds.push(c);
            index_only(c) && load(index)
        }
        VExpr::Select(_, a, b) => {
            packs(a, x, y, width, conds, reads) && packs(b, x, y, width, conds, reads)
        }
        _ => false,
    }
}

/// Whether `c` compares index expressions only (no loaded value).
fn index_only(c: &VCond) -> bool {
    match c {
        VCond::Index(..) => true,
        VCond::Value(..) => false,
        VCond::And(a, b) | VCond::Or(a, b) => index_only(a) && index_only(b),
        VCond::Not(a) => index_only(a),
    }
}

fn cond_vars(c: &VCond, out: &mut Vec<Var>) {
    match c {
        VCond::Index(_, a, b) => {
            a.vars(out);
            b.vars(out);
        }
        VCond::Value(..) => {}
        VCond::And(a, b) | VCond::Or(a, b) => {
            cond_vars(a, out);
            cond_vars(b, out);
        }
        VCond::Not(a) => cond_vars(a, out),
    }
}

/// `l` with the variables of `fixed` replaced by their values.
pub(super) fn constants(l: &Lin, fixed: &[&Vec<(Var, i64)>]) -> Lin {
    l.substitute(&|v| {
        fixed
            .iter()
            .find_map(|f| f.iter().find(|p| p.0 == v))
            .map(|p| Lin::constant(p.1))
    })
}

/// Every region start's definitions (`Stmt::Let`), by variable.
fn lets(body: &[Stmt]) -> VarMap<Vec<Lin>> {
    fn walk(body: &[Stmt], out: &mut VarMap<Vec<Lin>>) {
        for s in body {
            match s {
                Stmt::Let { var, value } => out.entry(*var).or_default().push(value.clone()),
                Stmt::For { body, .. } | Stmt::Alloc { body, .. } | Stmt::Guard { body, .. } => {
                    walk(body, out)
                }
                Stmt::Store { .. } => {}
            }
        }
    }
    let mut out = VarMap::default();
    walk(body, &mut out);
    out
}

/// Inclusive bounds of `v`: a loop's, or the hull of a region start's definitions. Unknown is
/// unbounded (no mask reading it is decided).
fn var_bounds(v: Var, func: &LoweredFunc, lets: &VarMap<Vec<Lin>>, depth: u32) -> (i64, i64) {
    const UNKNOWN: (i64, i64) = (-(1 << 40), 1 << 40);
    match v {
        Var::Loop { .. } => match func.loop_extents.get(&v) {
            Some(&n) if n >= 1 => (0, n - 1),
            _ => UNKNOWN,
        },
        Var::Lo { .. } => match lets.get(&v) {
            Some(defs) if depth < 16 => defs
                .iter()
                .map(|l| l.range(&|w| var_bounds(w, func, lets, depth + 1)))
                .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
                .unwrap_or(UNKNOWN),
            _ => UNKNOWN,
        },
    }
}

/// Whether `c` holds for every value the bounds allow (`Some(true)`), for none
/// (`Some(false)`), or depends on them (`None`).
fn decide(c: &VCond, bounds: &impl Fn(Var) -> (i64, i64)) -> Option<bool> {
    match c {
        VCond::Index(op, a, b) => {
            let (lo, hi) = a.sub(b).range(bounds);
            let (yes, no) = match op {
                CmpOp::Lt => (hi < 0, lo >= 0),
                CmpOp::Le => (hi <= 0, lo > 0),
                CmpOp::Gt => (lo > 0, hi <= 0),
                CmpOp::Ge => (lo >= 0, hi < 0),
                CmpOp::Eq => (lo == 0 && hi == 0, lo > 0 || hi < 0),
                CmpOp::Ne => (lo > 0 || hi < 0, lo == 0 && hi == 0),
            };
            if yes {
                Some(true)
            } else if no {
                Some(false)
            } else {
                None
            }
        }
        VCond::Value(..) => None,
        VCond::And(a, b) => match (decide(a, bounds), decide(b, bounds)) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (Some(true), Some(true)) => Some(true),
            _ => None,
        },
        VCond::Or(a, b) => match (decide(a, bounds), decide(b, bounds)) {
            (Some(true), _) | (_, Some(true)) => Some(true),
            (Some(false), Some(false)) => Some(false),
            _ => None,
        },
        VCond::Not(a) => decide(a, bounds).map(|b| !b),
    }
}

impl RowPack {
    /// The value of `e` (its tile point and unrolled loops fixed) in every lane of the vector
    /// `group`, where it is one constant: padding in every lane, or a product with it. A product
    /// with padding is taken as zero whatever the other factor, as a hand kernel skipping the
    /// border does (it differs only for an infinite or NaN weight).
    pub(super) fn lanes_constant(&self, e: &VExpr, t: &RegTile, group: (i64, i64)) -> Option<f64> {
        self.constant_with(e, t, &|c| self.mask(c, t, group))
    }

    /// [`RowPack::lanes_constant`] with each lane-varying select's mask given by `mask`.
    pub(super) fn constant_with(
        &self,
        e: &VExpr,
        t: &RegTile,
        mask: &dyn Fn(&VCond) -> Option<u32>,
    ) -> Option<f64> {
        let (lane, y) = (t.lane.0, self.rows.0);
        let known = |a: &VExpr| self.constant_with(a, t, mask);
        match e {
            VExpr::Const(c) => Some(*c),
            VExpr::Select(c, _, b) if cond_uses(c, lane) || cond_uses(c, y) => {
                match (mask(c)?, &**b) {
                    (0, VExpr::Const(fill)) => Some(*fill),
                    _ => None,
                }
            }
            VExpr::Unary(UnaryOp::Neg, a) => known(a).map(|a| -a),
            VExpr::Binary(BinaryOp::Mul, a, b) => match (known(a), known(b)) {
                (Some(0.0), _) | (_, Some(0.0)) => Some(0.0),
                (Some(a), Some(b)) => Some(a * b),
                _ => None,
            },
            VExpr::Binary(BinaryOp::Div, a, _) if known(a) == Some(0.0) => Some(0.0),
            VExpr::Binary(op @ (BinaryOp::Add | BinaryOp::Sub), a, b) => {
                let (a, b) = (known(a)?, known(b)?);
                Some(if *op == BinaryOp::Add { a + b } else { a - b })
            }
            _ => None,
        }
    }

    /// The lanes of the vector `(first, used)` where `c` holds, as a bit mask: `c` with the
    /// tile's point and the unrolled band loops fixed, decided lane by lane.
    pub(super) fn mask(&self, c: &VCond, t: &RegTile, (first, used): (i64, i64)) -> Option<u32> {
        let (lane, width) = t.lane;
        let y = self.rows.0;
        let bounds = |v: Var| {
            self.bounds
                .get(&v)
                .copied()
                .unwrap_or((-(1 << 40), 1 << 40))
        };
        let mut m = 0u32;
        for l in 0..used {
            let p = first + l;
            let at = [(y, p / width), (lane, p % width)];
            let c = map_cond(c, &|x: &Lin| constants(x, &[&at.to_vec()]));
            if decide(&c, &bounds)? {
                m |= 1 << l;
            }
        }
        Some(m)
    }
}

impl Gen<'_> {
    /// Writes `t` with its rows packed into lanes (see the module doc): accumulators loaded,
    /// the band with the tile unrolled inside (and the loops the masks read written once per
    /// value), stored.
    /// `init`: the constant the accumulators start from instead of being loaded.
    pub(super) fn row_packed_tile(&mut self, t: &RegTile, p: &RowPack, init: Option<f64>) {
        let lanes = self.lanes;
        let (lane, width) = t.lane;
        let (y, rows) = p.rows;
        let acc = self.names.bufs[t.buf].clone();
        // One accumulator per point of the other tile loops and vector of the packed rows.
        let mut regs = vec![];
        for point in tile_points(&t.tile[..t.tile.len() - 1]) {
            for (first, used) in groups(rows * width, lanes) {
                let name = self.names.fresh(&format!("{acc}_r{}", regs.len()));
                let mut at = point.clone();
                at.extend([(y, 0), (lane, first)]);
                let index = self.lin(&constants(t.index, &[&at]));
                regs.push((name, index, point.clone(), (first, used)));
            }
        }
        self.line("{");
        self.depth += 1;
        for (r, index, _, (_, used)) in &regs {
            let load = match init {
                Some(c) => format!("((th_vf){{0}} + {})", float_literal(c)),
                None => vload(&format!("&{acc}[{index}]"), *used, lanes),
            };
            self.line(&format!("th_vf {r} = {load};"));
        }
        self.packed_band(t, p, &regs, (0, &mut vec![]), None);
        for (r, index, _, (_, used)) in &regs {
            self.line(&vstore(&format!("&{acc}[{index}]"), r, *used, lanes));
        }
        self.depth -= 1;
        self.line("}");
    }

    /// The band from loop `i` in: a loop the masks read is written once per value. Under
    /// `taps`, a loop of one iteration is too (its variable is then 0 in the anchors).
    fn packed_band(
        &mut self,
        t: &RegTile,
        p: &RowPack,
        regs: &[Reg],
        (i, fixed): (usize, &mut Vec<(Var, i64)>),
        taps: Option<Taps>,
    ) {
        if taps.is_none()
            && let Some(ph) = &p.phases
            && ph.at == i
        {
            self.line("{");
            self.depth += 1;
            let names = self.phase_vectors(ph);
            self.packed_band(t, p, regs, (i, fixed), Some(Taps::Phases(ph, &names)));
            self.depth -= 1;
            self.line("}");
            return;
        }
        let Some(&(v, n, kind)) = t.band.get(i) else {
            self.packed_updates(t, p, regs, fixed, taps);
            return;
        };
        if taps.is_none()
            && p.phases.is_none()
            && self.aligns
            && anchor_loop(t, p) == Some(i)
            && let Some(a) = self.anchors(t, p, regs, fixed, i)
        {
            self.line("{");
            self.depth += 1;
            for d in &a.decls {
                self.line(d);
            }
            for k in 0..n {
                fixed.push((v, k));
                self.packed_band(t, p, regs, (i + 1, fixed), Some(Taps::Anchors(&a)));
                fixed.pop();
            }
            self.depth -= 1;
            self.line("}");
            return;
        }
        if p.unrolled.contains(&v) || (taps.is_some() && n == 1) {
            for k in 0..n {
                fixed.push((v, k));
                self.packed_band(t, p, regs, (i + 1, fixed), taps);
                fixed.pop();
            }
            return;
        }
        let name = self.var(v);
        self.open_loop(&name, n, kind);
        self.depth += 1;
        self.packed_band(t, p, regs, (i + 1, fixed), taps);
        self.depth -= 1;
        self.line("}");
    }

    /// One band iteration: each accumulator updated by its value at its point; its vector
    /// operands shifted out of `taps` where given.
    fn packed_updates(
        &mut self,
        t: &RegTile,
        p: &RowPack,
        regs: &[Reg],
        fixed: &[(Var, i64)],
        taps: Option<Taps>,
    ) {
        let mut ops = Operands::default();
        let fixed = fixed.to_vec();
        let mut updates = vec![];
        for (r, _, point, group) in regs {
            let value = map_lins(t.value, &|l| constants(l, &[point, &fixed]));
            // A vector whose every lane is padding adds the reduction's identity: no load and
            // no FMA (at a 7x7 map's edges, a fifth of a 5x5 window's).
            if p.lanes_constant(&value, t, *group) == Some(t.op.identity()) {
                continue;
            }
            let merge = taps.and_then(|_| p.merge_mask(&value, t, *group));
            let form = Form {
                group: *group,
                taps,
                merge,
            };
            let (e, vector) = self.packed_value(&value, t, p, &form, &mut ops);
            updates.push(match merge {
                Some(m) => format!(
                    "{r} = TH_VMERGE({m}u, {}, {r});",
                    accumulated(t.op, r, &e, vector)
                ),
                None => accumulate(t.op, r, &e, vector),
            });
        }
        if updates.is_empty() {
            return;
        }
        self.line("{");
        self.depth += 1;
        self.write_updates(regs.len(), &ops, &updates);
        self.depth -= 1;
        self.line("}");
    }

    /// C for `e` (its tile point and unrolled loops fixed) over the vector `form.group` of the
    /// packed rows, and whether it is a vector. `e` passed `packs`.
    fn packed_value(
        &mut self,
        e: &VExpr,
        t: &RegTile,
        p: &RowPack,
        form: &Form,
        ops: &mut Operands,
    ) -> (String, bool) {
        let (lane, y) = (t.lane.0, p.rows.0);
        let (first, used) = form.group;
        if !uses(e, lane) && !uses(e, y) {
            if let VExpr::Const(_) = e {
                return (self.value(e), false);
            }
            let v = self.value(e);
            return (ops.name(self, "float", v), false);
        }
        let at = |g: &mut Gen, buf: usize, index: &Lin| {
            let i = g.lin(&constants(index, &[&vec![(y, 0), (lane, first)]]));
            format!("&{}[{i}]", g.names.bufs[buf])
        };
        // The operand of a load in the lanes of `needed`, the others unspecified: an anchor
        // shifted, a phase shifted, or a load.
        let whole = |g: &mut Gen, buf: usize, index: &Lin, needed: u32| match form.taps {
            Some(Taps::Anchors(a)) => g.shifted(a, buf, index, (y, lane), first),
            Some(Taps::Phases(ph, names)) => {
                g.phase_operand((ph, names), p, t, (buf, index), form.group, needed)
            }
            None => vload(&at(g, buf, index), used, g.lanes),
        };
        match e {
            VExpr::Load { buf, index } => {
                let load = whole(self, *buf, index, (1u32 << used) - 1);
                (ops.name(self, "th_vf", load), true)
            }
            VExpr::Unary(UnaryOp::Neg, a) => {
                let (a, v) = self.packed_value(a, t, p, form, ops);
                (format!("(-{a})"), v)
            }
            VExpr::Binary(op, a, b) => {
                let a = self.packed_value(a, t, p, form, ops);
                let b = self.packed_value(b, t, p, form, ops);
                vector_arithmetic(*op, a, b)
            }
            VExpr::Select(c, a, b) if cond_uses(c, lane) || cond_uses(c, y) => {
                let (VExpr::Load { buf, index }, VExpr::Const(fill)) = (&**a, &**b) else {
                    unreachable!("packs admits a load under a select of a constant only")
                };
                let mask = p.mask(c, t, form.group).expect("plan decided every mask");
                let load = if mask == 0 {
                    format!("((th_vf){{0}} + {})", float_literal(*fill))
                } else if mask == (1u32 << used) - 1 || form.merge == Some(mask) {
                    whole(self, *buf, index, mask)
                } else if form.taps.is_some() {
                    let v = whole(self, *buf, index, mask);
                    format!(
                        "TH_VMERGE({mask}u, {v}, ((th_vf){{0}} + {}))",
                        float_literal(*fill)
                    )
                } else {
                    format!(
                        "th_vloadm({}, {mask}u, {})",
                        at(self, *buf, index),
                        float_literal(*fill)
                    )
                };
                (ops.name(self, "th_vf", load), true)
            }
            VExpr::Select(c, a, b) => {
                // A condition equal in every lane: its arms read only where it holds (see
                // `vector_value`).
                let c = self.cond(c);
                let mut arms = Operands::inline();
                let a = self.packed_value(a, t, p, form, &mut arms);
                let b = self.packed_value(b, t, p, form, &mut arms);
                (ops.name(self, "th_vf", vector_select(&c, a, b)), true)
            }
            _ => unreachable!("packs admits loads, negation, arithmetic and selects"),
        }
    }
}

/// The band loop whose taps share anchors (see `anchors`): the innermost written out value by
/// value with more than one, where every loop inside it is written out too or has one
/// iteration (a window's row of taps, a 7x7 one's 7). Where loops the masks do not read are
/// inside it (a convolution's input channels), none.
fn anchor_loop(t: &RegTile, p: &RowPack) -> Option<usize> {
    let spread = |b: &(Var, i64, LoopKind)| p.unrolled.contains(&b.0);
    let i = t.band.iter().rposition(|b| spread(b) && b.1 > 1)?;
    t.band[i + 1..]
        .iter()
        .all(|b| spread(b) || b.1 == 1)
        .then_some(i)
}

/// How a packed tile's update is written: over which vector, its operands shifted out of which
/// anchors or phases (if any), merged into the accumulator under which mask (if any).
struct Form<'a> {
    group: (i64, i64),
    taps: Option<Taps<'a>>,
    merge: Option<u32>,
}

/// What a packed tile's taps are shifted out of: stride 1's anchors, or stride 2's phases.
#[derive(Clone, Copy)]
enum Taps<'a> {
    Anchors(&'a Anchors),
    Phases(&'a Phases, &'a PhaseNames),
}

/// An accumulator: its name, its index (C), its point of the other tile loops and its vector.
pub(super) type Reg = (String, String, Vec<(Var, i64)>, (i64, i64));
