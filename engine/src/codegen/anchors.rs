//! Anchors: a packed-row tile's taps shifted out of vectors loaded once.
//!
//! With rows packed into lanes (`rows`), tap `(dy, dx)` of a window reads the vector that
//! starts `W * dy + dx` after its output: an unaligned load at each of the window's offsets,
//! and on AVX-512 nearly every one crosses a cache line (a 64-byte load at any float offset).
//! Where the window's innermost loop is written out value by value (and the registers hold
//! these vectors beside the accumulators), the tile instead loads, once per value of the loops
//! outside it, the vectors those taps read between them ("anchors",
//! `lanes` floats apart from the first offset), and makes each tap's operand from two of them
//! with one shift (`TH_VALIGN`, `valignd`). An anchor reads only the lanes some tap uses (a
//! masked load), so nothing outside what the masked loads read is touched.
//!
//! The padding then moves from the load to the update: where a tap's operand is padding in
//! the lanes of one mask and the padding adds the reduction's identity, the update is merged
//! into the accumulator in the other lanes only (`TH_VMERGE`, which GCC folds into a masked
//! FMA), instead of a masked shift.
//!
//! Measured by hand on a Zen 4 (depthwise 5x5 on 240 channels of 7x7, one thread): masked
//! loads per tap 11.9 us, anchors per window row with masked FMAs 9.4 us, with masked shifts
//! 9.9-10.1 us (docs/experiments/2026-12-05-anchors.md).

use std::collections::{BTreeMap, HashMap};

use super::lanes::cond_uses;
use super::regtile::{RegTile, map_lins, tile_points};
use super::rows::{Reg, RowPack, constants};
use super::writer::Gen;
use crate::lower::{Lin, VExpr, Var};

/// The anchors of a run of taps, by load site.
#[derive(Debug, Default)]
pub(super) struct Anchors {
    /// By site (buffer, index without its constant, lane 0 at the tile's origin): the offset
    /// the first anchor starts at, and the anchors' names.
    rows: HashMap<(usize, Lin), (i64, Vec<String>)>,
    /// The anchors' declarations, in order.
    pub decls: Vec<String>,
}

/// A vector operand: where its lane 0 reads, and the lanes it needs.
struct Site {
    key: (usize, Lin),
    offset: i64,
    needed: u32,
}

impl RowPack {
    /// Pushes the sites of `e`'s lane-varying loads over the vector `group` (`e` with its tile
    /// point and unrolled loops fixed). `None` where a load is read only under a condition
    /// equal in every lane: hoisted into an anchor, it would be read where the condition fails.
    fn sites(&self, e: &VExpr, t: &RegTile, group: (i64, i64), out: &mut Vec<Site>) -> Option<()> {
        let (lane, y) = (t.lane.0, self.rows.0);
        let mut loads = vec![];
        self.vector_loads(e, t, group, &mut loads)?;
        for (buf, index, needed) in loads {
            let at = constants(&index, &[&vec![(y, 0), (lane, group.0)]]);
            out.push(Site {
                key: (buf, Lin { c: 0, ..at.clone() }),
                offset: at.c,
                needed,
            });
        }
        Some(())
    }

    /// The one mask under which `e`'s update may be merged into its accumulator: every
    /// lane-varying select of `e` has it, and where none holds, `e` is the reduction's
    /// identity. `None` where the update needs no mask or cannot be merged.
    pub(super) fn merge_mask(&self, e: &VExpr, t: &RegTile, group: (i64, i64)) -> Option<u32> {
        let mut masks = vec![];
        self.select_masks(e, t, group, &mut masks)?;
        let &m = masks.first()?;
        let all = (1u32 << group.1) - 1;
        let one = masks.iter().all(|&x| x == m) && m & all != all;
        (one && self.filled(e, t) == Some(t.op.identity())).then_some(m)
    }

    fn select_masks(
        &self,
        e: &VExpr,
        t: &RegTile,
        group: (i64, i64),
        out: &mut Vec<u32>,
    ) -> Option<()> {
        let (lane, y) = (t.lane.0, self.rows.0);
        match e {
            VExpr::Select(c, _, _) if cond_uses(c, lane) || cond_uses(c, y) => {
                out.push(self.mask(c, t, group)?);
            }
            VExpr::Unary(_, a) => self.select_masks(a, t, group, out)?,
            VExpr::Binary(_, a, b) | VExpr::Select(_, a, b) => {
                self.select_masks(a, t, group, out)?;
                self.select_masks(b, t, group, out)?;
            }
            _ => {}
        }
        Some(())
    }

    /// The value of `e` in a lane where every lane-varying select gives its constant, where
    /// that is one constant (see `lanes_constant`).
    fn filled(&self, e: &VExpr, t: &RegTile) -> Option<f64> {
        self.constant_with(e, t, &|_| Some(0))
    }
}

impl Gen<'_> {
    /// The anchors of the taps of the band from loop `i` in (written out value by value), the
    /// loops outside it at `fixed`; `None` where a tap's load cannot be hoisted.
    pub(super) fn anchors(
        &mut self,
        t: &RegTile,
        p: &RowPack,
        regs: &[Reg],
        fixed: &[(Var, i64)],
        i: usize,
    ) -> Option<Anchors> {
        let inner: Vec<(Var, i64)> = t.band[i..].iter().map(|b| (b.0, b.1)).collect();
        let mut sites = vec![];
        for taps in tile_points(&inner) {
            let mut at = fixed.to_vec();
            at.extend(taps);
            for (_, _, point, group) in regs {
                let value = map_lins(t.value, &|l| constants(l, &[point, &at]));
                if p.lanes_constant(&value, t, *group) == Some(t.op.identity()) {
                    continue;
                }
                p.sites(&value, t, *group, &mut sites)?;
            }
        }
        let lanes = self.lanes;
        let mut by_key: BTreeMap<&(usize, Lin), Vec<&Site>> = BTreeMap::new();
        for s in &sites {
            by_key.entry(&s.key).or_default().push(s);
        }
        // The lanes each anchor must hold: the ones some operand reads.
        let mut rows = vec![];
        for (key, sites) in by_key {
            let first = sites.iter().map(|s| s.offset).min().expect("a site");
            let mut masks: Vec<u32> = vec![];
            for s in &sites {
                let d = s.offset - first;
                // An operand between two anchors reads both.
                let last = (d / lanes + i64::from(d % lanes != 0)) as usize;
                if masks.len() <= last {
                    masks.resize(last + 1, 0);
                }
                for l in (0..lanes).filter(|l| s.needed >> l & 1 == 1) {
                    let q = d + l;
                    masks[(q / lanes) as usize] |= 1 << (q % lanes);
                }
            }
            rows.push((key, first, masks));
        }
        // The accumulators, the anchors, an operand and a weight in registers, or the loads.
        let anchors: usize = rows.iter().map(|r| r.2.len()).sum();
        if (regs.len() + anchors + 2) as i64 > self.registers {
            return None;
        }
        let mut a = Anchors::default();
        for (key, first, masks) in rows {
            let buf = self.names.bufs[key.0].clone();
            let mut names = vec![];
            for (j, &m) in masks.iter().enumerate() {
                let name = self.names.fresh("th_anchor");
                let at = format!(
                    "&{buf}[{}]",
                    self.lin(&key.1.add_const(first + j as i64 * lanes))
                );
                a.decls
                    .push(format!("th_vf {name} = {};", lanes_load(&at, m, lanes)));
                names.push(name);
            }
            a.rows.insert(key.clone(), (first, names));
        }
        Some(a)
    }

    /// The vector that lane 0 of `index` (in `buf`, the vector `first` of the packed rows)
    /// starts: an anchor, or two shifted.
    pub(super) fn shifted(
        &self,
        a: &Anchors,
        buf: usize,
        index: &Lin,
        (y, lane): (Var, Var),
        first: i64,
    ) -> String {
        let at = constants(index, &[&vec![(y, 0), (lane, first)]]);
        let offset = at.c;
        let (start, names) = &a.rows[&(buf, Lin { c: 0, ..at })];
        let lanes = self.lanes;
        let (j, s) = (
            ((offset - start) / lanes) as usize,
            (offset - start) % lanes,
        );
        if s == 0 {
            return names[j].clone();
        }
        valign(&names[j], &names[j + 1], s, lanes)
    }
}

/// The vector at `at` in the lanes of `mask`, zero in the others (a masked load: nothing else
/// is read). Shared with `phases`.
pub(super) fn lanes_load(at: &str, mask: u32, lanes: i64) -> String {
    if mask == 0 {
        "((th_vf){0} + 0.0f)".to_string()
    } else if i64::from(mask) == (1i64 << lanes) - 1 {
        format!("th_vload({at})")
    } else {
        format!("th_vloadm({at}, {mask}u, 0.0f)")
    }
}

/// Lanes `s` to `s + lanes - 1` of `lo` then `hi` (`TH_VALIGN`, with the lanes its generic
/// branch shuffles). Shared with `phases`.
pub(super) fn valign(lo: &str, hi: &str, s: i64, lanes: i64) -> String {
    let at: Vec<String> = (s..s + lanes).map(|l| l.to_string()).collect();
    format!("TH_VALIGN({lo}, {hi}, {s}, {})", at.join(", "))
}
