//! The untyped syntax tree the parser builds and lowering reads.

use crate::ir::{BinaryOp, CmpOp, DType, ReduceOp};

/// Largest integer constant or coefficient in an index expression, and largest extent. Small
/// enough that no range computation anywhere in the engine can overflow an `i64`.
pub(super) const MAX_INDEX_INT: i64 = 1 << 24;

pub(super) struct Node {
    pub(super) kind: NodeKind,
    /// Offset of the token that identifies the node (a name, a literal, an operator): where
    /// errors about that token point.
    pub(super) pos: usize,
    /// Offset of the node's first token: where errors about the whole node point.
    pub(super) start: usize,
    pub(super) depth: usize,
}

pub(super) enum NodeKind {
    Num {
        text: String,
        value: f64,
        int: Option<i64>,
    },
    Var(String),
    Read(String, Vec<Node>),
    Call(String, Vec<Node>),
    Neg(Box<Node>),
    Bin(BinaryOp, Box<Node>, Box<Node>),
    Cmp(CmpOp, Box<Node>, Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Not(Box<Node>),
}

impl NodeKind {
    /// Children in source order.
    pub(super) fn children(&self) -> Vec<&Node> {
        match self {
            NodeKind::Num { .. } | NodeKind::Var(_) => vec![],
            NodeKind::Read(_, args) | NodeKind::Call(_, args) => args.iter().collect(),
            NodeKind::Neg(a) | NodeKind::Not(a) => vec![a],
            NodeKind::Bin(_, a, b)
            | NodeKind::Cmp(_, a, b)
            | NodeKind::And(a, b)
            | NodeKind::Or(a, b) => vec![a, b],
        }
    }
}

pub(super) struct InputDecl {
    pub(super) name: String,
    pub(super) pos: usize,
    pub(super) shape: Vec<i64>,
    /// Its element type (`input u8 X[...]`; f32 unless said).
    pub(super) dtype: DType,
}

pub(super) struct ComputeStmt {
    pub(super) name: String,
    pub(super) pos: usize,
    /// Its element type (`u8 Y[i] = ...`; f32 unless said).
    pub(super) dtype: DType,
    pub(super) lhs: Vec<(String, usize)>,
    pub(super) reduce: Option<ReduceOp>,
    pub(super) op: &'static str,
    pub(super) op_pos: usize,
    pub(super) body: Node,
    pub(super) bounds: Vec<Bound>,
}

/// `var < extent` from a where clause.
pub(super) struct Bound {
    pub(super) var: String,
    pub(super) pos: usize,
    pub(super) extent: i64,
}

pub(super) enum Stmt {
    Input(InputDecl),
    Compute(ComputeStmt),
}

impl Stmt {
    pub(super) fn name_pos(&self) -> (&str, usize) {
        match self {
            Stmt::Input(d) => (&d.name, d.pos),
            Stmt::Compute(c) => (&c.name, c.pos),
        }
    }
}
