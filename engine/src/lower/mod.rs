//! Lowering: a schedule's loop state becomes a loop-nest program over flat buffers.
//!
//! Bound inference works as Ansor's InferBound does on CPU: a stage computed at a loop of its
//! consumer holds only the region the consumer reads inside that loop. Because index
//! expressions are affine and splits are affine in their loops, each region is an interval per
//! dimension whose start is an expression of the enclosing loops and whose extent is a constant,
//! so local buffers have static sizes and loops static extents. Loops that overshoot their
//! axis (non-divisible splits, regions that reach past the tensor's edge) are guarded.

pub mod iexpr;

pub use iexpr::{Atom, Lin, Var, VarMap};

use crate::ir::{Affine, BinaryOp, CmpOp, ComputeDag, Cond, Expr, ReduceOp, StageKind, UnaryOp};
use crate::schedule::{Annotation, Attach, IterKind, Relation, ScheduleError, State};
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LoopKind {
    Serial,
    Parallel,
    Vectorized,
    Unrolled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    Input,
    Output,
    /// An intermediate stage computed at root: a heap buffer for the whole kernel.
    Global,
    /// A stage computed inside a consumer's loop: the region that loop reads.
    Local,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Buffer {
    pub name: String,
    /// The DAG stage it holds.
    pub stage: usize,
    /// Dimensions of the buffer (the region for local buffers).
    pub shape: Vec<i64>,
    /// Element stride of each dimension: row-major, except that a local buffer is laid out in
    /// the order its stage's loops walk it (see [`local_strides`]).
    pub strides: Vec<i64>,
    pub scope: Scope,
}

impl Buffer {
    pub fn elems(&self) -> i64 {
        self.shape.iter().product()
    }
}

/// A float value expression over buffers.
#[derive(Debug, Clone, PartialEq)]
pub enum VExpr {
    Const(f64),
    Load { buf: usize, index: Lin },
    Index(Lin),
    Unary(UnaryOp, Box<VExpr>),
    Binary(BinaryOp, Box<VExpr>, Box<VExpr>),
    Select(Box<VCond>, Box<VExpr>, Box<VExpr>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum VCond {
    Index(CmpOp, Lin, Lin),
    Value(CmpOp, Box<VExpr>, Box<VExpr>),
    And(Box<VCond>, Box<VCond>),
    Or(Box<VCond>, Box<VCond>),
    Not(Box<VCond>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Stmt {
    For {
        var: Var,
        extent: i64,
        kind: LoopKind,
        body: Vec<Stmt>,
    },
    /// Defines a region start (`const int lo = ...`).
    Let { var: Var, value: Lin },
    /// Declares a local buffer live for `body`.
    Alloc { buf: usize, body: Vec<Stmt> },
    /// Runs `body` when every `lhs < rhs`.
    Guard {
        conds: Vec<(Lin, i64)>,
        body: Vec<Stmt>,
    },
    /// `buf[index] = value`, or `buf[index] = combine(buf[index], value)` for a reduction.
    Store {
        buf: usize,
        index: Lin,
        value: VExpr,
        reduce: Option<ReduceOp>,
    },
}

/// A lowered kernel: buffers (arguments first: inputs in DAG order, then outputs) and a body.
#[derive(Debug, Clone, PartialEq)]
pub struct LoweredFunc {
    pub buffers: Vec<Buffer>,
    /// Argument buffers, in signature order.
    pub args: Vec<usize>,
    pub body: Vec<Stmt>,
    /// The state's DAG (it has the cache stages), for names.
    pub dag: ComputeDag,
    /// Extent of every loop variable, for code generation and features.
    pub loop_extents: VarMap<i64>,
    /// The state's name of every loop (`i.0` for a split part, `i@j` for a fusion).
    pub loop_names: VarMap<String>,
    /// Layout-free inputs the kernel reads in a packed layout (see [`LowerOptions`]).
    pub packed: Vec<PackedInput>,
}

/// Auto-unroll never makes more straight-line steps than this, whatever the stage's max step.
/// GCC's compile time grows superlinearly with an unrolled reduction (alias walking and PRE
/// over every copy): measured on one matmul tile, 128, 256 and 512 unrolled accumulations took
/// 1.6, 5.6 and 55 s to compile, against 0.1 s rolled, and 128 steps of a 4x16 tile 1.2-1.9 s.
/// A register tile of 4 rows by 4 vectors with the reduction unrolled by 4 needs 64.
pub const MAX_UNROLLED_STEPS: i64 = 64;

/// What lowering may decide beyond the schedule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LowerOptions {
    /// Inputs, by ordinal among the DAG's placeholders, whose memory layout the kernel may
    /// choose (constant weights, Ansor's layout-free placeholders): each is packed, once and
    /// outside the timed kernel, into the order its reading loop nest walks it.
    pub layout_free: Vec<usize>,
}

/// A layout-free input the kernel reads packed. Its argument buffer's shape is the packed one
/// (`digits`' extents); the caller fills the original tensor and packs it: packed element
/// `sum(t_d * stride_d)` (row-major over the digits) holds original flat element
/// `c + sum(coef_d * (lo_d + t_d))`, or 0 where that is outside the tensor (never read).
#[derive(Debug, Clone, PartialEq)]
pub struct PackedInput {
    /// The argument buffer.
    pub buf: usize,
    pub orig_shape: Vec<i64>,
    pub digits: Vec<PackDigit>,
    pub c: i64,
}

/// One dimension of a packed layout: an index atom (a loop variable, or a quotient or
/// remainder of a fused one) of the reader's access, with its coefficient in the original
/// flat index and its range `lo .. lo + extent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackDigit {
    pub coef: i64,
    pub lo: i64,
    pub extent: i64,
}

impl PackedInput {
    pub fn packed_elems(&self) -> i64 {
        self.digits.iter().map(|d| d.extent).product()
    }
}

/// Packed layouts larger than this multiple of the tensor are not worth their memory (an
/// input read through a sum of loop variables, `y + ry`, would be unrolled im2col-style).
const MAX_PACK_BLOWUP: i64 = 2;

/// What bound inference found for one stage.
#[derive(Debug, Clone)]
struct StageInfo {
    /// Extent of each axis (space then reduce): the region for an attached stage.
    root_ext: Vec<i64>,
    /// Start of each space axis (a `Lo` variable for attached stages, 0 at root).
    lo: Vec<Lin>,
    /// Definitions of the `Lo` variables.
    lo_def: Vec<Lin>,
    node_ext: Vec<i64>,
    /// Value of every node relative to the region start, in the stage's loop variables.
    node_val: Vec<Lin>,
    guards: Vec<(Lin, i64)>,
}

struct Lowerer<'a> {
    state: &'a State,
    dag: &'a ComputeDag,
    /// Bodies with inlined stages substituted.
    eff: Vec<Option<Expr>>,
    info: Vec<Option<StageInfo>>,
    buf_of: Vec<Option<usize>>,
    buffers: Vec<Buffer>,
    ranges: VarMap<(i64, i64)>,
    attached: HashMap<(usize, usize), Vec<usize>>,
}

fn invalid(msg: impl Into<String>) -> ScheduleError {
    ScheduleError::Invalid(msg.into())
}

/// Local regions up to this size live on the stack; larger ones on the heap.
pub const STACK_LIMIT_BYTES: i64 = 256 * 1024;

/// Runs the analyses lowering and samplers share: inlining, attachment checks, bound inference.
fn analyze(state: &State) -> Result<Lowerer<'_>, ScheduleError> {
    let dag = &state.dag;
    let n = dag.stages.len();
    let mut lw = Lowerer {
        state,
        dag,
        eff: vec![None; n],
        info: vec![None; n],
        buf_of: vec![None; n],
        buffers: vec![],
        ranges: VarMap::default(),
        attached: HashMap::new(),
    };
    lw.inline_bodies()?;
    lw.check_attachments()?;
    for s in (0..n).rev() {
        if lw.eff[s].is_some() {
            lw.infer(s)?;
        }
    }
    Ok(lw)
}

/// Lowers a state to a loop-nest program.
pub fn lower(state: &State) -> Result<LoweredFunc, ScheduleError> {
    lower_with(state, &LowerOptions::default())
}

/// Lowers a state, with layout-free inputs packed where the rewrite applies.
pub fn lower_with(state: &State, opts: &LowerOptions) -> Result<LoweredFunc, ScheduleError> {
    let dag = &state.dag;
    let n = dag.stages.len();
    let mut lw = analyze(state)?;
    let args = lw.make_buffers()?;
    let mut body = vec![];
    for s in 0..n {
        if lw.eff[s].is_some() && state.stages[s].attach == Attach::Root {
            body.extend(lw.emit_stage(s, false)?);
        }
    }
    let mut packed = vec![];
    let placeholders = dag.placeholders();
    for &o in &opts.layout_free {
        let Some(&p) = placeholders.get(o) else {
            return Err(invalid(format!(
                "layout-free input #{o}: the DAG has no such input"
            )));
        };
        let buf = lw.buf_of[p].expect("inputs have buffers");
        if let Some(pk) = lw.pack_layout(buf, &mut body) {
            packed.push(pk);
        }
    }
    // Intermediate root stages live for the whole kernel.
    for b in (0..lw.buffers.len()).rev() {
        if lw.buffers[b].scope == Scope::Global {
            body = vec![Stmt::Alloc { buf: b, body }];
        }
    }
    let mut loop_extents = VarMap::default();
    let mut loop_names = VarMap::default();
    for (s, info) in lw.info.iter().enumerate() {
        if let Some(info) = info {
            for &leaf in &state.stages[s].leaves {
                let v = Var::Loop {
                    stage: s,
                    node: leaf,
                };
                loop_extents.insert(v, info.node_ext[leaf]);
                loop_names.insert(v, state.stages[s].nodes[leaf].name.clone());
            }
        }
    }
    Ok(LoweredFunc {
        buffers: lw.buffers,
        args,
        body,
        dag: dag.clone(),
        loop_extents,
        loop_names,
        packed,
    })
}

impl Lowerer<'_> {
    /// Ansor's layout rewrite for one input: when the program reads `buf` at exactly one
    /// place, its index (region starts substituted, so it is in loop variables only) is a sum
    /// of atoms; the packed layout has one dimension per atom, ordered as their loops nest
    /// (outermost first; the larger coefficient first within one loop), so the innermost loop
    /// walks the packed buffer contiguously and each tile's slice of it is one block. The load
    /// is rewritten to the packed index. `None` (nothing changed) where it does not apply.
    fn pack_layout(&mut self, buf: usize, body: &mut [Stmt]) -> Option<PackedInput> {
        let mut sites = vec![];
        let mut stack = vec![];
        find_loads(body, buf, &mut stack, &mut sites);
        let [(index, nest)] = sites.as_slice() else {
            return None;
        };
        // Region starts may be defined through other region starts: substitute to a fixpoint.
        let mut lin = index.clone();
        for _ in 0..16 {
            let mut vs = vec![];
            lin.vars(&mut vs);
            if !vs.iter().any(|v| matches!(v, Var::Lo { .. })) {
                break;
            }
            lin = lin.substitute(&|v| match v {
                Var::Lo { stage, dim } => Some(self.info[stage].as_ref()?.lo_def[dim].clone()),
                _ => None,
            });
        }
        let mut digits = vec![];
        let range = |v: Var| self.ranges.get(&v).copied().unwrap_or((0, 0));
        for (atom, coef) in &lin.terms {
            let mut vs = vec![];
            atom.vars(&mut vs);
            let depth = vs
                .iter()
                .map(|v| nest.iter().position(|n| n == v))
                .collect::<Option<Vec<_>>>()?
                .into_iter()
                .max()?;
            let (lo, hi) = atom.range(&range);
            digits.push((depth, *coef, atom.clone(), lo, hi - lo + 1));
        }
        digits.sort_by_key(|d| (d.0, -d.1.abs()));
        let orig = &self.buffers[buf];
        let elems: i64 = digits
            .iter()
            .map(|d| d.4)
            .try_fold(1i64, |a, e| a.checked_mul(e))?;
        if elems > MAX_PACK_BLOWUP * orig.elems().max(1) {
            return None;
        }
        let mut new_index = Lin::constant(0);
        let mut stride = 1;
        for (_, _, atom, lo, ext) in digits.iter().rev() {
            new_index = new_index.add(&Lin::atom(atom.clone()).add_const(-lo).scale(stride));
            stride *= ext;
        }
        set_load_index(body, buf, &new_index);
        let pk = PackedInput {
            buf,
            orig_shape: orig.shape.clone(),
            digits: digits
                .iter()
                .map(|d| PackDigit {
                    coef: d.1,
                    lo: d.3,
                    extent: d.4,
                })
                .collect(),
            c: lin.c,
        };
        self.buffers[buf].shape = pk.digits.iter().map(|d| d.extent).collect();
        self.buffers[buf].strides = strides(&self.buffers[buf].shape);
        Some(pk)
    }

    fn inline_bodies(&mut self) -> Result<(), ScheduleError> {
        for (s, stage) in self.dag.stages.iter().enumerate() {
            let Some(body) = stage.body() else { continue };
            let mut err = None;
            let e = body.map_loads(&mut |t, idx| {
                if self.state.stages[t].attach == Attach::Inline {
                    match &self.eff[t] {
                        Some(b) => b.substitute_axes(idx),
                        None => {
                            err = Some(invalid(format!(
                                "inlined stage {} has no body",
                                self.dag.stages[t].name
                            )));
                            Expr::Const(0.0)
                        }
                    }
                } else {
                    Expr::Load(t, idx.to_vec())
                }
            });
            if let Some(e) = err {
                return Err(e);
            }
            self.eff[s] = Some(e);
        }
        // Inlined stages keep their body for substitution only; they get no loops.
        for (s, st) in self.state.stages.iter().enumerate() {
            if st.attach == Attach::Inline {
                self.eff[s] = None;
            }
        }
        Ok(())
    }

    fn check_attachments(&mut self) -> Result<(), ScheduleError> {
        let outputs = self.dag.outputs();
        let mut consumers: Vec<Vec<usize>> = vec![vec![]; self.dag.stages.len()];
        for (s, e) in self.eff.iter().enumerate() {
            if let Some(e) = e {
                e.visit_loads(&mut |t, _| {
                    if !consumers[t].contains(&s) {
                        consumers[t].push(s)
                    }
                });
            }
        }
        for (s, st) in self.state.stages.iter().enumerate() {
            let name = &self.dag.stages[s].name;
            match st.attach {
                Attach::Inline if outputs.contains(&s) => {
                    return Err(invalid(format!("output {name} cannot be inlined")));
                }
                Attach::At { stage: c, node } => {
                    if outputs.contains(&s) {
                        return Err(invalid(format!("output {name} must be computed at root")));
                    }
                    if consumers[s] != [c] {
                        return Err(invalid(format!(
                            "{name} is computed at {}, but is read by {:?}",
                            self.dag.stages[c].name,
                            consumers[s]
                                .iter()
                                .map(|&x| &self.dag.stages[x].name)
                                .collect::<Vec<_>>()
                        )));
                    }
                    if self.eff[c].is_none() {
                        return Err(invalid(format!(
                            "{name} is computed at {}, which has no loops",
                            self.dag.stages[c].name
                        )));
                    }
                    if !self.state.stages[c].leaves.contains(&node) {
                        return Err(invalid(format!(
                            "{name} is computed at a loop {} no longer has",
                            self.dag.stages[c].name
                        )));
                    }
                    self.attached.entry((c, node)).or_default().push(s);
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn range_of(&self) -> impl Fn(Var) -> (i64, i64) + '_ {
        |v| self.ranges.get(&v).copied().unwrap_or((0, 0))
    }

    /// Bound inference for stage `s`; its consumer (if attached) is already done.
    fn infer(&mut self, s: usize) -> Result<(), ScheduleError> {
        let stage = &self.dag.stages[s];
        let st = &self.state.stages[s];
        let n_space = stage.space().len();
        let mut root_ext: Vec<i64> = stage.axis_extents();
        let mut lo: Vec<Lin> = vec![Lin::constant(0); n_space];
        let mut lo_def = vec![];
        if let Attach::At { stage: c, node } = st.attach {
            let (lo_r, ext_r) = self.region(s, c, node)?;
            for d in 0..n_space {
                root_ext[d] = ext_r[d];
                // A constant start needs no variable.
                if lo_r[d].as_const().is_some() {
                    lo[d] = lo_r[d].clone();
                    continue;
                }
                let v = Var::Lo { stage: s, dim: d };
                let r = lo_r[d].range(&self.range_of());
                self.ranges.insert(v, r);
                lo[d] = Lin::var(v);
            }
            lo_def = lo_r;
        }
        // Extents forward through the relations.
        let mut node_ext = vec![0i64; st.nodes.len()];
        node_ext[..root_ext.len()].copy_from_slice(&root_ext);
        let mut guards: Vec<(Lin, i64)> = vec![];
        let mut split_guards = vec![];
        for rel in &st.relations {
            match rel {
                Relation::Split {
                    parent,
                    outs,
                    lengths,
                    inner_to_outer,
                } => {
                    let e = node_ext[*parent];
                    let prod: i64 = lengths.iter().product();
                    let rest = (e + prod - 1) / prod;
                    for (k, &o) in outs.iter().enumerate() {
                        node_ext[o] = if *inner_to_outer {
                            if k == 0 { rest } else { lengths[k - 1] }
                        } else if k < lengths.len() {
                            lengths[k]
                        } else {
                            rest
                        };
                    }
                    if rest * prod != e {
                        split_guards.push(*parent);
                    }
                }
                Relation::Fuse { ins, out } => {
                    node_ext[*out] = ins.iter().map(|&i| node_ext[i]).product();
                }
            }
        }
        let mut node_val = vec![Lin::constant(0); st.nodes.len()];
        for &l in &st.leaves {
            node_val[l] = Lin::var(Var::Loop { stage: s, node: l });
            self.ranges
                .insert(Var::Loop { stage: s, node: l }, (0, node_ext[l] - 1));
        }
        for rel in st.relations.iter().rev() {
            match rel {
                Relation::Split { parent, outs, .. } => {
                    let mut v = Lin::constant(0);
                    let mut stride = 1;
                    for &o in outs.iter().rev() {
                        v = v.add(&node_val[o].scale(stride));
                        stride *= node_ext[o];
                    }
                    node_val[*parent] = v;
                }
                Relation::Fuse { ins, out } => {
                    let mut stride = 1;
                    for (j, &i) in ins.iter().enumerate().rev() {
                        let q = node_val[*out].div(stride);
                        node_val[i] = if j == 0 { q } else { q.rem(node_ext[i]) };
                        stride *= node_ext[i];
                    }
                }
            }
        }
        for p in split_guards {
            guards.push((node_val[p].clone(), node_ext[p]));
        }
        // A region may reach past the tensor's edge where the consumer's tile does.
        for (d, l) in lo.iter().enumerate() {
            let (_, max_lo) = l.range(&self.range_of());
            if max_lo + root_ext[d] > stage.shape[d] {
                guards.push((l.add(&node_val[d]), stage.shape[d]));
            }
        }
        self.info[s] = Some(StageInfo {
            root_ext,
            lo,
            lo_def,
            node_ext,
            node_val,
            guards,
        });
        Ok(())
    }

    /// The region of stage `s` read inside loop `node` of its consumer `c`: a start per
    /// dimension (in `c`'s enclosing loops) and a constant extent.
    fn region(
        &self,
        s: usize,
        c: usize,
        node: usize,
    ) -> Result<(Vec<Lin>, Vec<i64>), ScheduleError> {
        let cinfo = self.info[c].as_ref().expect("consumers are inferred first");
        let cst = &self.state.stages[c];
        let pos = cst
            .leaves
            .iter()
            .position(|&l| l == node)
            .expect("checked in check_attachments");
        // (start, extent) of every node of c, with loops up to `pos` fixed.
        let mut r: Vec<(Lin, i64)> = vec![(Lin::constant(0), 1); cst.nodes.len()];
        for (k, &l) in cst.leaves.iter().enumerate() {
            r[l] = if k <= pos {
                (Lin::var(Var::Loop { stage: c, node: l }), 1)
            } else {
                (Lin::constant(0), cinfo.node_ext[l])
            };
        }
        for rel in cst.relations.iter().rev() {
            match rel {
                Relation::Split { parent, outs, .. } => {
                    let (mut lo, mut span, mut stride) = (Lin::constant(0), 0i64, 1i64);
                    for &o in outs.iter().rev() {
                        lo = lo.add(&r[o].0.scale(stride));
                        span += (r[o].1 - 1) * stride;
                        stride *= cinfo.node_ext[o];
                    }
                    r[*parent] = (lo, (span + 1).min(cinfo.node_ext[*parent]));
                }
                Relation::Fuse { ins, out } => {
                    let (flo, fext) = r[*out].clone();
                    let mut stride = 1;
                    for (j, &i) in ins.iter().enumerate().rev() {
                        let e = cinfo.node_ext[i];
                        r[i] = if fext == 1 {
                            let q = flo.div(stride);
                            (if j == 0 { q } else { q.rem(e) }, 1)
                        } else if j == 0 {
                            let extra = if flo.as_const() == Some(0) { 1 } else { 2 };
                            (flo.div(stride), e.min((fext - 1) / stride + extra))
                        } else {
                            (Lin::constant(0), e)
                        };
                        stride *= e;
                    }
                }
            }
        }
        // Absolute axis ranges of c.
        let n_axes = self.dag.stages[c].axis_extents().len();
        let axes: Vec<(Lin, i64)> = (0..n_axes)
            .map(|a| {
                (
                    cinfo.lo.get(a).map_or(r[a].0.clone(), |l| l.add(&r[a].0)),
                    r[a].1,
                )
            })
            .collect();
        let shape = &self.dag.stages[s].shape;
        let mut region: Option<Vec<(Lin, i64)>> = None;
        let mut visit = |idx: &[Affine]| {
            let this: Vec<(Lin, i64)> = idx.iter().map(|a| affine_range(a, &axes)).collect();
            region = Some(match region.take() {
                None => this,
                Some(prev) => prev
                    .into_iter()
                    .zip(this)
                    .enumerate()
                    .map(|(d, ((l1, e1), (l2, e2)))| match l2.sub(&l1).as_const() {
                        Some(k) => {
                            let start = k.min(0);
                            let end = e1.max(k + e2);
                            (if k < 0 { l2 } else { l1 }, end - start)
                        }
                        // Starts that differ by a non-constant: take the whole dimension.
                        None => (Lin::constant(0), shape[d]),
                    })
                    .collect(),
            });
        };
        self.eff[c]
            .as_ref()
            .expect("attached to a computed stage")
            .visit_loads(&mut |t, idx| {
                if t == s {
                    visit(idx)
                }
            });
        let region = region.ok_or_else(|| {
            invalid(format!(
                "{} does not read {}",
                self.dag.stages[c].name, self.dag.stages[s].name
            ))
        })?;
        let mut los = vec![];
        let mut exts = vec![];
        for (d, (lo, ext)) in region.into_iter().enumerate() {
            let (min_lo, _) = lo.range(&self.range_of());
            let lo = if min_lo < 0 {
                lo.maximum(&Lin::constant(0))
            } else {
                lo
            };
            los.push(lo);
            exts.push(ext.min(shape[d]));
        }
        Ok((los, exts))
    }

    fn make_buffers(&mut self) -> Result<Vec<usize>, ScheduleError> {
        let outputs = self.dag.outputs();
        let mut args = vec![];
        for scope in [Scope::Input, Scope::Output] {
            for (s, stage) in self.dag.stages.iter().enumerate() {
                let is = if scope == Scope::Input {
                    stage.is_placeholder()
                } else {
                    outputs.contains(&s)
                };
                if is {
                    self.buf_of[s] = Some(self.buffers.len());
                    args.push(self.buffers.len());
                    self.buffers.push(Buffer {
                        name: stage.name.clone(),
                        stage: s,
                        strides: strides(&stage.shape),
                        shape: stage.shape.clone(),
                        scope,
                    });
                }
            }
        }
        for (s, stage) in self.dag.stages.iter().enumerate() {
            if self.buf_of[s].is_some() || self.eff[s].is_none() {
                continue;
            }
            let info = self.info[s].as_ref().expect("inferred");
            let (shape, scope) = match self.state.stages[s].attach {
                Attach::Root => (stage.shape.clone(), Scope::Global),
                _ => (info.root_ext[..stage.shape.len()].to_vec(), Scope::Local),
            };
            let strides = match scope {
                Scope::Local => local_strides(&shape, &self.state.stages[s].leaves, s, info),
                _ => strides(&shape),
            };
            self.buf_of[s] = Some(self.buffers.len());
            self.buffers.push(Buffer {
                name: stage.name.clone(),
                stage: s,
                shape,
                strides,
                scope,
            });
        }
        for b in &self.buffers {
            if b.elems() >= i64::from(i32::MAX) {
                return Err(invalid(format!(
                    "buffer {} has {} elements; 32-bit indexing allows 2^31",
                    b.name,
                    b.elems()
                )));
            }
        }
        Ok(args)
    }

    /// Statements computing stage `s` (its region, when attached, with its local buffer).
    fn emit_stage(&self, s: usize, in_parallel: bool) -> Result<Vec<Stmt>, ScheduleError> {
        let st = &self.state.stages[s];
        let info = self.info[s].as_ref().expect("inferred");
        let stage = &self.dag.stages[s];
        let name = &stage.name;
        let leaves = &st.leaves;
        let n = leaves.len();
        let StageKind::Compute { reduce, .. } = &stage.kind else {
            unreachable!("placeholders have no loops")
        };

        // Loop kinds, with Ansor's auto-unroll: innermost loops whose product of extents stays
        // within the stage's max step are unrolled.
        let mut kinds = vec![LoopKind::Serial; n];
        let mut prod = 1i64;
        // Unrolling a body that calls libm (expf, tanhf, ...) only multiplies calls the
        // compiler cannot vectorize; measured, GCC then takes seconds to minutes per kernel.
        let calls = has_call(self.eff[s].as_ref().expect("computed stage"));
        let max_step = if calls {
            0
        } else {
            st.auto_unroll_max_step.min(MAX_UNROLLED_STEPS)
        };
        // Auto-unroll stops at the innermost loop that holds another stage: unrolling it would
        // copy that stage's whole nest, which the product of our own extents does not count.
        let mut holds_stage = false;
        for k in (0..n).rev() {
            let node = &st.nodes[leaves[k]];
            holds_stage |= self.attached.contains_key(&(s, leaves[k]));
            // A vectorized loop counts one step per 16 lanes (an AVX-512 register of f32), not
            // one per lane: TVM unrolls after vectorizing, so a register tile (4 rows of a
            // 64-wide vector loop) does unroll. Counting it as a single step, as TVM does, let
            // GCC take tens of seconds on 512 copies of a 64-wide body.
            let steps = if node.ann == Annotation::Vectorize {
                (info.node_ext[leaves[k]] + 15) / 16
            } else {
                info.node_ext[leaves[k]]
            };
            prod = if holds_stage {
                i64::MAX
            } else {
                prod.saturating_mul(steps)
            };
            kinds[k] = match node.ann {
                Annotation::Parallel => LoopKind::Parallel,
                Annotation::Vectorize => LoopKind::Vectorized,
                Annotation::Unroll => LoopKind::Unrolled,
                Annotation::None if max_step > 0 && prod <= max_step => LoopKind::Unrolled,
                Annotation::None => LoopKind::Serial,
            };
            if node.ann == Annotation::Vectorize {
                if k != n - 1 {
                    return Err(invalid(format!(
                        "{name}: a vectorized loop must be the innermost"
                    )));
                }
                if self.attached.contains_key(&(s, leaves[k])) {
                    return Err(invalid(format!(
                        "{name}: no stage can be computed inside a vectorized loop"
                    )));
                }
            }
        }
        let mut par_before = vec![in_parallel; n + 1];
        for k in 0..n {
            if kinds[k] == LoopKind::Parallel && par_before[k] {
                return Err(invalid(format!(
                    "{name}: a parallel loop is nested inside another parallel loop"
                )));
            }
            par_before[k + 1] = par_before[k] || kinds[k] == LoopKind::Parallel;
        }

        // Axis values (absolute) in the stage's loops.
        let n_space = stage.space().len();
        let axes: Vec<Lin> = (0..info.root_ext.len())
            .map(|a| {
                if a < n_space {
                    info.lo[a].add(&info.node_val[a])
                } else {
                    info.node_val[a].clone()
                }
            })
            .collect();
        let value = self.value(s, self.eff[s].as_ref().expect("computed stage"), &axes)?;
        let buf = self.buf_of[s].expect("buffers made");
        let strides = &self.buffers[buf].strides;
        let index = (0..n_space).fold(Lin::constant(0), |acc, d| {
            acc.add(&info.node_val[d].scale(strides[d]))
        });
        let store = Stmt::Store {
            buf,
            index: index.clone(),
            value,
            reduce: *reduce,
        };
        let mut body = guard(info.guards.clone(), vec![store]);

        let first_reduce = if reduce.is_some() {
            leaves
                .iter()
                .position(|&l| st.nodes[l].kind == IterKind::Reduce)
                .unwrap_or(n)
        } else {
            n
        };
        for k in (0..n).rev() {
            body = self.wrap_loop(s, k, kinds[k], par_before[k + 1], body)?;
            if k == first_reduce
                && let Some(op) = reduce
            {
                // The initialisation runs over the space loops inside the first reduction
                // loop, guarded only by conditions on those loops.
                let init = Stmt::Store {
                    buf,
                    index: index.clone(),
                    value: VExpr::Const(op.identity()),
                    reduce: None,
                };
                let space_vars: Vec<Var> = leaves[..]
                    .iter()
                    .enumerate()
                    .filter(|&(j, &l)| j < k || st.nodes[l].kind == IterKind::Space)
                    .map(|(_, &l)| Var::Loop { stage: s, node: l })
                    .collect();
                let conds = info
                    .guards
                    .iter()
                    .filter(|(e, _)| {
                        let mut vs = vec![];
                        e.vars(&mut vs);
                        vs.iter()
                            .all(|v| matches!(v, Var::Lo { .. }) || space_vars.contains(v))
                    })
                    .cloned()
                    .collect();
                let mut init_body = guard(conds, vec![init]);
                for j in (k..n).rev() {
                    if st.nodes[leaves[j]].kind == IterKind::Space {
                        let var = Var::Loop {
                            stage: s,
                            node: leaves[j],
                        };
                        init_body = vec![Stmt::For {
                            var,
                            extent: info.node_ext[leaves[j]],
                            kind: kinds[j],
                            body: init_body,
                        }];
                    }
                }
                init_body.extend(body);
                body = init_body;
            }
        }
        if let Attach::At { .. } = st.attach {
            body = vec![Stmt::Alloc { buf, body }];
            let lets: Vec<Stmt> = info
                .lo_def
                .iter()
                .enumerate()
                .filter(|(_, v)| v.as_const().is_none())
                .map(|(d, v)| Stmt::Let {
                    var: Var::Lo { stage: s, dim: d },
                    value: v.clone(),
                })
                .collect();
            body = lets.into_iter().chain(body).collect();
        }
        Ok(body)
    }

    /// Wraps `inner` in loop `k` of stage `s`, with the stages computed at that loop first.
    fn wrap_loop(
        &self,
        s: usize,
        k: usize,
        kind: LoopKind,
        in_parallel: bool,
        inner: Vec<Stmt>,
    ) -> Result<Vec<Stmt>, ScheduleError> {
        let st = &self.state.stages[s];
        let node = st.leaves[k];
        let info = self.info[s].as_ref().expect("inferred");
        let mut body = inner;
        if let Some(prods) = self.attached.get(&(s, node)) {
            // Producers are computed in DAG order at the start of the loop body; each one's
            // buffer stays live for the rest of the body.
            for &p in prods.iter().rev() {
                let mut stmts = self.emit_stage(p, in_parallel)?;
                // emit_stage ends with an Alloc scope holding the producer: the consumer's code
                // goes inside it, after the producer.
                match stmts.last_mut() {
                    Some(Stmt::Alloc { body: b, .. }) => b.extend(body),
                    _ => unreachable!("an attached stage is emitted in an Alloc scope"),
                }
                body = stmts;
            }
        }
        Ok(vec![Stmt::For {
            var: Var::Loop { stage: s, node },
            extent: info.node_ext[node],
            kind,
            body,
        }])
    }

    /// Lowers a body expression of stage `s` evaluated at absolute axis values `axes`.
    fn value(&self, s: usize, e: &Expr, axes: &[Lin]) -> Result<VExpr, ScheduleError> {
        Ok(match e {
            Expr::Const(c) => VExpr::Const(*c),
            Expr::Index(a) => VExpr::Index(affine_at(a, axes)),
            Expr::Load(t, idx) => {
                let buf = self.buf_of[*t].ok_or_else(|| {
                    invalid(format!(
                        "{} reads {}, which has no buffer",
                        self.dag.stages[s].name, self.dag.stages[*t].name
                    ))
                })?;
                let b = &self.buffers[buf];
                let strides = &b.strides;
                let mut index = Lin::constant(0);
                for (d, a) in idx.iter().enumerate() {
                    let mut v = affine_at(a, axes);
                    if b.scope == Scope::Local {
                        // Subtracting the region start's definition (rather than its variable)
                        // lets the tile offsets cancel: `C.local[i.1]`, not `C.local[i - lo]`.
                        let lo = &self.info[*t].as_ref().expect("inferred").lo_def[d];
                        v = v.sub(lo);
                    }
                    index = index.add(&v.scale(strides[d]));
                }
                VExpr::Load { buf, index }
            }
            Expr::Unary(o, a) => VExpr::Unary(*o, Box::new(self.value(s, a, axes)?)),
            Expr::Binary(o, a, b) => VExpr::Binary(
                *o,
                Box::new(self.value(s, a, axes)?),
                Box::new(self.value(s, b, axes)?),
            ),
            Expr::Select(c, a, b) => VExpr::Select(
                Box::new(self.cond(s, c, axes)?),
                Box::new(self.value(s, a, axes)?),
                Box::new(self.value(s, b, axes)?),
            ),
        })
    }

    fn cond(&self, s: usize, c: &Cond, axes: &[Lin]) -> Result<VCond, ScheduleError> {
        Ok(match c {
            Cond::Index(o, a, b) => VCond::Index(*o, affine_at(a, axes), affine_at(b, axes)),
            Cond::Value(o, a, b) => VCond::Value(
                *o,
                Box::new(self.value(s, a, axes)?),
                Box::new(self.value(s, b, axes)?),
            ),
            Cond::And(a, b) => VCond::And(
                Box::new(self.cond(s, a, axes)?),
                Box::new(self.cond(s, b, axes)?),
            ),
            Cond::Or(a, b) => VCond::Or(
                Box::new(self.cond(s, a, axes)?),
                Box::new(self.cond(s, b, axes)?),
            ),
            Cond::Not(a) => VCond::Not(Box::new(self.cond(s, a, axes)?)),
        })
    }
}

/// Every load of `buf` in `body`: its index and the loop variables around it, outermost first.
fn find_loads(body: &[Stmt], buf: usize, stack: &mut Vec<Var>, out: &mut Vec<(Lin, Vec<Var>)>) {
    for s in body {
        match s {
            Stmt::For { var, body, .. } => {
                stack.push(*var);
                find_loads(body, buf, stack, out);
                stack.pop();
            }
            Stmt::Alloc { body, .. } | Stmt::Guard { body, .. } => {
                find_loads(body, buf, stack, out)
            }
            Stmt::Let { .. } => {}
            Stmt::Store { value, .. } => visit_vexpr(value, &mut |e| {
                if let VExpr::Load { buf: b, index } = e
                    && *b == buf
                {
                    out.push((index.clone(), stack.clone()));
                }
            }),
        }
    }
}

fn visit_vexpr(e: &VExpr, f: &mut impl FnMut(&VExpr)) {
    f(e);
    match e {
        VExpr::Const(_) | VExpr::Load { .. } | VExpr::Index(_) => {}
        VExpr::Unary(_, a) => visit_vexpr(a, f),
        VExpr::Binary(_, a, b) => {
            visit_vexpr(a, f);
            visit_vexpr(b, f)
        }
        VExpr::Select(c, a, b) => {
            visit_vcond(c, f);
            visit_vexpr(a, f);
            visit_vexpr(b, f)
        }
    }
}

fn visit_vcond(c: &VCond, f: &mut impl FnMut(&VExpr)) {
    match c {
        VCond::Index(..) => {}
        VCond::Value(_, a, b) => {
            visit_vexpr(a, f);
            visit_vexpr(b, f)
        }
        VCond::And(a, b) | VCond::Or(a, b) => {
            visit_vcond(a, f);
            visit_vcond(b, f)
        }
        VCond::Not(a) => visit_vcond(a, f),
    }
}

/// Sets the index of every load of `buf` (there is one: see `pack_layout`).
fn set_load_index(body: &mut [Stmt], buf: usize, index: &Lin) {
    fn in_expr(e: &mut VExpr, buf: usize, index: &Lin) {
        match e {
            VExpr::Load { buf: b, index: i } if *b == buf => *i = index.clone(),
            VExpr::Const(_) | VExpr::Load { .. } | VExpr::Index(_) => {}
            VExpr::Unary(_, a) => in_expr(a, buf, index),
            VExpr::Binary(_, a, b) => {
                in_expr(a, buf, index);
                in_expr(b, buf, index)
            }
            VExpr::Select(c, a, b) => {
                in_cond(c, buf, index);
                in_expr(a, buf, index);
                in_expr(b, buf, index)
            }
        }
    }
    fn in_cond(c: &mut VCond, buf: usize, index: &Lin) {
        match c {
            VCond::Index(..) => {}
            VCond::Value(_, a, b) => {
                in_expr(a, buf, index);
                in_expr(b, buf, index)
            }
            VCond::And(a, b) | VCond::Or(a, b) => {
                in_cond(a, buf, index);
                in_cond(b, buf, index)
            }
            VCond::Not(a) => in_cond(a, buf, index),
        }
    }
    for s in body {
        match s {
            Stmt::For { body, .. } | Stmt::Alloc { body, .. } | Stmt::Guard { body, .. } => {
                set_load_index(body, buf, index)
            }
            Stmt::Let { .. } => {}
            Stmt::Store { value, .. } => in_expr(value, buf, index),
        }
    }
}

/// Whether evaluating `e` calls a math library function.
fn has_call(e: &Expr) -> bool {
    e.any_unary(&|op| !matches!(op, UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Relu))
}

fn guard(conds: Vec<(Lin, i64)>, body: Vec<Stmt>) -> Vec<Stmt> {
    if conds.is_empty() {
        body
    } else {
        vec![Stmt::Guard { conds, body }]
    }
}

/// Strides of a local buffer: its dimensions ordered as the stage's loops nest them (by the
/// innermost loop that moves each one; ties and untouched dimensions in their original order),
/// row-major over that order. A tile whose innermost loop is not the last dimension (a conv
/// accumulator vectorized over output channels) then still walks its accumulator
/// contiguously; GCC vectorizes and keeps in registers only contiguous, unit-stride
/// accumulators. Loops in the original order give the row-major layout.
fn local_strides(shape: &[i64], leaves: &[usize], s: usize, info: &StageInfo) -> Vec<i64> {
    let depth = |d: usize| {
        let mut vs = vec![];
        info.node_val[d].vars(&mut vs);
        vs.iter()
            .filter_map(|v| match *v {
                Var::Loop { stage, node } if stage == s => leaves.iter().position(|&l| l == node),
                _ => None,
            })
            .max()
    };
    let mut order: Vec<usize> = (0..shape.len()).collect();
    order.sort_by_key(|&d| (depth(d), d));
    let mut out = vec![0; shape.len()];
    let mut stride = 1;
    for &d in order.iter().rev() {
        out[d] = stride;
        stride *= shape[d];
    }
    out
}

/// Row-major strides of a shape.
pub fn strides(shape: &[i64]) -> Vec<i64> {
    let mut st = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        st[d] = st[d + 1] * shape[d + 1];
    }
    st
}

fn affine_at(a: &Affine, axes: &[Lin]) -> Lin {
    a.terms
        .iter()
        .fold(Lin::constant(a.offset), |acc, &(x, c)| {
            acc.add(&axes[x].scale(c))
        })
}

/// Start and extent of an affine index over axes given as (start, extent).
fn affine_range(a: &Affine, axes: &[(Lin, i64)]) -> (Lin, i64) {
    let mut lo = Lin::constant(a.offset);
    let mut span = 0;
    for &(x, c) in &a.terms {
        let (l, e) = &axes[x];
        if c >= 0 {
            lo = lo.add(&l.scale(c));
        } else {
            lo = lo.add(&l.add_const(e - 1).scale(c));
        }
        span += c.abs() * (e - 1);
    }
    (lo, span + 1)
}

/// Extents of the current loops of every stage, outermost first, as bound inference sees
/// them (an attached stage's loops cover its region): what a sampler needs to pick split
/// factors. Inlined stages and inputs have none.
pub fn loop_extents(state: &State) -> Result<Vec<Vec<i64>>, ScheduleError> {
    let lw = analyze(state)?;
    Ok(lw
        .info
        .iter()
        .enumerate()
        .map(|(s, i)| {
            i.as_ref().map_or_else(Vec::new, |i| {
                state.stages[s]
                    .leaves
                    .iter()
                    .map(|&l| i.node_ext[l])
                    .collect()
            })
        })
        .collect())
}
