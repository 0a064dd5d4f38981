//! Ansor-style program features: one vector of [`N_FEATURES`] floats per buffer store of a
//! lowered program.
//!
//! As in Ansor, every `Store` statement is a sample: a reduction's initialisation and its
//! update are two stores (two `BufferStore` nodes in TVM), and a cache_write copy-out is a
//! third. The cost model later predicts a score per store and sums them per program.
//!
//! The features are computed from the loop nest alone (no simulation): access footprints and
//! strides come from the coefficients of each loop variable in the flattened index `Lin`, so
//! extraction is linear in the size of the program. Approximations, all documented where they
//! are made:
//! - executed counts multiply per-iteration counts by every enclosing extent; guards are
//!   ignored (boundary tiles count as full ones);
//! - the unique elements an access touches under a loop level are the product of the extents of
//!   the loops that change its index, capped by the index's span and the buffer's size (exact for
//!   disjoint tiles, and for overlapping windows such as `y + ry` thanks to the span cap);
//! - accesses of one buffer with different indices add their footprints (overlap not removed);
//! - unique cache lines divide the unique elements by the elements a line holds at the access's
//!   stride (a tile narrower than a line is undercounted);
//! - every tensor is `f32` (4 bytes) and a cache line is 64 bytes.

use std::borrow::Cow;
use tunehub_engine::ir::{BinaryOp, ComputeDag, ReduceOp, UnaryOp};
use tunehub_engine::lower::{
    Atom, Buffer, Lin, LoopKind, LoweredFunc, Stmt, VCond, VExpr, Var, lower,
};
use tunehub_engine::schedule::{Schedule, ScheduleError};

/// Every tensor of the engine is f32.
const ELEM_BYTES: f64 = 4.0;
const CACHE_LINE_BYTES: f64 = 64.0;

// ---- Layout: every offset and size lives here; `FEATURE_NAMES` follows the same order. ----

/// Group 1: executed operation counts (16).
pub const COMPUTE: usize = 0;
pub const N_COMPUTE: usize = 16;
/// Group 2: vectorize, unroll and parallel annotations, 11 each (num, prod, len, 8 positions).
pub const LOOPS: usize = COMPUTE + N_COMPUTE;
pub const PER_LOOP_KIND: usize = 11;
const LOOP_KINDS: [LoopKind; 3] = [LoopKind::Vectorized, LoopKind::Unrolled, LoopKind::Parallel];
/// Group 3: the accessed buffers, 18 features each, most bytes first.
pub const BUFFERS: usize = LOOPS + LOOP_KINDS.len() * PER_LOOP_KIND;
pub const MAX_BUFFERS: usize = 5;
pub const PER_BUFFER: usize = 18;
/// Group 4: arithmetic intensity curve (10 samples).
pub const INTENSITY: usize = BUFFERS + MAX_BUFFERS * PER_BUFFER;
pub const N_INTENSITY: usize = 10;
/// Group 5: allocation of the stored buffer (5).
pub const ALLOC: usize = INTENSITY + N_INTENSITY;
pub const N_ALLOC: usize = 5;
/// Group 6: outer scope (3).
pub const OUTER: usize = ALLOC + N_ALLOC;
pub const N_OUTER: usize = 3;
/// Group 7: kind of store (3).
pub const STORE: usize = OUTER + N_OUTER;
pub const N_STORE: usize = 3;
/// Group 8: the register tile of an accumulating store (2).
pub const REGTILE: usize = STORE + N_STORE;
pub const N_REGTILE: usize = 2;
pub const N_FEATURES: usize = REGTILE + N_REGTILE;

/// Accumulator floats a register tile may hold: the code generator's limit on the largest
/// register file among the targets (AVX-512: 32 registers of 16 lanes). A per-target model
/// learns where its own, smaller, file ends.
const MAX_TILE_FLOATS: f64 = (tunehub_engine::codegen::max_tile_vectors(32) * 16) as f64;

// Group 1 slots.
const F_MAD: usize = 0;
const F_ADDSUB: usize = 1;
const F_MUL: usize = 2;
const F_DIV: usize = 3;
const F_MINMAX: usize = 4;
const F_CMP: usize = 5;
const F_MATH: usize = 6;
const F_OTHER: usize = 7;
const I_MAD: usize = 8;
const I_ADDSUB: usize = 9;
const I_MUL: usize = 10;
const I_DIVMOD: usize = 11;
const I_MINMAX: usize = 12;
const I_CMP: usize = 13;
const BOOL_OP: usize = 14;
const SELECT: usize = 15;

// Annotation positions (Ansor's `AnnotationPosType`), offsets inside a loop-kind group after
// num, prod and len.
const POS_NONE: usize = 0;
const POS_INNER_SPATIAL: usize = 1;
const POS_MIDDLE_SPATIAL: usize = 2;
const POS_OUTER_SPATIAL: usize = 3;
const POS_INNER_REDUCE: usize = 4;
const POS_MIDDLE_REDUCE: usize = 5;
const POS_OUTER_REDUCE: usize = 6;
const POS_MIXED: usize = 7;

// Per-buffer slots.
const B_READ: usize = 0;
const B_WRITE: usize = 1;
const B_RW: usize = 2;
const B_BYTES: usize = 3;
const B_UNIQUE_BYTES: usize = 4;
const B_LINES: usize = 5;
const B_UNIQUE_LINES: usize = 6;
const B_REUSE_LOOP: usize = 7;
const B_REUSE_SERIAL: usize = 8;
const B_REUSE_NONE: usize = 9;
const B_REUSE_DIS_ITER: usize = 10;
const B_REUSE_DIS_BYTES: usize = 11;
const B_REUSE_CT: usize = 12;
const B_BYTES_D_REUSE: usize = 13;
const B_UNIQUE_BYTES_D_REUSE: usize = 14;
const B_LINES_D_REUSE: usize = 15;
const B_UNIQUE_LINES_D_REUSE: usize = 16;
const B_STRIDE: usize = 17;

macro_rules! feature_names {
    (loops: $($l:literal),*; buffers: $($b:literal),*) => {
        [
            // Group 1: executed counts of each operation class (float, then index arithmetic).
            "float_mad", "float_addsub", "float_mul", "float_div", "float_minmax", "float_cmp",
            "float_math", "float_other", "int_mad", "int_addsub", "int_mul", "int_divmod",
            "int_minmax", "int_cmp", "bool_op", "select",
            // Group 2: per annotation kind.
            $(
                concat!($l, "_num"), concat!($l, "_prod"), concat!($l, "_len"),
                concat!($l, "_pos_none"), concat!($l, "_pos_inner_spatial"),
                concat!($l, "_pos_middle_spatial"), concat!($l, "_pos_outer_spatial"),
                concat!($l, "_pos_inner_reduce"), concat!($l, "_pos_middle_reduce"),
                concat!($l, "_pos_outer_reduce"), concat!($l, "_pos_mixed"),
            )*
            // Group 3: per accessed buffer.
            $(
                concat!($b, ".acc_read"), concat!($b, ".acc_write"), concat!($b, ".acc_rw"),
                concat!($b, ".bytes"), concat!($b, ".unique_bytes"), concat!($b, ".lines"),
                concat!($b, ".unique_lines"), concat!($b, ".reuse_loop"),
                concat!($b, ".reuse_serial"), concat!($b, ".reuse_none"),
                concat!($b, ".reuse_dis_iter"), concat!($b, ".reuse_dis_bytes"),
                concat!($b, ".reuse_ct"), concat!($b, ".bytes_d_reuse_ct"),
                concat!($b, ".unique_bytes_d_reuse_ct"), concat!($b, ".lines_d_reuse_ct"),
                concat!($b, ".unique_lines_d_reuse_ct"), concat!($b, ".stride"),
            )*
            // Group 4.
            "ai_0", "ai_1", "ai_2", "ai_3", "ai_4", "ai_5", "ai_6", "ai_7", "ai_8", "ai_9",
            // Group 5.
            "alloc_size", "alloc_prod", "alloc_outer_prod", "alloc_inner_prod", "num_allocs",
            // Group 6.
            "outer_prod", "num_loops", "auto_unroll",
            // Group 7.
            "is_reduce_update", "is_const_store", "guarded",
            // Group 8.
            "regtile_acc", "regtile_band",
        ]
    };
}

/// One short name per feature, in layout order.
///
/// - Group 1 (`float_*`, `int_*`, `bool_op`, `select`): operations executed by the store over
///   the whole nest (per-iteration count x product of enclosing extents). `float_mad` counts
///   `a*b+c` patterns and sum-reductions of a product; `float_math` is exp/log/sqrt/rsqrt/tanh/
///   sigmoid; `float_other` is abs; neg counts as addsub and relu as minmax; `int_*` is index
///   arithmetic of loads, the store and guards (a coefficient multiply followed by an add is a
///   mad); `int_cmp` counts guard and index conditions.
/// - Group 2 (`vec_*`, `unroll_*`, `par_*`): number of enclosing loops of that kind, product of
///   their extents, extent of the innermost one, and its position one-hot: spatial if its
///   variable indexes the stored buffer (inner/middle/outer by the buffer dimension it indexes;
///   loops of an enclosing consumer stage count as outer spatial), reduce otherwise (by order
///   among the stage's reduce loops), mixed when fused (the variable is under a div/mod).
/// - Group 3 (`b0..b4.*`): per accessed buffer, sorted by bytes: access type one-hot; bytes
///   accessed; unique bytes (footprint); cache lines accessed; unique lines; reuse type one-hot
///   (the innermost loop not changing the index reuses: loop; else several accesses in one
///   iteration: serial; else none); reuse distance in iterations (of the loops inside the reuse
///   loop) and in bytes (footprint of all buffers inside it); reuse count (the reuse loop's
///   extent); the four sizes divided by the reuse count; stride (elements) of the innermost loop
///   that changes the index.
/// - Group 4 (`ai_*`): arithmetic intensity curve, Ansor's: per loop level, log2 FLOPs over
///   log2 bytes touched under it, sampled at 10 even points of log2 FLOPs.
/// - Group 5: bytes of the stored buffer when it is allocated in the program, that size times
///   the iterations around its allocation, those iterations, the iterations between allocation
///   and store, and the number of live allocations.
/// - Group 6: product of all enclosing extents, number of enclosing loops, and the product of
///   the innermost run of unrolled loops (what auto-unroll expanded).
/// - Group 7: flags: the store is a reduction update; it stores a constant (a reduction's
///   initialisation); it sits under a guard (non-divisible tiles).
/// - Group 8: the register tile the code generator writes out for a sum whose perfect nest
///   ends in the vector loop (see `tunehub_engine::codegen`): accumulator floats (the space
///   loops inside the band, vector loop included) and the band's iterations (the reduction
///   loops, from the outermost one where the tile still fits [`MAX_TILE_FLOATS`]); accumulators
///   are loaded and stored once per band. 0 when the nest does not qualify (the value's
///   gathers and math calls, which also disqualify it, are not checked).
pub const FEATURE_NAMES: [&str; N_FEATURES] = feature_names!(
    loops: "vec", "unroll", "par";
    buffers: "b0", "b1", "b2", "b3", "b4"
);

/// Whether feature `i` is count-like, so that [`extract`] applies `log2(1 + x)` to it as
/// Ansor does (one-hots, flags and the intensity curve stay raw).
pub const fn is_log_scaled(i: usize) -> bool {
    if i < LOOPS {
        true
    } else if i < BUFFERS {
        (i - LOOPS) % PER_LOOP_KIND < 3
    } else if i < INTENSITY {
        let o = (i - BUFFERS) % PER_BUFFER;
        !matches!(
            o,
            B_READ | B_WRITE | B_RW | B_REUSE_LOOP | B_REUSE_SERIAL | B_REUSE_NONE
        )
    } else if i < ALLOC {
        false
    } else {
        i < STORE || i >= REGTILE
    }
}

/// The features of one `Store` statement.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreFeatures {
    /// The stored buffer's name.
    pub buffer: String,
    /// Names of the buffers in slots `b0..`, in slot order (at most [`MAX_BUFFERS`]).
    pub accessed: Vec<String>,
    pub values: [f32; N_FEATURES],
}

impl StoreFeatures {
    /// The value of the feature called `name`.
    pub fn get(&self, name: &str) -> Option<f32> {
        FEATURE_NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| self.values[i])
    }

    /// The slot (`0..MAX_BUFFERS`) holding buffer `name`, if it is among the accessed ones.
    pub fn slot_of(&self, name: &str) -> Option<usize> {
        self.accessed.iter().position(|n| n == name)
    }
}

/// Features of every store of `func`, in program order, with count-like features as
/// `log2(1 + x)`.
pub fn extract(func: &LoweredFunc) -> Vec<StoreFeatures> {
    let mut out = extract_raw(func);
    for f in &mut out {
        log_scale(&mut f.values);
    }
    out
}

/// Like [`extract`], before the `log2(1 + x)` scaling (for tests and inspection).
pub fn extract_raw(func: &LoweredFunc) -> Vec<StoreFeatures> {
    walk(func, true)
}

/// The feature vectors alone, log-scaled as by [`extract`]: the model's path, which needs no
/// buffer names.
pub fn extract_values(func: &LoweredFunc) -> Vec<[f32; N_FEATURES]> {
    walk(func, false)
        .into_iter()
        .map(|mut f| {
            log_scale(&mut f.values);
            f.values
        })
        .collect()
}

/// [`is_log_scaled`] of every slot, computed once.
const LOG_SCALED: [bool; N_FEATURES] = {
    let mut m = [false; N_FEATURES];
    let mut i = 0;
    while i < N_FEATURES {
        m[i] = is_log_scaled(i);
        i += 1;
    }
    m
};

fn log_scale(values: &mut [f32; N_FEATURES]) {
    // Most values are 0 (one-hots, empty buffer slots), which the scaling leaves at 0.
    for (v, scaled) in values.iter_mut().zip(LOG_SCALED) {
        if scaled && *v != 0.0 {
            *v = (1.0 + *v).log2();
        }
    }
}

fn walk(func: &LoweredFunc, names: bool) -> Vec<StoreFeatures> {
    let mut w = Walker {
        func,
        names,
        loops: vec![],
        depth: vec![],
        lets: Lets::default(),
        allocs: vec![],
        guards: vec![],
        out: vec![],
    };
    w.walk(&func.body);
    w.out
}

/// Replays and lowers `sched`, then extracts its features.
pub fn extract_schedule(
    dag: &ComputeDag,
    sched: &Schedule,
) -> Result<Vec<StoreFeatures>, ScheduleError> {
    Ok(extract(&lower(&sched.replay(dag)?)?))
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

/// A set of enclosing loops by depth. Schedules nest a few dozen loops at most (every axis
/// split into a few levels); deeper nests are refused rather than silently mis-described.
type LoopSet = u128;
const MAX_DEPTH: usize = LoopSet::BITS as usize;
const NOT_ENCLOSING: u8 = u8::MAX;

#[derive(Clone, Copy)]
struct Loop {
    var: Var,
    extent: i64,
    kind: LoopKind,
    /// The body is one statement (a perfect nest goes on below).
    perfect: bool,
}

struct Walker<'a> {
    func: &'a LoweredFunc,
    /// Fill in buffer names (for inspection; the model's path skips the allocations).
    names: bool,
    /// Enclosing loops, outermost first.
    loops: Vec<Loop>,
    /// `depth[stage][node]`: where the loop of that iterator sits in `loops` (`NOT_ENCLOSING`
    /// otherwise), so that variable lookups do not scan the nest.
    depth: Vec<Vec<u8>>,
    /// Region starts, already in terms of loop variables.
    lets: Lets,
    /// Enclosing allocations: buffer and the product of extents around the `Alloc`.
    allocs: Vec<(usize, f64)>,
    /// Left-hand sides of enclosing guard conditions.
    guards: Vec<&'a Lin>,
    out: Vec<StoreFeatures>,
}

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
    fn walk(&mut self, stmts: &'a [Stmt]) {
        for s in stmts {
            match s {
                Stmt::For {
                    var,
                    extent,
                    kind,
                    body,
                } => {
                    assert!(
                        self.loops.len() < MAX_DEPTH,
                        "a loop nest deeper than {MAX_DEPTH} loops"
                    );
                    self.set_depth(*var, self.loops.len() as u8);
                    self.loops.push(Loop {
                        var: *var,
                        extent: *extent,
                        kind: *kind,
                        perfect: body.len() == 1,
                    });
                    self.walk(body);
                    self.loops.pop();
                    self.set_depth(*var, NOT_ENCLOSING);
                }
                Stmt::Let { var, value } => {
                    let v = subst(value, &self.lets).into_owned();
                    self.lets.insert(*var, v);
                }
                Stmt::Alloc { buf, body } => {
                    self.allocs.push((*buf, self.outer_prod()));
                    self.walk(body);
                    self.allocs.pop();
                }
                Stmt::Guard { conds, body } => {
                    let n = self.guards.len();
                    self.guards.extend(conds.iter().map(|(l, _)| l));
                    self.walk(body);
                    self.guards.truncate(n);
                }
                Stmt::Store {
                    buf,
                    index,
                    value,
                    reduce,
                } => {
                    let f = self.store(*buf, index, value, *reduce);
                    self.out.push(f);
                }
            }
        }
    }

    fn outer_prod(&self) -> f64 {
        self.loops.iter().map(|l| l.extent as f64).product()
    }

    fn store<'e>(
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
            .map(|lvl| groups.iter().map(|g| g.unique[lvl]).sum::<f64>() * ELEM_BYTES)
            .collect();
        let iter_bytes: f64 = groups.iter().map(|g| g.count as f64).sum::<f64>() * ELEM_BYTES;

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
            v[ALLOC] = (elems * ELEM_BYTES) as f32;
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

        // Group 8.
        if reduce == Some(ReduceOp::Sum) {
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

    /// The enclosing loops whose variables `l` uses, as a bit set.
    fn loops_in(&self, l: &Lin) -> LoopSet {
        l.terms
            .iter()
            .fold(0, |set, (a, _)| set | self.atom_loops(a))
    }

    fn atom_loops(&self, a: &Atom) -> LoopSet {
        match a {
            Atom::Var(v) => self.depth_of(*v).map_or(0, |i| 1 << i),
            Atom::Div(x, _) | Atom::Mod(x, _) => self.loops_in(x),
            Atom::Max(x, y) | Atom::Min(x, y) => self.loops_in(x) | self.loops_in(y),
        }
    }

    /// Range of a variable when loops `lvl..` vary and everything else is at 0.
    fn var_range(&self, w: Var, lvl: usize) -> (i64, i64) {
        match self.depth_of(w) {
            Some(d) if d >= lvl => (0, self.loops[d].extent - 1),
            _ => (0, 0),
        }
    }

    /// The position in `loops` of the loop whose variable is `v`, if it encloses the walk.
    fn depth_of(&self, v: Var) -> Option<usize> {
        let Var::Loop { stage, node } = v else {
            return None;
        };
        let d = *self.depth.get(stage)?.get(node)?;
        (d != NOT_ENCLOSING).then_some(d as usize)
    }

    fn set_depth(&mut self, v: Var, d: u8) {
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
    fn stride(&self, ix: &Lin, uses: LoopSet, i: usize) -> f64 {
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
        r[B_BYTES] = count * outer_prod * ELEM_BYTES;
        r[B_UNIQUE_BYTES] = g.unique[0] * ELEM_BYTES;

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
            * (stride * ELEM_BYTES / CACHE_LINE_BYTES).min(1.0))
        .max(1.0);
        let per_line = if stride > 0.0 {
            (CACHE_LINE_BYTES / (ELEM_BYTES * stride.max(1.0))).max(1.0)
        } else {
            CACHE_LINE_BYTES / ELEM_BYTES
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

/// Region-start variables and their definitions. A handful per program: a vector searched
/// linearly beats hashing here.
#[derive(Default)]
struct Lets(Vec<(Var, Lin)>);

impl Lets {
    fn get(&self, v: &Var) -> Option<&Lin> {
        self.0.iter().find(|(w, _)| w == v).map(|(_, l)| l)
    }

    fn insert(&mut self, v: Var, l: Lin) {
        match self.0.iter_mut().find(|(w, _)| *w == v) {
            Some(slot) => slot.1 = l,
            None => self.0.push((v, l)),
        }
    }

    /// Whether `l` uses a region-start variable (else substitution leaves it as it is).
    fn used_in(&self, l: &Lin) -> bool {
        l.terms.iter().any(|(a, _)| match a {
            Atom::Var(v) => self.get(v).is_some(),
            Atom::Div(x, _) | Atom::Mod(x, _) => self.used_in(x),
            Atom::Max(x, y) | Atom::Min(x, y) => self.used_in(x) || self.used_in(y),
        })
    }
}

/// `l` with region-start variables replaced by their definitions.
fn subst<'l>(l: &'l Lin, lets: &Lets) -> Cow<'l, Lin> {
    if !lets.used_in(l) {
        return Cow::Borrowed(l);
    }
    let mut out = Lin::constant(l.c);
    for (a, k) in &l.terms {
        let t = match a {
            Atom::Var(v) => lets.get(v).cloned().unwrap_or_else(|| Lin::var(*v)),
            Atom::Div(x, d) => subst(x, lets).div(*d),
            Atom::Mod(x, d) => subst(x, lets).rem(*d),
            Atom::Max(x, y) => subst(x, lets).maximum(&subst(y, lets)),
            Atom::Min(x, y) => subst(x, lets).minimum(&subst(y, lets)),
        };
        out = out.add(&t.scale(*k));
    }
    Cow::Owned(out)
}

/// Integer operations evaluating `l`: a coefficient multiply, an add per extra summand (a
/// multiply feeding an add counts as one mad), and the div/mod/min/max atoms.
fn lin_ops(l: &Lin, c: &mut [f64; N_COMPUTE]) {
    let mut muls = 0usize;
    let mut summands = usize::from(l.c != 0);
    for (a, k) in &l.terms {
        summands += 1;
        if k.abs() != 1 {
            muls += 1;
        }
        match a {
            Atom::Var(_) => {}
            Atom::Div(x, _) | Atom::Mod(x, _) => {
                c[I_DIVMOD] += 1.0;
                lin_ops(x, c);
            }
            Atom::Max(x, y) | Atom::Min(x, y) => {
                c[I_MINMAX] += 1.0;
                lin_ops(x, c);
                lin_ops(y, c);
            }
        }
    }
    let adds = summands.saturating_sub(1);
    let mad = muls.min(adds);
    c[I_MAD] += mad as f64;
    c[I_MUL] += (muls - mad) as f64;
    c[I_ADDSUB] += (adds - mad) as f64;
}

fn is_mul(e: &VExpr) -> bool {
    matches!(e, VExpr::Binary(BinaryOp::Mul, _, _))
}

/// Per-iteration operation counts of `e`; collects its loads.
fn count_expr<'e>(e: &'e VExpr, c: &mut [f64; N_COMPUTE], loads: &mut Vec<(usize, &'e Lin)>) {
    match e {
        VExpr::Const(_) => {}
        VExpr::Index(l) => lin_ops(l, c),
        VExpr::Load { buf, index } => {
            lin_ops(index, c);
            loads.push((*buf, index));
        }
        VExpr::Unary(op, a) => {
            let slot = match op {
                UnaryOp::Neg => F_ADDSUB,
                UnaryOp::Relu => F_MINMAX,
                UnaryOp::Abs => F_OTHER,
                UnaryOp::Exp
                | UnaryOp::Log
                | UnaryOp::Sqrt
                | UnaryOp::Rsqrt
                | UnaryOp::Tanh
                | UnaryOp::Sigmoid => F_MATH,
            };
            c[slot] += 1.0;
            count_expr(a, c, loads);
        }
        VExpr::Binary(BinaryOp::Add | BinaryOp::Sub, a, b) if is_mul(a) || is_mul(b) => {
            // a*b + c: one fused multiply-add.
            c[F_MAD] += 1.0;
            let (m, other) = if is_mul(a) { (a, b) } else { (b, a) };
            if let VExpr::Binary(_, x, y) = &**m {
                count_expr(x, c, loads);
                count_expr(y, c, loads);
            }
            count_expr(other, c, loads);
        }
        VExpr::Binary(op, a, b) => {
            let slot = match op {
                BinaryOp::Add | BinaryOp::Sub => F_ADDSUB,
                BinaryOp::Mul => F_MUL,
                BinaryOp::Div => F_DIV,
                BinaryOp::Min | BinaryOp::Max => F_MINMAX,
            };
            c[slot] += 1.0;
            count_expr(a, c, loads);
            count_expr(b, c, loads);
        }
        VExpr::Select(cond, a, b) => {
            c[SELECT] += 1.0;
            count_cond(cond, c, loads);
            count_expr(a, c, loads);
            count_expr(b, c, loads);
        }
    }
}

fn count_cond<'e>(e: &'e VCond, c: &mut [f64; N_COMPUTE], loads: &mut Vec<(usize, &'e Lin)>) {
    match e {
        VCond::Index(_, a, b) => {
            c[I_CMP] += 1.0;
            lin_ops(a, c);
            lin_ops(b, c);
        }
        VCond::Value(_, a, b) => {
            c[F_CMP] += 1.0;
            count_expr(a, c, loads);
            count_expr(b, c, loads);
        }
        VCond::And(a, b) | VCond::Or(a, b) => {
            c[BOOL_OP] += 1.0;
            count_cond(a, c, loads);
            count_cond(b, c, loads);
        }
        VCond::Not(a) => {
            c[BOOL_OP] += 1.0;
            count_cond(a, c, loads);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tunehub_engine::ops;
    use tunehub_engine::sample::RandomSampler;
    use tunehub_engine::schedule::{Annotation, Step};
    use tunehub_engine::target::Target;

    fn lowered(dag: &ComputeDag, sched: &Schedule) -> LoweredFunc {
        lower(&sched.replay(dag).expect("replays")).expect("lowers")
    }

    fn count_stores(stmts: &[Stmt]) -> usize {
        stmts
            .iter()
            .map(|s| match s {
                Stmt::For { body, .. } | Stmt::Alloc { body, .. } | Stmt::Guard { body, .. } => {
                    count_stores(body)
                }
                Stmt::Let { .. } => 0,
                Stmt::Store { .. } => 1,
            })
            .sum()
    }

    fn update(fs: &[StoreFeatures]) -> &StoreFeatures {
        fs.iter()
            .find(|f| f.values[STORE] == 1.0)
            .expect("a reduction update")
    }

    /// Feature `field` (e.g. `reuse_dis_bytes`) of buffer `buf`'s slot.
    fn buf_feature(f: &StoreFeatures, buf: &str, field: &str) -> f32 {
        let slot = f
            .slot_of(buf)
            .unwrap_or_else(|| panic!("{buf} not accessed: {:?}", f.accessed));
        f.get(&format!("b{slot}.{field}")).expect("a feature name")
    }

    #[test]
    fn layout_and_names_agree() {
        assert_eq!(N_FEATURES, 162);
        assert_eq!(FEATURE_NAMES[LOOPS], "vec_num");
        assert_eq!(FEATURE_NAMES[LOOPS + 2 * PER_LOOP_KIND], "par_num");
        assert_eq!(FEATURE_NAMES[BUFFERS], "b0.acc_read");
        assert_eq!(FEATURE_NAMES[BUFFERS + PER_BUFFER - 1], "b0.stride");
        assert_eq!(FEATURE_NAMES[INTENSITY - 1], "b4.stride");
        assert_eq!(FEATURE_NAMES[INTENSITY], "ai_0");
        assert_eq!(FEATURE_NAMES[ALLOC], "alloc_size");
        assert_eq!(FEATURE_NAMES[OUTER], "outer_prod");
        assert_eq!(FEATURE_NAMES[STORE], "is_reduce_update");
        assert_eq!(FEATURE_NAMES[REGTILE], "regtile_acc");
        let mut names = FEATURE_NAMES.to_vec();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), N_FEATURES, "names are unique");
    }

    /// The model's path (no names) gives the same vectors as the inspected one.
    #[test]
    fn values_alone_equal_the_named_extraction() {
        let dag = ops::build_op("conv2d_nchw(n=1,c=8,h=14,w=14,f=8,kh=3,kw=3,pad=1,bias=1,relu=1)")
            .unwrap();
        let mut s = RandomSampler::new(&dag, &Target::detect(), 5);
        for _ in 0..50 {
            let f = lowered(&dag, &s.sample());
            let named: Vec<[f32; N_FEATURES]> = extract(&f).into_iter().map(|x| x.values).collect();
            let bare = extract_values(&f);
            assert_eq!(named.len(), bare.len());
            for (a, b) in named.iter().zip(&bare) {
                assert!(a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()));
            }
        }
    }

    #[test]
    fn deterministic_finite_and_one_vector_per_store() {
        let win = ops::Window {
            kh: 3,
            kw: 3,
            stride: 1,
            pad: 1,
            dilation: 1,
        };
        let dags = [
            ops::matmul(64, 64, 64).unwrap(),
            ops::conv2d_nchw(1, 8, 14, 14, 8, win, true, true).unwrap(),
            ops::softmax(32, 64).unwrap(),
        ];
        for dag in &dags {
            let mut sampler = RandomSampler::new(dag, &Target::detect(), 7);
            for _ in 0..20 {
                let func = lowered(dag, &sampler.sample());
                let a = extract(&func);
                assert_eq!(a, extract(&func));
                assert_eq!(a.len(), count_stores(&func.body));
                for f in &a {
                    assert!(f.values.iter().all(|v| v.is_finite()), "{f:?}");
                    assert!(!f.accessed.is_empty() && f.accessed.len() <= MAX_BUFFERS);
                }
            }
        }
    }

    #[test]
    fn naive_matmul_counts_and_accesses() {
        let dag = ops::matmul(64, 64, 64).unwrap();
        let func = lowered(&dag, &Schedule::default());
        let raw = extract_raw(&func);
        // The initialisation and the update are separate stores, as in Ansor.
        assert_eq!(raw.len(), 2);
        assert_eq!(raw[0].values[STORE + 1], 1.0, "init stores a constant");
        assert_eq!(raw[0].accessed, ["C"]);
        let up = update(&raw);
        assert_eq!(up.buffer, "C");
        assert_eq!(up.values[COMPUTE + F_MAD], 262_144.0);
        assert_eq!(
            up.values[COMPUTE + F_MUL],
            0.0,
            "the product is part of the mad"
        );
        let mut acc = up.accessed.clone();
        acc.sort();
        assert_eq!(acc, ["A", "B", "C"]);
        assert_eq!(buf_feature(up, "C", "acc_rw"), 1.0);
        assert_eq!(buf_feature(up, "A", "acc_read"), 1.0);
        assert_eq!(buf_feature(up, "A", "bytes"), 262_144.0 * 4.0);
        assert_eq!(buf_feature(up, "A", "unique_bytes"), 4096.0 * 4.0);
        // A[i, k] is reused across j: every 64 iterations, 64 times.
        assert_eq!(buf_feature(up, "A", "reuse_loop"), 1.0);
        assert_eq!(buf_feature(up, "A", "reuse_ct"), 64.0);
        assert_eq!(buf_feature(up, "A", "reuse_dis_iter"), 64.0);
        // B[k, j] along k (innermost) has a stride of a row; C is reused along k.
        assert_eq!(buf_feature(up, "B", "stride"), 64.0);
        assert_eq!(buf_feature(up, "C", "reuse_dis_iter"), 1.0);
        assert_eq!(up.values[OUTER], 262_144.0);
        assert_eq!(up.values[OUTER + 1], 3.0);

        // Scaled: log2(1 + x) of the same value.
        let scaled = extract(&func);
        assert_eq!(
            update(&scaled).values[COMPUTE + F_MAD],
            (1.0f32 + 262_144.0).log2()
        );
        assert_eq!(update(&scaled).values[STORE], 1.0, "flags stay raw");
    }

    #[test]
    fn vectorize_and_parallel_annotations() {
        let dag = ops::matmul(64, 64, 64).unwrap();
        use Step::*;
        let s = Schedule::new(vec![
            Reorder {
                stage: 2,
                order: vec![0, 2, 1],
            },
            Annotate {
                stage: 2,
                iter: 2,
                ann: Annotation::Vectorize,
            },
            Annotate {
                stage: 2,
                iter: 0,
                ann: Annotation::Parallel,
            },
        ]);
        let raw = extract_raw(&lowered(&dag, &s));
        for f in &raw {
            assert_eq!(f.get("vec_len"), Some(64.0));
            assert_eq!(f.get("vec_num"), Some(1.0));
            assert_eq!(f.get("vec_pos_inner_spatial"), Some(1.0));
            assert_eq!(f.get("par_prod"), Some(64.0));
            assert_eq!(f.get("par_pos_outer_spatial"), Some(1.0));
            assert_eq!(f.get("unroll_pos_none"), Some(1.0));
        }
        assert_eq!(raw.len(), 2);

        let fused = Schedule::new(vec![
            Fuse {
                stage: 2,
                iters: vec![0, 1],
            },
            Annotate {
                stage: 2,
                iter: 0,
                ann: Annotation::Parallel,
            },
        ]);
        let raw = extract_raw(&lowered(&dag, &fused));
        let up = update(&raw);
        assert_eq!(up.get("par_prod"), Some(4096.0));
        assert_eq!(
            up.get("par_pos_mixed"),
            Some(1.0),
            "a fused loop indexes two dims"
        );
        assert_eq!(up.get("vec_pos_none"), Some(1.0));
        assert_eq!(up.values[COMPUTE + F_MAD], 262_144.0);
    }

    #[test]
    fn tiling_with_cache_write_shortens_reuse_of_b() {
        let dag = ops::matmul(64, 64, 64).unwrap();
        let naive = extract_raw(&lowered(&dag, &Schedule::default()));
        let func = lowered(
            &dag,
            &tunehub_engine::schedule::hand::matmul_register_tiled(64, 4, 16),
        );
        let fs = extract_raw(&func);
        // C.local's init and update, and the copy to C.
        assert_eq!(fs.len(), 3);
        assert_eq!(fs.len(), count_stores(&func.body));
        let (n, t) = (update(&naive), update(&fs));
        assert_eq!(t.buffer, "C.local");
        assert_eq!(
            t.values[COMPUTE + F_MAD],
            262_144.0,
            "tiling keeps the work"
        );
        for field in ["reuse_dis_bytes", "reuse_dis_iter"] {
            let (a, b) = (buf_feature(n, "B", field), buf_feature(t, "B", field));
            assert!(b < a, "{field}: tiled {b} vs naive {a}");
        }
        // The accumulator tile is a small local buffer, all of it reused in registers.
        assert!(buf_feature(t, "C.local", "unique_bytes") < buf_feature(n, "C", "unique_bytes"));
        assert_eq!(t.get("alloc_size"), Some(4.0 * 16.0 * 4.0));
        assert_eq!(t.get("vec_len"), Some(16.0));
        assert_eq!(t.get("unroll_prod"), Some(16.0));
        assert_eq!(t.get("par_prod"), Some(64.0));
        assert_eq!(
            t.get("par_pos_outer_spatial"),
            Some(1.0),
            "the consumer's loop is outside"
        );
        // 4 rows x 16 lanes of accumulators over the whole reduction (k.0 x k.1 = 16 x 4).
        assert_eq!(t.get("regtile_acc"), Some(64.0));
        assert_eq!(t.get("regtile_band"), Some(64.0));
        let init = fs
            .iter()
            .find(|f| f.get("is_const_store") == Some(1.0))
            .unwrap();
        assert_eq!(init.get("regtile_acc"), Some(0.0), "only sums are tiles");
        // 32 rows x 64 lanes do not fit any register file: no tile.
        let big = extract_raw(&lowered(
            &dag,
            &tunehub_engine::schedule::hand::matmul_register_tiled(64, 32, 64),
        ));
        assert_eq!(update(&big).get("regtile_acc"), Some(0.0));
    }
}
