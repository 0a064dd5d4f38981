//! A tuning task: one workload (a DAG with its key and FLOP count), its reference outputs
//! computed once and shared by every measurement of the task.

use crate::ir::ComputeDag;
use crate::reference;
use std::sync::{Arc, OnceLock};

#[derive(Debug)]
pub struct Task {
    pub dag: ComputeDag,
    /// The workload key (see [`ComputeDag::workload_key`]).
    pub key: String,
    pub flops: u64,
    /// How the user named it: an op spec or the text form.
    pub desc: String,
    reference: OnceLock<Arc<Vec<Vec<f32>>>>,
}

impl Task {
    pub fn new(dag: ComputeDag, desc: impl Into<String>) -> Task {
        Task {
            key: dag.workload_key(),
            flops: dag.flop_count(),
            dag,
            desc: desc.into(),
            reference: OnceLock::new(),
        }
    }

    /// Outputs of the reference implementation, computed on first use.
    pub fn reference(&self) -> Arc<Vec<Vec<f32>>> {
        self.reference
            .get_or_init(|| Arc::new(reference::outputs(&self.dag)))
            .clone()
    }

    /// GFLOP/s of a run taking `seconds`.
    pub fn gflops(&self, seconds: f64) -> f64 {
        if seconds > 0.0 && seconds.is_finite() {
            self.flops as f64 / seconds / 1e9
        } else {
            0.0
        }
    }
}
