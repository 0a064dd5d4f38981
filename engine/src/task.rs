//! A tuning task: one workload (a DAG with its key and FLOP count), its reference outputs
//! computed once and shared by every measurement of the task.

use crate::ir::ComputeDag;
use crate::lower::LowerOptions;
use crate::reference;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::sync::{Arc, OnceLock};

/// What a task measures besides its DAG: options that change the kernel (and so the workload
/// key), carried typed from the API to the database and the workers. A later per-task option
/// goes here, beside `layout_free`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadOptions {
    /// Inputs, by tensor name, whose layout the kernel may choose (see
    /// [`Task::with_layout_free`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layout_free: Vec<String>,
}

impl WorkloadOptions {
    /// No option set: the task is its DAG alone.
    pub fn is_empty(&self) -> bool {
        self.layout_free.is_empty()
    }
}

#[derive(Debug)]
pub struct Task {
    pub dag: ComputeDag,
    /// The workload key (see [`ComputeDag::workload_key`]).
    pub key: String,
    pub flops: u64,
    /// How the user named it: an op spec or the text form.
    pub desc: String,
    /// Inputs (ordinals among the DAG's placeholders) whose layout the kernel may choose:
    /// constant weights, packed once outside the timed kernel (Ansor's layout-free
    /// placeholders). Schedules are unaffected; lowering packs what it can.
    pub layout_free: Vec<usize>,
    reference: OnceLock<Arc<Vec<Vec<f64>>>>,
}

impl Task {
    pub fn new(dag: ComputeDag, desc: impl Into<String>) -> Task {
        Task {
            key: dag.workload_key(),
            flops: dag.flop_count(),
            dag,
            desc: desc.into(),
            layout_free: vec![],
            reference: OnceLock::new(),
        }
    }

    /// The task with `options` applied (their names checked against the DAG's inputs).
    pub fn with_options(self, options: &WorkloadOptions) -> Result<Task, String> {
        let names: Vec<&str> = options.layout_free.iter().map(String::as_str).collect();
        self.with_layout_free(&names)
    }

    /// The options this task was built with, names in input order: what to store and send so
    /// that the same task (and key) is built again elsewhere.
    pub fn options(&self) -> WorkloadOptions {
        let inputs = self.dag.placeholders();
        WorkloadOptions {
            layout_free: self
                .layout_free
                .iter()
                .map(|&o| self.dag.stages[inputs[o]].name.clone())
                .collect(),
        }
    }

    /// Marks inputs, by tensor name, as layout-free. The task's key changes with them: the
    /// same schedule runs at another speed on packed weights, so its records are kept apart.
    pub fn with_layout_free(mut self, names: &[&str]) -> Result<Task, String> {
        let inputs = self.dag.placeholders();
        for name in names {
            let o = inputs
                .iter()
                .position(|&s| self.dag.stages[s].name == *name)
                .ok_or_else(|| format!("layout_free: `{name}` is not an input of the workload"))?;
            if !self.layout_free.contains(&o) {
                self.layout_free.push(o);
            }
        }
        self.layout_free.sort_unstable();
        let base = self.dag.workload_key();
        self.key = if self.layout_free.is_empty() {
            base
        } else {
            let tag = format!("{base} layout_free={:?}", self.layout_free);
            let d = Sha256::digest(tag.as_bytes());
            d[..12].iter().map(|b| format!("{b:02x}")).collect()
        };
        Ok(self)
    }

    /// How this task's kernels are lowered.
    pub fn lower_options(&self) -> LowerOptions {
        LowerOptions {
            layout_free: self.layout_free.clone(),
        }
    }

    /// Outputs of the reference implementation, computed on first use.
    pub fn reference(&self) -> Arc<Vec<Vec<f64>>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_free_names_inputs_and_changes_the_key() {
        let dag = crate::ops::matmul(8, 8, 8).unwrap();
        let t = Task::new(dag.clone(), "m");
        let k = t.key.clone();
        let t = t.with_layout_free(&["B"]).unwrap();
        assert_eq!(t.layout_free, vec![1]);
        assert_ne!(t.key, k);
        assert!(Task::new(dag, "m").with_layout_free(&["Z"]).is_err());
    }

    #[test]
    fn options_rebuild_the_same_task() {
        let dag = crate::ops::matmul(8, 8, 8).unwrap();
        let opts = WorkloadOptions {
            layout_free: vec!["B".into()],
        };
        let t = Task::new(dag.clone(), "m").with_options(&opts).unwrap();
        // The key stays what `with_layout_free` gives: stored records keep matching.
        let by_names = Task::new(dag.clone(), "m")
            .with_layout_free(&["B"])
            .unwrap();
        assert_eq!(t.key, by_names.key);
        assert_eq!(t.options(), opts);
        let again = Task::new(dag.clone(), "m")
            .with_options(&t.options())
            .unwrap();
        assert_eq!(again.key, t.key);
        let plain = Task::new(dag, "m")
            .with_options(&WorkloadOptions::default())
            .unwrap();
        assert!(plain.options().is_empty());
        assert_eq!(plain.key, plain.dag.workload_key());
        let json = serde_json::to_string(&opts).unwrap();
        assert_eq!(json, r#"{"layout_free":["B"]}"#);
        assert_eq!(
            serde_json::from_str::<WorkloadOptions>("{}").unwrap(),
            WorkloadOptions::default()
        );
    }
}
