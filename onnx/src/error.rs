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
