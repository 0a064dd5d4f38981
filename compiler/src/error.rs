//! What can stop a model from compiling, running or matching its reference. Each names the
//! node, the task or the file to look at.

#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    #[error(transparent)]
    Import(#[from] tunehub_onnx::ImportError),
    /// A node a compiled model cannot run yet.
    #[error("node '{node}' ({op}): {msg}")]
    Node {
        node: String,
        op: String,
        msg: String,
    },
    /// A kernel that does not fit the task it was given for (inputs from the service are
    /// checked as any input).
    #[error("task {task} ({label}): {msg}")]
    Kernel {
        task: usize,
        label: String,
        msg: String,
    },
    #[error("{0}")]
    BadName(String),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: String,
        source: std::io::Error,
    },
    /// The C compiler refused the library (its diagnostics, shortened).
    #[error("compiling {path} failed ({command}):\n{stderr}")]
    Cc {
        path: String,
        command: String,
        stderr: String,
    },
    /// The built library could not be loaded or run.
    #[error("{0}")]
    Library(String),
    /// The built model's output differs from the reference's.
    #[error("output '{output}' differs from the reference (tract): {detail}")]
    Mismatch { output: String, detail: String },
}

impl CompileError {
    pub(crate) fn node(node: &tunehub_onnx::graph::Node, msg: impl Into<String>) -> CompileError {
        CompileError::Node {
            node: node.name.clone(),
            op: node.op.clone(),
            msg: msg.into(),
        }
    }
}
