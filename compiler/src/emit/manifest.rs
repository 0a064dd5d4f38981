//! `manifest.json`: how to build the library (compiler and flags), what it takes and returns,
//! its memory, and per ONNX node what runs it: a kernel (the task, the record or zero-shot
//! answer serving it, with its provenance and GFLOP/s), a view, a copy, or nothing (folded at
//! build time).

use super::header::Io;
use crate::error::CompileError;
use crate::program::NodeNote;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The manifest's version: a reader refuses another.
pub const FORMAT: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub name: String,
    pub model: String,
    pub compiler: String,
    pub compiler_version: String,
    pub cflags: Vec<String>,
    pub ldflags: Vec<String>,
    /// The library's file name in the directory (absent with `--no-compile`).
    pub library: Option<String>,
    pub weights: String,
    pub weights_bytes: u64,
    /// The weights are in the library too (`--embed-weights`): `NAME_create(NULL)` uses them.
    #[serde(default)]
    pub embedded_weights: bool,
    pub inputs: Vec<Io>,
    pub outputs: Vec<Io>,
    /// The arena's bytes, and the sum of every intermediate tensor's without reuse.
    pub arena_bytes: u64,
    pub intermediate_bytes: u64,
    pub packed_bytes: u64,
    pub tasks: Vec<TaskEntry>,
    pub nodes: Vec<NodeEntry>,
    /// The run's steps in order (`NAME_run_profiled` times each).
    pub steps: Vec<StepEntry>,
    /// OpenMP threads the kernels use until `set_num_threads`.
    pub threads: u32,
    /// The layout the f32 convolutions run in (`nchw`, `nhwc`): the tasks' layout.
    #[serde(default)]
    pub layout: String,
    /// How the build chose it, when it chose (a build's `auto`): each layout's tuned time.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub layout_choice: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskEntry {
    pub task: usize,
    pub label: String,
    pub workload_key: String,
    pub symbol: String,
    /// "" for a zero-shot answer (transferred from a neighbour, not measured on this workload).
    pub record_id: String,
    pub provenance: String,
    pub gflops: f64,
    /// FLOPs of one call: with `gflops`, the kernel's time as measured alone.
    pub flops: u64,
    pub calls: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepEntry {
    /// "kernel", "copy", "layout" (a copy into or out of a kernel's layout at a region's edge),
    /// "fill", "gather", "quantize", "dequantize", "dynamic_quantize", "zero_point_shift" or
    /// "scalar".
    pub how: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub task: Option<usize>,
    pub nodes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeEntry {
    pub node: String,
    pub op: String,
    pub how: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub task: Option<usize>,
}

impl From<&NodeNote> for NodeEntry {
    fn from(n: &NodeNote) -> Self {
        NodeEntry {
            node: n.node.clone(),
            op: n.op.clone(),
            how: n.how.to_string(),
            task: n.task,
        }
    }
}

impl Manifest {
    /// The file's text.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).expect("plain data") + "\n"
    }

    /// Writes `dir/manifest.json` (through a temporary file and a rename).
    pub fn write(&self, dir: &Path) -> Result<(), CompileError> {
        crate::files::write_whole(&dir.join("manifest.json"), self.json().as_bytes())
    }

    /// Reads `dir/manifest.json`, refusing another format.
    pub fn read(dir: &Path) -> Result<Manifest, CompileError> {
        let path = dir.join("manifest.json");
        let text = std::fs::read_to_string(&path).map_err(|source| CompileError::Io {
            what: "reading",
            path: path.display().to_string(),
            source,
        })?;
        let manifest: Manifest = serde_json::from_str(&text).map_err(|e| {
            CompileError::Library(format!(
                "{}: not a tunehub model manifest: {e}",
                path.display()
            ))
        })?;
        if manifest.format != FORMAT {
            return Err(CompileError::Library(format!(
                "{}: manifest format {}, this tunehub reads {FORMAT}: build the model again",
                path.display(),
                manifest.format
            )));
        }
        Ok(manifest)
    }
}
