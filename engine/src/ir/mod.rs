//! The tensor-expression IR: expressions over affine indices (`expr`), the compute DAG
//! (`dag`) and what each element type may compute (`types`).

pub mod dag;
pub mod expr;
mod types;

pub use dag::{Axis, ComputeDag, DagError, InputData, ReduceOp, Stage, StageKind};
pub use expr::{Affine, BinaryOp, CmpOp, Cond, DType, Expr, UnaryOp};
