//! Dot tiles: an integer sum of 8-bit products written as dot-product instructions, each of
//! which multiplies 4 bytes by 4 bytes per i32 lane and adds the 4 products to the lane
//! (x86 `vpdpbusd`: AVX-512 VNNI on 512-bit vectors, and on 256-bit ones with AVX-512VL or
//! AVX-VNNI; AVX-VNNI on 256- and 128-bit ones; aarch64 `sdot`, the dot-product extension on
//! NEON). A tile takes the widest width its vector loop fills with whole vectors: 24 output
//! channels are three 256-bit vectors on an AVX-512 target, where 16-lane vectors would leave
//! a partial one (`Target::int8_dot_lanes`).
//!
//! The search prepares the nest (`search::annotate::tile`): the reduction's 4 innermost
//! products are a loop inside the vector loop. A tile qualifies when, below its band of
//! reduction loops, the nest is the tile's space loops, the vector loop (whole vectors), the
//! loop of 4 and an i32 sum of a product of two loads:
//! - the weight (i8), read at 4 bytes per lane, contiguous over the lane and the loop of 4:
//!   the layout a packed weight takes when the loops walk it in that order;
//! - the data (u8 or i8), the same in every lane, contiguous over the loop of 4 (4 bytes
//!   broadcast to every lane), possibly under a condition of neither loop (inlined padding:
//!   0 outside).
//!
//! x86's instruction multiplies unsigned data by signed weights, aarch64's signed by signed.
//! Data of the other signedness is read with its top bit flipped (x ^ 0x80: x + 128 for an
//! i8, x - 128 for a u8), and the tile takes back 128 x the sum of the weights it read, summed
//! by the same instruction on bytes of 1. Compiled without the instruction (another `-march`),
//! a kernel gets the same sums from a portable helper, lane by lane, so it still builds and
//! runs anywhere.

use super::init::Accumulators;
use super::regtile::{perfect_nest, tile_points};
use super::window::at_point;
use super::writer::Gen;
use crate::ir::{BinaryOp, DType, ReduceOp};
use crate::lower::{Lin, LoopKind, LoweredFunc, Stmt, VCond, VExpr, Var};
use std::collections::HashMap;
use std::fmt::Write;

/// The products one instruction sums per lane.
const QUAD: i64 = 4;

/// The data operand: broadcast, 4 contiguous bytes per step of the band.
#[derive(Debug, Clone)]
pub(super) struct Data<'s> {
    buf: usize,
    index: &'s Lin,
    /// Inlined padding: the data is 0 where this fails.
    guard: Option<&'s VCond>,
    signed: bool,
}

/// The dot-product instruction of a target: its architecture (which says whether it takes the
/// data signed) and the vector widths it is written at, in i32 lanes, widest first.
#[derive(Debug, Clone, Copy)]
pub(super) struct Instruction {
    arch: Arch,
    widths: &'static [i64],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arch {
    X86,
    Aarch64,
}

impl Instruction {
    /// The instruction of `target` at the widths the code generator writes it, if any.
    pub(super) fn of(target: &crate::target::Target) -> Option<Instruction> {
        let widths = target.int8_dot_lanes();
        if widths.is_empty() {
            return None;
        }
        let arch = if target.arch == "aarch64" {
            Arch::Aarch64
        } else {
            Arch::X86
        };
        Some(Instruction { arch, widths })
    }

    pub(super) fn widths(self) -> &'static [i64] {
        self.widths
    }

    fn signed_data(self) -> bool {
        self.arch == Arch::Aarch64
    }
}

/// A dot tile, found at the outermost loop of its reduction band.
#[derive(Debug, Clone)]
pub(super) struct DotTile<'s> {
    /// The vector width in i32 lanes: the widest of the instruction's that the vector loop
    /// fills with whole vectors.
    pub(super) width: i64,
    band: Vec<(Var, i64, LoopKind)>,
    tile: Vec<(Var, i64)>,
    lane: (Var, i64),
    quad: Var,
    buf: usize,
    index: &'s Lin,
    data: Data<'s>,
    weight: (usize, &'s Lin),
}

/// Every dot tile of `func`, keyed by its band's outermost loop, for vectors of one of
/// `widths` (i32 lanes, widest first) and at most `max` accumulators.
pub(super) fn dot_tiles<'s>(
    func: &'s LoweredFunc,
    widths: &[i64],
    max: i64,
) -> HashMap<*const Stmt, DotTile<'s>> {
    fn walk<'s>(
        func: &'s LoweredFunc,
        body: &'s [Stmt],
        lim: (&[i64], i64),
        out: &mut HashMap<*const Stmt, DotTile<'s>>,
    ) {
        for st in body {
            match st {
                Stmt::For { body, .. } => match plan(func, st, lim.0, lim.1) {
                    Some(t) => {
                        out.insert(st as *const Stmt, t);
                    }
                    None => walk(func, body, lim, out),
                },
                Stmt::Alloc { body, .. } | Stmt::Guard { body, .. } => walk(func, body, lim, out),
                Stmt::Let { .. } | Stmt::Store { .. } => {}
            }
        }
    }
    let mut out = HashMap::new();
    if !widths.is_empty() {
        walk(func, &func.body, (widths, max), &mut out);
    }
    out
}

impl DotTile<'_> {
    pub(super) fn accumulators(&self) -> Accumulators<'_> {
        Accumulators::of(self.buf, self.index, &self.tile, self.lane)
    }
}

fn dtype(func: &LoweredFunc, buf: usize) -> DType {
    func.buffers[buf].dtype
}

/// The coefficient of `v` in `l`, `None` where it sits in a non-linear term.
fn coef(l: &Lin, v: Var) -> Option<i64> {
    super::lanes::lane_coef(l, v)
}

fn plan<'s>(func: &'s LoweredFunc, top: &'s Stmt, widths: &[i64], max: i64) -> Option<DotTile<'s>> {
    let (loops, inner) = perfect_nest(top, |_| false);
    let Stmt::Store {
        buf,
        index,
        value,
        reduce: Some(ReduceOp::Sum),
    } = inner
    else {
        return None;
    };
    if dtype(func, *buf) != DType::I32 || loops.len() < 3 {
        return None;
    }
    let n = loops.len();
    let (quad, q_extent, q_kind) = loops[n - 1];
    let (lane, lane_extent, LoopKind::Vectorized) = loops[n - 2] else {
        return None;
    };
    let serial = |k: LoopKind| matches!(k, LoopKind::Serial | LoopKind::Unrolled);
    let lanes = widths.iter().copied().find(|&w| lane_extent % w == 0)?;
    if q_extent != QUAD
        || !serial(q_kind)
        || coef(index, lane) != Some(1)
        || coef(index, quad) != Some(0)
    {
        return None;
    }
    let mut used = vec![];
    index.vars(&mut used);
    let rest = &loops[..n - 2];
    if used.contains(&rest.first()?.0) || !rest.iter().all(|l| serial(l.2)) {
        return None;
    }
    let (tile, band): (Vec<&(Var, i64, LoopKind)>, Vec<_>) =
        rest.iter().partition(|l| used.contains(&l.0));
    let vectors = tile.iter().map(|l| l.1).product::<i64>() * (lane_extent / lanes);
    // Room for the weight vectors, the broadcast and the weights' sums.
    if vectors > max - 4 {
        return None;
    }
    let VExpr::Binary(BinaryOp::Mul, x, y) = value else {
        return None;
    };
    let (data, weight) = match (operand(func, x, lane, quad), operand(func, y, lane, quad)) {
        (Some(Operand::Data(d)), Some(Operand::Weight(w))) => (d, w),
        (Some(Operand::Weight(w)), Some(Operand::Data(d))) => (d, w),
        _ => return None,
    };
    Some(DotTile {
        width: lanes,
        band: band.into_iter().copied().collect(),
        tile: tile.iter().map(|l| (l.0, l.1)).collect(),
        lane: (lane, lane_extent),
        quad,
        buf: *buf,
        index,
        data,
        weight,
    })
}

enum Operand<'s> {
    Data(Data<'s>),
    Weight((usize, &'s Lin)),
}

/// What `e` is to the instruction, if it is one of its operands.
fn operand<'s>(func: &LoweredFunc, e: &'s VExpr, lane: Var, quad: Var) -> Option<Operand<'s>> {
    let (e, guard) = match e {
        VExpr::Select(c, a, b) if matches!(**b, VExpr::Const(z) if z == 0.0) => {
            if super::lanes::cond_uses(c, lane) || super::lanes::cond_uses(c, quad) {
                return None;
            }
            (&**a, Some(&**c))
        }
        e => (e, None),
    };
    let VExpr::Load { buf, index } = e else {
        return None;
    };
    match (dtype(func, *buf), coef(index, lane)?, coef(index, quad)?) {
        (DType::I8, QUAD, 1) if guard.is_none() => Some(Operand::Weight((*buf, index))),
        (t @ (DType::U8 | DType::I8), 0, 1) => Some(Operand::Data(Data {
            buf: *buf,
            index,
            guard,
            signed: t == DType::I8,
        })),
        _ => None,
    }
}

/// The C helpers of dot tiles for `ins` at `width` i32 lanes, named by it (`th_dot16`...):
/// `th_dot{width}(acc, a, b)` adds to each i32 lane of `acc` the 4 products of the lane's bytes
/// of `a` (the data, of the instruction's signedness) and `b` (signed weights).
pub(super) fn helpers(ins: Instruction, width: i64) -> String {
    let lanes = width;
    let bytes = lanes * 4;
    let native: &[(&str, &str, &str)] = match (ins.arch, bytes) {
        (Arch::X86, 64) => &[(
            "defined(__AVX512VNNI__)",
            "<immintrin.h>",
            "_mm512_dpbusd_epi32((__m512i)(acc), (__m512i)(a), (__m512i)(b))",
        )],
        (Arch::X86, 32) => &[
            (
                "defined(__AVX512VNNI__) && defined(__AVX512VL__)",
                "<immintrin.h>",
                "_mm256_dpbusd_epi32((__m256i)(acc), (__m256i)(a), (__m256i)(b))",
            ),
            (
                "defined(__AVXVNNI__)",
                "<immintrin.h>",
                "_mm256_dpbusd_avx_epi32((__m256i)(acc), (__m256i)(a), (__m256i)(b))",
            ),
        ],
        (Arch::X86, 16) => &[
            (
                "defined(__AVX512VNNI__) && defined(__AVX512VL__)",
                "<immintrin.h>",
                "_mm_dpbusd_epi32((__m128i)(acc), (__m128i)(a), (__m128i)(b))",
            ),
            (
                "defined(__AVXVNNI__)",
                "<immintrin.h>",
                "_mm_dpbusd_avx_epi32((__m128i)(acc), (__m128i)(a), (__m128i)(b))",
            ),
        ],
        (Arch::Aarch64, 16) => &[(
            "defined(__ARM_FEATURE_DOTPROD)",
            "<arm_neon.h>",
            "vdotq_s32((int32x4_t)(acc), (int8x16_t)(a), (int8x16_t)(b))",
        )],
        _ => &[],
    };
    let data = if ins.signed_data() {
        "(int)(signed char)"
    } else {
        "(int)"
    };
    let v = format!("th_vi{lanes}");
    let mut s = format!(
        "#ifndef TH_DOT{lanes}\n#define TH_DOT{lanes}\n\
         typedef int {v} __attribute__((vector_size({bytes})));\n\
         static inline __attribute__((unused)) {v} th_viload{lanes}(const void* p) {{ {v} v; __builtin_memcpy(&v, p, sizeof v); return v; }}\n\
         static inline __attribute__((unused)) void th_vistore{lanes}(void* p, {v} v) {{ __builtin_memcpy(p, &v, sizeof v); }}\n\
         /* 4 bytes in every lane. */\n\
         static inline __attribute__((unused)) {v} th_bcast4_{lanes}(const void* p) {{ int x; __builtin_memcpy(&x, p, 4); return ({v}){{0}} + x; }}\n"
    );
    let portable = format!(
        "/* The instruction's sums, lane by lane: 4 bytes of a times 4 signed bytes of b. */\n\
         static inline __attribute__((unused)) {v} th_dot{lanes}({v} acc, {v} a, {v} b) {{\n\
         \x20 for (int l = 0; l < {lanes}; l++)\n\
         \x20   for (int q = 0; q < 4; q++)\n\
         \x20     acc[l] += {data}(((unsigned)a[l] >> (8 * q)) & 255u) * (int)(signed char)(((unsigned)b[l] >> (8 * q)) & 255u);\n\
         \x20 return acc;\n}}\n"
    );
    for (k, (guard, include, call)) in native.iter().enumerate() {
        let _ = write!(
            s,
            "#{} {guard}\n#include {include}\n#define th_dot{lanes}(acc, a, b) (({v})({call}))\n",
            if k == 0 { "if" } else { "elif" }
        );
    }
    if native.is_empty() {
        s.push_str(&portable);
    } else {
        let _ = write!(s, "#else\n{portable}#endif\n");
    }
    s.push_str("#endif\n\n");
    s
}

impl Gen<'_> {
    /// Writes `t`: accumulators loaded, the band with one instruction per accumulator and step
    /// inside (each distinct operand read once per step), a flipped data's offset taken back,
    /// stored. With `init`, the accumulators start from it instead of memory.
    pub(super) fn dot_tile(&mut self, t: &DotTile, ins: Instruction, init: Option<f64>) {
        // Data of the other signedness is read with its top bit flipped; the weights' sums
        // times 128 are then taken back (x86: the data was read 128 more) or added back
        // (aarch64: 128 less).
        let flip = t.data.signed != ins.signed_data();
        let (lane, extent) = t.lane;
        let lanes = t.width;
        let (load, store, bcast, dot) = (
            format!("th_viload{lanes}"),
            format!("th_vistore{lanes}"),
            format!("th_bcast4_{lanes}"),
            format!("th_dot{lanes}"),
        );
        let vt = format!("th_vi{lanes}");
        let acc = self.names.bufs[t.buf].clone();
        let wbuf = self.names.bufs[t.weight.0].clone();
        let dbuf = self.names.bufs[t.data.buf].clone();
        let at_q0 = |l: &Lin, point: &[(Var, i64)], first: i64| {
            at_point(l, point, (lane, first), Some((t.quad, 0)))
        };
        // Per accumulator: its name, its address, and the C of its two operands.
        let mut regs = vec![];
        for point in tile_points(&t.tile) {
            for first in (0..extent / lanes).map(|g| g * lanes) {
                let name = self.names.fresh(&format!("{acc}_d{}", regs.len()));
                let at = self.lin(&at_point(t.index, &point, (lane, first), None));
                let w = self.lin(&at_q0(t.weight.1, &point, first));
                let w = format!("{load}(&{wbuf}[{w}])");
                let d = self.lin(&at_q0(t.data.index, &point, first));
                let mut d = format!("{bcast}(&{dbuf}[{d}])");
                if let Some(c) = t.data.guard {
                    let c = super::regtile::map_cond(c, &|l: &Lin| at_q0(l, &point, first));
                    let c = self.cond(&c);
                    d = format!("({c} ? {d} : ({vt}){{0}})");
                }
                if flip {
                    d = format!("({d} ^ (int)0x80808080)");
                }
                regs.push((name, at, w, d));
            }
        }
        // Each distinct operand gets a name, in the order of first use.
        let mut names: HashMap<String, String> = HashMap::new();
        let mut order: Vec<(String, String)> = vec![];
        let mut name_of = |g: &mut Gen, e: &String, stem: &str| -> String {
            names
                .entry(e.clone())
                .or_insert_with(|| {
                    let n = g.names.fresh(stem);
                    order.push((n.clone(), e.clone()));
                    n
                })
                .clone()
        };
        let ops: Vec<(String, String)> = regs
            .iter()
            .map(|(_, _, w, d)| (name_of(self, w, "th_w"), name_of(self, d, "th_a")))
            .collect();
        let weights: Vec<String> = {
            let mut v: Vec<String> = ops.iter().map(|o| o.0.clone()).collect();
            v.sort();
            v.dedup();
            v
        };
        self.line("{");
        self.depth += 1;
        for (r, at, _, _) in &regs {
            let start = match init {
                Some(c) => format!("({vt}){{0}} + {}", c as i32),
                None => format!("{load}(&{acc}[{at}])"),
            };
            self.line(&format!("{vt} {r} = {start};"));
        }
        // Flipped data: the sums of the weights each accumulator read.
        let sums: HashMap<String, String> = if flip {
            weights
                .iter()
                .map(|w| (w.clone(), self.names.fresh("th_wsum")))
                .collect()
        } else {
            HashMap::new()
        };
        let mut sum_names: Vec<&String> = sums.values().collect();
        sum_names.sort();
        for s in &sum_names {
            self.line(&format!("{vt} {s} = ({vt}){{0}};"));
        }
        for &(v, n, kind) in &t.band {
            let name = self.var(v);
            self.open_loop(&name, n, kind);
            self.depth += 1;
        }
        for (n, e) in &order {
            self.line(&format!("const {vt} {n} = {e};"));
        }
        for ((r, ..), (w, d)) in regs.iter().zip(&ops) {
            self.line(&format!("{r} = {dot}({r}, {d}, {w});"));
        }
        for w in &weights {
            if let Some(s) = sums.get(w) {
                self.line(&format!("{s} = {dot}({s}, ({vt}){{0}} + 0x01010101, {w});"));
            }
        }
        for _ in &t.band {
            self.depth -= 1;
            self.line("}");
        }
        for ((r, at, ..), (w, _)) in regs.iter().zip(&ops) {
            if let Some(s) = sums.get(w) {
                let op = if ins.signed_data() { '+' } else { '-' };
                self.line(&format!("{r} = {r} {op} ({s} << 7);"));
            }
            self.line(&format!("{store}(&{acc}[{at}], {r});"));
        }
        self.depth -= 1;
        self.line("}");
    }
}
