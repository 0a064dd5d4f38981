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

mod regtile;
pub use regtile::max_tile_vectors;

use crate::ir::ComputeDag;
use crate::ir::{BinaryOp, CmpOp, ReduceOp, UnaryOp};
use crate::lower::{
    Buffer, Lin, LoopKind, LowerOptions, LoweredFunc, PackedInput, STACK_LIMIT_BYTES, Scope, Stmt,
    VCond, VExpr, Var, lower_with,
};
use crate::measure::ArgSpec;
use crate::schedule::{Schedule, ScheduleError};
use crate::target::Target;
use regtile::{RegTile, register_tiles};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

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

const RESERVED: &[&str] = &[
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "main",
    "free",
    "malloc",
    "aligned_alloc",
    "exp",
    "expf",
    "log",
    "logf",
    "sqrt",
    "sqrtf",
    "tanh",
    "tanhf",
    "fabsf",
    "INFINITY",
    "NAN",
];

/// Gives every buffer and variable a unique, valid C identifier derived from its IR name.
#[derive(Default)]
struct Names {
    used: HashSet<String>,
    vars: HashMap<Var, String>,
    bufs: Vec<String>,
}

impl Names {
    fn fresh(&mut self, base: &str) -> String {
        let mut s: String = base
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
            s.insert(0, 'v');
        }
        if RESERVED.contains(&s.as_str()) || s.starts_with("th_") || s.starts_with("tunehub") {
            s.push_str("_t");
        }
        let mut out = s.clone();
        let mut k = 1;
        while !self.used.insert(out.clone()) {
            out = format!("{s}_{k}");
            k += 1;
        }
        out
    }
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

struct Gen<'a> {
    func: &'a LoweredFunc,
    /// The target's cores: parallel loops use exactly these, whatever the caller's OpenMP
    /// settings, since the schedule was tuned for them.
    threads: usize,
    names: Names,
    out: String,
    depth: usize,
    /// Accumulator base pointers (see [`accumulator_bases`]).
    bases: Bases,
    /// The C name of each base pointer, by its store.
    base_names: HashMap<*const Stmt, String>,
    /// f32 lanes of the target's vectors.
    lanes: i64,
    /// Vector registers of the target, and the inline-asm constraint that names one.
    registers: i64,
    pin: Option<&'static str>,
    /// Register tiles by their band's outermost loop (see [`regtile`]).
    tiles: HashMap<*const Stmt, RegTile<'a>>,
}

/// For each accumulating store: the loop before which its base pointer is declared (the
/// outermost loop of the reduction band right around its register tile), the part of its index
/// that is constant in that band (the pointer's offset) and the rest (the index off the
/// pointer). Stores and loops are keyed by address: the tree is borrowed for the whole
/// generation.
#[derive(Default)]
struct Bases {
    at_loop: HashMap<*const Stmt, Vec<(*const Stmt, usize, Lin)>>,
    of_store: HashMap<*const Stmt, Lin>,
}

/// Accumulator stores get a base pointer declared outside their reduction band, so that the
/// index inside the band holds only the band's own loops. GCC keeps a register tile's
/// accumulators in registers across the reduction (store motion) only when the load and the
/// store of one accumulator have the same address form; with an outer tile loop in the index
/// (a conv tile of 2 rows), vectorization gave the two different forms and every FMA went
/// through memory: measured 63 against 104 GFLOP/s on the same conv2d schedule.
/// Register tiles (`skip`) write their own accumulators.
fn accumulator_bases(body: &[Stmt], skip: &HashMap<*const Stmt, RegTile>) -> Bases {
    fn walk<'s>(
        body: &'s [Stmt],
        stack: &mut Vec<(&'s Stmt, Var)>,
        skip: &HashMap<*const Stmt, RegTile>,
        out: &mut Bases,
    ) {
        for st in body {
            match st {
                Stmt::For { .. } if skip.contains_key(&(st as *const Stmt)) => {}
                Stmt::For { var, body, .. } => {
                    stack.push((st, *var));
                    walk(body, stack, skip, out);
                    stack.pop();
                }
                Stmt::Alloc { body, .. } | Stmt::Guard { body, .. } => walk(body, stack, skip, out),
                Stmt::Let { .. } => {}
                Stmt::Store {
                    buf,
                    index,
                    reduce: Some(_),
                    ..
                } => {
                    let mut used = vec![];
                    index.vars(&mut used);
                    // Inward to outward: the tile's loops (in the index), then the band (not in
                    // it); the band's outermost loop is where the pointer goes.
                    let mut k = stack.len();
                    while k > 0 && used.contains(&stack[k - 1].1) {
                        k -= 1;
                    }
                    let hi = k;
                    while k > 0 && !used.contains(&stack[k - 1].1) {
                        k -= 1;
                    }
                    if k == hi {
                        continue;
                    }
                    let inside: Vec<Var> = stack[k..].iter().map(|e| e.1).collect();
                    let (mut outer, mut inner) = (Lin::constant(index.c), Lin::constant(0));
                    for (a, coef) in &index.terms {
                        let mut vs = vec![];
                        a.vars(&mut vs);
                        let part = if vs.iter().any(|v| inside.contains(v)) {
                            &mut inner
                        } else {
                            &mut outer
                        };
                        part.terms.push((a.clone(), *coef));
                    }
                    if outer.terms.is_empty() {
                        continue;
                    }
                    out.at_loop
                        .entry(stack[k].0 as *const Stmt)
                        .or_default()
                        .push((st as *const Stmt, *buf, outer));
                    out.of_store.insert(st as *const Stmt, inner);
                }
                Stmt::Store { .. } => {}
            }
        }
    }
    let mut out = Bases::default();
    walk(body, &mut vec![], skip, &mut out);
    out
}

impl Gen<'_> {
    fn line(&mut self, s: &str) {
        for _ in 0..self.depth {
            self.out.push_str("  ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn var(&mut self, v: Var) -> String {
        if let Some(n) = self.names.vars.get(&v) {
            return n.clone();
        }
        let base = match v {
            Var::Loop { stage, node } => {
                let loop_name = self
                    .func
                    .loop_names
                    .get(&v)
                    .map_or(format!("l{node}"), Clone::clone);
                format!("{}_{}", self.func.dag.stages[stage].name, loop_name)
            }
            Var::Lo { stage, dim } => format!("{}_lo{dim}", self.func.dag.stages[stage].name),
        };
        let n = self.names.fresh(&base);
        self.names.vars.insert(v, n.clone());
        n
    }

    fn lin(&mut self, l: &crate::lower::Lin) -> String {
        let mut vs = vec![];
        l.vars(&mut vs);
        for v in vs {
            self.var(v);
        }
        let names = &self.names.vars;
        l.to_c(&|v| names[&v].clone())
    }

    fn buf(&self, b: usize) -> &Buffer {
        &self.func.buffers[b]
    }

    fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::For {
                var,
                extent,
                kind,
                body,
            } => {
                let key = s as *const Stmt;
                if let Some(t) = self.tiles.get(&key).cloned() {
                    self.register_tile(&t);
                    return;
                }
                let v = self.var(*var);
                for (store, buf, offset) in
                    self.bases.at_loop.get(&key).cloned().unwrap_or_default()
                {
                    let b = self.names.bufs[buf].clone();
                    let name = self.names.fresh(&format!("{b}_acc"));
                    let off = self.lin(&offset);
                    self.line(&format!("float* {name} = {b} + ({off});"));
                    self.base_names.insert(store, name);
                }
                self.open_loop(&v, *extent, *kind);
                self.block(body);
                self.line("}");
            }
            Stmt::Let { var, value } => {
                let v = self.var(*var);
                let e = self.lin(value);
                self.line(&format!("const int {v} = {e};"));
            }
            Stmt::Alloc { buf, body } => {
                let name = self.names.bufs[*buf].clone();
                let elems = self.buf(*buf).elems();
                let bytes = (elems * 4 + 63) / 64 * 64;
                let heap = bytes > STACK_LIMIT_BYTES || self.buf(*buf).scope == Scope::Global;
                if heap {
                    self.line(&format!(
                        "float* restrict {name} = (float*)aligned_alloc(64, {bytes});"
                    ));
                } else {
                    self.line(&format!(
                        "float {name}[{elems}] __attribute__((aligned(64)));"
                    ));
                }
                for st in body {
                    self.stmt(st);
                }
                if heap {
                    self.line(&format!("free({name});"));
                }
            }
            Stmt::Guard { conds, body } => {
                let c: Vec<String> = conds
                    .iter()
                    .map(|(e, b)| format!("{} < {b}", self.lin(e)))
                    .collect();
                self.line(&format!("if ({}) {{", c.join(" && ")));
                self.block(body);
                self.line("}");
            }
            Stmt::Store {
                buf,
                index,
                value,
                reduce,
            } => {
                let key = s as *const Stmt;
                let (name, idx) = match self.base_names.get(&key).cloned() {
                    Some(base) => (base, self.lin(&self.bases.of_store[&key].clone())),
                    None => (self.names.bufs[*buf].clone(), self.lin(index)),
                };
                let v = self.value(value);
                let target = format!("{name}[{idx}]");
                let rhs = match reduce {
                    None => v,
                    Some(ReduceOp::Sum) => format!("{target} + {v}"),
                    Some(ReduceOp::Max) => format!("th_maxf({target}, {v})"),
                    Some(ReduceOp::Min) => format!("th_minf({target}, {v})"),
                };
                self.line(&format!("{target} = {rhs};"));
            }
        }
    }

    /// A loop's pragma and header, up to its opening brace.
    fn open_loop(&mut self, v: &str, extent: i64, kind: LoopKind) {
        match kind {
            LoopKind::Parallel => self.line(&format!(
                "#pragma omp parallel for num_threads({})",
                self.threads
            )),
            LoopKind::Vectorized => self.line("#pragma omp simd"),
            LoopKind::Unrolled => self.line(&format!("#pragma GCC unroll {}", extent.min(65534))),
            LoopKind::Serial => {}
        }
        self.line(&format!("for (int {v} = 0; {v} < {extent}; ++{v}) {{"));
    }

    fn block(&mut self, body: &[Stmt]) {
        self.depth += 1;
        for s in body {
            self.stmt(s);
        }
        self.depth -= 1;
    }

    fn value(&mut self, e: &VExpr) -> String {
        match e {
            VExpr::Const(c) => float_literal(*c),
            VExpr::Load { buf, index } => {
                let idx = self.lin(index);
                format!("{}[{idx}]", self.names.bufs[*buf])
            }
            VExpr::Index(l) => format!("(float)({})", self.lin(l)),
            VExpr::Unary(op, a) => {
                let a = self.value(a);
                match op {
                    UnaryOp::Neg => format!("(-{a})"),
                    UnaryOp::Exp => format!("expf({a})"),
                    UnaryOp::Log => format!("logf({a})"),
                    UnaryOp::Sqrt => format!("sqrtf({a})"),
                    UnaryOp::Rsqrt => format!("(1.0f / sqrtf({a}))"),
                    UnaryOp::Tanh => format!("tanhf({a})"),
                    UnaryOp::Sigmoid => format!("(1.0f / (1.0f + expf(-{a})))"),
                    UnaryOp::Abs => format!("fabsf({a})"),
                    UnaryOp::Relu => format!("th_maxf({a}, 0.0f)"),
                }
            }
            VExpr::Binary(op, a, b) => {
                let (a, b) = (self.value(a), self.value(b));
                match op {
                    BinaryOp::Add => format!("({a} + {b})"),
                    BinaryOp::Sub => format!("({a} - {b})"),
                    BinaryOp::Mul => format!("({a} * {b})"),
                    BinaryOp::Div => format!("({a} / {b})"),
                    BinaryOp::Min => format!("th_minf({a}, {b})"),
                    BinaryOp::Max => format!("th_maxf({a}, {b})"),
                }
            }
            VExpr::Select(c, a, b) => {
                let c = self.cond(c);
                let (a, b) = (self.value(a), self.value(b));
                format!("({c} ? {a} : {b})")
            }
        }
    }

    fn cond(&mut self, c: &VCond) -> String {
        match c {
            VCond::Index(op, a, b) => format!("({} {} {})", self.lin(a), cmp(*op), self.lin(b)),
            VCond::Value(op, a, b) => format!("({} {} {})", self.value(a), cmp(*op), self.value(b)),
            VCond::And(a, b) => format!("({} && {})", self.cond(a), self.cond(b)),
            VCond::Or(a, b) => format!("({} || {})", self.cond(a), self.cond(b)),
            VCond::Not(a) => format!("(!{})", self.cond(a)),
        }
    }
}

fn cmp(op: CmpOp) -> &'static str {
    op.c_op()
}

/// A C float literal that reads back as the same f32.
pub fn float_literal(c: f64) -> String {
    if c.is_nan() {
        "NAN".into()
    } else if c.is_infinite() {
        if c > 0.0 {
            "INFINITY".into()
        } else {
            "(-INFINITY)".into()
        }
    } else {
        let s = format!("{:?}", c as f32);
        let s = if s.contains(['.', 'e', 'E']) {
            s
        } else {
            format!("{s}.0")
        };
        if s.starts_with('-') {
            format!("({s}f)")
        } else {
            format!("{s}f")
        }
    }
}
