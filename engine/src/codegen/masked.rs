//! The C helpers of register tiles' partial, strided and range-masked vectors:
//! - `th_vloadn` and `th_vstoren` move the first `n` lanes of a vector and touch no memory past
//!   them (a tile whose lane loop is not a multiple of the vector, such as a 28-wide output row
//!   on 16 lanes, ends in one such vector);
//! - `th_vload2` reads lanes `p[0], p[2], ...` as two such loads and a shuffle of their even
//!   lanes (a stride-2 convolution's or pooling's columns), where GCC's vectorizer would gather
//!   them one lane at a time;
//! - `th_vload2p` and `th_vload2mp` give the same lanes in the order `TH_LANEPERM` takes to
//!   and from the natural one: on AVX2 the evens are an in-lane `vshufps` that leaves the
//!   middle 64-bit pairs swapped, and a register tile whose vector operands are all of this
//!   kind accumulates in that order and puts its lanes back once, at its load and store,
//!   instead of a `vpermpd` per operand (elsewhere the order is the natural one);
//! - `TH_EVENS`, `TH_ODDS` and `TH_SHUFFLE2` pick lanes of two vectors: a pair's taps and their
//!   one-lane shifts where a window's columns share their loads (`window`);
//! - `TH_EVENS_IL` and `TH_ODDS_IL` (AVX-512) give a pair's evens and odds in the in-lane order
//!   of [`in_lane_order`], and `TH_TO_IL` / `TH_FROM_IL` move a vector into and out of it: a
//!   weighted column-shared tile (a depthwise convolution's) computes in that order, since
//!   `vpermt2ps` issues on the FMA's pipes on a Zen 4 and `vshufps` beside them;
//! - `th_vloadm` and `th_vload2m` read the lanes of a bit mask and give a constant in the others
//!   (padding inlined into a tile's operand: see `peel`), never touching memory outside the
//!   mask, so a padded row's edge is read straight from the unpadded input;
//! - `TH_VALIGN(lo, hi, s, i...)` (where [`aligns`]) is the vector of lanes `s..s + lanes` of
//!   `lo` then `hi` (AVX-512's `valignd`), and `TH_VMERGE(m, a, b)` takes `a` in the lanes of
//!   mask `m` and `b` in the others: a packed-row tile's taps shifted out of vectors loaded once
//!   (`rows`), their padding merged into the accumulator (a masked FMA).
//!
//! The masks are the ISA's masked moves where the target has them (AVX-512's `k` masks,
//! AVX's `vmaskmovps`), which never fault outside the mask; elsewhere lane-by-lane copies. The
//! generated kernel chooses by the compiler's macros, so a kernel written out for AVX-512
//! and compiled without its flags still builds.
//!
//! Where the masked load is emulated (AVX's mask vector built from the bits, `vmaskmovps` and a
//! blend with the constant; the lane loop), a mask of every lane is a plain load and an empty
//! one the constant: a padded tile's operand is in range in all but its edge tiles, and on a
//! Zen 3 the emulation cost a stride-2 depthwise convolution a fifth of its time. AVX-512's
//! one-instruction masked loads keep no branch.

use std::fmt::Write;

/// The in-lane order of a pair's evens (or odds) where the target has one: lane `j` of
/// `TH_EVENS_IL(a, b)` holds the evens' lane `order[j]`. AVX-512's `vshufps` picks within each
/// 128-bit block, two lanes from `a`, then two from `b`: lanes 0, 1, 8, 9, 2, 3, 10, 11, ...
///
/// Only on 16 lanes: measured on a Zen 4 only, where a 3x3 stride-2 depthwise row in this
/// order took 19.05 against 21.01 us (hand kernels, docs/experiments/2026-11-29-in-lane-zen4.md).
pub(super) fn in_lane_order(arch: &str, lanes: i64) -> Option<Vec<i64>> {
    if (arch, lanes) != ("x86_64", 16) {
        return None;
    }
    let half = lanes / 2;
    Some(
        (0..lanes)
            .map(|j| {
                let (block, k) = (j / 4, j % 4);
                if k < 2 {
                    2 * block + k
                } else {
                    half + 2 * block + k - 2
                }
            })
            .collect(),
    )
}

/// Whether the target shifts a vector across two in one instruction (`TH_VALIGN`): AVX-512.
/// Only there: elsewhere a two-source shift is two or three shuffles, dearer than the loads it
/// saves.
pub(super) fn aligns(arch: &str, lanes: i64) -> bool {
    (arch, lanes) == ("x86_64", 16)
}

/// The helpers for vectors of `lanes` f32 on `arch`, guarded so that kernels concatenate.
pub(super) fn helpers(arch: &str, lanes: i64) -> String {
    let mut s = format!(
        "#ifndef TH_VMASKED\n#define TH_VMASKED\n\
         typedef int th_vi __attribute__((vector_size({bytes})));\n",
        bytes = lanes * 4
    );
    let fallback = "static inline __attribute__((unused)) th_vf th_vloadn(const float* p, int n) { th_vf v = {0}; __builtin_memcpy(&v, p, (unsigned long)n * sizeof(float)); return v; }\n\
         static inline __attribute__((unused)) void th_vstoren(float* p, th_vf v, int n) { __builtin_memcpy(p, &v, (unsigned long)n * sizeof(float)); }\n";
    let full = (1i64 << lanes) - 1;
    // An emulated masked load: the whole vector or none of it without the emulation.
    let fast =
        format!("if (m == {full}u) return th_vload(p); if (m == 0u) return (th_vf){{0}} + c; ");
    let fallback = format!(
        "{fallback}static inline __attribute__((unused)) th_vf th_vloadm(const float* p, unsigned m, float c) {{ {fast}th_vf v = {{0}}; for (int i = 0; i < {lanes}; ++i) v[i] = (m >> i & 1u) ? p[i] : c; return v; }}\n#define TH_MASK_EMULATED 1\n"
    );
    let bits: Vec<String> = (0..lanes).map(|l| (1i64 << l).to_string()).collect();
    let isa = match (arch, lanes) {
        ("x86_64", 16) => Some((
            "defined(__AVX512F__)",
            "static inline __attribute__((unused)) th_vf th_vloadn(const float* p, int n) { return (th_vf)_mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1u), p); }\n\
             static inline __attribute__((unused)) void th_vstoren(float* p, th_vf v, int n) { _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1u), (__m512)v); }\n\
             static inline __attribute__((unused)) th_vf th_vloadm(const float* p, unsigned m, float c) { return (th_vf)_mm512_mask_loadu_ps(_mm512_set1_ps(c), (__mmask16)m, p); }\n"
                .to_string(),
        )),
        ("x86_64", 8) => Some((
            "defined(__AVX__)",
            format!(
                "static const int th_vmask[16] __attribute__((unused)) = {{-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0}};\n\
                 static inline __attribute__((unused)) th_vf th_vloadn(const float* p, int n) {{ return (th_vf)_mm256_maskload_ps(p, _mm256_loadu_si256((const __m256i*)(th_vmask + 8 - n))); }}\n\
                 static inline __attribute__((unused)) void th_vstoren(float* p, th_vf v, int n) {{ _mm256_maskstore_ps(p, _mm256_loadu_si256((const __m256i*)(th_vmask + 8 - n)), (__m256)v); }}\n\
                 static inline __attribute__((unused)) th_vf th_vloadm(const float* p, unsigned m, float c) {{ {fast}const th_vi k = ((th_vi){{{}}} & (int)m) != 0; const th_vf v = (th_vf)_mm256_maskload_ps(p, (__m256i)k); const th_vf f = (th_vf){{0}} + c; return (th_vf)((k & (th_vi)v) | (~k & (th_vi)f)); }}\n#define TH_MASK_EMULATED 1\n",
                bits.join(", ")
            ),
        )),
        _ => None,
    };
    match isa {
        Some((guard, body)) => {
            let _ = write!(
                s,
                "#if {guard}\n#include <immintrin.h>\n{body}#else\n{fallback}#endif\n"
            );
        }
        None => s.push_str(&fallback),
    }
    let evens: Vec<String> = (0..lanes).map(|l| (2 * l).to_string()).collect();
    let evens = evens.join(", ");
    let odds: Vec<String> = (0..lanes).map(|l| (2 * l + 1).to_string()).collect();
    let odds = odds.join(", ");
    // GCC's two-vector shuffle takes a mask vector, clang's takes the lanes as arguments.
    // `TH_SHUFFLE2(a, b, i...)`: lane l of the result is lane i_l of a's lanes then b's.
    s.push_str(
        "#if defined(__clang__)\n#define TH_SHUFFLE2(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)\n#else\n\
         #define TH_SHUFFLE2(a, b, ...) __builtin_shuffle(a, b, (th_vi){__VA_ARGS__})\n#endif\n",
    );
    let generic = format!(
        "#define TH_EVENS(a, b) TH_SHUFFLE2(a, b, {evens})\n#define TH_ODDS(a, b) TH_SHUFFLE2(a, b, {odds})\n"
    );
    // The evens in their natural order: no permutation to undo.
    let natural = "#define TH_EVENS_P(a, b) TH_EVENS(a, b)\n#define TH_LANEPERM(v) (v)\n";
    if (arch, lanes) == ("x86_64", 8) {
        // AVX2's even lanes as an in-lane `vshufps` and a `vpermpd` of its 64-bit pairs: GCC's
        // own choice (two `vpermd` and a blend) takes a third shuffle and two index registers,
        // and a max pool's row tile of 7 vectors spilled more with it (Zen 3). The `vshufps`
        // alone leaves pairs 1 and 2 swapped: `TH_LANEPERM` swaps them back (its own inverse).
        s.push_str(
            "#if defined(__AVX2__)\n#define TH_EVENS_P(a, b) ((th_vf)_mm256_shuffle_ps((__m256)(a), (__m256)(b), 0x88))\n\
             #define TH_LANEPERM(v) ((th_vf)_mm256_permute4x64_pd((__m256d)(v), 0xD8))\n\
             #define TH_EVENS(a, b) TH_LANEPERM(TH_EVENS_P(a, b))\n\
             #define TH_ODDS(a, b) TH_LANEPERM((th_vf)_mm256_shuffle_ps((__m256)(a), (__m256)(b), 0xDD))\n#else\n",
        );
        s.push_str(&generic);
        s.push_str(natural);
        s.push_str("#endif\n");
    } else {
        s.push_str(&generic);
        s.push_str(natural);
    }
    if let Some(order) = in_lane_order(arch, lanes) {
        let list = |f: &dyn Fn(i64) -> i64| -> String {
            let v: Vec<String> = (0..lanes).map(|j| f(j).to_string()).collect();
            v.join(", ")
        };
        let at = |x: i64| order.iter().position(|&o| o == x).expect("a permutation") as i64;
        // Without AVX-512's flags the same lane order by generic shuffles, so that the shifts
        // the generator writes for it hold under either branch.
        let _ = write!(
            s,
            "#if defined(__AVX512F__)\n\
             #define TH_EVENS_IL(a, b) ((th_vf)_mm512_shuffle_ps((__m512)(a), (__m512)(b), 0x88))\n\
             #define TH_ODDS_IL(a, b) ((th_vf)_mm512_shuffle_ps((__m512)(a), (__m512)(b), 0xDD))\n\
             #else\n#define TH_EVENS_IL(a, b) TH_SHUFFLE2(a, b, {})\n\
             #define TH_ODDS_IL(a, b) TH_SHUFFLE2(a, b, {})\n#endif\n\
             #define TH_TO_IL(v) TH_SHUFFLE2(v, v, {})\n#define TH_FROM_IL(v) TH_SHUFFLE2(v, v, {})\n",
            list(&|j| 2 * order[j as usize]),
            list(&|j| 2 * order[j as usize] + 1),
            list(&|j| order[j as usize]),
            list(&at),
        );
    }
    if aligns(arch, lanes) {
        // Without AVX-512's flags, a generic shuffle and a blend: the same lanes.
        let _ = write!(
            s,
            "#if defined(__AVX512F__)\n\
             #define TH_VALIGN(lo, hi, s, ...) ((th_vf)_mm512_alignr_epi32((__m512i)(hi), (__m512i)(lo), (s)))\n\
             #define TH_VMERGE(m, a, b) ((th_vf)_mm512_mask_mov_ps((__m512)(b), (__mmask16)(m), (__m512)(a)))\n\
             #else\n#define TH_VALIGN(lo, hi, s, ...) TH_SHUFFLE2(lo, hi, __VA_ARGS__)\n\
             #define TH_VMERGE(m, a, b) th_vmerge(m, a, b)\n\
             static inline __attribute__((unused)) th_vf th_vmerge(unsigned m, th_vf a, th_vf b) {{ const th_vi k = ((th_vi){{{}}} & (int)m) != 0; return (th_vf)((k & (th_vi)a) | (~k & (th_vi)b)); }}\n#endif\n",
            bits.join(", ")
        );
    }
    let half = lanes / 2;
    // Lanes p[0], p[2], ..., p[2n-2]: the 2n - 1 floats from p, never one past them. The masked
    // form spreads lane bit l to element bit 2l of the half that holds it. Written twice: in
    // the natural order and in `TH_LANEPERM`'s (suffix `p`).
    s.push_str(
        "static inline __attribute__((unused)) unsigned th_spread(unsigned x) {\n\
         \x20 x = (x | (x << 4)) & 0x0F0Fu;\n\
         \x20 x = (x | (x << 2)) & 0x3333u;\n\
         \x20 return (x | (x << 1)) & 0x5555u;\n}\n",
    );
    for (suffix, evens) in [("", "TH_EVENS"), ("p", "TH_EVENS_P")] {
        let _ = write!(
            s,
            "static inline __attribute__((unused)) th_vf th_vload2{suffix}(const float* p, int n) {{\n\
             \x20 const int k = 2 * n - 1;\n\
             \x20 th_vf lo = k >= {lanes} ? th_vload(p) : th_vloadn(p, k);\n\
             \x20 th_vf hi = k > {lanes} ? th_vloadn(p + {lanes}, k - {lanes}) : (th_vf){{0}};\n\
             \x20 return {evens}(lo, hi);\n}}\n\
             static inline __attribute__((unused)) th_vf th_vload2m{suffix}(const float* p, unsigned m, float c) {{\n\
             #ifdef TH_MASK_EMULATED\n\
             \x20 if (m == {full}u) return th_vload2{suffix}(p, {lanes});\n\
             \x20 if (m == 0u) return (th_vf){{0}} + c;\n\
             #endif\n\
             \x20 th_vf lo = th_vloadm(p, th_spread(m & {lowmask}u), c);\n\
             \x20 th_vf hi = th_vloadm(p + {lanes}, th_spread(m >> {half}), c);\n\
             \x20 return {evens}(lo, hi);\n}}\n",
            lowmask = (1i64 << half) - 1
        );
    }
    s.push_str(
        "static inline __attribute__((unused)) unsigned th_rangemask(int lo, int hi) { return hi > lo ? ((1u << hi) - 1u) & ~((1u << lo) - 1u) : 0u; }\n\
         #endif\n\n",
    );
    s
}
