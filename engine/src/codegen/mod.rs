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
//! `names` (C identifiers), `args` (the kernel's arguments).

mod args;
mod names;
mod regtile;
mod vreduce;
mod writer;

pub use args::ArgSpec;
pub use regtile::max_tile_vectors;
pub use writer::float_literal;

use crate::ir::ComputeDag;
use crate::lower::{LowerOptions, LoweredFunc, PackedInput, Scope, lower_with};
use crate::schedule::{Schedule, ScheduleError};
use crate::target::Target;
use names::Names;
use regtile::register_tiles;
use std::collections::HashMap;
use std::fmt::Write;
use writer::{Gen, accumulator_bases};

/// The kernel's symbol in every generated source.
pub const KERNEL_NAME: &str = "tunehub_kernel";

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
    let state = sched.replay(dag)?;
    let func = lower_with(&state, opts)?;
    Ok(emit(&func, target))
}

/// The C source alone.
pub fn kernel_source(
    dag: &ComputeDag,
    sched: &Schedule,
    target: &Target,
) -> Result<String, ScheduleError> {
    generate(dag, sched, target).map(|k| k.source)
}

/// Generates C for a lowered program. Loop and buffer names follow the IR's.
pub fn emit(func: &LoweredFunc, target: &Target) -> GeneratedKernel {
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
    let tiles = register_tiles(&func.body, lanes, regtile::max_tile_vectors(registers));
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
        threads: target.cores.max(1),
        bases: accumulator_bases(&func.body, &tiles),
        base_names: HashMap::new(),
        lanes,
        registers,
        pin,
        tiles,
    };
    let mut header = String::new();
    header.push_str("#include <math.h>\n#include <stdlib.h>\n\n");
    header.push_str("static inline float th_maxf(float a, float b) { return a > b ? a : b; }\n");
    header.push_str("static inline float th_minf(float a, float b) { return a < b ? a : b; }\n");
    header.push_str("static inline int th_maxi(int a, int b) { return a > b ? a : b; }\n");
    header.push_str("static inline int th_mini(int a, int b) { return a < b ? a : b; }\n\n");
    if target.has_vector_math() {
        // glibc declares its vector math (libmvec) only under -ffast-math, which would also
        // reorder the reductions and assume no infinities (a padded max pool's -inf). Declared
        // here, `omp simd` loops call the 16-lane expf: the best softmax 128x1000 went from 1.3
        // to 9.4 GFLOP/s (200 trials each).
        header.push_str(
            "__attribute__((__simd__(\"notinbranch\"))) float expf(float);\n\
             __attribute__((__simd__(\"notinbranch\"))) float logf(float);\n\n",
        );
    }
    if !g.tiles.is_empty() {
        // memcpy: tile rows need not be vector-aligned; GCC turns it into one vector move.
        let _ = writeln!(
            header,
            "typedef float th_vf __attribute__((vector_size({})));",
            lanes * 4
        );
        header.push_str(
            "static inline th_vf th_vload(const float* p) { th_vf v; __builtin_memcpy(&v, p, sizeof v); return v; }\n",
        );
        header.push_str(
            "static inline void th_vstore(float* p, th_vf v) { __builtin_memcpy(p, &v, sizeof v); }\n\n",
        );
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
                "#if {guard}\n#define TH_PIN(v) __asm__(\"\" : \"+{constraint}\"(v))\n#else\n#define TH_PIN(v) ((void)0)\n#endif\n\n"
            );
        }
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
        params.push(format!("{cq}float* restrict {name}_arg"));
        writeln!(
            prologue,
            "  {cq}float* restrict {name} = ({cq}float*)__builtin_assume_aligned({name}_arg, 64);"
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
            packs.push_str(&pack_function(pos, pk));
        }
        args.push(ArgSpec {
            name,
            shape: pk.map_or_else(|| buf.shape.clone(), |p| p.orig_shape.clone()),
            stage: seed,
            is_output,
            packed_len: pk.map(PackedInput::packed_elems),
        });
    }
    for stmt in &func.body {
        g.stmt(stmt);
    }
    let source = format!(
        "{header}void {KERNEL_NAME}({}) {{\n{prologue}{}}}\n{packs}",
        params.join(", "),
        g.out
    );
    GeneratedKernel { source, args }
}

/// `tunehub_pack_<pos>(src, dst)`: the layout rewrite of argument `pos` (see
/// [`PackedInput`]), run once by the harness outside the timed kernel.
fn pack_function(pos: usize, pk: &PackedInput) -> String {
    let n: i64 = pk.orig_shape.iter().product();
    let mut s = format!(
        "\nvoid {KERNEL_NAME}_pack_{pos}(const float* restrict src, float* restrict dst) {{\n  long p = 0;\n"
    );
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
        "{ind}{{ const long o = {orig}; dst[p++] = (o >= 0 && o < {n}L) ? src[o] : 0.0f; }}\n}}"
    );
    s
}
