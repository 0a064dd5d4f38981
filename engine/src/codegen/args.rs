//! The kernel's arguments: what the code generator's signature takes and the harness fills.

use crate::ir::{DType, InputData};
use serde::{Deserialize, Serialize};

/// One kernel argument: a tensor of the DAG passed by pointer, in signature order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArgSpec {
    pub name: String,
    pub shape: Vec<i64>,
    /// The tensor's ordinal among the inputs (or among the outputs, for an output): inputs
    /// are filled with `data::input_value(stage, flat index)`, as the reference's are.
    pub stage: usize,
    pub is_output: bool,
    /// The element type (f32 unless said, as in records written before integer kernels).
    #[serde(default = "f32", skip_serializing_if = "is_f32")]
    pub dtype: DType,
    /// For a layout-free input the kernel reads packed: the packed buffer's elements. The
    /// harness fills the tensor of `shape` as usual, then packs it once, before anything is
    /// run, with the kernel source's `tunehub_pack_<argument position>(src, dst)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packed_len: Option<i64>,
    /// What an input's values are drawn from (its placeholder's `data`).
    #[serde(default, skip_serializing_if = "InputData::is_usual")]
    pub data: InputData,
}

fn f32() -> DType {
    DType::F32
}

fn is_f32(d: &DType) -> bool {
    *d == DType::F32
}

impl ArgSpec {
    pub fn num_elements(&self) -> i64 {
        self.shape.iter().product()
    }

    /// The C parameter type: `const T* restrict` for an input, `T* restrict` for an output.
    pub fn c_param(&self) -> String {
        let cq = if self.is_output { "" } else { "const " };
        format!("{cq}{}* restrict", self.dtype.c_name())
    }
}
