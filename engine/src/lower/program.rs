//! The lowered program: flat buffers and a loop nest over them, what code generation and the
//! cost model's features read.

use super::iexpr::{Lin, Var, VarMap};
use crate::ir::{BinaryOp, CmpOp, ComputeDag, DType, InputData, ReduceOp, UnaryOp};

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
    /// Its element type (the stage's).
    pub dtype: DType,
    /// An input's check data (the stage's).
    pub data: InputData,
    /// Dimensions of the buffer (the region for local buffers).
    pub shape: Vec<i64>,
    /// Element stride of each dimension: row-major, except that a local buffer is laid out in
    /// the order its stage's loops walk it (see `emit::local_strides`).
    pub strides: Vec<i64>,
    pub scope: Scope,
}

impl Buffer {
    pub fn elems(&self) -> i64 {
        self.shape.iter().product()
    }
}

/// A value expression over buffers: f32, or i32 in an integer stage's store.
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
    /// Layout-free inputs the kernel reads in a packed layout (see [`super::LowerOptions`]).
    pub packed: Vec<PackedInput>,
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

/// Row-major strides of a shape.
pub fn strides(shape: &[i64]) -> Vec<i64> {
    let mut st = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        st[d] = st[d + 1] * shape[d + 1];
    }
    st
}
