//! Lowering: a schedule's loop state becomes a loop-nest program over flat buffers.
//!
//! Bound inference works as Ansor's InferBound does on CPU: a stage computed at a loop of its
//! consumer holds only the region the consumer reads inside that loop. Because index
//! expressions are affine and splits are affine in their loops, each region is an interval per
//! dimension whose start is an expression of the enclosing loops and whose extent is a constant,
//! so local buffers have static sizes and loops static extents. Loops that overshoot their
//! axis (non-divisible splits, regions that reach past the tensor's edge) are guarded.
//!
//! One step per module: `bounds` (the analysis), `emit` (buffers and loop nests) and `pack`
//! (layout-free inputs), over the program types of `program` and the index expressions of
//! [`iexpr`].

mod bounds;
mod emit;
pub mod iexpr;
mod pack;
mod program;

pub use bounds::loop_extents;
pub use emit::{MAX_UNROLLED_STEPS, STACK_LIMIT_BYTES};
pub use iexpr::{Atom, Lin, Var, VarMap};
pub use program::{
    Buffer, LoopKind, LoweredFunc, PackDigit, PackedInput, Scope, Stmt, VCond, VExpr, strides,
};

use crate::schedule::{Attach, ScheduleError, State};
use bounds::{analyze, invalid};

/// What lowering may decide beyond the schedule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LowerOptions {
    /// Inputs, by ordinal among the DAG's placeholders, whose memory layout the kernel may
    /// choose (constant weights, Ansor's layout-free placeholders): each is packed, once and
    /// outside the timed kernel, into the order its reading loop nest walks it.
    pub layout_free: Vec<usize>,
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
