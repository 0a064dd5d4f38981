//! Whole networks: an ONNX model's tuning tasks, extracted as Ansor's task extraction does.
//! tract-onnx parses the model and infers its shapes; the extraction walks the nodes, fuses
//! each anchor (convolution, matrix product, pooling, softmax, layer norm) with the elementwise
//! nodes after it, and writes each group as a workload of tunehub's text form. Groups with the
//! same workload key are one task, weighted by how often they occur.
//!
//! # Layout
//!
//! - [`shapes`]: values for dynamic input dimensions (`--batch`, `--shape`).
//! - [`graph`]: the nodes from the protobuf, the shapes from tract.
//! - [`classify`]: anchor, elementwise, glue or unsupported, per operator.
//! - [`fuse`]: groups of nodes (anchor + epilogue; elementwise chains).
//! - [`library`]: a group as a library operator (an `OpSpec` with the model's constant weights
//!   as its layout-free inputs), when one fits; [`workload`]: as text form.
//! - [`tasks`]: the deduplicated, weighted task list.
//! - [`error`]: what can be wrong with a model.
//! - [`builder`]: models built in code (tests, benchmarks); [`nets`]: the networks built so.

pub mod builder;
pub mod classify;
pub mod error;
pub mod fuse;
pub mod graph;
pub mod library;
pub mod nets;
pub mod shapes;
pub mod tasks;
pub mod workload;

pub use error::ImportError;
pub use shapes::InputShapes;
pub use tasks::{NetTask, Skipped, TaskList};

/// The protobuf types of ONNX (tract-onnx's), for building models in tests and tools.
pub use tract_onnx::pb;

use std::path::Path;

/// The tasks of a model in memory.
pub fn extract(bytes: &[u8], shapes: &InputShapes, strict: bool) -> Result<TaskList, ImportError> {
    let g = graph::Graph::load(bytes, shapes, None)?;
    tasks::extract(&g, strict)
}

/// The tasks of a model file (external weight files are looked for beside it).
pub fn extract_file(
    path: &Path,
    shapes: &InputShapes,
    strict: bool,
) -> Result<TaskList, ImportError> {
    let bytes = std::fs::read(path).map_err(|source| ImportError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let dir = path.parent().and_then(Path::to_str);
    let g = graph::Graph::load(&bytes, shapes, dir)?;
    tasks::extract(&g, strict)
}

/// Whether a command-line argument names an ONNX model rather than an operator.
pub fn is_model_path(arg: &str) -> bool {
    arg.ends_with(".onnx") && !arg.contains('(')
}
