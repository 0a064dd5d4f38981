//! C code generation from a lowered program.
//!
//! Plain C99 with OpenMP: `#pragma omp parallel for` for parallel loops, `#pragma omp simd`
//! for vectorized loops and `#pragma GCC unroll` for unrolled ones. Measured on this project's
//! machine (AVX-512, GCC 12): a register-tiled matmul written this way reaches ~128 GFLOP/s on
//! one core (94% of FMA peak) once the target asks for 512-bit vectors, and plain C keeps every
//! target (x86, ARM, cross compilers) on one generator. The one exception is a register tile
//! under a reduction band ([`regtile`]): GCC's store motion does not reliably keep it in
//! registers, so its accumulators are written out as vector variables (GCC vector extensions,
//! which every GCC and Clang target lowers to its own vector unit).
//!
//! One module per idea: `writer` (the C text), `regtile` (which register tiles qualify),
//! `masked` (their partial and stride-2 vector loads), `peel` (padded copies split by range),
//! `quantize` (8-bit stores of vectorized loops, rounded in floats and converted apart),
//! `lanes` (what varies along the vector lane), `rows` (rows shorter than a vector packed
//! into its lanes), `anchors` (their window's taps shifted out of vectors loaded once),
//! `phases` (a stride-2 window's taps shifted out of the input's four phases),
//! `vminmax` (max and min tiles), `window` (stride-2 window tiles whose columns share their
//! loads: pooling, depthwise convolution),
//! `vreduce` (which loops reduce into one element), `hreduce` (those loops in vectors and a
//! horizontal tree), `dot` (integer sums of 8-bit products in dot-product instructions),
//! `itile` (the other integer sums' register tiles, 8-bit operands widened as loaded), `init`
//! (a reduction's zero-fill that those tiles make in their registers), `names` (C
//! identifiers), `args` (the kernel's arguments).
//!
//! The same program is written in two linkages ([`Linkage`]): as measured, for the harness, and
//! named, for a compiler to link (`crate::package`). They differ in names and in where the
//! thread count comes from, never in the loops.

mod anchors;
mod args;
mod dot;
mod hreduce;
mod init;
mod itile;
mod lanes;
mod masked;
mod names;
mod peel;
mod phases;
mod quantize;
mod regtile;
mod rows;
mod vminmax;
mod vreduce;
mod window;
mod writer;

pub use args::ArgSpec;
pub use regtile::max_tile_vectors;
pub use writer::float_literal;

use crate::ir::{ComputeDag, DType};
use crate::lower::{LowerOptions, LoweredFunc, PackedInput, Scope, lower_with};
use crate::schedule::{Schedule, ScheduleError};
use crate::target::Target;
use names::Names;
use regtile::register_tiles;
use std::collections::HashMap;
use std::fmt::Write;
use writer::{Gen, accumulator_bases};

/// The kernel's symbol in every measured source.
pub const KERNEL_NAME: &str = "tunehub_kernel";

/// How a kernel's functions are named and where its thread count comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Linkage {
    /// As measured: [`KERNEL_NAME`], packing functions `<KERNEL_NAME>_pack_<position>` (the
    /// harness calls them by position), the target's cores as a constant.
    #[default]
    Harness,
    /// For a compiler to link: `<symbol>`, `<symbol>_pack_<argument name>`, and the thread
    /// count in a variable that `<symbol>_set_num_threads(int)` sets (the target's cores
    /// until then). Several such kernels concatenate into one file: the shared helpers are
    /// guarded.
    Named(String),
}

impl Linkage {
    fn symbol(&self) -> &str {
        match self {
            Linkage::Harness => KERNEL_NAME,
            Linkage::Named(s) => s,
        }
    }

    /// The packing function of argument `pos` (named `name`).
    pub fn pack_function(&self, pos: usize, name: &str) -> String {
        match self {
            Linkage::Harness => format!("{KERNEL_NAME}_pack_{pos}"),
            Linkage::Named(s) => format!("{s}_pack_{name}"),
        }
    }

    /// The thread setter's name, for a named kernel.
    pub fn set_num_threads(&self) -> Option<String> {
        match self {
            Linkage::Harness => None,
            Linkage::Named(s) => Some(format!("{s}_set_num_threads")),
        }
    }
}

/// A generated kernel and its signature.
#[derive(Debug, Clone)]
pub struct GeneratedKernel {
    pub source: String,
    pub args: Vec<ArgSpec>,
}

/// Replays `sched` on `dag`, lowers it and generates the C kernel.
pub fn generate(
    dag: &ComputeDag,
    sched: &Schedule,
    target: &Target,
) -> Result<GeneratedKernel, ScheduleError> {
    generate_with(dag, sched, target, &LowerOptions::default())
}

/// [`generate`] with lowering options (layout-free inputs: see [`LowerOptions`]).
pub fn generate_with(
    dag: &ComputeDag,
    sched: &Schedule,
    target: &Target,
    opts: &LowerOptions,
) -> Result<GeneratedKernel, ScheduleError> {
    generate_linked(dag, sched, target, opts, &Linkage::Harness)
}

/// [`generate_with`] in a given linkage.
pub fn generate_linked(
    dag: &ComputeDag,
    sched: &Schedule,
    target: &Target,
    opts: &LowerOptions,
    linkage: &Linkage,
) -> Result<GeneratedKernel, ScheduleError> {
    let state = sched.replay(dag)?;
    let func = lower_with(&state, opts)?;
    Ok(emit_linked(&func, target, linkage))
}

/// The C source alone.
pub fn kernel_source(
    dag: &ComputeDag,
    sched: &Schedule,
    target: &Target,
) -> Result<String, ScheduleError> {
    generate(dag, sched, target).map(|k| k.source)
}

/// The declarations through which GCC calls glibc's vector math (libmvec) from `omp simd`
/// loops, in every kernel of a target that has it (`Target::has_vector_math`). GCC's attribute;
/// another compiler (clang) builds the scalar calls. Public for the benchmark's vector-math
/// probe, which must call what the kernels call.
pub const VECTOR_MATH_DECLARATIONS: &str = "#if defined(__GNUC__) && !defined(__clang__)\n\
     __attribute__((__simd__(\"notinbranch\"))) float expf(float);\n\
     __attribute__((__simd__(\"notinbranch\"))) float logf(float);\n\
     #if __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35)\n\
     __attribute__((__simd__(\"notinbranch\"))) float erff(float);\n\
     __attribute__((__simd__(\"notinbranch\"))) float tanhf(float);\n\
     #endif\n\
     #endif\n\n";

/// Generates C for a lowered program, as measured. Loop and buffer names follow the IR's.
pub fn emit(func: &LoweredFunc, target: &Target) -> GeneratedKernel {
    emit_linked(func, target, &Linkage::Harness)
}

/// [`emit`] in a given linkage.
pub fn emit_linked(func: &LoweredFunc, target: &Target, linkage: &Linkage) -> GeneratedKernel {
    let symbol = linkage.symbol();
    let threads_var = format!("{symbol}_num_threads");
    let mut names = Names::default();
    for b in &func.buffers {
        let n = names.fresh(&b.name);
        names.bufs.push(n);
    }
    let lanes = i64::from(target.vector_lanes_f32());
    // 32 vector registers on AVX-512 and AArch64, 16 on AVX2, SSE and 32-bit ARM.
    let registers = if target.arch == "aarch64" || target.vector_bits() >= 512 {
        32
    } else {
        16
    };
    // The vector forms (register tiles and their relatives, vector reductions) are written for
    // f32; a kernel with an integer tensor is plain C with `omp simd` (see `writer`'s typed
    // values) until the integer tiles come.
    let vectors = func.buffers.iter().all(|b| b.dtype == DType::F32);
    let mut tiles = if vectors {
        register_tiles(&func.body, lanes, regtile::max_tile_vectors(registers))
    } else {
        HashMap::new()
    };
    // Integer sums of 8-bit products, where the target has a dot-product instruction.
    let dot_instruction = dot::Instruction::of(target).filter(|_| !vectors);
    let dots = match dot_instruction {
        Some(ins) => dot::dot_tiles(func, ins.widths(), regtile::max_tile_vectors(registers)),
        None => HashMap::new(),
    };
    // Integer sums the dot tiles do not take, as integer register tiles.
    let int_tiles = if vectors {
        HashMap::new()
    } else {
        let mut t = itile::int_tiles(func, lanes, regtile::max_tile_vectors(registers));
        t.retain(|k, _| !dots.contains_key(k));
        t
    };
    // Rows packed into lanes where a row fills no vector (see `rows`), else the column-shared
    // form where it applies.
    let rows: HashMap<_, _> = tiles
        .iter()
        .filter_map(|(&k, t)| {
            rows::plan(
                t,
                func,
                lanes,
                (masked::aligns(&target.arch, lanes), registers),
            )
            .map(|p| (k, p))
        })
        .collect();
    tiles.retain(|k, t| t.plain_fits || rows.contains_key(k));
    let shares = tiles
        .iter()
        .filter(|(k, _)| !rows.contains_key(*k))
        .filter_map(|(&k, t)| window::plan(t, lanes, registers).map(|w| (k, w)))
        .collect();
    // The inline-asm constraint of a vector register, where GCC has one (see `regtile`).
    let pin = match target.arch.as_str() {
        "x86_64" if target.vector_bits() >= 512 => Some("v"),
        "x86_64" => Some("x"),
        "aarch64" => Some("w"),
        _ => None,
    };
    let mut g = Gen {
        func,
        names,
        out: String::new(),
        depth: 1,
        threads: match linkage {
            Linkage::Harness => target.cores.max(1).to_string(),
            Linkage::Named(_) => threads_var.clone(),
        },
        bases: accumulator_bases(
            &func.body,
            &tiles
                .keys()
                .chain(dots.keys())
                .chain(int_tiles.keys())
                .copied()
                .collect(),
        ),
        base_names: HashMap::new(),
        lanes,
        registers,
        pin,
        tiles,
        dots,
        int_tiles,
        dot_instruction,
        rows,
        shares,
        tile_init: HashMap::new(),
        inner: None,
        vector_reductions: false,
        vectors,
        int_value: false,
        in_lane: masked::in_lane_order(&target.arch, lanes),
        aligns: masked::aligns(&target.arch, lanes),
    };
    // The helpers are guarded so that kernels concatenate into one file (a kernel pack), and
    // marked unused so that a linked kernel compiles under -Wall -Werror with clang too.
    let mut header = String::new();
    header.push_str(
        // clang warns (-Wpass-failed) where it cannot vectorize an `omp simd` loop: a hint it
        // declines, not a fault of the kernel, which must build under -Werror.
        "#include <math.h>\n#include <stdint.h>\n#include <stdlib.h>\n\n#ifndef TH_HELPERS\n#define TH_HELPERS\n\
         #if defined(__clang__)\n#pragma clang diagnostic ignored \"-Wpass-failed\"\n#endif\n",
    );
    header.push_str("static inline __attribute__((unused)) float th_maxf(float a, float b) { return a > b ? a : b; }\n");
    header.push_str("static inline __attribute__((unused)) float th_minf(float a, float b) { return a < b ? a : b; }\n");
    header.push_str("static inline __attribute__((unused)) int th_maxi(int a, int b) { return a > b ? a : b; }\n");
    header.push_str("static inline __attribute__((unused)) int th_mini(int a, int b) { return a < b ? a : b; }\n");
    // An 8-bit stage's store (`DType::quantize`): ties to even, NaN to 0, saturated. `th_cu8`
    // and `th_ci8` keep the result in floats, for the vectorized loops that convert it apart
    // (`quantize`); `th_qu8` and `th_qi8` convert it.
    header.push_str("static inline __attribute__((unused)) float th_cu8(float v) { v = rintf(v); v = v > 0.0f ? v : 0.0f; return v < 255.0f ? v : 255.0f; }\n");
    header.push_str("static inline __attribute__((unused)) float th_ci8(float v) { v = rintf(v); v = v == v ? v : 0.0f; v = v > -128.0f ? v : -128.0f; return v < 127.0f ? v : 127.0f; }\n");
    header.push_str("static inline __attribute__((unused)) uint8_t th_qu8(float v) { return (uint8_t)(int)th_cu8(v); }\n");
    header.push_str("static inline __attribute__((unused)) int8_t th_qi8(float v) { return (int8_t)(int)th_ci8(v); }\n");
    // ceil(a / k) for k > 0 and any sign of a: a lane bound of a range select (`peel`).
    header.push_str("static inline __attribute__((unused)) int th_ceildiv(int a, int k) { return a >= 0 ? (a + k - 1) / k : -((-a) / k); }\n#endif\n\n");
    if target.has_vector_math() {
        // glibc declares its vector math (libmvec) only under -ffast-math, which would also
        // reorder the reductions and assume no infinities (a padded max pool's -inf). Declared
        // here, `omp simd` loops call the 16-lane expf: the best softmax 128x1000 went from 1.3
        // to 9.4 GFLOP/s (200 trials each). erff and tanhf (GELU's two forms) joined libmvec in
        // glibc 2.35; older ones build them scalar.
        header.push_str(VECTOR_MATH_DECLARATIONS);
    }
    let mut params = vec![];
    let mut prologue = String::new();
    let mut args = vec![];
    let mut in_ord = 0;
    let mut out_ord = 0;
    let mut packs = String::new();
    for (pos, &b) in func.args.iter().enumerate() {
        let buf = &func.buffers[b];
        let name = g.names.bufs[b].clone();
        let is_output = buf.scope == Scope::Output;
        let cq = if is_output { "" } else { "const " };
        let dtype = buf.dtype;
        let t = dtype.c_name();
        params.push(format!("{cq}{t}* restrict {name}_arg"));
        writeln!(
            prologue,
            "  {cq}{t}* restrict {name} = ({cq}{t}*)__builtin_assume_aligned({name}_arg, 64);"
        )
        .unwrap();
        let seed = if is_output {
            out_ord += 1;
            out_ord - 1
        } else {
            in_ord += 1;
            in_ord - 1
        };
        let pk = func.packed.iter().find(|p| p.buf == b);
        if let Some(pk) = pk {
            packs.push_str(&pack_function(
                &linkage.pack_function(pos, &name),
                pk,
                dtype,
            ));
        }
        args.push(ArgSpec {
            name,
            shape: pk.map_or_else(|| buf.shape.clone(), |p| p.orig_shape.clone()),
            stage: seed,
            is_output,
            dtype,
            packed_len: pk.map(PackedInput::packed_elems),
            data: buf.data,
        });
    }
    g.stmts(&func.body);
    // The helpers of each vector width the integer and dot tiles used, widest first.
    let widths = |w: &mut dyn Iterator<Item = i64>| {
        let mut w: Vec<i64> = w.collect();
        w.sort_unstable_by(|a, b| b.cmp(a));
        w.dedup();
        w
    };
    for w in widths(&mut g.int_tiles.values().map(|t| t.width)) {
        header.push_str(&itile::helpers(w));
    }
    if let Some(ins) = dot_instruction {
        for w in widths(&mut g.dots.values().map(|t| t.width)) {
            header.push_str(&dot::helpers(ins, w));
        }
    }
    // After the body: whether it wrote vectors is known only then.
    if !g.tiles.is_empty() || g.vector_reductions {
        // memcpy: tile rows need not be vector-aligned; GCC turns it into one vector move.
        let _ = writeln!(
            header,
            "#ifndef TH_VF\n#define TH_VF\ntypedef float th_vf __attribute__((vector_size({})));",
            lanes * 4
        );
        header.push_str(
            "static inline __attribute__((unused)) th_vf th_vload(const float* p) { th_vf v; __builtin_memcpy(&v, p, sizeof v); return v; }\n",
        );
        header.push_str(
            "static inline __attribute__((unused)) void th_vstore(float* p, th_vf v) { __builtin_memcpy(p, &v, sizeof v); }\n#endif\n\n",
        );
        header.push_str(&masked::helpers(&target.arch, lanes));
        header.push_str(&vminmax::helpers(&target.arch, lanes));
        header.push_str(&hreduce::helpers(lanes));
        // The operand pin (see `regtile`) needs registers of the vector's width, which the
        // target's flags give; a kernel written out (`tune --out-c`) and compiled without them
        // (plain `cc`, no `-march`) would stop at "impossible constraint". There the pin is a
        // no-op: GCC's generic vectors still compile, slower.
        if let Some(constraint) = g.pin {
            let guard = match (target.arch.as_str(), lanes * 4) {
                ("aarch64", _) => "defined(__ARM_NEON)",
                (_, 64) => "defined(__AVX512F__)",
                (_, 32) => "defined(__AVX__)",
                _ => "defined(__SSE2__)",
            };
            let _ = write!(
                header,
                "#ifndef TH_PIN\n#if {guard}\n#define TH_PIN(v) __asm__(\"\" : \"+{constraint}\"(v))\n#else\n#define TH_PIN(v) ((void)0)\n#endif\n#endif\n\n"
            );
        }
    }

    if let Some(setter) = linkage.set_num_threads() {
        let _ = write!(
            header,
            "static int {threads_var} = {};\n\nvoid {setter}(int n) {{ {threads_var} = n > 0 ? n : 1; }}\n\n",
            target.cores.max(1)
        );
    }
    let source = format!(
        "{header}void {symbol}({}) {{\n{prologue}{}}}\n{packs}",
        params.join(", "),
        g.out
    );
    GeneratedKernel { source, args }
}

/// `<fname>(src, dst)`: the layout rewrite of one argument (see [`PackedInput`]), run once
/// outside the timed kernel (by the harness, or by the compiler that links the kernel).
fn pack_function(fname: &str, pk: &PackedInput, dtype: DType) -> String {
    let n: i64 = pk.orig_shape.iter().product();
    let t = dtype.c_name();
    let mut s =
        format!("\nvoid {fname}(const {t}* restrict src, {t}* restrict dst) {{\n  long p = 0;\n");
    let mut orig = format!("{}L", pk.c);
    for (d, g) in pk.digits.iter().enumerate() {
        let _ = writeln!(
            s,
            "{}for (long t{d} = 0; t{d} < {}; ++t{d})",
            "  ".repeat(d + 1),
            g.extent
        );
        let _ = write!(orig, " + {}L * ({}L + t{d})", g.coef, g.lo);
    }
    let ind = "  ".repeat(pk.digits.len() + 1);
    let _ = writeln!(
        s,
        "{ind}{{ const long o = {orig}; dst[p++] = (o >= 0 && o < {n}L) ? src[o] : 0; }}\n}}"
    );
    s
}
