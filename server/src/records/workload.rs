//! A stored workload: its DAG, its options, and the engine task they make.

use serde::Serialize;
use tunehub_engine::ir::ComputeDag;
use tunehub_engine::task::{Task, WorkloadOptions};

/// A stored workload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workload {
    pub key: String,
    pub description: Option<String>,
    pub dag_json: String,
    /// What the task measures besides the DAG (layout-free inputs); part of the key.
    pub options: WorkloadOptions,
    pub flops: u64,
    pub created_at: i64,
}

impl Workload {
    /// The engine task this workload stands for: its DAG with its options. Fails when the DAG
    /// does not parse, an option does not fit it, or the key it makes is not the stored one.
    pub fn to_task(&self) -> Result<Task, String> {
        let dag: ComputeDag = serde_json::from_str(&self.dag_json)
            .map_err(|e| format!("workload {}: stored DAG: {e}", self.key))?;
        let task = Task::new(dag, self.description.clone().unwrap_or_default())
            .with_options(&self.options)
            .map_err(|e| format!("workload {}: {e}", self.key))?;
        if task.key != self.key {
            return Err(format!(
                "workload {}: its DAG and options make key {}",
                self.key, task.key
            ));
        }
        Ok(task)
    }
}

/// The options as stored in `workloads.layout_free_json` (see `migrations/0004`).
pub(crate) fn layout_free_json(options: &WorkloadOptions) -> String {
    serde_json::to_string(&options.layout_free).expect("names serialize")
}

/// The options read back from their columns.
pub(crate) fn options_from_columns(
    key: &str,
    layout_free_json: &str,
) -> Result<WorkloadOptions, String> {
    let layout_free = serde_json::from_str(layout_free_json)
        .map_err(|e| format!("workload {key}: layout_free_json: {e}"))?;
    Ok(WorkloadOptions { layout_free })
}
