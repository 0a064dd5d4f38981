//! ONNX models on the command line: a model's tasks, extracted here with `tunehub-onnx` (`tune`,
//! `submit`, `pack` and `tasks` take MODEL.onnx), and those tasks as a job's task list.

use crate::usage::UsageError;
use crate::workload;
use std::path::Path;
use tunehub_onnx::{Extraction, InputShapes, TaskList};
use tunehub_proto::v1 as pb;

use crate::args::ModelArgs;

/// A model's tasks; a bad model (unreadable, malformed, a dynamic dimension without a value,
/// an unsupported operator when `how` is strict) is bad input, one line naming the node and
/// operator.
pub fn load(
    path: &str,
    batch: Option<i64>,
    shapes: &[String],
    how: &Extraction,
) -> Result<TaskList, UsageError> {
    let shapes = input_shapes(batch, shapes)?;
    tunehub_onnx::extract_file(Path::new(path), &shapes, how)
        .map_err(|e| UsageError(format!("{path}: {e}")))
}

/// The dimensions `--model-batch` and `--shape NAME=D0xD1x...` fix.
pub fn input_shapes(batch: Option<i64>, shapes: &[String]) -> Result<InputShapes, UsageError> {
    Ok(InputShapes {
        batch,
        shapes: shapes
            .iter()
            .map(|s| InputShapes::parse_shape(s).map_err(|e| UsageError(format!("--shape {e}"))))
            .collect::<Result<_, _>>()?,
    })
}

pub fn load_with(path: &str, m: &ModelArgs) -> Result<TaskList, UsageError> {
    load(path, m.model_batch, &m.shapes, &m.extraction())
}

/// The job's tasks: each task's text form with its weight and `trials` candidates.
pub fn task_specs(list: &TaskList, trials: u32) -> Vec<pb::TaskSpec> {
    list.tasks
        .iter()
        .map(|t| pb::TaskSpec {
            workload: Some(workload::of_net_task(t)),
            trials,
            weight: f64::from(t.weight),
            alternative: t.alternative,
        })
        .collect()
}

/// The skipped nodes, said on stderr: never silently.
pub fn warn_skipped(list: &TaskList) {
    for s in &list.skipped {
        eprintln!(
            "warning: node '{}' ({}) skipped, not tuned nor in the estimate: {}",
            s.node, s.op, s.reason
        );
    }
}
