//! Ansor (TVM's `auto_scheduler`, 0.19) records for the library operators whose DAG is one to
//! one a TE definition: matmul, batch_matmul, dense, conv2d_nchw, conv2d_nhwc and
//! depthwise_conv2d_nchw.
//!
//! The TE definitions targeted are registered by name (`auto_scheduler.register_workload`),
//! one function per operator, `tunehub.<op>(params..., layout_free)`: the operator's
//! parameters in the library's order with every default written out, then the layout-free
//! inputs joined by `,` (`""` for none). Each builds the same stages as `ops`, in the same
//! order, with the same axes (space then reduction, in the library's order); a padding stage
//! exists only when `pad > 0`. `bench/ansor_apply.py` holds them: a TVM user registers those.
//!
//! Layout-free (packed) weights: the `layout_free` argument keeps records measured on packed
//! weights apart (their costs are not those of the same schedule unpacked), but the
//! definitions mark no `layout_free_placeholders`: TVM builds the schedule on the original
//! layouts. Its layout rewrite gave wrong outputs for some of our tile orders (outer tiles
//! reordered), so it is not asked for (layout rewrite option 0 in every record).
//!
//! - [`key`]: workload keys (`["tunehub.matmul", 64, 64, 64, ""]`) to and from operators.
//! - [`stages`]: Ansor's stage numbering of a DAG (its topological order, placeholders
//!   included) and ours, kept in step as cache-write inserts stages.
//! - [`steps`]: our steps to Ansor's record steps and back (FSP and FFSP read as splits).

pub mod key;
pub mod stages;
pub mod steps;

pub use key::AnsorWorkload;
pub use stages::StageMap;
pub use steps::{from_ansor, to_ansor};

/// The log version TVM 0.19 writes (`AUTO_SCHEDULER_LOG_VERSION`).
pub const LOG_VERSION: &str = "v0.6";

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnsorError {
    /// The workload key names no operator this mapping covers.
    #[error("workload key {key}: {msg}")]
    Key { key: String, msg: String },
    /// The workload is not one of the operators with a TE twin.
    #[error("{0}")]
    Unsupported(String),
    /// A step that does not map, by its index in the step list and its code.
    #[error("step {index} (\"{code}\"): {msg}")]
    Step {
        index: usize,
        code: String,
        msg: String,
    },
}
