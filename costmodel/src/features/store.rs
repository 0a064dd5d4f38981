//! One store's features: its operation counts, loop annotations, per-buffer accesses and
//! reuse, arithmetic intensity, allocation, nest and register-tile groups.

use super::counts::{count_expr, lin_ops};
use super::layout::*;
use super::lets::subst;
use super::nest::{Loop, LoopSet, Walker};
use std::borrow::Cow;
use tunehub_engine::ir::{BinaryOp, ReduceOp};
use tunehub_engine::lower::{Atom, Buffer, Lin, LoopKind, VExpr, Var};

/// Bytes of one element of buffer `b`: 4 for f32 and i32, 1 for the 8-bit types.
fn elem_bytes(bufs: &[Buffer], b: usize) -> f64 {
    bufs[b].dtype.bytes() as f64
}

const CACHE_LINE_BYTES: f64 = 64.0;

/// The accesses of one buffer in one store.
struct Group<'x> {
    buf: usize,
    read: bool,
    write: bool,
    /// Accesses per iteration (a reduction's read and write count twice).
    count: usize,
    /// Distinct indices, with region starts substituted.
    indices: Vec<Cow<'x, Lin>>,
    /// Bit `i` of `uses[k]`: whether loop `i`'s variable appears in index `k` (computed once).
    uses: Vec<LoopSet>,
    /// The union of `uses`.
    any_use: LoopSet,
    /// Unique elements touched under each loop level `0..=n` (level `n`: one iteration).
    unique: Vec<f64>,
}

impl<'a> Walker<'a> {
    pub(super) fn store<'e>(
        &'e self,
        buf: usize,
        index: &'e Lin,
        value: &'e VExpr,
        reduce: Option<ReduceOp>,
    ) -> StoreFeatures {
        let bufs = &self.func.buffers;
        let mut v = [0f32; N_FEATURES];
        let n = self.loops.len();
        let outer_prod = self.outer_prod();

        // Group 1: per-iteration counts, then scaled by the iterations.
        let mut c = [0f64; N_COMPUTE];
        let mut loads: Vec<(usize, &Lin)> = vec![];
        match (reduce, value) {
            (Some(ReduceOp::Sum), VExpr::Binary(BinaryOp::Mul, a, b)) => {
                c[F_MAD] += 1.0;
                count_expr(a, &mut c, &mut loads);
                count_expr(b, &mut c, &mut loads);
            }
            (Some(ReduceOp::Sum), e) => {
                c[F_ADDSUB] += 1.0;
                count_expr(e, &mut c, &mut loads);
            }
            (Some(ReduceOp::Max | ReduceOp::Min), e) => {
                c[F_MINMAX] += 1.0;
                count_expr(e, &mut c, &mut loads);
            }
            (None, e) => count_expr(e, &mut c, &mut loads),
        }
        lin_ops(index, &mut c);
        for g in &self.guards {
            c[I_CMP] += 1.0;
            lin_ops(g, &mut c);
        }
        let flops_per_iter = 2.0 * c[F_MAD]
            + c[F_ADDSUB]
            + c[F_MUL]
            + c[F_DIV]
            + c[F_MINMAX]
            + c[F_CMP]
            + c[F_MATH]
            + c[F_OTHER];
        // An integer stage's arithmetic is integer: its value's operations move to the
        // integer slots (where its index arithmetic already is), as Ansor counts them; the
        // intensity above counts them as a float stage's.
        if bufs[buf].dtype.is_int() {
            for (f, i) in [
                (F_MAD, I_MAD),
                (F_ADDSUB, I_ADDSUB),
                (F_MUL, I_MUL),
                (F_MINMAX, I_MINMAX),
                (F_CMP, I_CMP),
            ] {
                c[i] += std::mem::take(&mut c[f]);
            }
        }
        for (i, x) in c.iter().enumerate() {
            v[COMPUTE + i] = (x * outer_prod) as f32;
        }

        // Group 2.
        let store_index = subst(index, &self.lets);
        let store_uses = self.loops_in(&store_index);
        for (g, kind) in LOOP_KINDS.iter().enumerate() {
            let base = LOOPS + g * PER_LOOP_KIND;
            let mut num = 0.0;
            let mut prod = 1.0;
            let mut innermost = None;
            for (i, l) in self.loops.iter().enumerate() {
                if l.kind == *kind {
                    num += 1.0;
                    prod *= l.extent as f64;
                    innermost = Some(i);
                }
            }
            let pos = match innermost {
                Some(i) => {
                    v[base] = num as f32;
                    v[base + 1] = prod as f32;
                    v[base + 2] = self.loops[i].extent as f32;
                    self.position(i, &bufs[buf], &store_index, store_uses)
                }
                None => POS_NONE,
            };
            v[base + 3 + pos] = 1.0;
        }

        // Group 3: group accesses by buffer.
        let mut groups: Vec<Group> = vec![];
        let mut add = |b: usize, idx: &'e Lin, read: bool, write: bool, count: usize| {
            let idx = subst(idx, &self.lets);
            let g = match groups.iter_mut().position(|g| g.buf == b) {
                Some(p) => &mut groups[p],
                None => {
                    groups.push(Group {
                        buf: b,
                        read: false,
                        write: false,
                        count: 0,
                        indices: vec![],
                        uses: vec![],
                        any_use: 0,
                        unique: vec![],
                    });
                    groups.last_mut().expect("just pushed")
                }
            };
            g.read |= read;
            g.write |= write;
            g.count += count;
            if !g.indices.contains(&idx) {
                g.indices.push(idx);
            }
        };
        add(
            buf,
            index,
            reduce.is_some(),
            true,
            if reduce.is_some() { 2 } else { 1 },
        );
        for (b, idx) in &loads {
            add(*b, idx, true, false, 1);
        }
        for g in &mut groups {
            g.uses = g.indices.iter().map(|ix| self.loops_in(ix)).collect();
            g.any_use = g.uses.iter().fold(0, |a, u| a | u);
            let elems = bufs[g.buf].elems().max(1) as f64;
            g.unique = vec![0.0; n + 1];
            for (ix, uses) in g.indices.iter().zip(&g.uses) {
                // Outermost level last: the product of the changing loops' extents grows as
                // levels are added, the span is the index's range with loops `lvl..` varying.
                // A level whose loop the index does not use leaves both unchanged.
                // The range sums its terms' ranges, so the width grows term by term: a
                // variable term by |k|·(extent − 1) when its loop is added, a nonlinear term (a
                // fused loop's quotient or remainder) recomputed when a loop inside it is.
                // Loops of extent 1 change nothing.
                let atom_width = |a: &Atom, lvl: usize| {
                    let (lo, hi) = a.range(&|w| self.var_range(w, lvl));
                    hi - lo
                };
                let mut nonlinear: Vec<(i64, &Atom, LoopSet, i64)> = ix
                    .terms
                    .iter()
                    .filter(|(a, _)| !matches!(a, Atom::Var(_)))
                    .map(|(a, k)| (k.abs(), a, self.atom_loops(a), atom_width(a, n)))
                    .collect();
                let mut width: i64 = nonlinear.iter().map(|(k, _, _, w)| k * w).sum();
                let mut prod = 1.0;
                for lvl in (0..=n).rev() {
                    if lvl < n && uses >> lvl & 1 == 1 && self.loops[lvl].extent > 1 {
                        let l = self.loops[lvl];
                        prod *= l.extent as f64;
                        width += ix.var_coef(l.var).abs() * (l.extent - 1);
                        for (k, a, set, w) in &mut nonlinear {
                            if *set >> lvl & 1 == 1 {
                                let now = atom_width(a, lvl);
                                width += *k * (now - *w);
                                *w = now;
                            }
                        }
                    }
                    g.unique[lvl] += prod.min((width + 1) as f64).max(1.0);
                }
            }
            g.unique.iter_mut().for_each(|u| *u = u.min(elems));
        }
        // Bytes touched by all buffers under each level, for reuse distances and intensity.
        let level_bytes: Vec<f64> = (0..=n)
            .map(|lvl| {
                groups
                    .iter()
                    .map(|g| g.unique[lvl] * elem_bytes(bufs, g.buf))
                    .sum::<f64>()
            })
            .collect();
        let iter_bytes: f64 = groups
            .iter()
            .map(|g| g.count as f64 * elem_bytes(bufs, g.buf))
            .sum();

        let mut rows: Vec<(f64, usize, [f64; PER_BUFFER])> = groups
            .iter()
            .map(|g| {
                let r = self.buffer_row(g, outer_prod, &level_bytes, iter_bytes);
                (r[B_BYTES], g.buf, r)
            })
            .collect();
        // Most bytes first; ties by buffer number keep the order deterministic.
        rows.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut accessed = vec![];
        for (slot, (_, b, r)) in rows.iter().take(MAX_BUFFERS).enumerate() {
            if self.names {
                accessed.push(bufs[*b].name.clone());
            }
            for (k, x) in r.iter().enumerate() {
                v[BUFFERS + slot * PER_BUFFER + k] = *x as f32;
            }
        }

        // Group 4: intensity per level, innermost (one iteration) first, as Ansor samples it.
        if flops_per_iter > 0.0 {
            let mut xs = vec![];
            let mut ys = vec![];
            let mut inner = 1.0;
            for lvl in (0..=n).rev() {
                if lvl < n {
                    inner *= self.loops[lvl].extent as f64;
                }
                let x = (1.0 + flops_per_iter * inner).log2();
                xs.push(x);
                ys.push(x / (1.0 + level_bytes[lvl]).log2().max(1e-9));
            }
            let x_max = *xs.last().expect("at least one level");
            let mut pt = 0;
            for p in 0..N_INTENSITY {
                let x = x_max * (p + 1) as f64 / N_INTENSITY as f64;
                while pt + 1 < xs.len() && xs[pt] < x - 1e-6 {
                    pt += 1;
                }
                let y = if pt == 0 || xs[pt] <= xs[pt - 1] {
                    ys[pt]
                } else {
                    let t = (x - xs[pt - 1]) / (xs[pt] - xs[pt - 1]);
                    ys[pt - 1] + t * (ys[pt] - ys[pt - 1])
                };
                v[INTENSITY + p] = y as f32;
            }
        }

        // Group 5.
        if let Some(&(_, around)) = self.allocs.iter().rev().find(|(b, _)| *b == buf) {
            let elems = bufs[buf].elems() as f64;
            v[ALLOC] = (elems * elem_bytes(bufs, buf)) as f32;
            v[ALLOC + 1] = (elems * around) as f32;
            v[ALLOC + 2] = around as f32;
            v[ALLOC + 3] = (outer_prod / around) as f32;
        }
        v[ALLOC + 4] = self.allocs.len() as f32;

        // Group 6. A vectorized innermost loop sits inside the unrolled run it belongs to.
        v[OUTER] = outer_prod as f32;
        v[OUTER + 1] = n as f32;
        let mut run = 0.0;
        for l in self.loops.iter().rev() {
            match l.kind {
                LoopKind::Vectorized if run == 0.0 => {}
                LoopKind::Unrolled => run = if run == 0.0 { 1.0 } else { run } * l.extent as f64,
                _ => break,
            }
        }
        v[OUTER + 2] = run as f32;

        // Group 7.
        v[STORE] = f32::from(u8::from(reduce.is_some()));
        v[STORE + 1] = f32::from(u8::from(matches!(value, VExpr::Const(_))));
        v[STORE + 2] = f32::from(u8::from(!self.guards.is_empty()));

        // Group 8: sums, and a pooling's max or min, which the generator tiles alike.
        if reduce.is_some() {
            let (acc, band) = register_tile(&self.loops, index);
            v[REGTILE] = acc as f32;
            v[REGTILE + 1] = band as f32;
        }

        StoreFeatures {
            buffer: if self.names {
                bufs[buf].name.clone()
            } else {
                String::new()
            },
            accessed,
            values: v,
        }
    }
    fn changes(&self, g: &Group, i: usize) -> bool {
        let l = self.loops[i];
        l.extent > 1 && g.any_use >> i & 1 == 1
    }
    fn buffer_row(
        &self,
        g: &Group,
        outer_prod: f64,
        level_bytes: &[f64],
        iter_bytes: f64,
    ) -> [f64; PER_BUFFER] {
        let n = self.loops.len();
        let mut r = [0f64; PER_BUFFER];
        let acc = match (g.read, g.write) {
            (true, true) => B_RW,
            (false, true) => B_WRITE,
            _ => B_READ,
        };
        r[acc] = 1.0;
        let count = g.count as f64;
        let elem = elem_bytes(&self.func.buffers, g.buf);
        r[B_BYTES] = count * outer_prod * elem;
        r[B_UNIQUE_BYTES] = g.unique[0] * elem;

        // Stride: innermost loop that changes the index; the loops inside it repeat the same
        // element, so they do not add cache lines.
        let mut stride = 0.0;
        let mut reduce_ratio = 1.0;
        for i in (0..n).rev() {
            if self.changes(g, i) {
                stride = g
                    .indices
                    .iter()
                    .zip(&g.uses)
                    .map(|(ix, uses)| self.stride(ix, *uses, i))
                    .filter(|s| *s > 0.0)
                    .fold(f64::INFINITY, f64::min);
                if !stride.is_finite() {
                    stride = 0.0;
                }
                break;
            }
            reduce_ratio *= self.loops[i].extent as f64;
        }
        r[B_STRIDE] = stride;
        r[B_LINES] = (count * outer_prod / reduce_ratio
            * (stride * elem / CACHE_LINE_BYTES).min(1.0))
        .max(1.0);
        let per_line = if stride > 0.0 {
            (CACHE_LINE_BYTES / (elem * stride.max(1.0))).max(1.0)
        } else {
            CACHE_LINE_BYTES / elem
        };
        r[B_UNIQUE_LINES] = (g.unique[0] / per_line).ceil().max(1.0);

        // Reuse: the innermost loop (of extent > 1) that leaves the index unchanged.
        let reuse_loop = (0..n)
            .rev()
            .find(|&i| self.loops[i].extent > 1 && !self.changes(g, i));
        let reuse_ct = if let Some(i) = reuse_loop {
            r[B_REUSE_LOOP] = 1.0;
            r[B_REUSE_DIS_ITER] = self.loops[i + 1..]
                .iter()
                .map(|l| l.extent as f64)
                .product();
            r[B_REUSE_DIS_BYTES] = level_bytes[i + 1];
            self.loops[i].extent as f64
        } else if g.count > 1 {
            r[B_REUSE_SERIAL] = 1.0;
            r[B_REUSE_DIS_ITER] = 1.0;
            r[B_REUSE_DIS_BYTES] = iter_bytes;
            count - 1.0
        } else {
            r[B_REUSE_NONE] = 1.0;
            0.0
        };
        r[B_REUSE_CT] = reuse_ct;
        let d = reuse_ct.max(1.0);
        r[B_BYTES_D_REUSE] = r[B_BYTES] / d;
        r[B_UNIQUE_BYTES_D_REUSE] = r[B_UNIQUE_BYTES] / d;
        r[B_LINES_D_REUSE] = r[B_LINES] / d;
        r[B_UNIQUE_LINES_D_REUSE] = r[B_UNIQUE_LINES] / d;
        r
    }
    /// Position one-hot of loop `i` for a store to `buf` at `index` (region starts substituted),
    /// which uses the loops in `used`.
    fn position(&self, i: usize, buf: &Buffer, index: &Lin, used: LoopSet) -> usize {
        let var = self.loops[i].var;
        let Var::Loop { stage, .. } = var else {
            return POS_MIXED;
        };
        if stage != buf.stage {
            // A loop of the consumer this stage is computed in: outside the stage's whole nest.
            return POS_OUTER_SPATIAL;
        }
        if used >> i & 1 == 1 {
            let coef = index
                .terms
                .iter()
                .find_map(|(a, k)| matches!(a, Atom::Var(v) if *v == var).then_some(*k));
            let nonlinear = index
                .terms
                .iter()
                .any(|(a, _)| !matches!(a, Atom::Var(_)) && self.atom_loops(a) >> i & 1 == 1);
            let Some(k) = coef.filter(|_| !nonlinear) else {
                return POS_MIXED;
            };
            // The dimension the loop moves: the largest stride dividing its coefficient
            // (local buffers may be laid out in loop order, not row-major).
            let st = &buf.strides;
            let d = (0..st.len())
                .filter(|&d| st[d] > 0 && k % st[d] == 0)
                .max_by_key(|&d| st[d])
                .unwrap_or(0);
            let (lo, hi) = (st.iter().min(), st.iter().max());
            return if Some(&st[d]) == lo {
                POS_INNER_SPATIAL
            } else if Some(&st[d]) == hi {
                POS_OUTER_SPATIAL
            } else {
                POS_MIDDLE_SPATIAL
            };
        }
        // A reduce loop: ordered among the stage's loops that do not index the store.
        let reduce: Vec<usize> = (0..self.loops.len())
            .filter(|&j| {
                matches!(self.loops[j].var, Var::Loop { stage: s, .. } if s == stage)
                    && used >> j & 1 == 0
            })
            .collect();
        if reduce.last() == Some(&i) {
            POS_INNER_REDUCE
        } else if reduce.first() == Some(&i) {
            POS_OUTER_REDUCE
        } else {
            POS_MIDDLE_REDUCE
        }
    }
}

/// The register tile of a sum stored under `loops` at `index`: (accumulator floats, band
/// iterations), or zeros. Mirrors the code generator's choice: the perfect serial nest above
/// the innermost, vectorized, loop; the band starts at its outermost reduction loop whose
/// inner space loops still fit the register file.
fn register_tile(loops: &[Loop], index: &Lin) -> (f64, f64) {
    let Some((last, rest)) = loops.split_last() else {
        return (0.0, 0.0);
    };
    if last.kind != LoopKind::Vectorized || !last.perfect {
        return (0.0, 0.0);
    }
    let mut used = vec![];
    index.vars(&mut used);
    let (mut acc, mut band) = (last.extent as f64, 1.0);
    let mut tile = (0.0, 0.0);
    for l in rest.iter().rev() {
        if !l.perfect || !matches!(l.kind, LoopKind::Serial | LoopKind::Unrolled) {
            break;
        }
        if used.contains(&l.var) {
            acc *= l.extent as f64;
            if acc > MAX_TILE_FLOATS {
                break;
            }
        } else {
            band *= l.extent as f64;
            tile = (acc, band);
        }
    }
    tile
}
