//! tunehub's engine: the tensor-expression IR, the operator library and its text form, targets,
//! schedules as replayable steps, lowering to a loop nest, C code generation, and local build
//! and verified measurement. It knows nothing of gRPC or SQL: the server and the worker build
//! on it.
//!
//! # Layout
//!
//! - [`ir`]: the tensor-expression IR, expressions over affine indices and the compute DAG.
//! - [`interchange`]: records other tools read: TVM auto_scheduler (Ansor) logs.
//! - [`ops`]: the operator library (matmul, conv2d, softmax, ...) and `OpSpec`, an operator
//!   with its parameters and options as its text names it, parsed once.
//! - [`text`]: the text form, a few lines of source parsed into a DAG.
//! - [`target`]: the device kernels are compiled for and run on.
//! - [`schedule`]: schedules as replayable step lists, and the loop state they build.
//! - [`lower`]: a loop state lowered to a loop nest over flat buffers.
//! - [`codegen`]: C source from a lowered program, and the kernel's arguments.
//! - [`data`]: deterministic input data, the same in Rust and in the C harness.
//! - [`reference`]: the reference interpreter every measured kernel is checked against.
//! - [`measure`]: build and verified measurement in bounded child processes.
//! - [`task`]: a tuning task, one workload with its reference outputs.
//! - [`package`]: linkable kernels (named, with their calling contract) and kernel packs.
//! - [`sample`]: a random sampler of valid schedules, for property tests.
//! - [`search`]: Ansor's search (sketches, annotation, evolution, task scheduling).
//! - [`transfer`]: reuse across shapes: a workload's extent-free structure, and schedules
//!   carried to other extents.
//! - [`par`]: data parallelism on scoped threads.

pub mod codegen;
pub mod data;
pub mod interchange;
pub mod ir;
pub mod lower;
pub mod measure;
pub mod ops;
pub mod package;
pub mod par;
pub mod reference;
pub mod sample;
pub mod schedule;
pub mod search;
pub mod target;
pub mod task;
pub mod text;
pub mod transfer;
