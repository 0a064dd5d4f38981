//! tunehub's engine: the tensor-expression IR, the operator library and its text form, targets,
//! schedules as replayable steps, lowering to a loop nest, C code generation, and local build
//! and verified measurement. It knows nothing of gRPC or SQL: the server and the worker build
//! on it.

pub mod codegen;
pub mod data;
pub mod ir;
pub mod lower;
pub mod measure;
pub mod ops;
pub mod reference;
pub mod sample;
pub mod schedule;
pub mod search;
pub mod target;
pub mod task;
pub mod text;
