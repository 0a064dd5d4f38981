//! What can be wrong with a model: each error names the node and its operator where there is
//! one, so that the command line's one line says what to fix.

/// A model that cannot be turned into tasks.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// Past [`crate::MAX_MODEL_BYTES`], found before parsing (its metadata, else a capped
    /// read: `/dev/zero` is not read until memory runs out).
    #[error(
        "{path} is {size}: an ONNX model file is at most {max} bytes (protobuf's 2 GiB limit; a \
         larger model keeps its weights in external data files)"
    )]
    TooLarge {
        path: String,
        /// `N bytes`, or `more than N bytes` when the file does not say its length.
        size: String,
        max: u64,
    },
    /// Not a decodable ModelProto: a truncated download, another file format.
    #[error("not a valid ONNX model (truncated or malformed): {0}")]
    Malformed(String),
    #[error(
        "input '{input}' dimension {dim} is dynamic ('{param}'): give it a value with --batch N \
         or --shape {input}=D0xD1x..."
    )]
    DynamicDim {
        input: String,
        dim: usize,
        param: String,
    },
    /// An input dimension fixed at 0 or less (some exporters write 0 for a dynamic one): not
    /// a size, and not a name to give a value to either.
    #[error(
        "input '{input}' dimension {dim} is {value}, not a size (a tensor with no elements, or \
         an exporter's mark for a dynamic dimension): give it a value with --shape \
         {input}=D0xD1x...{batch_hint}"
    )]
    NotASize {
        input: String,
        dim: usize,
        value: i64,
        /// ` or --batch N` for the first dimension.
        batch_hint: &'static str,
    },
    #[error("--shape {name}: {msg}")]
    BadShape { name: String, msg: String },
    /// A node the extraction cannot turn into a task or a shape it cannot know.
    #[error("node '{node}' ({op}): {msg}")]
    Node {
        node: String,
        op: String,
        msg: String,
    },
    /// An operator outside the supported list, when unsupported operators are errors.
    #[error("node '{node}' ({op}): unsupported operator: {reason}")]
    Unsupported {
        node: String,
        op: String,
        reason: String,
    },
    /// tract refused the graph (its message names the node).
    #[error("the model's graph: {0}")]
    Graph(String),
    #[error("the model yields no task to tune{0}")]
    NoTask(String),
}

impl ImportError {
    pub(crate) fn node(node: &crate::graph::Node, msg: impl Into<String>) -> ImportError {
        ImportError::Node {
            node: node.name.clone(),
            op: node.op.clone(),
            msg: msg.into(),
        }
    }
}
