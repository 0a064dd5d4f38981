//! `NAME.c`: every kernel, the runtime's few helpers (strided copies per element type, gather,
//! fill, a QDQ model's conversions, a dynamically quantized model's (`dynamic`); only those
//! used, `-Wall -Werror` refuses an unused static function), and the driver: create (map the
//! weights, check them, pack the packed weights once, allocate the arena), run (inputs into
//! the arena, every step in order, outputs out of it), destroy. Arena, weight and packed
//! pointers are `void*`: each value keeps its type.

use super::header::c_text;
use crate::memory::Plan;
use crate::program::{Arg, Convert, Program, Step, Storage, ValueId};
use crate::weights::{HEADER, MAGIC, VERSION, Weights};
use std::fmt::Write;
use tunehub_engine::ir::DType;

pub struct Layout<'a> {
    /// The weights file is assembled into the library (`.incbin`): `NAME_create(NULL)` uses it.
    pub embed: bool,
    pub plan: &'a Plan,
    pub weights: &'a Weights,
    pub packed_offsets: &'a [u64],
    pub packed_bytes: u64,
}

/// Drops extents of 1 and merges dimensions both sides walk contiguously: fewer, longer loops
/// (and a `memcpy` where the last dimension is dense on both sides).
fn simplify(shape: &[i64], ds: &[i64], ss: &[i64]) -> (Vec<i64>, Vec<i64>, Vec<i64>) {
    let mut out: Vec<(i64, i64, i64)> = vec![];
    for ((&n, &d), &s) in shape.iter().zip(ds).zip(ss) {
        if n == 1 {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.1 == d * n && last.2 == s * n => {
                last.0 *= n;
                last.1 = d;
                last.2 = s;
            }
            _ => out.push((n, d, s)),
        }
    }
    if out.is_empty() {
        out.push((1, 1, 1));
    }
    (
        out.iter().map(|x| x.0).collect(),
        out.iter().map(|x| x.1).collect(),
        out.iter().map(|x| x.2).collect(),
    )
}

fn list(v: &[i64]) -> String {
    v.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
}

pub fn source(name: &str, model: &str, p: &Program, l: &Layout) -> String {
    let read_in_place = in_place(p);
    let ptr = |v: ValueId| -> String {
        let r = p.root(v);
        if let Some(i) = p.inputs.iter().position(|&x| x == r)
            && read_in_place[i]
        {
            return format!("((void*)in_{i})");
        }
        match p.values[r].storage {
            Storage::Constant(c) => format!("W({})", l.weights.offsets[c]),
            _ => format!("A({})", l.plan.offsets[r].unwrap_or(0)),
        }
    };
    let mut s = format!(
        "/* {name}: the model {}, compiled by tunehub: {} kernels, {} steps.\n * Build with the \
         flags in manifest.json. */\n#include \"{name}.h\"\n\n#include <fcntl.h>\n#include <math.h>\n#include \
         <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include \
         <sys/mman.h>\n#include <sys/stat.h>\n#include <time.h>\n#include <unistd.h>\n\n",
        c_text(model),
        p.kernels.len(),
        p.steps.len()
    );
    let mut seen = std::collections::HashSet::new();
    for k in &p.kernels {
        if seen.insert(k.symbol.clone()) {
            let _ = write!(s, "/* ---- {} ---- */\n{}\n", k.symbol, k.source);
        }
    }
    s.push_str("/* ---- runtime ---- */\n\n");
    let used = |f: fn(&Step) -> bool| p.steps.iter().any(f);
    let mut copies: Vec<DType> = vec![];
    for step in &p.steps {
        if let Step::Copy(c) = step {
            let t = p.values[c.dst].dtype;
            if !copies.contains(&t) {
                copies.push(t);
            }
        }
    }
    for t in copies {
        let (ty, n) = (t.c_name(), t.name());
        let _ = write!(
            s,
            "static void {name}_copy_{n}({ty}* d, const int64_t* ds, const {ty}* s, const int64_t* ss, const int64_t* sh, int rank) {{\n  \
             if (rank == 2 && ds[1] == 1 && ss[0] == 1) {{\n    \
             /* A transpose (a layout change): 32 x 32 tiles, each side walks whole cache lines. */\n    \
             const int64_t R = sh[0], C = sh[1], D = ds[0], S = ss[1];\n    int64_t t;\n\
             #ifdef _OPENMP\n#pragma omp parallel for schedule(static) if (R * C >= 65536)\n#endif\n    \
             for (t = 0; t < ((R + 31) / 32) * ((C + 31) / 32); t++) {{\n      \
             const int64_t i0 = t / ((C + 31) / 32) * 32, j0 = t % ((C + 31) / 32) * 32;\n      \
             const int64_t i1 = i0 + 32 < R ? i0 + 32 : R, j1 = j0 + 32 < C ? j0 + 32 : C;\n      \
             for (int64_t j = j0; j < j1; j++)\n        for (int64_t i = i0; i < i1; i++) d[i * D + j] = s[i + j * S];\n    }}\n    return;\n  }}\n  \
             if (rank == 1) {{\n    if (ds[0] == 1 && ss[0] == 1) {{\n      memcpy(d, s, (size_t)sh[0] * sizeof({ty}));\n      return;\n    }}\n    \
             for (int64_t i = 0; i < sh[0]; i++) d[i * ds[0]] = s[i * ss[0]];\n    return;\n  }}\n  \
             /* The outer rows on the threads when there is enough to share (an image into a \n     \
             padded NHWC input: 224 rows of 224 x 3). */\n  \
             int64_t inner = 1;\n  for (int r = 1; r < rank; r++) inner *= sh[r];\n  int64_t i;\n\
             #ifdef _OPENMP\n#pragma omp parallel for schedule(static) if (sh[0] > 1 && sh[0] * inner >= 65536)\n#endif\n  \
             for (i = 0; i < sh[0]; i++) {name}_copy_{n}(d + i * ds[0], ds + 1, s + i * ss[0], ss + 1, sh + 1, rank - 1);\n}}\n\n"
        );
    }
    if used(|s| matches!(s, Step::Gather(_))) {
        let _ = write!(
            s,
            "static void {name}_gather(float* d, const float* s, int64_t outer, int64_t axis, int64_t inner, const int64_t* idx, int64_t n) {{\n  \
             for (int64_t o = 0; o < outer; o++)\n    for (int64_t j = 0; j < n; j++)\n      \
             memcpy(d + (o * n + j) * inner, s + (o * axis + idx[j]) * inner, (size_t)inner * sizeof(float));\n}}\n\n"
        );
    }
    let mut fills: Vec<DType> = vec![];
    for step in &p.steps {
        if let Step::Fill { dst, .. } = step
            && !fills.contains(&p.values[*dst].dtype)
        {
            fills.push(p.values[*dst].dtype);
        }
    }
    for t in fills {
        let (ty, n) = (t.c_name(), t.name());
        let _ = write!(
            s,
            "static void {name}_fill_{n}({ty}* d, int64_t n, {ty} v) {{\n  for (int64_t i = 0; i < n; i++) d[i] = v;\n}}\n\n"
        );
    }
    conversions(&mut s, name, p);
    super::dynamic::helpers(&mut s, name, p);
    let arena = l.plan.arena_bytes.max(64);
    let packed = l.packed_bytes.max(64);
    let _ = write!(
        s,
        "struct {name}_model {{\n  unsigned char* arena;\n  unsigned char* packed;\n  const unsigned char* weights;\n  size_t weights_bytes;\n  int mapped;\n}};\n\n\
         static char {name}_error[512];\n\
         const char* {name}_last_error(void) {{ return {name}_error; }}\n\n\
         #define A(off) ((void*)(m->arena + (off)))\n#define W(off) ((const void*)(m->weights + (off)))\n#define K(off) ((const void*)(m->packed + (off)))\n\n"
    );
    // Create: check the weights, allocate, pack.
    let _ = write!(
        s,
        "/* Memory the kernels stream (packed weights, the arena): where it is megabytes, in 2 MB\n\
         * pages (Linux's transparent huge pages, when advised): a GPT-2 layer's 28 MB of packed\n\
         * weights in 4 KB pages ran 0.34-0.58 ms from one process to the next. */\n\
         static void* {name}_alloc(size_t n) {{\n  \
         const size_t huge = (size_t)2 << 20;\n  \
         if (n >= huge) {{\n    \
         const size_t whole = (n + huge - 1) & ~(huge - 1);\n    \
         void* p = aligned_alloc(huge, whole);\n#ifdef MADV_HUGEPAGE\n    \
         if (p) madvise(p, whole, MADV_HUGEPAGE);\n#endif\n    \
         if (p) return p;\n  }}\n  \
         return aligned_alloc(64, (n + 63) & ~(size_t)63);\n}}\n\n"
    );
    let magic: String = MAGIC.iter().map(|&b| b as char).collect();
    let _ = write!(
        s,
        "static {name}_model* {name}_init({name}_model* m) {{\n  \
         uint64_t h[4];\n  \
         if (m->weights_bytes < {HEADER}) {{\n    snprintf({name}_error, sizeof {name}_error, \"the weights are %zu bytes, not a weights file\", m->weights_bytes);\n    {name}_destroy(m);\n    return NULL;\n  }}\n  \
         memcpy(h, m->weights, sizeof h);\n  \
         if (memcmp(m->weights, \"{magic}\", 8) != 0 || h[1] != {VERSION}u || h[2] != {}u || h[3] != {}u) {{\n    \
         snprintf({name}_error, sizeof {name}_error, \"the weights are not this build's ({name}.weights of the same build, %zu bytes, is needed)\", (size_t){}u);\n    {name}_destroy(m);\n    return NULL;\n  }}\n  \
         m->arena = {name}_alloc({arena});\n  m->packed = {name}_alloc({packed});\n  \
         if (!m->arena || !m->packed) {{\n    snprintf({name}_error, sizeof {name}_error, \"out of memory ({arena} + {packed} bytes)\");\n    {name}_destroy(m);\n    return NULL;\n  }}\n",
        l.weights.bytes.len(),
        l.weights.build_id,
        l.weights.bytes.len(),
    );
    for (k, &off) in p.packed.iter().zip(l.packed_offsets) {
        let _ = writeln!(
            s,
            "  {}(W({}), (void*)(m->packed + {off}));",
            k.function, l.weights.offsets[k.constant]
        );
    }
    let _ = write!(s, "  return m;\n}}\n\n");
    // Without a path: the weights assembled into the library, when they are.
    let no_path = if l.embed {
        let _ = write!(
            s,
            "/* {name}.weights, assembled into the library (--embed-weights). */\n\
             __asm__(\".section .rodata\\n.balign 64\\n.global {name}_weights_start\\n.hidden {name}_weights_start\\n{name}_weights_start:\\n.incbin \\\"{name}.weights\\\"\\n.global {name}_weights_end\\n.hidden {name}_weights_end\\n{name}_weights_end:\\n.previous\");\n\
             extern const unsigned char {name}_weights_start[], {name}_weights_end[];\n\n"
        );
        format!(
            "return {name}_create_from_memory({name}_weights_start, (size_t)({name}_weights_end - {name}_weights_start));"
        )
    } else {
        format!(
            "snprintf({name}_error, sizeof {name}_error, \"no weights path (this library was built without --embed-weights)\");\n    return NULL;"
        )
    };
    let _ = write!(
        s,
        "{name}_model* {name}_create(const char* weights_path) {{\n  \
         {name}_model* m;\n  struct stat st;\n  void* map;\n  int fd;\n  \
         if (!weights_path) {{\n    {no_path}\n  }}\n  \
         m = calloc(1, sizeof *m);\n  \
         if (!m) return NULL;\n  \
         fd = open(weights_path, O_RDONLY);\n  \
         if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0) {{\n    snprintf({name}_error, sizeof {name}_error, \"cannot read %s\", weights_path);\n    if (fd >= 0) close(fd);\n    free(m);\n    return NULL;\n  }}\n  \
         map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);\n  close(fd);\n  \
         if (map == MAP_FAILED) {{\n    snprintf({name}_error, sizeof {name}_error, \"cannot map %s\", weights_path);\n    free(m);\n    return NULL;\n  }}\n  \
         m->weights = map;\n  m->weights_bytes = (size_t)st.st_size;\n  m->mapped = 1;\n  return {name}_init(m);\n}}\n\n\
         {name}_model* {name}_create_from_memory(const void* weights, size_t bytes) {{\n  \
         {name}_model* m;\n  \
         if (!weights || ((uintptr_t)weights % 64) != 0) {{\n    snprintf({name}_error, sizeof {name}_error, \"the weights must be 64-byte aligned\");\n    return NULL;\n  }}\n  \
         m = calloc(1, sizeof *m);\n  if (!m) return NULL;\n  \
         m->weights = weights;\n  m->weights_bytes = bytes;\n  return {name}_init(m);\n}}\n\n\
         void {name}_destroy({name}_model* m) {{\n  \
         if (!m) return;\n  free(m->arena);\n  free(m->packed);\n  \
         if (m->mapped) munmap((void*)m->weights, m->weights_bytes);\n  free(m);\n}}\n\n\
         void {name}_set_num_threads(int n) {{\n"
    );
    let mut seen = std::collections::HashSet::new();
    for k in &p.kernels {
        if seen.insert(k.set_num_threads.clone()) {
            let _ = writeln!(s, "  {}(n);", k.set_num_threads);
        }
    }
    s.push_str("}\n\n");
    // Run: one body, with a timestamp after each phase when `t` is given (`run_profiled`), and
    // a cache flush before each step when `flush` is (`run_profiled_cold`): the time of the
    // flushes is taken out of the timestamps, so that each step's time is its own from a cold
    // cache, as a model's tasks were timed when tuned.
    let _ = write!(
        s,
        "static double {name}_now(void) {{\n  struct timespec ts;\n  clock_gettime(CLOCK_MONOTONIC, &ts);\n  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;\n}}\n\n\
         static volatile unsigned long {name}_sink;\n\n\
         /* Writes then reads every cache line of `buf` on all the kernels' threads (the tuner's flush). */\n\
         static void {name}_flush(unsigned char* buf, size_t n, double* paused) {{\n  \
         const double a = {name}_now();\n  unsigned long s = 0;\n  size_t i;\n\
         #ifdef _OPENMP\n#pragma omp parallel for schedule(static) reduction(+ : s)\n#endif\n  \
         for (i = 0; i < n; i += 64) {{\n    buf[i] = (unsigned char)(buf[i] + 1u);\n    s += buf[i];\n  }}\n  \
         {name}_sink += s;\n  *paused += {name}_now() - a;\n}}\n\n\
         #define TICK(i) if (t) t[i] = {name}_now() - paused\n\
         #define COLD if (flush) {name}_flush(flush, flush_bytes, &paused)\n\n\
         static int {name}_exec({name}_model* m, const float* const* inputs, float* const* outputs, double* t, unsigned char* flush, size_t flush_bytes) {{\n  \
         double paused = 0;\n  \
         if (!m || !inputs || !outputs) {{\n    snprintf({name}_error, sizeof {name}_error, \"a null model, inputs or outputs\");\n    return -1;\n  }}\n  TICK(0);\n"
    );
    for (i, &v) in p.inputs.iter().enumerate() {
        let slot = format!("A({})", l.plan.offsets[v].unwrap_or(0));
        let bytes = format!("{}u * sizeof(float)", p.values[v].elements());
        if read_in_place[i] {
            // The kernels take 64-byte-aligned arguments (`__builtin_assume_aligned`).
            let _ = writeln!(
                s,
                "  const float* in_{i} = inputs[{i}];\n  if (((uintptr_t)in_{i} & 63u) != 0) {{\n    memcpy({slot}, in_{i}, {bytes});\n    in_{i} = (const float*){slot};\n  }}"
            );
        } else {
            let _ = writeln!(s, "  memcpy({slot}, inputs[{i}], {bytes});");
        }
    }
    s.push_str("  TICK(1);\n");
    for (i, step) in p.steps.iter().enumerate() {
        if i > 0 {
            let _ = writeln!(s, "  TICK({});", i + 1);
        }
        s.push_str("  COLD;\n");
        match step {
            Step::Kernel(k) => {
                let args: Vec<String> = k
                    .args
                    .iter()
                    .map(|a| match *a {
                        Arg::Value(v) => ptr(v),
                        Arg::Packed(i) => format!("K({})", l.packed_offsets[i]),
                    })
                    .collect();
                let _ = writeln!(
                    s,
                    "  /* {} */\n  {}({});",
                    c_text(&k.nodes.join(", ")),
                    k.symbol,
                    args.join(", ")
                );
            }
            Step::Copy(c) => {
                let (sh, ds, ss) = simplify(&c.shape, &c.dst_strides, &c.src_strides);
                let _ = writeln!(
                    s,
                    "  {{\n    static const int64_t sh[] = {{{}}}, ds[] = {{{}}}, ss[] = {{{}}};\n    {name}_copy_{}(({}*){} + {}, ds, (const {}*){} + {}, ss, sh, {});\n  }}",
                    list(&sh),
                    list(&ds),
                    list(&ss),
                    p.values[c.dst].dtype.name(),
                    p.values[c.dst].dtype.c_name(),
                    ptr(c.dst),
                    c.dst_offset,
                    p.values[c.dst].dtype.c_name(),
                    ptr(c.src),
                    c.src_offset,
                    sh.len()
                );
            }
            Step::Fill { dst, value } => {
                let t = p.values[*dst].dtype;
                let v = if t != DType::F32 {
                    // An integer (a zero point): exact in an f32.
                    format!("({}){}", t.c_name(), *value as i64)
                } else if value.is_nan() {
                    "__builtin_nanf(\"\")".to_string()
                } else if value.is_infinite() {
                    format!("({}__builtin_inff())", if *value < 0.0 { "-" } else { "" })
                } else {
                    format!("{value:e}f")
                };
                let _ = writeln!(
                    s,
                    "  {name}_fill_{}(({}*){}, {}, {v});",
                    t.name(),
                    t.c_name(),
                    ptr(*dst),
                    p.values[*dst].elements(),
                );
            }
            Step::Quantize(c) | Step::Dequantize(c) => {
                let (dir, t) = conversion(p, step, c);
                let _ = writeln!(
                    s,
                    "  {name}_{dir}_{}({}, {}, {}, {:e}f, {});",
                    t.name(),
                    ptr(c.dst),
                    ptr(c.src),
                    p.values[c.dst].elements(),
                    c.scale,
                    c.zero_point
                );
            }
            Step::DynamicQuantize(d) => {
                s.push_str(&super::dynamic::dynamic_quantize(name, p, d, ptr));
            }
            Step::ZeroPointShift(z) => {
                s.push_str(&super::dynamic::zero_point_shift(name, p, z, ptr));
            }
            Step::Scalar { dst, a, b, op } => {
                let _ = writeln!(
                    s,
                    "  *(float*){} = *(const float*){} {op} *(const float*){};",
                    ptr(*dst),
                    ptr(*a),
                    ptr(*b)
                );
            }
            Step::Gather(g) => {
                let _ = writeln!(
                    s,
                    "  {{\n    static const int64_t idx[] = {{{}}};\n    {name}_gather({}, {}, {}, {}, {}, idx, {});\n  }}",
                    list(&g.indices),
                    ptr(g.dst),
                    ptr(g.src),
                    g.outer,
                    g.axis,
                    g.inner,
                    g.indices.len()
                );
            }
        }
    }
    if !p.steps.is_empty() {
        let _ = writeln!(s, "  TICK({});", p.steps.len() + 1);
    }
    for (i, &v) in p.outputs.iter().enumerate() {
        let _ = writeln!(
            s,
            "  memcpy(outputs[{i}], {}, {}u * sizeof(float));",
            ptr(v),
            p.values[v].elements()
        );
    }
    let _ = write!(
        s,
        "  TICK({});\n  return 0;\n}}\n\n\
         int {name}_run({name}_model* m, const float* const* inputs, float* const* outputs) {{\n  return {name}_exec(m, inputs, outputs, NULL, NULL, 0);\n}}\n\n\
         int {name}_run_profiled({name}_model* m, const float* const* inputs, float* const* outputs, double* t) {{\n  return {name}_exec(m, inputs, outputs, t, NULL, 0);\n}}\n\n\
         int {name}_run_profiled_cold({name}_model* m, const float* const* inputs, float* const* outputs, double* t, unsigned char* flush, size_t flush_bytes) {{\n  return {name}_exec(m, inputs, outputs, t, flush, flush_bytes);\n}}\n",
        p.steps.len() + 2
    );
    s
}

/// A conversion step's direction and its 8-bit type.
fn conversion(p: &Program, step: &Step, c: &Convert) -> (&'static str, DType) {
    match step {
        Step::Quantize(_) => ("quantize", p.values[c.dst].dtype),
        _ => ("dequantize", p.values[c.src].dtype),
    }
}

/// The QDQ conversions the steps use, one function per direction and 8-bit type. Rounding is
/// `rintf` (half to even, the default rounding mode) of the quotient, as ONNX specifies; NaN
/// becomes 0, as the kernels' requantization stores it. Large tensors are converted on the
/// kernels' threads.
fn conversions(s: &mut String, name: &str, p: &Program) {
    let mut done = std::collections::HashSet::new();
    for step in &p.steps {
        let (Step::Quantize(c) | Step::Dequantize(c)) = step else {
            continue;
        };
        let (dir, t) = conversion(p, step, c);
        if !done.insert((dir, t)) {
            continue;
        }
        // An i32 source: a `Cast` of integer sums (scale 1, zero point 0).
        let (ty, lo, hi) = match t {
            DType::I8 => ("int8_t", -128, 127),
            DType::I32 => ("int32_t", 0, 0),
            _ => ("uint8_t", 0, 255),
        };
        let body = if dir == "quantize" {
            format!(
                "    float v = rintf(s[i] / scale) + (float)z;\n    \
                 d[i] = v != v ? ({ty})0 : v < {lo}.0f ? ({ty}){lo} : v > {hi}.0f ? ({ty}){hi} : ({ty})v;"
            )
        } else {
            "    d[i] = (float)((int32_t)s[i] - z) * scale;".to_string()
        };
        let (dt, st) = if dir == "quantize" {
            (ty, "float")
        } else {
            ("float", ty)
        };
        let _ = write!(
            s,
            "static void {name}_{dir}_{}({dt}* restrict d, const {st}* restrict s, int64_t n, float scale, int32_t z) {{\n  \
             int64_t i;\n#ifdef _OPENMP\n#pragma omp parallel for schedule(static) if (n >= 65536)\n#endif\n  \
             for (i = 0; i < n; i++) {{\n{body}\n  }}\n}}\n\n",
            t.name()
        );
    }
}

/// Which inputs the steps read where the caller put them (when it is 64-byte aligned), not
/// copied into the arena first: every input no step writes into. A run then reads its inputs
/// until it returns, as it reads nothing else of the caller's.
fn in_place(p: &Program) -> Vec<bool> {
    let written: std::collections::HashSet<ValueId> = p
        .steps
        .iter()
        .flat_map(|s| s.writes())
        .map(|v| p.root(v))
        .collect();
    p.inputs.iter().map(|v| !written.contains(v)).collect()
}
