//! The program a compiled model runs: every tensor it touches, where each lives (the arena, the
//! weights file, or a view of another), and the steps that compute them in an order that
//! respects their dependencies. `lowering` builds it from the graph, its calls (one per fused
//! group) and one kernel per task.

use tunehub_engine::package::Kernel;

pub type ValueId = usize;

/// One tensor of the run.
#[derive(Debug, Clone)]
pub struct Value {
    pub name: String,
    pub shape: Vec<i64>,
    pub storage: Storage,
}

impl Value {
    pub fn elements(&self) -> i64 {
        self.shape.iter().product()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// A slot of the arena (an activation, a model input or output): the memory plan's.
    Arena,
    /// The same elements, in the same order, as another value (Reshape, Flatten, Squeeze...).
    View(ValueId),
    /// In the weights file: index into [`Program::constants`].
    Constant(usize),
}

/// A constant stored in the weights file.
#[derive(Debug, Clone)]
pub struct Constant {
    /// What it is (a tensor's name, or a folded batch norm's parts).
    pub key: String,
    pub data: Vec<f32>,
}

/// A weight a kernel reads packed: written once by `function` when the model is created.
#[derive(Debug, Clone, PartialEq)]
pub struct Packed {
    pub constant: usize,
    pub function: String,
    pub elements: i64,
}

/// What a kernel argument points at.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arg {
    Value(ValueId),
    Packed(usize),
}

#[derive(Debug, Clone)]
pub struct KernelCall {
    pub symbol: String,
    pub task: usize,
    /// In the kernel's order; the output's is `output`.
    pub args: Vec<Arg>,
    pub output: ValueId,
    /// The ONNX nodes it runs.
    pub nodes: Vec<String>,
}

/// `dst[dst_offset + sum(i_d * dst_strides[d])] = src[src_offset + sum(i_d * src_strides[d])]`
/// over `shape`: transposes, slices, concatenations, splits, broadcasts and pads are all this.
#[derive(Debug, Clone)]
pub struct Copy {
    pub dst: ValueId,
    pub dst_offset: i64,
    pub dst_strides: Vec<i64>,
    pub src: ValueId,
    pub src_offset: i64,
    pub src_strides: Vec<i64>,
    pub shape: Vec<i64>,
}

/// `dst[o, j, i] = src[o, indices[j], i]` for `o < outer`, `i < inner`; `src` has `axis`
/// entries on the gathered axis.
#[derive(Debug, Clone)]
pub struct Gather {
    pub dst: ValueId,
    pub src: ValueId,
    pub outer: i64,
    pub axis: i64,
    pub inner: i64,
    pub indices: Vec<i64>,
}

#[derive(Debug, Clone)]
pub enum Step {
    Kernel(KernelCall),
    Copy(Copy),
    Fill { dst: ValueId, value: f32 },
    Gather(Gather),
}

impl Step {
    /// The values it reads.
    pub fn reads(&self) -> Vec<ValueId> {
        match self {
            Step::Kernel(k) => k
                .args
                .iter()
                .filter_map(|a| match a {
                    Arg::Value(v) if *v != k.output => Some(*v),
                    _ => None,
                })
                .collect(),
            Step::Copy(c) => vec![c.src],
            Step::Fill { .. } => vec![],
            Step::Gather(g) => vec![g.src],
        }
    }

    /// The value it writes.
    pub fn writes(&self) -> ValueId {
        match self {
            Step::Kernel(k) => k.output,
            Step::Copy(c) => c.dst,
            Step::Fill { dst, .. } => *dst,
            Step::Gather(g) => g.dst,
        }
    }
}

/// What became of one ONNX node (the manifest's per-node entry).
#[derive(Debug, Clone, serde::Serialize)]
pub struct NodeNote {
    pub node: String,
    pub op: String,
    /// "kernel" (with `task`), "view", "copy", "gather", or "folded" (computed at build time).
    pub how: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<usize>,
}

#[derive(Debug, Clone, Default)]
pub struct Program {
    pub values: Vec<Value>,
    pub constants: Vec<Constant>,
    pub packed: Vec<Packed>,
    pub steps: Vec<Step>,
    /// The model's inputs and outputs, in its order.
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<ValueId>,
    pub nodes: Vec<NodeNote>,
    /// Every kernel, by task.
    pub kernels: Vec<Kernel>,
}

impl Program {
    /// The value whose memory `v` is (itself, unless it is a view).
    pub fn root(&self, mut v: ValueId) -> ValueId {
        while let Storage::View(of) = self.values[v].storage {
            v = of;
        }
        v
    }
}
