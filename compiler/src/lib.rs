//! Compiled models: an ONNX model, its tasks and one kernel per task (tuned records or zero-shot
//! answers, asked of the service by the caller) as a C library that runs the whole model, the
//! way `relay.build` gives TVM users a module. The glue between kernels (views, copies, a
//! gather) is generated C; constants are folded at build time (batch norms into the
//! convolutions before them); activations live in one arena planned by liveness. The built
//! library is checked against tract running the same ONNX file.
//!
//! # Layout
//!
//! - [`program`]: tensors (where each lives, their types) and steps; [`lowering`]: the graph
//!   to them; [`order`]: the steps' order; [`glue`]: the nodes no kernel runs; `convert`: a
//!   QDQ model's conversions; `dynamic`: a dynamically quantized model's (its run-time
//!   quantization, an integer kernel's zero-point correction, the cast of its sums);
//!   `layout`: kernels in another layout than the model's tensors (transposed or padded
//!   operands, results kept in the kernel's layout until a reader needs the model's); `prune`: glue nothing reads, dropped; [`constants`]: folded
//!   batch norms, requantization constants, dequantized weights.
//! - [`memory`]: the arena plan; [`weights`]: the weights file.
//! - [`emit`]: `NAME.c`, `NAME.h`, `manifest.json`; [`cc`]: the shared library.
//! - [`library`]: a built model loaded and run; [`check`]: its outputs against tract's.
//! - [`error`]: what can go wrong, naming the node, task or file; `files`: whole-file writes.

pub mod cc;
pub mod check;
pub mod constants;
mod convert;
mod dynamic;
pub mod emit;
pub mod error;
mod files;
pub mod glue;
mod layout;
pub mod library;
pub mod lowering;
pub mod memory;
pub mod order;
pub mod program;
mod prune;
pub mod weights;

pub use emit::manifest::Manifest;
pub use error::CompileError;
pub use library::{Latency, Library, Profile};

use emit::header::Io;
use emit::manifest::{FORMAT, NodeEntry, StepEntry, TaskEntry};
use program::Program;
use std::path::Path;
use tunehub_engine::package::{Kernel, check_identifier};
use tunehub_onnx::TaskList;
use tunehub_onnx::graph::Graph;

/// How to compile.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Assemble the weights file into the library: `NAME_create(NULL)` needs no file.
    pub embed_weights: bool,
}

/// A compiled model's files, in memory.
pub struct Compiled {
    pub name: String,
    pub source: String,
    pub header: String,
    pub weights: Vec<u8>,
    pub manifest: Manifest,
}

/// Whether `g` is a model this compiler builds, as far as can be told before anything is
/// tuned: a QDQ model's conversions of activations must be per tensor (one scale and zero
/// point; per-axis ones are for weights, which are constants).
pub fn check_buildable(g: &Graph) -> Result<(), CompileError> {
    use tunehub_onnx::quantized::{DEQUANTIZE, QUANTIZE, single};
    let per_axis = g.nodes.iter().find(|n| {
        (n.op == QUANTIZE || n.op == DEQUANTIZE)
            && n.input(0).is_some_and(|x| !g.is_constant(x))
            && single(g, n).is_none()
    });
    match per_axis {
        None => Ok(()),
        Some(n) => Err(CompileError::Node {
            node: n.name.clone(),
            op: n.op.clone(),
            msg: "a compiled model converts an activation with one scale and one zero point \
                  (a per-axis one is for weights)"
                .into(),
        }),
    }
}

/// Compiles `g` (its tasks `tasks`, `kernels[i]` serving task `i`) as the library `name` (a C
/// identifier); `model` names the model in comments and the manifest.
pub fn compile(
    g: &Graph,
    tasks: &TaskList,
    kernels: &[Kernel],
    name: &str,
    model: &str,
    options: &Options,
) -> Result<Compiled, CompileError> {
    check_identifier("model name", name).map_err(|e| CompileError::BadName(e.to_string()))?;
    if kernels.len() != tasks.tasks.len() {
        return Err(CompileError::BadName(format!(
            "{} kernels for {} tasks",
            kernels.len(),
            tasks.tasks.len()
        )));
    }
    // The kernels come from a service: every name that lands in the C must be an identifier.
    for (i, k) in kernels.iter().enumerate() {
        let names = std::iter::once(&k.symbol)
            .chain(std::iter::once(&k.set_num_threads))
            .chain(k.args.iter().filter_map(|a| a.pack_function.as_ref()));
        for n in names {
            let ok = !n.is_empty()
                && n.len() <= 255
                && !n.starts_with(|c: char| c.is_ascii_digit())
                && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                return Err(CompileError::Kernel {
                    task: i,
                    label: tasks.tasks[i].label.clone(),
                    msg: format!("its function name {n:?} is not a C identifier"),
                });
            }
        }
    }
    check_buildable(g)?;
    let p = Program::build(g, tasks, kernels)?;
    let plan = memory::plan(&p);
    let weights = weights::layout(&p);
    let (packed_offsets, packed_bytes) = weights::packed_layout(&p);
    let io = |vs: &[usize]| -> Vec<Io> {
        vs.iter()
            .map(|&v| Io {
                name: p.values[v].name.clone(),
                dtype: "float32".into(),
                shape: p.values[v].shape.clone(),
            })
            .collect()
    };
    let (inputs, outputs) = (io(&p.inputs), io(&p.outputs));
    let layout = emit::source::Layout {
        embed: options.embed_weights,
        plan: &plan,
        weights: &weights,
        packed_offsets: &packed_offsets,
        packed_bytes,
    };
    let source = emit::source::source(name, model, &p, &layout);
    let header = emit::header::header(name, model, &inputs, &outputs, p.steps.len());
    let first = kernels.first();
    let tasks_entries = tasks
        .tasks
        .iter()
        .zip(kernels)
        .enumerate()
        .map(|(i, (t, k))| TaskEntry {
            task: i,
            label: t.label.clone(),
            workload_key: t.workload_key.clone(),
            symbol: k.symbol.clone(),
            record_id: k.provenance.record_id.clone(),
            provenance: if k.provenance.record_id.is_empty() {
                "zero-shot (transferred from a tuned neighbour, predicted)".into()
            } else {
                "tuned (measured)".into()
            },
            gflops: k.provenance.gflops,
            flops: t.flops,
            calls: t.weight,
        })
        .collect();
    let manifest = Manifest {
        format: FORMAT,
        name: name.to_string(),
        model: model.to_string(),
        compiler: first.map_or("cc".into(), |k| k.compiler.clone()),
        compiler_version: first.map_or(String::new(), |k| k.compiler_version.clone()),
        cflags: first.map_or(vec![], |k| k.cflags.clone()),
        ldflags: first.map_or(vec![], |k| k.ldflags.clone()),
        library: None,
        weights: format!("{name}.weights"),
        embedded_weights: options.embed_weights,
        weights_bytes: weights.bytes.len() as u64,
        inputs,
        outputs,
        arena_bytes: plan.arena_bytes,
        intermediate_bytes: plan.unshared_bytes,
        packed_bytes,
        tasks: tasks_entries,
        nodes: p.nodes.iter().map(NodeEntry::from).collect(),
        steps: p.steps.iter().map(|s| step_entry(&p, s)).collect(),
        threads: first.map_or(1, |k| k.threads),
        layout: tasks.layout.name().into(),
        layout_choice: String::new(),
    };
    Ok(Compiled {
        name: name.to_string(),
        source,
        header,
        weights: weights.bytes,
        manifest,
    })
}

fn step_entry(p: &Program, s: &program::Step) -> StepEntry {
    use program::Step;
    let (how, task, nodes) = match s {
        Step::Kernel(k) => ("kernel", Some(k.task), k.nodes.clone()),
        Step::Copy(c) if c.layout => ("layout", None, vec![]),
        Step::Copy(_) => ("copy", None, vec![]),
        Step::Fill { .. } => ("fill", None, vec![]),
        Step::Gather(_) => ("gather", None, vec![]),
        Step::Quantize(_) => ("quantize", None, vec![]),
        Step::Dequantize(_) => ("dequantize", None, vec![]),
        Step::DynamicQuantize(_) => ("dynamic_quantize", None, vec![]),
        Step::ZeroPointShift(_) => ("zero_point_shift", None, vec![]),
        Step::Scalar { .. } => ("scalar", None, vec![]),
    };
    // A glue step is named by the tensor it writes.
    let nodes = if nodes.is_empty() {
        vec![p.values[s.writes()[0]].name.clone()]
    } else {
        nodes
    };
    StepEntry {
        how: how.into(),
        task,
        nodes,
    }
}

impl Compiled {
    /// Writes the files into `dir` and builds them there: [`build_checked`].
    pub fn build_checked(
        &self,
        dir: &Path,
        compiler: Option<&str>,
        reference: &check::Reference,
        seed: u64,
    ) -> Result<(Library, Vec<String>), CompileError> {
        self.write(dir)?;
        build_checked(dir, compiler, reference, seed)
    }

    /// The files by name, `manifest.json` last (a reader that sees it sees the rest).
    pub fn files(&self) -> Vec<(String, Vec<u8>)> {
        vec![
            (format!("{}.c", self.name), self.source.clone().into_bytes()),
            (format!("{}.h", self.name), self.header.clone().into_bytes()),
            (format!("{}.weights", self.name), self.weights.clone()),
            ("manifest.json".into(), self.manifest.json().into_bytes()),
        ]
    }

    /// Writes the files into `dir` (created if missing), each through a temporary name and a
    /// rename, the manifest last.
    pub fn write(&self, dir: &Path) -> Result<(), CompileError> {
        create_dir(dir)?;
        for (file, bytes) in self.files() {
            files::write_whole(&dir.join(file), &bytes)?;
        }
        Ok(())
    }
}

/// Creates `dir` if missing.
pub fn create_dir(dir: &Path) -> Result<(), CompileError> {
    std::fs::create_dir_all(dir).map_err(|source| CompileError::Io {
        what: "creating",
        path: dir.display().to_string(),
        source,
    })
}

/// Builds the model whose files are in `dir` (written by [`Compiled::write`] or received from a
/// service) with `compiler` (else the kernels' own), loads it and checks it against
/// `reference` on random inputs from `seed`. A library that does not match is removed, and the
/// manifest then names none: never a wrong model left to link. The loaded library and the
/// outputs that matched.
pub fn build_checked(
    dir: &Path,
    compiler: Option<&str>,
    reference: &check::Reference,
    seed: u64,
) -> Result<(Library, Vec<String>), CompileError> {
    let mut manifest = Manifest::read(dir)?;
    let lib_path = cc::build(dir, &mut manifest, compiler)?;
    let mut lib = Library::open(dir)?;
    match check::against_reference(
        &mut lib,
        reference.model,
        reference.shapes,
        reference.dir,
        seed,
    ) {
        Ok(outputs) => Ok((lib, outputs)),
        Err(e) => {
            drop(lib);
            let _ = std::fs::remove_file(&lib_path);
            manifest.library = None;
            manifest.write(dir)?;
            Err(CompileError::Library(format!(
                "{e}; {} removed",
                lib_path.display()
            )))
        }
    }
}
