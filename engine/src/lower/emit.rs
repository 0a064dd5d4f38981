//! Emission: buffers for the stages that need one, and each stage's loop nest (tiles, compute
//! locations, annotations, guards) with its body in buffer loads.

use super::bounds::{Lowerer, StageInfo, invalid};
use super::iexpr::{Lin, Var};
use super::program::{Buffer, LoopKind, Scope, Stmt, VCond, VExpr, strides};
use crate::ir::{Affine, Cond, Expr, StageKind, UnaryOp};
use crate::schedule::{Annotation, Attach, IterKind, ScheduleError};

/// Auto-unroll never makes more straight-line steps than this, whatever the stage's max step.
/// GCC's compile time grows superlinearly with an unrolled reduction (alias walking and PRE
/// over every copy): measured on one matmul tile, 128, 256 and 512 unrolled accumulations took
/// 1.6, 5.6 and 55 s to compile, against 0.1 s rolled, and 128 steps of a 4x16 tile 1.2-1.9 s.
/// A register tile of 4 rows by 4 vectors with the reduction unrolled by 4 needs 64.
pub const MAX_UNROLLED_STEPS: i64 = 64;

/// Local regions up to this size live on the stack; larger ones on the heap.
pub const STACK_LIMIT_BYTES: i64 = 256 * 1024;

/// The reduction iterations that may sit below a vectorized loop: the 4 products an 8-bit
/// dot-product instruction sums per lane.
const MAX_BELOW_VECTOR: i64 = 4;

impl Lowerer<'_> {
    pub(super) fn make_buffers(&mut self) -> Result<Vec<usize>, ScheduleError> {
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
                        dtype: stage.dtype,
                        data: stage.data,
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
                dtype: stage.dtype,
                data: stage.data,
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
    pub(super) fn emit_stage(
        &self,
        s: usize,
        in_parallel: bool,
    ) -> Result<Vec<Stmt>, ScheduleError> {
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
                // Innermost, but for the few products a dot-product instruction sums per lane
                // (an integer reduction's 4 innermost: see `codegen::dot`).
                let below: Vec<_> = leaves[k + 1..].iter().map(|&l| &st.nodes[l]).collect();
                let dot = below.iter().all(|b| b.kind == IterKind::Reduce)
                    && leaves[k + 1..]
                        .iter()
                        .map(|&l| info.node_ext[l])
                        .product::<i64>()
                        <= MAX_BELOW_VECTOR;
                if !dot {
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

fn affine_at(a: &Affine, axes: &[Lin]) -> Lin {
    a.terms
        .iter()
        .fold(Lin::constant(a.offset), |acc, &(x, c)| {
            acc.add(&axes[x].scale(c))
        })
}
