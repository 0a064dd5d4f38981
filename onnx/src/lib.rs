//! Whole networks: an ONNX model's tuning tasks, extracted as Ansor's task extraction does.
//! tract-onnx parses the model and infers its shapes; the extraction walks the nodes, fuses
//! each anchor (convolution, matrix product, pooling, softmax, layer norm) with the elementwise
//! nodes after it, and writes each group as a workload of tunehub's text form. Groups with the
//! same workload key are one task, weighted by how often they occur.
//!
//! # Layout
//!
//! - [`shapes`]: values for dynamic input dimensions (`--batch`, `--shape`).
//! - [`graph`]: the nodes from the protobuf, the shapes from tract; `qoperator`: a QOperator
//!   model's `QLinearConv` / `QLinearMatMul` read as the QDQ form they are defined by.
//! - [`classify`]: anchor, elementwise, glue or unsupported, per operator; [`operands`]: a
//!   matrix product whose operand shapes do not multiply, named.
//! - [`fuse`]: groups of nodes (anchor + epilogue; elementwise chains); [`quantized`]: a QDQ
//!   model's anchors and elementwise chains between `DequantizeLinear` and `QuantizeLinear`,
//!   in integer forms;
//!   [`requantization`]: the constants a build gives such an anchor's kernel; [`integer`]: a
//!   dynamically quantized model's `MatMulInteger` / `ConvInteger`, and the weight sums its
//!   run-time data zero point corrects.
//! - [`library`]: a group as a library operator (an `OpSpec` with the model's constant weights
//!   as its layout-free inputs), when one fits; [`workload`]: as text form; [`window`]: a
//!   window operator's attributes as the library's window.
//! - [`layout`]: the layout the f32 convolutions' tasks are written in (NCHW, NHWC, or NHWC
//!   with 3x3 stride-1 convolutions by [`winograd`]'s minimal filtering: three tasks each);
//!   [`choice`]: the form of each convolution chosen by its tuned kernels.
//! - [`tasks`]: the deduplicated, weighted task list, and each group as a call of its task;
//!   [`operand`]: where a call's inputs come from (a tensor, a folded batch norm).
//! - [`error`]: what can be wrong with a model; [`reference`]: tract running it, the
//!   reference a compiled model is checked against.
//! - [`builder`]: models built in code (tests, benchmarks); [`nets`]: the networks built so.

pub mod builder;
pub mod choice;
pub mod classify;
pub mod error;
pub mod fuse;
pub mod graph;
pub mod integer;
pub mod layout;
pub mod library;
pub mod nets;
pub mod operand;
pub mod operands;
mod qoperator;
pub mod quantized;
pub mod reference;
pub mod requantization;
pub mod shapes;
pub mod tasks;
pub mod window;
pub mod winograd;
pub mod workload;

pub use error::ImportError;
pub use layout::Layout;
pub use operand::{Operand, Operands, QuantPart};
pub use shapes::InputShapes;
pub use tasks::{Call, Extraction, NetTask, Skipped, TaskList};

/// The protobuf types of ONNX (tract-onnx's), for building models in tests and tools.
pub use tract_onnx::pb;

use std::path::Path;

/// The tasks of a model in memory.
pub fn extract(
    bytes: &[u8],
    shapes: &InputShapes,
    how: &Extraction,
) -> Result<TaskList, ImportError> {
    let g = graph::Graph::load(bytes, shapes, None)?;
    tasks::extract(&g, how)
}

/// The largest model file read: protobuf cannot encode a message of 2 GiB or more, so no ONNX
/// model file is larger (bigger models keep their weights in external data files). A server's
/// `Jobs.SubmitModel` takes at most this too, and less under its message limit
/// (`max_model_bytes` in the server's `api::model`): the file travels in one gRPC message there.
pub const MAX_MODEL_BYTES: u64 = i32::MAX as u64;

/// The tasks of a model file (external weight files are looked for beside it).
pub fn extract_file(
    path: &Path,
    shapes: &InputShapes,
    how: &Extraction,
) -> Result<TaskList, ImportError> {
    let bytes = read_model(path)?;
    let dir = path.parent().and_then(Path::to_str);
    let g = graph::Graph::load(&bytes, shapes, dir)?;
    tasks::extract(&g, how)
}

/// A model file's bytes, at most [`MAX_MODEL_BYTES`]: a regular file's length is looked at
/// before reading, and anything else (a pipe, a device) is read with that cap.
pub fn read_model(path: &Path) -> Result<Vec<u8>, ImportError> {
    use std::io::Read;
    let shown = || path.display().to_string();
    let io = |source| ImportError::Io {
        path: shown(),
        source,
    };
    let too_large = |size: String| ImportError::TooLarge {
        path: shown(),
        size,
        max: MAX_MODEL_BYTES,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if meta.is_file() && meta.len() > MAX_MODEL_BYTES {
        return Err(too_large(format!("{} bytes", meta.len())));
    }
    let mut bytes = Vec::with_capacity(if meta.is_file() {
        meta.len() as usize
    } else {
        0
    });
    file.take(MAX_MODEL_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_MODEL_BYTES {
        return Err(too_large(format!("more than {MAX_MODEL_BYTES} bytes")));
    }
    Ok(bytes)
}

/// Whether a command-line argument names an ONNX model rather than an operator.
pub fn is_model_path(arg: &str) -> bool {
    arg.ends_with(".onnx") && !arg.contains('(')
}
