//! Phases: the packed rows (`rows`) of a window read with stride 2, their taps shifted out of
//! the input's four phases.
//!
//! A stride-2 window's output rows on a small map are 4 or 7 wide: packed into the lanes,
//! lane `y * OW + x` of a tap reads input row `2y + ty`, column `2x + tx`, which is no
//! contiguous load. Split the input into its phases (row parity `a` x column parity `b`) and
//! lay phase `(a, b)` out like the output: its lane `L = Y * OW + X` holds input row
//! `2Y + a`, column `2X + b`. Tap `(ty, tx) = (2qy + a, 2qx + b)` then reads phase `(a, b)`
//! shifted by `qy * OW + qx` lanes, where `x + qx` stays within the row (`X < OW`): one
//! `valignd` and a masked FMA per tap, as with stride 1's anchors (`anchors`).
//!
//! The phases are built once per value of the loops outside the window (per channel), from
//! the input's vectors ("chunks", each loaded under the mask of the lanes some phase takes)
//! by two-source shuffles (`TH_SHUFFLE2`, `vpermt2ps`) merged under masks. Nothing is read
//! that a tap does not read.
//!
//! Which phase and shift a tap reads is found from its offset alone (no input shape is
//! known here): the offset `ty * R + tx` (`R` the input's row pitch, half the index's row
//! coefficient) is split into the row and column nearest it, and the split is kept only if
//! every lane the tap needs reads, through it, the very address the tap's own index names.
//! Where the shift by `qx` lanes carries a row's last columns into the next row (padding less
//! than the window's half, as a pool without padding has), the tap reads instead a phase of
//! its own shifted `qx` columns in its layout (`(a, b, q)`: lane `L` holds column
//! `2(X + q) + b`), by `qy * OW` lanes. A tile where some tap has neither keeps the plain form.
//!
//! Measured by hand on a Zen 4 (AVX-512, 2 threads; `bench/hand/depthwise_s2_phases.c`): the
//! depthwise 7x7 stride 2 on 120 channels of 7x7 in 3.15 us, where the search's best plain
//! tile took 7.99 us (docs/experiments/2026-12-06-sweep-stride2-small-maps.md).

use std::collections::BTreeMap;

use super::anchors::{lanes_load, valign};
use super::regtile::{RegTile, groups, map_lins, tile_points};
use super::rows::{RowPack, constants};
use super::writer::Gen;
use crate::lower::{Lin, Var};

/// The phases a tile's taps read, laid out once (its window loops all written out).
#[derive(Debug, Clone)]
pub(super) struct Phases {
    /// The band loop the phases are built before, the tile written out from it in.
    pub at: usize,
    families: Vec<Family>,
}

/// The phases of one input region: a buffer, its index without the constant.
#[derive(Debug, Clone)]
struct Family {
    buf: usize,
    base: Lin,
    /// The input's row pitch `R`.
    pitch: i64,
    /// The chunks: their first offset from `base` and the lanes loaded.
    chunks: Vec<(i64, u32)>,
    /// The phase vectors, by phase and first lane.
    vectors: Vec<PhaseVector>,
}

#[derive(Debug, Clone)]
struct PhaseVector {
    phase: Phase,
    start: i64,
    /// Each lane's source (chunk, lane), where some tap needs it.
    lanes: Vec<Option<(usize, i64)>>,
}

/// A family's buffer, index without its constant, and row pitch.
type FamilyKey = (usize, Lin, i64);

/// A phase: row parity `a`, column parity `b`, and `q` phase columns further right (lane
/// `Y * OW + X` holds input row `2Y + a`, column `2(X + q) + b`). `q` is 0 unless a tap's
/// column shift would carry its last columns into the next phase row (see [`RowPack::tap`]).
type Phase = (i64, i64, i64);

/// Where a tap's operand comes from: its family, phase and shift (in lanes).
struct Tap {
    family: FamilyKey,
    phase: Phase,
    shift: i64,
}

impl RowPack {
    /// The phases of `t`'s taps (its band's loops from `at` in written out, in `self`), where
    /// every tap has them and they fit `registers` beside the accumulators.
    pub(super) fn phases(
        &self,
        t: &RegTile,
        at: usize,
        lanes: i64,
        registers: i64,
    ) -> Option<Phases> {
        let (width, rows) = (t.lane.1, self.rows.1);
        let inner: Vec<(Var, i64)> = t.band[at..].iter().map(|b| (b.0, b.1)).collect();
        let points = tile_points(&t.tile[..t.tile.len() - 1]);
        let vectors = groups(rows * width, lanes);
        // Every lane a phase must hold, by family and phase.
        let mut needed: BTreeMap<FamilyKey, BTreeMap<Phase, Vec<i64>>> = BTreeMap::new();
        for taps in tile_points(&inner) {
            for point in &points {
                for &group in &vectors {
                    let value = map_lins(t.value, &|l| constants(l, &[point, &taps]));
                    if self.lanes_constant(&value, t, group) == Some(t.op.identity()) {
                        continue;
                    }
                    let mut reads = vec![];
                    self.vector_loads(&value, t, group, &mut reads)?;
                    for (buf, index, mask) in reads {
                        let tap = self.tap(buf, &index, t, group, mask)?;
                        let ls = needed.entry(tap.family).or_default();
                        let ls = ls.entry(tap.phase).or_default();
                        ls.extend(lanes_of(group, mask).map(|p| p + tap.shift));
                    }
                }
            }
        }
        let mut families = vec![];
        for ((buf, base, pitch), phases) in needed {
            families.push(Family::lay_out(buf, base, pitch, width, &phases, lanes));
        }
        let vectors_held: usize = families.iter().map(|f| f.vectors.len()).sum();
        let accumulators = points.len() * vectors.len();
        ((accumulators + vectors_held + 2) as i64 <= registers).then_some(Phases { at, families })
    }

    /// The phase and shift of the load of `buf` at `index` (its point and window fixed) over
    /// the vector `group`, checked lane by lane on the lanes of `mask`.
    fn tap(
        &self,
        buf: usize,
        index: &Lin,
        t: &RegTile,
        group: (i64, i64),
        mask: u32,
    ) -> Option<Tap> {
        let (lane, width) = t.lane;
        let y = self.rows.0;
        let (row, col) = (index.var_coef(y), index.var_coef(lane));
        if col != 2 || row % 2 != 0 || row == 0 {
            return None;
        }
        let pitch = row / 2;
        let origin = constants(index, &[&vec![(y, 0), (lane, 0)]]);
        let c0 = origin.c;
        let base = Lin { c: 0, ..origin };
        // The nearest splits first; on rows narrower than the window's reach the tap's own
        // column is further out (any split that reads the same addresses is right).
        let mut splits: Vec<i64> = (-8..=8).map(|d| c0.div_euclid(pitch) + d).collect();
        splits.sort_by_key(|ty| (c0 - ty * pitch).abs());
        // Every split with the column shift in the lanes first (taps share the phase), then
        // with it in the phase (phase vectors of their own): a shift by whole lanes carries a
        // row's last columns into the next row, which only padding (masked off) or a phase row
        // wider than the output's reach may take; a 3x3 pool without padding on a 14x14 map
        // has neither (a 6-wide output row, its taps 0-2 columns right).
        let forms = [false, true]
            .into_iter()
            .flat_map(|in_phase| splits.iter().map(move |&ty| (ty, in_phase)));
        for (ty, in_phase) in forms {
            let tx = c0 - ty * pitch;
            let (a, b) = (ty.rem_euclid(2), tx.rem_euclid(2));
            let (qy, qx) = ((ty - a) / 2, (tx - b) / 2);
            let (phase, shift) = if in_phase {
                ((a, b, qx), qy * width)
            } else {
                ((a, b, 0), qy * width + qx)
            };
            let reads_the_same = lanes_of(group, mask).all(|p| {
                let own = c0 + row * (p / width) + col * (p % width);
                own == source(phase, p + shift, pitch, width)
            });
            if reads_the_same {
                return Some(Tap {
                    family: (buf, base.clone(), pitch),
                    phase,
                    shift,
                });
            }
        }
        None
    }
}

/// The packed lanes of the vector `group` set in `mask`.
fn lanes_of((first, used): (i64, i64), mask: u32) -> impl Iterator<Item = i64> {
    (0..used)
        .filter(move |l| mask >> l & 1 == 1)
        .map(move |l| first + l)
}

/// The offset (from the family's base) that lane `l` of phase `(a, b, q)` holds: input row
/// `2Y + a`, column `2(X + q) + b`, for `l = Y * width + X`.
fn source((a, b, q): Phase, l: i64, pitch: i64, width: i64) -> i64 {
    a * pitch + b + 2 * q + 2 * pitch * l.div_euclid(width) + 2 * l.rem_euclid(width)
}

impl Family {
    /// The phase vectors covering `phases`' lanes (each from the lowest lane not yet
    /// covered) and the chunks covering their sources.
    fn lay_out(
        buf: usize,
        base: Lin,
        pitch: i64,
        width: i64,
        phases: &BTreeMap<Phase, Vec<i64>>,
        lanes: i64,
    ) -> Family {
        // Each vector's lanes as their sources (offsets from `base`), where some tap needs them.
        let mut laid = vec![];
        for (&phase, ls) in phases {
            for (start, members) in cover(ls, lanes) {
                let mut v = vec![None; lanes as usize];
                for l in members {
                    v[(l - start) as usize] = Some(source(phase, l, pitch, width));
                }
                laid.push((phase, start, v));
            }
        }
        let sources: Vec<i64> = laid
            .iter()
            .flat_map(|v| v.2.iter().flatten().copied())
            .collect();
        let chunks: Vec<(i64, u32)> = cover(&sources, lanes)
            .into_iter()
            .map(|(start, members)| {
                let mask = members.iter().fold(0u32, |m, s| m | 1 << (s - start));
                (start, mask)
            })
            .collect();
        // Each source as (chunk, lane).
        let in_chunk = |off: i64| {
            let k = chunks
                .iter()
                .position(|c| (c.0..c.0 + lanes).contains(&off))
                .expect("a chunk covers every source");
            (k, off - chunks[k].0)
        };
        let vectors = laid
            .into_iter()
            .map(|(phase, start, v)| PhaseVector {
                phase,
                start,
                lanes: v.into_iter().map(|s| s.map(in_chunk)).collect(),
            })
            .collect();
        Family {
            buf,
            base,
            pitch,
            chunks,
            vectors,
        }
    }
}

/// `xs` covered by runs of `lanes` values, each starting at the lowest value not yet covered:
/// each run's start and the values in it.
fn cover(xs: &[i64], lanes: i64) -> Vec<(i64, Vec<i64>)> {
    let mut xs = xs.to_vec();
    xs.sort_unstable();
    xs.dedup();
    let mut out: Vec<(i64, Vec<i64>)> = vec![];
    for x in xs {
        match out.last_mut() {
            Some((start, members)) if x < *start + lanes => members.push(x),
            _ => out.push((x, vec![x])),
        }
    }
    out
}

/// The phase vectors' names, by family (in `Phases`' order) and vector.
#[derive(Debug, Default)]
pub(super) struct PhaseNames(Vec<Vec<String>>);

impl Gen<'_> {
    /// Declares the chunks and phase vectors of `ph` (see the module doc).
    pub(super) fn phase_vectors(&mut self, ph: &Phases) -> PhaseNames {
        let lanes = self.lanes;
        let mut names = PhaseNames::default();
        for f in &ph.families {
            let buf = self.names.bufs[f.buf].clone();
            let mut chunks = vec![];
            for &(start, mask) in &f.chunks {
                let name = self.names.fresh("th_chunk");
                let at = format!("&{buf}[{}]", self.lin(&f.base.add_const(start)));
                let load = lanes_load(&at, mask, lanes);
                self.line(&format!("const th_vf {name} = {load};"));
                chunks.push(name);
            }
            let mut vectors = vec![];
            for a in &f.vectors {
                let name = self.names.fresh("th_phase");
                let value = gathered(&a.lanes, &chunks);
                self.line(&format!("const th_vf {name} = {value};"));
                vectors.push(name);
            }
            names.0.push(vectors);
        }
        names
    }

    /// The operand of the load of `buf` at `index` (its point and window fixed) over the
    /// vector `group`, in the lanes of `mask`: a phase vector shifted, or two.
    pub(super) fn phase_operand(
        &self,
        (ph, names): (&Phases, &PhaseNames),
        p: &RowPack,
        t: &RegTile,
        (buf, index): (usize, &Lin),
        group: (i64, i64),
        mask: u32,
    ) -> String {
        let tap = p
            .tap(buf, index, t, group, mask)
            .expect("phases checked every tap");
        let f = ph
            .families
            .iter()
            .position(|f| (f.buf, &f.base, f.pitch) == (tap.family.0, &tap.family.1, tap.family.2))
            .expect("phases laid out every tap's family");
        let lanes = self.lanes;
        let first = group.0 + tap.shift;
        // The phase vectors holding the lanes the operand needs: one or two.
        let mut holding: Vec<usize> = vec![];
        for l in lanes_of(group, mask).map(|l| l + tap.shift) {
            let j = ph.families[f]
                .vectors
                .iter()
                .position(|a| a.phase == tap.phase && (a.start..a.start + lanes).contains(&l))
                .expect("a phase vector holds every needed lane");
            if !holding.contains(&j) {
                holding.push(j);
            }
        }
        holding.sort_by_key(|&j| ph.families[f].vectors[j].start);
        let start = |j: usize| ph.families[f].vectors[j].start;
        let name = |j: usize| names.0[f][j].as_str();
        match holding[..] {
            [j] => {
                // Rotated: the lanes it does not hold are not needed.
                let s = (first - start(j)).rem_euclid(lanes);
                if s == 0 {
                    return name(j).to_string();
                }
                valign(name(j), name(j), s, lanes)
            }
            [j, k] if start(k) == start(j) + lanes => {
                valign(name(j), name(k), first - start(j), lanes)
            }
            [j, k] => {
                let idx: Vec<String> = (first..first + lanes)
                    .map(|l| {
                        if (start(j)..start(j) + lanes).contains(&l) {
                            l - start(j)
                        } else if (start(k)..start(k) + lanes).contains(&l) {
                            lanes + l - start(k)
                        } else {
                            0
                        }
                    })
                    .map(|i| i.to_string())
                    .collect();
                format!("TH_SHUFFLE2({}, {}, {})", name(j), name(k), idx.join(", "))
            }
            _ => unreachable!("an operand's needed lanes span at most two phase vectors"),
        }
    }
}

/// A phase vector from the chunks its lanes come from: a two-source shuffle per pair of
/// chunks, merged under the mask of that pair's lanes.
fn gathered(lanes: &[Option<(usize, i64)>], chunks: &[String]) -> String {
    let n = lanes.len() as i64;
    let mut used: Vec<usize> = lanes.iter().flatten().map(|s| s.0).collect();
    used.sort_unstable();
    used.dedup();
    let mut value = String::new();
    for pair in used.chunks(2) {
        let (lo, hi) = (pair[0], *pair.last().expect("a pair"));
        let mut mask = 0u32;
        let idx: Vec<String> = lanes
            .iter()
            .enumerate()
            .map(|(i, s)| match *s {
                Some((k, l)) if k == lo => {
                    mask |= 1 << i;
                    l
                }
                Some((k, l)) if k == hi => {
                    mask |= 1 << i;
                    n + l
                }
                _ => 0,
            })
            .map(|i| i.to_string())
            .collect();
        let shuffle = format!(
            "TH_SHUFFLE2({}, {}, {})",
            chunks[lo],
            chunks[hi],
            idx.join(", ")
        );
        value = if value.is_empty() {
            shuffle
        } else {
            format!("TH_VMERGE({mask}u, {shuffle}, {value})")
        };
    }
    value
}
