//! Linkable kernels: a record's schedule as a C function a compiler can build, link and call,
//! with everything it needs to do so correctly (the `Kernel` of the Query API), and kernel
//! packs, many such functions in one `.c`, one `.h` and a manifest.
//!
//! Layout: `symbol` (the C names), `header` (the prototypes and their comment), `bundle` (a
//! pack of kernels). The kernel itself is `codegen`'s, in its named linkage: the loops are the
//! ones that were measured.

mod bundle;
mod header;
mod symbol;

pub use bundle::{Pack, pack};
pub use symbol::{DEFAULT_PREFIX, check_identifier, symbol_for};

use crate::codegen::{self, Linkage};
use crate::schedule::Schedule;
use crate::target::Target;
use crate::task::Task;
use serde::Serialize;
use thiserror::Error;

/// Why a kernel could not be packaged.
#[derive(Debug, Error)]
pub enum PackageError {
    #[error("{0}")]
    BadName(String),
    #[error("record {record}: its steps do not replay: {why}")]
    Replay { record: String, why: String },
}

/// Bytes every pointer argument must be aligned to: the kernel tells the compiler so
/// (`__builtin_assume_aligned(p, 64)`), and vector loads may rely on it.
pub const ALIGNMENT: u32 = 64;

/// Where a kernel came from: the record and what it measured.
#[derive(Debug, Clone, Serialize)]
pub struct Provenance {
    /// Empty for a schedule that was not measured on this workload (a transferred answer).
    pub record_id: String,
    pub workload_key: String,
    pub target_key: String,
    pub description: String,
    /// Measured, or predicted for a transferred answer.
    pub gflops: f64,
}

/// What an argument is to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Input,
    /// A layout-free input: a constant the kernel may read packed.
    Weight,
    Output,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Input => "input",
            Role::Weight => "weight",
            Role::Output => "output",
        }
    }
}

/// One argument, in call order: a dense row-major tensor passed by pointer (float32, or uint8,
/// int8 and int32 for an integer kernel).
#[derive(Debug, Clone, Serialize)]
pub struct KernelArg {
    pub name: String,
    pub role: Role,
    /// numpy's name of the element type: `float32`, `uint8`, `int8`, `int32`.
    pub dtype: &'static str,
    /// Its C type.
    #[serde(skip)]
    pub c_type: &'static str,
    pub shape: Vec<i64>,
    /// In elements.
    pub strides: Vec<i64>,
    pub alignment: u32,
    /// For a weight read packed: `pack_function(src, dst)` writes `packed_elements` floats.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pack_function: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packed_elements: Option<i64>,
    /// "row-major" or "packed".
    pub layout: &'static str,
}

/// numpy's name of an element type, as the Python client and the manifest spell it.
fn numpy_name(d: crate::ir::DType) -> &'static str {
    use crate::ir::DType;
    match d {
        DType::F32 => "float32",
        DType::F16 => "float16",
        DType::U8 => "uint8",
        DType::I8 => "int8",
        DType::I32 => "int32",
    }
}

/// A kernel ready to compile and call.
#[derive(Debug, Clone, Serialize)]
pub struct Kernel {
    pub symbol: String,
    pub source: String,
    pub header: String,
    pub args: Vec<KernelArg>,
    pub cflags: Vec<String>,
    pub ldflags: Vec<String>,
    pub compiler: String,
    pub compiler_version: String,
    pub threads: u32,
    pub set_num_threads: String,
    #[serde(flatten)]
    pub provenance: Provenance,
}

/// The kernel of `schedule` on `task` for `target`, named `symbol_for(prefix, ...)`, generated
/// as it was measured (layout-free inputs packed) but in the named linkage.
pub fn kernel(
    task: &Task,
    schedule: &Schedule,
    target: &Target,
    provenance: Provenance,
    prefix: &str,
) -> Result<Kernel, PackageError> {
    let symbol = symbol_for(
        prefix,
        &provenance.description,
        &task.key,
        &provenance.target_key,
    )?;
    let linkage = Linkage::Named(symbol.clone());
    let generated =
        codegen::generate_linked(&task.dag, schedule, target, &task.lower_options(), &linkage)
            .map_err(|e| PackageError::Replay {
                record: provenance.record_id.clone(),
                why: e.to_string(),
            })?;
    let args: Vec<KernelArg> = generated
        .args
        .iter()
        .enumerate()
        .map(|(pos, a)| {
            let role = if a.is_output {
                Role::Output
            } else if task.layout_free.contains(&a.stage) {
                Role::Weight
            } else {
                Role::Input
            };
            KernelArg {
                name: a.name.clone(),
                role,
                dtype: numpy_name(a.dtype),
                c_type: a.dtype.c_name(),
                strides: row_major_strides(&a.shape),
                shape: a.shape.clone(),
                alignment: ALIGNMENT,
                pack_function: a.packed_len.map(|_| linkage.pack_function(pos, &a.name)),
                packed_elements: a.packed_len,
                layout: if a.packed_len.is_some() {
                    "packed"
                } else {
                    "row-major"
                },
            }
        })
        .collect();
    let mut ldflags = vec!["-fopenmp".to_string()];
    ldflags.extend(target.libraries());
    ldflags.push("-lm".to_string());
    let mut k = Kernel {
        set_num_threads: linkage.set_num_threads().unwrap_or_default(),
        symbol,
        source: generated.source,
        header: String::new(),
        args,
        cflags: target.compile_flags(),
        ldflags,
        compiler: target.compiler.clone(),
        compiler_version: target.compiler_version.clone(),
        threads: u32::try_from(target.cores.max(1)).unwrap_or(u32::MAX),
        provenance,
    };
    k.header = header::standalone(&k);
    Ok(k)
}

fn row_major_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    strides
}

#[cfg(test)]
mod tests;
