//! The tensor-expression IR: expressions over affine indices and the compute DAG.

pub mod dag;
pub mod expr;

pub use dag::{Axis, ComputeDag, DagError, ReduceOp, Stage, StageKind};
pub use expr::{Affine, BinaryOp, CmpOp, Cond, DType, Expr, UnaryOp};
