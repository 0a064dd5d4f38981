//! Integer register tiles: an i32 sum whose nest is a register tile's (`regtile`: a band of
//! reduction loops around a small tile of space loops, the vector loop last) gets its
//! accumulators as named integer vectors across the band, its 8-bit operands widened to i32
//! lanes as they are loaded (`vpmovzxbd` / `vpmovsxbd` on x86, see `helpers`).
//!
//! The sums the dot tiles take (`dot`) multiply 4 bytes per lane; a depthwise convolution's
//! window sums no channels, so its products are one per lane, and plain C left its
//! accumulators in memory: every product loaded and stored its accumulator. MobileNetV2's
//! integer depthwise layers ran at 15-31 GOP/s that way, 26-68 with these tiles
//! (docs/experiments/2026-12-04-integer-tiles.md).
//!
//! A tile qualifies when it is a register tile of a sum into an i32 buffer, its vector loop
//! whole vectors of the target's width or of a half or quarter of it (at least 4 lanes: 24 or
//! 120 channels on AVX-512 are 8-lane vectors), and its value `+`, `-`, `*`, negation, integer
//! constants, selects on lane-invariant conditions (inlined padding, its arms read only where
//! the condition holds), and loads of u8, i8 or i32 tensors, contiguous along the lane or the
//! same in every lane.

use super::init::Accumulators;
use super::lanes::{cond_uses, lane_coef, uses};
use super::regtile::{RegTile, map_lins, register_tiles, tile_points};
use super::writer::{Gen, Operands};
use crate::ir::{BinaryOp, DType, ReduceOp, UnaryOp};
use crate::lower::{Lin, LoweredFunc, Stmt, VExpr, Var};
use std::collections::HashMap;

/// An integer register tile: a register tile's nest, and its vector width in i32 lanes.
#[derive(Debug, Clone)]
pub(super) struct IntTile<'s> {
    pub(super) nest: RegTile<'s>,
    pub(super) width: i64,
}

impl IntTile<'_> {
    pub(super) fn accumulators(&self) -> Accumulators<'_> {
        let t = &self.nest;
        Accumulators::of(t.buf, t.index, &t.tile, t.lane)
    }
}

/// Every integer register tile of `func`, keyed by its band's outermost loop, for vectors of
/// at most `lanes` i32 and at most `max` accumulators.
pub(super) fn int_tiles(
    func: &LoweredFunc,
    lanes: i64,
    max: i64,
) -> HashMap<*const Stmt, IntTile<'_>> {
    register_tiles(&func.body, lanes, max)
        .into_iter()
        .filter_map(|(k, t)| {
            let (lane, extent) = t.lane;
            let width = [lanes, lanes / 2, lanes / 4]
                .into_iter()
                .find(|&w| w >= 4 && extent % w == 0)?;
            let points: i64 = t.tile.iter().map(|l| l.1).product();
            let fits = points * (extent / width) <= max;
            (t.op == ReduceOp::Sum
                && func.buffers[t.buf].dtype == DType::I32
                && fits
                && int_form(func, t.value, lane))
            .then_some((k, IntTile { nest: t, width }))
        })
        .collect()
}

/// Whether `e` is written by [`Gen::int_vector_value`] (see the module docs).
fn int_form(func: &LoweredFunc, e: &VExpr, lane: Var) -> bool {
    let integer =
        |buf: usize| matches!(func.buffers[buf].dtype, DType::U8 | DType::I8 | DType::I32);
    match e {
        VExpr::Const(c) => c.fract() == 0.0 && c.abs() < 2f64.powi(31),
        VExpr::Load { buf, index } => {
            integer(*buf) && matches!(lane_coef(index, lane), Some(0 | 1))
        }
        VExpr::Index(_) => !uses(e, lane),
        VExpr::Unary(UnaryOp::Neg, a) => int_form(func, a, lane),
        VExpr::Binary(BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul, a, b) => {
            int_form(func, a, lane) && int_form(func, b, lane)
        }
        VExpr::Select(c, a, b) => {
            !cond_uses(c, lane) && int_form(func, a, lane) && int_form(func, b, lane)
        }
        _ => false,
    }
}

/// The values `e` (in [`int_form`]) may take, when they are bounded by its 8-bit loads and
/// constants (an i32 load or an index is not).
fn range(func: &LoweredFunc, e: &VExpr) -> Option<(i64, i64)> {
    match e {
        VExpr::Const(c) => Some((*c as i64, *c as i64)),
        VExpr::Load { buf, .. } => match func.buffers[*buf].dtype {
            DType::U8 => Some((0, 255)),
            DType::I8 => Some((-128, 127)),
            _ => None,
        },
        VExpr::Unary(UnaryOp::Neg, a) => range(func, a).map(|(lo, hi)| (-hi, -lo)),
        VExpr::Binary(op, a, b) => {
            let ((al, ah), (bl, bh)) = (range(func, a)?, range(func, b)?);
            match op {
                BinaryOp::Add => Some((al.checked_add(bl)?, ah.checked_add(bh)?)),
                BinaryOp::Sub => Some((al.checked_sub(bh)?, ah.checked_sub(bl)?)),
                BinaryOp::Mul => {
                    let c = [
                        al.checked_mul(bl)?,
                        al.checked_mul(bh)?,
                        ah.checked_mul(bl)?,
                        ah.checked_mul(bh)?,
                    ];
                    Some((*c.iter().min()?, *c.iter().max()?))
                }
                _ => None,
            }
        }
        VExpr::Select(_, a, b) => {
            let ((al, ah), (bl, bh)) = (range(func, a)?, range(func, b)?);
            Some((al.min(bl), ah.max(bh)))
        }
        _ => None,
    }
}

/// Whether `a * b` is `th_vint*_mul16`: one factor within [0, 2^15) and the other within
/// [-2^15, 2^15), so that in each i32 lane the low halves hold the values as i16 and the high
/// half of the first is zero. `vpmaddwd` then sums the product of the low halves and a zero
/// product of the high halves: the exact product in one instruction, where `vpmulld` takes
/// two (a u8 x i8 depthwise window, its data non-negative).
fn products_in_16_bits(func: &LoweredFunc, a: &VExpr, b: &VExpr) -> bool {
    let (Some(a), Some(b)) = (range(func, a), range(func, b)) else {
        return false;
    };
    let low = |r: (i64, i64)| r.0 >= 0 && r.1 < 1 << 15;
    let signed = |r: (i64, i64)| r.0 >= -(1 << 15) && r.1 < 1 << 15;
    (low(a) && signed(b)) || (low(b) && signed(a))
}

/// The C helpers of integer tiles at `lanes` i32 lanes, named by it (`th_vint16`...): the
/// vector type, its loads and stores, and loads of `lanes` bytes widened to it. The widening
/// is one `vpmovzxbd` / `vpmovsxbd` where x86 has it at that width: GCC 12 wrote
/// `__builtin_convertvector` from 16 bytes to 16 ints as 16 scalar extractions and inserts, and
/// a depthwise layer's tile ran 4x slower than in memory for it. `_mul16` multiplies lanes
/// that [`products_in_16_bits`] admits, in `vpmaddwd` where x86 has it.
pub(super) fn helpers(lanes: i64) -> String {
    let bytes = lanes * 4;
    let v = format!("th_vint{lanes}");
    let x86 = match lanes {
        16 => Some((
            "defined(__AVX512F__)",
            "_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)p))",
            "_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)p))",
            "_mm512_madd_epi16((__m512i)a, (__m512i)b)",
        )),
        8 => Some((
            "defined(__AVX2__)",
            "_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)p))",
            "_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)p))",
            "_mm256_madd_epi16((__m256i)a, (__m256i)b)",
        )),
        4 => Some((
            "defined(__SSE4_1__)",
            "_mm_cvtepu8_epi32(_mm_cvtsi32_si128(th_bytes4(p)))",
            "_mm_cvtepi8_epi32(_mm_cvtsi32_si128(th_bytes4(p)))",
            "_mm_madd_epi16((__m128i)a, (__m128i)b)",
        )),
        _ => None,
    };
    let mut s = format!(
        "#ifndef TH_VINT{lanes}\n#define TH_VINT{lanes}\n\
         typedef int {v} __attribute__((vector_size({bytes})));\n\
         static inline __attribute__((unused)) {v} {v}_load(const void* p) {{ {v} v; __builtin_memcpy(&v, p, sizeof v); return v; }}\n\
         static inline __attribute__((unused)) void {v}_store(void* p, {v} v) {{ __builtin_memcpy(p, &v, sizeof v); }}\n\
         /* {lanes} bytes, each widened to an i32 lane. */\n"
    );
    let portable = format!(
        "typedef unsigned char {v}_u8s __attribute__((vector_size({lanes})));\n\
         typedef signed char {v}_i8s __attribute__((vector_size({lanes})));\n\
         static inline __attribute__((unused)) {v} {v}_u8(const void* p) {{ {v}_u8s v; __builtin_memcpy(&v, p, sizeof v); return __builtin_convertvector(v, {v}); }}\n\
         static inline __attribute__((unused)) {v} {v}_i8(const void* p) {{ {v}_i8s v; __builtin_memcpy(&v, p, sizeof v); return __builtin_convertvector(v, {v}); }}\n\
         static inline __attribute__((unused)) {v} {v}_mul16({v} a, {v} b) {{ return a * b; }}\n"
    );
    match x86 {
        Some((guard, u8s, i8s, madd)) => {
            s.push_str(&format!(
                "#if {guard}\n#include <immintrin.h>\n\
                 #ifndef TH_BYTES4\n#define TH_BYTES4\n\
                 static inline __attribute__((unused)) int th_bytes4(const void* p) {{ int x; __builtin_memcpy(&x, p, 4); return x; }}\n\
                 #endif\n\
                 static inline __attribute__((unused)) {v} {v}_u8(const void* p) {{ return ({v})({u8s}); }}\n\
                 static inline __attribute__((unused)) {v} {v}_i8(const void* p) {{ return ({v})({i8s}); }}\n\
                 static inline __attribute__((unused)) {v} {v}_mul16({v} a, {v} b) {{ return ({v})({madd}); }}\n\
                 #else\n{portable}#endif\n"
            ));
        }
        None => s.push_str(&portable),
    }
    s.push_str("#endif\n\n");
    s
}

impl Gen<'_> {
    /// Writes `t`: accumulators loaded, the band with each distinct operand read once per step
    /// and the tile's updates inside, stored. With `init`, the accumulators start from it
    /// instead of memory.
    pub(super) fn int_tile(&mut self, it: &IntTile, init: Option<f64>) {
        let t = &it.nest;
        let (lane, extent) = t.lane;
        let lanes = it.width;
        let v = format!("th_vint{lanes}");
        let acc = self.names.bufs[t.buf].clone();
        let mut regs = vec![];
        for point in tile_points(&t.tile) {
            for first in (0..extent / lanes).map(|g| g * lanes) {
                let fixed = |l: &Lin| {
                    l.substitute(&|v| point.iter().find(|p| p.0 == v).map(|p| Lin::constant(p.1)))
                };
                let name = self.names.fresh(&format!("{acc}_i{}", regs.len()));
                let at = super::window::at_point(t.index, &point, (lane, first), None);
                let at = self.lin(&at);
                regs.push((name, at, map_lins(t.value, &fixed), first));
            }
        }
        self.line("{");
        self.depth += 1;
        for (r, at, ..) in &regs {
            let start = match init {
                Some(c) => format!("({v}){{0}} + {}", c as i32),
                None => format!("{v}_load(&{acc}[{at}])"),
            };
            self.line(&format!("{v} {r} = {start};"));
        }
        for &(v, n, kind) in &t.band {
            let name = self.var(v);
            self.open_loop(&name, n, kind);
            self.depth += 1;
        }
        let mut operands = Operands::default();
        let updates: Vec<String> = regs
            .iter()
            .map(|(r, _, value, first)| {
                let (e, _) = self.int_vector_value(value, (lane, *first, &v), &mut operands);
                format!("{r} = {r} + {e};")
            })
            .collect();
        operands.write(self);
        for u in updates {
            self.line(&u);
        }
        for _ in &t.band {
            self.depth -= 1;
            self.line("}");
        }
        for (r, at, ..) in &regs {
            self.line(&format!("{v}_store(&{acc}[{at}], {r});"));
        }
        self.depth -= 1;
        self.line("}");
    }

    /// The C of `e` (in [`int_form`]) for the vector of type `v` of lanes from `first`, and
    /// whether it is a vector (else an `int` the same in every lane, which the vector
    /// operations broadcast).
    fn int_vector_value(
        &mut self,
        e: &VExpr,
        (lane, first, v): (Var, i64, &str),
        ops: &mut Operands,
    ) -> (String, bool) {
        if !uses(e, lane) {
            if let VExpr::Const(c) = e {
                return (format!("{}", *c as i64), false);
            }
            let v = self.int_scalar(e);
            return (ops.name(self, "int", v), false);
        }
        match e {
            VExpr::Load { buf, index } => {
                let at = index.substitute(&|v| (v == lane).then(|| Lin::constant(first)));
                let i = self.lin(&at);
                let at = format!("&{}[{i}]", self.names.bufs[*buf]);
                let load = match self.func.buffers[*buf].dtype {
                    DType::U8 => format!("{v}_u8({at})"),
                    DType::I8 => format!("{v}_i8({at})"),
                    _ => format!("{v}_load({at})"),
                };
                (ops.name(self, "__auto_type", load), true)
            }
            VExpr::Unary(UnaryOp::Neg, a) => {
                let (a, vector) = self.int_vector_value(a, (lane, first, v), ops);
                (format!("(-{a})"), vector)
            }
            VExpr::Binary(BinaryOp::Mul, x, y) if products_in_16_bits(self.func, x, y) => {
                let mut vector =
                    |e: &VExpr, g: &mut Self| match g.int_vector_value(e, (lane, first, v), ops) {
                        (s, true) => s,
                        (s, false) => format!("(({v}){{0}} + {s})"),
                    };
                let (a, b) = (vector(x, self), vector(y, self));
                (format!("{v}_mul16({a}, {b})"), true)
            }
            VExpr::Binary(op, a, b) => {
                let (a, _) = self.int_vector_value(a, (lane, first, v), ops);
                let (b, _) = self.int_vector_value(b, (lane, first, v), ops);
                let o = match op {
                    BinaryOp::Add => "+",
                    BinaryOp::Sub => "-",
                    BinaryOp::Mul => "*",
                    _ => unreachable!("int_form admits + - * only"),
                };
                (format!("({a} {o} {b})"), true)
            }
            VExpr::Select(c, a, b) => {
                // As in the f32 tiles: one operand, its arms read only where it holds.
                let c = self.cond(c);
                let mut arms = Operands::inline();
                let (a, va) = self.int_vector_value(a, (lane, first, v), &mut arms);
                let (b, vb) = self.int_vector_value(b, (lane, first, v), &mut arms);
                let arm = |s: String, vector: bool| {
                    if vector {
                        s
                    } else {
                        format!("(({v}){{0}} + {s})")
                    }
                };
                let select = format!("({c} ? {} : {})", arm(a, va), arm(b, vb));
                (ops.name(self, "__auto_type", select), true)
            }
            _ => unreachable!("int_form admits loads, negation, + - * and selects"),
        }
    }

    /// A value the same in every lane, in C's `int` (loads of 8-bit tensors promote).
    fn int_scalar(&mut self, e: &VExpr) -> String {
        match e {
            VExpr::Load { buf, index } => {
                let i = self.lin(index);
                format!("(int){}[{i}]", self.names.bufs[*buf])
            }
            VExpr::Const(c) => format!("{}", *c as i64),
            VExpr::Index(l) => format!("({})", self.lin(l)),
            VExpr::Unary(UnaryOp::Neg, a) => format!("(-{})", self.int_scalar(a)),
            VExpr::Binary(op, a, b) => {
                let (a, b) = (self.int_scalar(a), self.int_scalar(b));
                let o = match op {
                    BinaryOp::Add => "+",
                    BinaryOp::Sub => "-",
                    BinaryOp::Mul => "*",
                    _ => unreachable!("int_form admits + - * only"),
                };
                format!("({a} {o} {b})")
            }
            VExpr::Select(c, a, b) => {
                let c = self.cond(c);
                let (a, b) = (self.int_scalar(a), self.int_scalar(b));
                format!("({c} ? {a} : {b})")
            }
            _ => unreachable!("int_form admits loads, negation, + - * and selects"),
        }
    }
}
