//! The C writer: statements, loops and expressions of a lowered program as C text, with
//! accumulator base pointers hoisted out of reduction bands, and register tiles written out as
//! vector variables (see `regtile` for which tiles qualify).

use super::lanes::{lane_coef, uses};
use super::names::Names;
use super::regtile::{RegTile, groups, lanes_permutable, map_lins, tile_points};
use crate::ir::{BinaryOp, CmpOp, DType, ReduceOp, UnaryOp};
use crate::lower::{
    Buffer, Lin, LoopKind, LoweredFunc, STACK_LIMIT_BYTES, Scope, Stmt, VCond, VExpr, Var,
};
use std::collections::{HashMap, HashSet};

pub(super) struct Gen<'a> {
    pub(super) func: &'a LoweredFunc,
    /// The `num_threads` clause's value: the target's cores, a constant in a measured kernel
    /// (whatever the caller's OpenMP settings, since the schedule was tuned for them), or the
    /// linkable kernel's thread variable (see [`super::Linkage`]).
    pub(super) threads: String,
    pub(super) names: Names,
    pub(super) out: String,
    pub(super) depth: usize,
    /// Accumulator base pointers (see [`accumulator_bases`]).
    pub(super) bases: Bases,
    /// The C name of each base pointer, by its store.
    pub(super) base_names: HashMap<*const Stmt, String>,
    /// f32 lanes of the target's vectors.
    pub(super) lanes: i64,
    /// Vector registers of the target, and the inline-asm constraint that names one.
    pub(super) registers: i64,
    pub(super) pin: Option<&'static str>,
    /// Register tiles by their band's outermost loop (see [`super::regtile`]).
    pub(super) tiles: HashMap<*const Stmt, RegTile<'a>>,
    /// Dot tiles likewise (see [`super::dot`]).
    pub(super) dots: HashMap<*const Stmt, super::dot::DotTile<'a>>,
    /// Integer register tiles likewise (see [`super::itile`]).
    pub(super) int_tiles: HashMap<*const Stmt, super::itile::IntTile<'a>>,
    /// The dot-product instruction the dot tiles are written for.
    pub(super) dot_instruction: Option<super::dot::Instruction>,
    /// The row-packed form of the tiles that qualify (see [`super::rows`]), planned once.
    pub(super) rows: HashMap<*const Stmt, super::rows::RowPack>,
    /// The column-shared form of the tiles that qualify (see [`super::window`]), planned once.
    pub(super) shares: HashMap<*const Stmt, super::window::ColumnShare<'a>>,
    /// The constant a tile's accumulators start from, where the tile writes its own
    /// initialization (see [`Gen::stmts`]).
    pub(super) tile_init: HashMap<*const Stmt, f64>,
    /// The innermost loop being written, whose invariant divisors become reciprocals.
    pub(super) inner: Option<Var>,
    /// The lane order weighted column-shared tiles compute in, where the target has one (see
    /// [`super::masked::in_lane_order`]).
    pub(super) in_lane: Option<Vec<i64>>,
    /// Whether vectors shift across two in one instruction ([`super::masked::aligns`]).
    pub(super) aligns: bool,
    /// Whether a reduction was written in vectors (see [`super::hreduce`]): the kernel then
    /// needs the vector helpers.
    pub(super) vector_reductions: bool,
    /// Whether the vector forms apply (every tensor f32; see `emit_linked`).
    pub(super) vectors: bool,
    /// Whether the value being written is an integer stage's (see [`Gen::value`]).
    pub(super) int_value: bool,
}

/// For each accumulating store: the loop before which its base pointer is declared (the
/// outermost loop of the reduction band right around its register tile), the part of its index
/// that is constant in that band (the pointer's offset) and the rest (the index off the
/// pointer). Stores and loops are keyed by address: the tree is borrowed for the whole
/// generation.
#[derive(Default)]
pub(super) struct Bases {
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
pub(super) fn accumulator_bases(body: &[Stmt], skip: &HashSet<*const Stmt>) -> Bases {
    fn walk<'s>(
        body: &'s [Stmt],
        stack: &mut Vec<(&'s Stmt, Var)>,
        skip: &HashSet<*const Stmt>,
        out: &mut Bases,
    ) {
        for st in body {
            match st {
                Stmt::For { .. } if skip.contains(&(st as *const Stmt)) => {}
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
    pub(super) fn line(&mut self, s: &str) {
        for _ in 0..self.depth {
            self.out.push_str("  ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }
    pub(super) fn var(&mut self, v: Var) -> String {
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
    pub(super) fn lin(&mut self, l: &crate::lower::Lin) -> String {
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
    pub(super) fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::For {
                var,
                extent,
                kind,
                body,
            } => {
                let outer = self.inner.replace(*var);
                self.for_loop(s, *var, *extent, *kind, body);
                self.inner = outer;
            }
            Stmt::Let { var, value } => {
                let v = self.var(*var);
                let e = self.lin(value);
                // Marked: a local buffer's origin is unused when every access folded it away,
                // and linked kernels must compile under -Wall -Werror.
                self.line(&format!("const int {v} __attribute__((unused)) = {e};"));
            }
            Stmt::Alloc { buf, body } => {
                let name = self.names.bufs[*buf].clone();
                let elems = self.buf(*buf).elems();
                let dtype = self.dtype(*buf);
                let t = dtype.c_name();
                let bytes = (elems * dtype.bytes() as i64 + 63) / 64 * 64;
                let heap = bytes > STACK_LIMIT_BYTES || self.buf(*buf).scope == Scope::Global;
                if heap {
                    self.line(&format!(
                        "{t}* restrict {name} = ({t}*)aligned_alloc(64, {bytes});"
                    ));
                } else {
                    self.line(&format!(
                        "{t} {name}[{elems}] __attribute__((aligned(64)));"
                    ));
                }
                self.stmts(body);
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
                let target = self.store_target(s, *buf, index);
                let v = self.stored_value(*buf, value);
                let int = self.dtype(*buf).is_int();
                let (max, min) = if int {
                    ("th_maxi", "th_mini")
                } else {
                    ("th_maxf", "th_minf")
                };
                let rhs = match reduce {
                    None => v,
                    Some(ReduceOp::Sum) => format!("{target} + {v}"),
                    Some(ReduceOp::Max) => format!("{max}({target}, {v})"),
                    Some(ReduceOp::Min) => format!("{min}({target}, {v})"),
                };
                self.line(&format!("{target} = {rhs};"));
            }
        }
    }
    /// The C element a store `s` into `buf` at `index` writes: through its accumulator base
    /// when a loop set one up (`accumulator_bases`), else the buffer itself.
    pub(super) fn store_target(
        &mut self,
        s: &Stmt,
        buf: usize,
        index: &crate::lower::Lin,
    ) -> String {
        let key = s as *const Stmt;
        let (name, idx) = match self.base_names.get(&key).cloned() {
            Some(base) => (base, self.lin(&self.bases.of_store[&key].clone())),
            None => (self.names.bufs[buf].clone(), self.lin(index)),
        };
        format!("{name}[{idx}]")
    }
    /// A loop: a register tile, a peeled, quantizing or reduction loop, or plain.
    fn for_loop(&mut self, s: &Stmt, var: Var, extent: i64, kind: LoopKind, body: &[Stmt]) {
        let key = s as *const Stmt;
        let init = self.tile_init.get(&key).copied();
        if let (Some(t), Some(ins)) = (self.dots.get(&key).cloned(), self.dot_instruction) {
            self.inner = None;
            self.dot_tile(&t, ins, init);
            return;
        }
        if let Some(t) = self.int_tiles.get(&key).cloned() {
            self.inner = None;
            self.int_tile(&t, init);
            return;
        }
        if let Some(t) = self.tiles.get(&key).cloned() {
            // Its loops are written by the tile, which decides its divisions by the lane.
            self.inner = None;
            if let Some(p) = self.rows.get(&key).cloned() {
                self.row_packed_tile(&t, &p, init);
            } else if let Some(w) = self.shares.get(&key).cloned() {
                self.column_share_tile(&t, &w, init);
            } else {
                self.register_tile(&t);
            }
            return;
        }
        let v = self.var(var);
        for (store, buf, offset) in self.bases.at_loop.get(&key).cloned().unwrap_or_default() {
            let b = self.names.bufs[buf].clone();
            let name = self.names.fresh(&format!("{b}_acc"));
            let off = self.lin(&offset);
            let t = self.dtype(buf).c_name();
            self.line(&format!("{t}* {name} = {b} + ({off});"));
            self.base_names.insert(store, name);
        }
        if kind == LoopKind::Vectorized
            && let Some(p) = super::peel::plan(var, body)
        {
            self.peeled(&v, extent, &p);
            return;
        }
        if kind == LoopKind::Vectorized
            && let Some(store) = self.quantizing_store(body)
        {
            self.split_quantize(store, &v, extent);
            return;
        }
        if matches!(kind, LoopKind::Serial | LoopKind::Unrolled)
            && let Some((buf, index, value, op)) = super::vreduce::contiguous_reduction(var, body)
        {
            self.reduction_loop(&body[0], (var, &v, extent), (buf, index, value, op));
            return;
        }
        self.open_loop(&v, extent, kind);
        self.block(body);
        self.line("}");
    }
    /// A reduction loop (see [`super::vreduce`]) in vectors where it has a vector form
    /// ([`super::hreduce`]), else as `omp simd reduction` on a scalar.
    fn reduction_loop(
        &mut self,
        store: &Stmt,
        (var, v, extent): (Var, &str, i64),
        (buf, index, value, op): (usize, &Lin, &VExpr, ReduceOp),
    ) {
        let key = store as *const Stmt;
        let (name, idx) = match self.base_names.get(&key).cloned() {
            Some(base) => (base, self.lin(&self.bases.of_store[&key].clone())),
            None => (self.names.bufs[buf].clone(), self.lin(index)),
        };
        let target = format!("{name}[{idx}]");
        if self.vectors
            && let Some(acc) = super::hreduce::accumulators(var, extent, self.lanes, value)
        {
            self.vector_reduction((var, v, extent, acc), &target, value, op);
            return;
        }
        let dtype = self.dtype(buf);
        let (max, min) = if dtype.is_int() {
            ("th_maxi", "th_mini")
        } else {
            ("th_maxf", "th_minf")
        };
        let acc = self.names.fresh("th_red");
        let (clause, update) = match op {
            ReduceOp::Sum => ("+", format!("{acc} + ")),
            ReduceOp::Max => ("max", format!("{max}({acc}, ")),
            ReduceOp::Min => ("min", format!("{min}({acc}, ")),
        };
        self.line("{");
        self.depth += 1;
        self.line(&format!("{} {acc} = {target};", dtype.c_name()));
        self.line(&format!("#pragma omp simd reduction({clause}:{acc})"));
        self.line(&format!("for (int {v} = 0; {v} < {extent}; ++{v}) {{"));
        self.depth += 1;
        let x = self.typed_value(value, dtype.is_int());
        let close = if op == ReduceOp::Sum { "" } else { ")" };
        self.line(&format!("{acc} = {update}{x}{close};"));
        self.depth -= 1;
        self.line("}");
        self.line(&format!("{target} = {acc};"));
        self.depth -= 1;
        self.line("}");
    }
    /// C bounds on the lane of `r`'s comparisons: (lower bounds, exclusive upper bounds).
    fn lane_bounds(&mut self, r: &super::peel::LaneRange) -> (Vec<String>, Vec<String>) {
        let (mut lower, mut upper) = (vec![], vec![]);
        for c in &r.lane {
            let (is_lower, num, k) = c.bound();
            let n = self.lin(&num);
            let e = if k == 1 {
                n
            } else {
                format!("th_ceildiv({n}, {k})")
            };
            if is_lower {
                lower.push(e);
            } else {
                upper.push(e);
            }
        }
        (lower, upper)
    }
    /// The bit mask of the lanes in `range`, counted from `first`, within `[lo, hi)`: a C
    /// `th_rangemask`, 0 where a condition free of the lane fails.
    pub(super) fn range_mask(
        &mut self,
        range: &super::peel::LaneRange,
        (lo, hi): (i64, i64),
        first: i64,
    ) -> String {
        let (lower, upper) = self.lane_bounds(range);
        let from = |b: &String| {
            if first == 0 {
                b.clone()
            } else {
                format!("({b}) - {first}")
            }
        };
        let lo = lower
            .iter()
            .fold(lo.to_string(), |a, l| format!("th_maxi({a}, {})", from(l)));
        let hi = upper
            .iter()
            .fold(hi.to_string(), |a, u| format!("th_mini({a}, {})", from(u)));
        let mask = format!("th_rangemask({lo}, {hi})");
        if range.invariant.is_empty() {
            return mask;
        }
        let inv: Vec<String> = range.invariant.iter().map(|c| self.cond(c)).collect();
        format!("({} ? {mask} : 0u)", inv.join(" && "))
    }
    /// A vectorized loop over `v` storing a select on a range of it (see [`super::peel`]):
    /// the value outside the range, the value inside it (`omp simd`), the value outside it.
    fn peeled(&mut self, v: &str, extent: i64, p: &super::peel::Peel) {
        let (lower, upper) = self.lane_bounds(&p.range);
        let lo = self.names.fresh("th_lo");
        let hi = self.names.fresh("th_hi");
        let store = |value: &VExpr| Stmt::Store {
            buf: p.buf,
            index: p.index.clone(),
            value: value.clone(),
            reduce: None,
        };
        let (inside, outside) = (store(p.inside), store(p.outside));
        self.line("{");
        self.depth += 1;
        let l = lower
            .iter()
            .fold("0".to_string(), |acc, b| format!("th_maxi({acc}, {b})"));
        self.line(&format!("const int {lo} = th_mini({extent}, {l});"));
        let h = upper
            .iter()
            .fold(extent.to_string(), |acc, b| format!("th_mini({acc}, {b})"));
        self.line(&format!("const int {hi} = th_maxi({lo}, {h});"));
        let guard = p
            .range
            .invariant
            .iter()
            .map(|c| self.cond(c))
            .collect::<Vec<_>>();
        if !guard.is_empty() {
            self.line(&format!("if ({}) {{", guard.join(" && ")));
            self.depth += 1;
        }
        for (from, to, st) in [
            ("0".to_string(), lo.clone(), &outside),
            (lo.clone(), hi.clone(), &inside),
            (hi.clone(), extent.to_string(), &outside),
        ] {
            self.line("#pragma omp simd");
            self.line(&format!("for (int {v} = {from}; {v} < {to}; ++{v}) {{"));
            self.block(std::slice::from_ref(st));
            self.line("}");
        }
        if !guard.is_empty() {
            self.depth -= 1;
            self.line("} else {");
            self.depth += 1;
            self.open_loop(v, extent, LoopKind::Vectorized);
            self.block(std::slice::from_ref(&outside));
            self.line("}");
            self.depth -= 1;
            self.line("}");
        }
        self.depth -= 1;
        self.line("}");
    }
    /// A loop's pragma and header, up to its opening brace.
    pub(super) fn open_loop(&mut self, v: &str, extent: i64, kind: LoopKind) {
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
        self.stmts(body);
        self.depth -= 1;
    }
    /// Writes `body`. A constant stored into a column-shared or row-packed tile's accumulators
    /// right before the tile (the reduction's initialization) is not written: the tile starts
    /// its registers from the constant instead of loading them. Stored by a separate vectorized loop and read
    /// back whole, the partial vector's stores did not forward to the load: a stride-2
    /// depthwise row tile's hand copy on a Zen 4 took 42.3 us with it, 30.0 without
    /// (docs/experiments/2026-11-29-pool-columns-zen4.md).
    pub(super) fn stmts(&mut self, body: &[Stmt]) {
        for (i, s) in body.iter().enumerate() {
            if let Some(next) = body.get(i + 1) {
                let key = next as *const Stmt;
                let fresh =
                    |k: &*const Stmt| self.shares.contains_key(k) || self.rows.contains_key(k);
                if fresh(&key)
                    && let Some(t) = self.tiles.get(&key)
                    && let Some(c) = super::window::init_value(s, t)
                {
                    self.tile_init.insert(key, c);
                    continue;
                }
                if let Some((key, c)) = super::init::fresh_init(s, next, |k| self.accumulators(k)) {
                    self.tile_init.insert(key, c);
                    continue;
                }
                let buffers = &self.func.buffers;
                if let Some((key, c)) =
                    super::window::init_before_chain(s, next, &self.tiles, fresh, |b| {
                        buffers[b].elems()
                    })
                {
                    self.tile_init.insert(key, c);
                }
            }
            self.stmt(s);
        }
    }
    /// The accumulators of the integer or dot tile keyed `key`, if it is one.
    fn accumulators(&self, key: *const Stmt) -> Option<super::init::Accumulators<'_>> {
        match (self.dots.get(&key), self.int_tiles.get(&key)) {
            (Some(t), _) if self.dot_instruction.is_some() => Some(t.accumulators()),
            (_, Some(t)) => Some(t.accumulators()),
            _ => None,
        }
    }
    /// The element type of buffer `b`.
    pub(super) fn dtype(&self, b: usize) -> DType {
        self.func.buffers[b].dtype
    }
    /// The C value `value` stored into buffer `buf` is: an i32 stage's in the integers, an f32
    /// stage's in floats, an 8-bit stage's computed in floats and quantized (rounded half to
    /// even, saturated: `DType::quantize`), except a copy of its own type, which stays one.
    fn stored_value(&mut self, buf: usize, value: &VExpr) -> String {
        let dtype = self.dtype(buf);
        if self.quantizes(buf, value) {
            let v = self.typed_value(value, false);
            return format!("th_q{}({v})", dtype.name());
        }
        self.typed_value(value, dtype.is_int())
    }
    /// Whether storing `value` into `buf` quantizes: an 8-bit stage computed in floats, not a
    /// copy of its own type ([`Gen::moves`]).
    pub(super) fn quantizes(&self, buf: usize, value: &VExpr) -> bool {
        let t = self.dtype(buf);
        matches!(t, DType::U8 | DType::I8) && !self.moves(value, t)
    }
    /// Whether `e` only moves values of type `t` (a load of a `t` tensor, a constant in `t`'s
    /// range, a select of those: a max pool's padded read), so that a `t` stage stores it in
    /// integers, with nothing to round or saturate.
    fn moves(&self, e: &VExpr, t: DType) -> bool {
        match e {
            VExpr::Load { buf, .. } => self.dtype(*buf) == t,
            VExpr::Const(c) => t
                .int_range()
                .is_some_and(|(lo, hi)| c.fract() == 0.0 && (lo as f64..=hi as f64).contains(c)),
            VExpr::Select(_, a, b) => self.moves(a, t) && self.moves(b, t),
            _ => false,
        }
    }
    /// [`Gen::value`] of an integer stage (`int`) or an f32 one.
    pub(super) fn typed_value(&mut self, e: &VExpr, int: bool) -> String {
        let outer = std::mem::replace(&mut self.int_value, int);
        let v = self.value(e);
        self.int_value = outer;
        v
    }
    /// An integer stage's value in C's `int`: the IR's typing rules (`ir::types`) allow only
    /// integer operations there, loads of 8-bit tensors promote, and a sum of their products
    /// fits (checked when the DAG was made).
    fn int_value(&mut self, e: &VExpr) -> String {
        match e {
            VExpr::Const(c) if c.is_infinite() => {
                (if *c > 0.0 { "INT32_MAX" } else { "INT32_MIN" }).into()
            }
            VExpr::Const(c) => format!("{}", *c as i64),
            VExpr::Index(l) => format!("({})", self.lin(l)),
            VExpr::Unary(op, a) => {
                let a = self.value(a);
                match op {
                    UnaryOp::Neg => format!("(-{a})"),
                    UnaryOp::Abs => format!("abs({a})"),
                    UnaryOp::Relu => format!("th_maxi({a}, 0)"),
                    _ => unreachable!("{} in an integer stage (refused by ir::types)", op.name()),
                }
            }
            VExpr::Binary(op @ (BinaryOp::Min | BinaryOp::Max), a, b) => {
                let (a, b) = (self.value(a), self.value(b));
                let f = if *op == BinaryOp::Min {
                    "th_mini"
                } else {
                    "th_maxi"
                };
                format!("{f}({a}, {b})")
            }
            _ => unreachable!("written by `value`"),
        }
    }
    pub(super) fn value(&mut self, e: &VExpr) -> String {
        if self.int_value
            && matches!(
                e,
                VExpr::Const(_)
                    | VExpr::Index(_)
                    | VExpr::Unary(..)
                    | VExpr::Binary(BinaryOp::Min | BinaryOp::Max, ..)
            )
        {
            return self.int_value(e);
        }
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
                    UnaryOp::Erf => format!("erff({a})"),
                    // The current rounding mode: to nearest, ties to even, unless a program
                    // changes it (none does): ONNX's rounding, one `vroundps` under SSE4.1.
                    UnaryOp::Round => format!("rintf({a})"),
                }
            }
            VExpr::Binary(op, a, b_expr) => {
                let (a, b) = (self.value(a), self.value(b_expr));
                match op {
                    BinaryOp::Add => format!("({a} + {b})"),
                    BinaryOp::Sub => format!("({a} - {b})"),
                    BinaryOp::Mul => format!("({a} * {b})"),
                    // A divisor the innermost loop does not change (softmax's row sum): one
                    // division before the loop and a multiply per element, for a division
                    // per element (a 16-lane divide takes ~10 cycles); within about an ulp of it.
                    BinaryOp::Div if self.inner.is_some_and(|v| !uses(b_expr, v)) => {
                        format!("({a} * (1.0f / {b}))")
                    }
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
    pub(super) fn cond(&mut self, c: &VCond) -> String {
        match c {
            VCond::Index(op, a, b) => format!("({} {} {})", self.lin(a), cmp(*op), self.lin(b)),
            VCond::Value(op, a, b) => format!("({} {} {})", self.value(a), cmp(*op), self.value(b)),
            VCond::And(a, b) => format!("({} && {})", self.cond(a), self.cond(b)),
            VCond::Or(a, b) => format!("({} || {})", self.cond(a), self.cond(b)),
            VCond::Not(a) => format!("(!{})", self.cond(a)),
        }
    }
}

/// The operands of one band iteration's updates: each distinct expression gets a name, in the
/// order of first use.
#[derive(Default)]
pub(super) struct Operands {
    /// (name, C type, expression), in order.
    order: Vec<(String, &'static str, String)>,
    /// expression -> name.
    names: HashMap<String, String>,
    /// Stride-2 loads in `TH_LANEPERM`'s lane order (see `regtile::lanes_permutable`).
    permuted: bool,
    /// Expressions stay in place, unnamed: the arms of a select, read only where its
    /// condition holds.
    inline: bool,
}

impl Operands {
    /// Operands written where they are used, unnamed (the arms of a select).
    pub(super) fn inline() -> Operands {
        Operands {
            inline: true,
            ..Operands::default()
        }
    }
    pub(super) fn name(&mut self, g: &mut Gen<'_>, ty: &'static str, expr: String) -> String {
        if self.inline {
            return expr;
        }
        if let Some(n) = self.names.get(&expr) {
            return n.clone();
        }
        let n = g.names.fresh(&format!("th_op{}", self.order.len()));
        self.order.push((n.clone(), ty, expr.clone()));
        self.names.insert(expr, n.clone());
        n
    }
    /// Declares the operands, in order.
    pub(super) fn write(&self, g: &mut Gen<'_>) {
        for (name, ty, expr) in &self.order {
            g.line(&format!("{ty} {name} = {expr};"));
        }
    }
}

impl Gen<'_> {
    /// Writes the tile: accumulators loaded, the band with the tile unrolled inside, stored.
    fn register_tile(&mut self, t: &RegTile) {
        let (lane, extent) = t.lane;
        let lanes = self.lanes;
        let acc = self.names.bufs[t.buf].clone();
        // One accumulator per tile point and group of lanes, with the point's variables fixed;
        // the last group of a lane loop that is not a multiple of the lanes is partial.
        let mut regs = vec![];
        for point in tile_points(&t.tile) {
            for (first, used) in groups(extent, lanes) {
                let fixed = |l: &Lin| {
                    l.substitute(&|v| point.iter().find(|p| p.0 == v).map(|p| Lin::constant(p.1)))
                };
                let name = self.names.fresh(&format!("{acc}_r{}", regs.len()));
                let index = self.lin(&super::window::at_point(
                    t.index,
                    &point,
                    (lane, first),
                    None,
                ));
                regs.push((name, index, map_lins(t.value, &fixed), (first, used)));
            }
        }
        // Every vector operand a stride-2 load: the tile accumulates in their shuffle's lane
        // order, its lanes put back once at the accumulators' load and store.
        let permuted = lanes_permutable(t.value, lane);
        let perm = |v: String| {
            if permuted {
                format!("TH_LANEPERM({v})")
            } else {
                v
            }
        };
        self.line("{");
        self.depth += 1;
        for (r, index, _, (_, used)) in &regs {
            let load = perm(vload(&format!("&{acc}[{index}]"), *used, lanes));
            self.line(&format!("th_vf {r} = {load};"));
        }
        for &(v, n, kind) in &t.band {
            let name = self.var(v);
            self.open_loop(&name, n, kind);
            self.depth += 1;
        }
        // Every operand is read once per band iteration into a named temporary, then the
        // updates use the names: with the loads repeated per accumulator, GCC folded them into
        // the FMAs as memory operands (on AVX2's 16 registers it re-read the same B vector for
        // every row of the tile), and the loads, not the FMAs, bounded the loop.
        let mut operands = Operands {
            permuted,
            ..Operands::default()
        };
        let updates: Vec<String> = regs
            .iter()
            .map(|(r, _, value, group)| {
                let (e, vector) = self.vector_value(value, lane, *group, &mut operands);
                accumulate(t.op, r, &e, vector)
            })
            .collect();
        self.write_updates(regs.len(), &operands, &updates);
        for _ in &t.band {
            self.depth -= 1;
            self.line("}");
        }
        for (r, index, _, (_, used)) in &regs {
            self.line(&vstore(
                &format!("&{acc}[{index}]"),
                &perm(r.clone()),
                *used,
                lanes,
            ));
        }
        self.depth -= 1;
        self.line("}");
    }
    /// One band iteration of a tile of `accumulators`: its operands declared, then `updates`.
    pub(super) fn write_updates(
        &mut self,
        accumulators: usize,
        operands: &Operands,
        updates: &[String],
    ) {
        operands.write(self);
        // Naming them is not enough: GCC's combine folds a once-loaded vector back into every
        // FMA that reads it. An empty asm that "modifies" the register ends that (the load
        // happens once, into a register). Only when the tile, the vector operands and a
        // broadcast fit the register file: past it the pin would spill. Matmul 512 on AVX2,
        // tiles of 4 rows by 16 floats (8 accumulators, 2 B vectors) over the whole reduction:
        // 124-128 -> 183-190 GFLOP/s, the loop no longer bound by 12 loads per 8 FMAs.
        let vectors = operands.order.iter().filter(|o| o.1 == "th_vf").count() as i64;
        if self.pin.is_some() && accumulators as i64 + vectors < self.registers {
            for (name, ty, _) in &operands.order {
                if *ty == "th_vf" {
                    self.line(&format!("TH_PIN({name});"));
                }
            }
        }
        for u in updates {
            self.line(u);
        }
    }
    /// C for `e` over the `used` lanes from `first` on (`group`), and whether it is a vector
    /// (else a scalar the vector operations broadcast). `e` passed `regtile::vector_form`.
    pub(super) fn vector_value(
        &mut self,
        e: &VExpr,
        lane: Var,
        group: (i64, i64),
        ops: &mut Operands,
    ) -> (String, bool) {
        let (first, used) = group;
        if !uses(e, lane) {
            if let VExpr::Const(_) = e {
                return (self.value(e), false);
            }
            let v = self.value(e);
            return (ops.name(self, "float", v), false);
        }
        match e {
            VExpr::Load { buf, index } => {
                let at = index.substitute(&|v| (v == lane).then(|| Lin::constant(first)));
                let i = self.lin(&at);
                let at = format!("&{}[{i}]", self.names.bufs[*buf]);
                let load = if lane_coef(index, lane) == Some(2) {
                    let p = if ops.permuted { "p" } else { "" };
                    format!("th_vload2{p}({at}, {used})")
                } else {
                    vload(&at, used, self.lanes)
                };
                (ops.name(self, "th_vf", load), true)
            }
            VExpr::Unary(UnaryOp::Neg, a) => {
                let (a, v) = self.vector_value(a, lane, group, ops);
                (format!("(-{a})"), v)
            }
            VExpr::Binary(op, a, b) => {
                let a = self.vector_value(a, lane, group, ops);
                let b = self.vector_value(b, lane, group, ops);
                vector_arithmetic(*op, a, b)
            }
            VExpr::Select(c, a, b) if super::lanes::cond_uses(c, lane) => {
                // A load on a range of the lane (vector_form checked the form): the lanes of
                // this group in range, relative to its first, as a bit mask.
                let (Some(range), VExpr::Load { buf, index }, VExpr::Const(fill)) =
                    (super::peel::lane_range(c, lane), &**a, &**b)
                else {
                    unreachable!("vector_form admits a load on a range of the lane only")
                };
                let mask = self.range_mask(&range, (0, used), first);
                let at = index.substitute(&|v| (v == lane).then(|| Lin::constant(first)));
                let i = self.lin(&at);
                let load = if lane_coef(index, lane) == Some(2) {
                    let p = if ops.permuted { "p" } else { "" };
                    format!("th_vload2m{p}")
                } else {
                    "th_vloadm".to_string()
                };
                let load = format!(
                    "{load}(&{}[{i}], {mask}, {})",
                    self.names.bufs[*buf],
                    float_literal(*fill)
                );
                (ops.name(self, "th_vf", load), true)
            }
            VExpr::Select(c, a, b) => {
                // The arms are read only where the condition holds: an inlined padding's load
                // lies outside its buffer where the condition fails (a depthwise NHWC tile's
                // first row read 208 floats before its data, and faulted). The select is one
                // operand, its arms inside it.
                let c = self.cond(c);
                let mut arms = Operands {
                    permuted: ops.permuted,
                    inline: true,
                    ..Operands::default()
                };
                let a = self.vector_value(a, lane, group, &mut arms);
                let b = self.vector_value(b, lane, group, &mut arms);
                (ops.name(self, "th_vf", vector_select(&c, a, b)), true)
            }
            _ => unreachable!("vector_form admits loads, negation, arithmetic and selects"),
        }
    }
}

/// `a op b` for a tile's operands that are vectors or scalars (`(C, is a vector)`): `+ - * /`
/// only (what `regtile::vector_form` and `rows` admit), and whether the result is a vector.
pub(super) fn vector_arithmetic(
    op: BinaryOp,
    (a, va): (String, bool),
    (b, vb): (String, bool),
) -> (String, bool) {
    let o = match op {
        BinaryOp::Add => "+",
        BinaryOp::Sub => "-",
        BinaryOp::Mul => "*",
        // A divisor equal in every lane: its reciprocal, as in `value`.
        BinaryOp::Div if !vb => return (format!("({a} * (1.0f / {b}))"), va),
        BinaryOp::Div => "/",
        _ => unreachable!("the tile forms admit + - * / only"),
    };
    (format!("({a} {o} {b})"), va || vb)
}

/// A select of vectors on condition `c`, from arms that are vectors or scalars (`(C, is a
/// vector)`): both must have the vector type, a scalar arm is broadcast.
pub(super) fn vector_select(c: &str, a: (String, bool), b: (String, bool)) -> String {
    let arm = |(s, v): (String, bool)| {
        if v {
            s
        } else {
            format!("((th_vf){{0}} + {s})")
        }
    };
    format!("({c} ? {} : {})", arm(a), arm(b))
}

/// The update of accumulator `r` by `e` (a vector, or a scalar where `vector` is false) in a
/// tile reducing by `op`.
pub(super) fn accumulate(op: ReduceOp, r: &str, e: &str, vector: bool) -> String {
    format!("{r} = {};", accumulated(op, r, e, vector))
}

/// The value [`accumulate`] gives `r`.
pub(super) fn accumulated(op: ReduceOp, r: &str, e: &str, vector: bool) -> String {
    // `+` broadcasts a scalar; the max and min helpers take vectors.
    let e = if vector || op == ReduceOp::Sum {
        e.to_string()
    } else {
        format!("((th_vf){{0}} + {e})")
    };
    match op {
        ReduceOp::Sum => format!("{r} + {e}"),
        ReduceOp::Max => format!("th_vmax({r}, {e})"),
        ReduceOp::Min => format!("th_vmin({r}, {e})"),
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

/// A vector load of `used` lanes at `at`: masked when they are fewer than the vector's.
pub(super) fn vload(at: &str, used: i64, lanes: i64) -> String {
    if used == lanes {
        format!("th_vload({at})")
    } else {
        format!("th_vloadn({at}, {used})")
    }
}

/// A vector store of the first `used` lanes of `v` at `at`: masked when they are fewer than
/// the vector's.
pub(super) fn vstore(at: &str, v: &str, used: i64, lanes: i64) -> String {
    if used == lanes {
        format!("th_vstore({at}, {v});")
    } else {
        format!("th_vstoren({at}, {v}, {used});")
    }
}
