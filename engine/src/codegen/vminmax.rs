//! The C helpers of register tiles that reduce by max or min (a pooling's running result):
//! `th_vmax(a, b)` is `a > b ? a : b` lane by lane, `th_vmin(a, b)` is `a < b ? a : b`: the
//! scalar `th_maxf` and `th_minf` of the plain loops, so a tile and a plain loop give the same
//! bits, NaN included (a NaN in `b` wins, as in the reference's order of comparisons).
//!
//! x86's `maxps`/`minps` return their second operand unless the first is strictly greater
//! (smaller): exactly these semantics, one instruction. Elsewhere (NEON's `fmax` differs on
//! NaN) a compare and a select in GCC's vector extensions, which every GCC and Clang target
//! lowers to its own vector unit.

use std::fmt::Write;

/// The helpers for vectors of `lanes` f32 on `arch`, guarded so that kernels concatenate.
/// They use `th_vf` and `th_vi` (see `masked`), declared before.
pub(super) fn helpers(arch: &str, lanes: i64) -> String {
    let generic = "static inline __attribute__((unused)) th_vf th_vmax(th_vf a, th_vf b) { const th_vi k = a > b; return (th_vf)((k & (th_vi)a) | (~k & (th_vi)b)); }\n\
         static inline __attribute__((unused)) th_vf th_vmin(th_vf a, th_vf b) { const th_vi k = a < b; return (th_vf)((k & (th_vi)a) | (~k & (th_vi)b)); }\n";
    let isa = match (arch, lanes) {
        ("x86_64", 16) => Some(("defined(__AVX512F__)", "_mm512", "__m512")),
        ("x86_64", 8) => Some(("defined(__AVX__)", "_mm256", "__m256")),
        ("x86_64", 4) => Some(("defined(__SSE__)", "_mm", "__m128")),
        _ => None,
    };
    let mut s = String::from("#ifndef TH_VMINMAX\n#define TH_VMINMAX\n");
    match isa {
        Some((guard, prefix, ty)) => {
            let _ = write!(
                s,
                "#if {guard}\n#include <immintrin.h>\n\
                 static inline __attribute__((unused)) th_vf th_vmax(th_vf a, th_vf b) {{ return (th_vf){prefix}_max_ps(({ty})a, ({ty})b); }}\n\
                 static inline __attribute__((unused)) th_vf th_vmin(th_vf a, th_vf b) {{ return (th_vf){prefix}_min_ps(({ty})a, ({ty})b); }}\n\
                 #else\n{generic}#endif\n"
            );
        }
        None => s.push_str(generic),
    }
    s.push_str("#endif\n\n");
    s
}
