//! The C of a dynamically quantized model's steps (`crate::dynamic`): `DynamicQuantizeLinear`
//! as ONNX defines it and tract runs it (the range widened to hold 0, `scale = (max - min) /
//! 255`, `zero_point = saturate(round_half_even(-min / scale))`, NaN to 0 as tract's cast
//! does, then `saturate(round_half_even(x / scale) + zero_point)`), and the zero point's
//! correction of i32 sums. Only the helpers the steps use are written.

use crate::program::{DynamicQuantize, Program, Step, ZeroPointShift};
use std::fmt::Write;
use tunehub_engine::ir::DType;

/// The helpers the steps of `p` use.
pub fn helpers(s: &mut String, name: &str, p: &Program) {
    if p.steps
        .iter()
        .any(|s| matches!(s, Step::DynamicQuantize(_)))
    {
        let _ = write!(
            s,
            "static void {name}_dynamic_quantize(uint8_t* restrict d, float* scale, uint8_t* zero_point, const float* restrict s, int64_t n) {{\n  \
             float lo = 0.0f, hi = 0.0f, sc, z;\n  int64_t i;\n  \
             /* An OpenMP reduction may take the lanes in any order: min and max do not care, and\n     \
             the compiler vectorizes them (without it, not under IEEE rules). */\n\
             #ifdef _OPENMP\n#pragma omp parallel for simd schedule(static) reduction(min : lo) reduction(max : hi) if (n >= 65536)\n#endif\n  \
             for (i = 0; i < n; i++) {{\n    lo = s[i] < lo ? s[i] : lo;\n    hi = s[i] > hi ? s[i] : hi;\n  }}\n  \
             sc = (hi - lo) / 255.0f;\n  \
             /* All zeros: 0 / 0, a NaN zero point, which saturates to 0. */\n  \
             z = rintf(-lo / sc);\n  z = z >= 0.0f ? (z > 255.0f ? 255.0f : z) : 0.0f;\n  \
             *scale = sc;\n  *zero_point = (uint8_t)z;\n  \
             /* Rounded and saturated in floats, then narrowed: two loops the compiler vectorizes\n     \
             (one would saturate on the narrowed bytes: `codegen::quantize`). */\n\
             #ifdef _OPENMP\n#pragma omp parallel for schedule(static) if (n >= 65536)\n#endif\n  \
             for (i = 0; i < n; i += 1024) {{\n    \
             float q[1024];\n    const int64_t m = n - i < 1024 ? n - i : 1024;\n    \
             for (int64_t j = 0; j < m; j++) {{\n      float v = rintf(s[i + j] / sc) + z;\n      v = v != v ? z : v;\n      q[j] = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;\n    }}\n    \
             for (int64_t j = 0; j < m; j++) d[i + j] = (uint8_t)(int32_t)q[j];\n  }}\n}}\n\n"
        );
    }
    // One correction per result type (i32, or f32: the sums' cast folded in).
    let mut types: Vec<DType> = p
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::ZeroPointShift(z) => Some(p.values[z.dst].dtype),
            _ => None,
        })
        .collect();
    types.sort_by_key(|t| t.name());
    types.dedup();
    for t in types {
        let (n, ty) = (t.name(), t.c_name());
        let _ = write!(
            s,
            "static void {name}_zero_point_shift_{n}({ty}* restrict d, const int32_t* restrict s, int32_t z, const int32_t* restrict sums, int64_t n, int64_t len) {{\n  \
             int64_t c;\n  \
             /* Chunks on the threads, each in runs that end where the sums start again. */\n\
             #ifdef _OPENMP\n#pragma omp parallel for schedule(static) if (n >= 65536)\n#endif\n  \
             for (c = 0; c < n; c += 4096) {{\n    \
             const int64_t e = c + 4096 < n ? c + 4096 : n;\n    \
             for (int64_t i = c; i < e;) {{\n      \
             const int64_t j = i % len, r = len - j < e - i ? len - j : e - i;\n      \
             for (int64_t k = 0; k < r; k++) d[i + k] = ({ty})(s[i + k] - z * sums[j + k]);\n      \
             i += r;\n    }}\n  }}\n}}\n\n"
        );
    }
}

/// The call of a dynamic quantization; `ptr` gives a value's pointer expression.
pub fn dynamic_quantize(
    name: &str,
    p: &Program,
    d: &DynamicQuantize,
    ptr: impl Fn(usize) -> String,
) -> String {
    format!(
        "  {name}_dynamic_quantize({}, {}, {}, {}, {});\n",
        ptr(d.dst),
        ptr(d.scale),
        ptr(d.zero_point),
        ptr(d.src),
        p.values[d.src].elements()
    )
}

/// The call of a zero point's correction.
pub fn zero_point_shift(
    name: &str,
    p: &Program,
    z: &ZeroPointShift,
    ptr: impl Fn(usize) -> String,
) -> String {
    format!(
        "  {name}_zero_point_shift_{}({}, {}, (int32_t)*(const {}*){}, {}, {}, {});\n",
        p.values[z.dst].dtype.name(),
        ptr(z.dst),
        ptr(z.src),
        p.values[z.zero_point].dtype.c_name(),
        ptr(z.zero_point),
        ptr(z.sums),
        p.values[z.dst].elements(),
        p.values[z.sums].elements()
    )
}
