//! ONNX models on the command line: `tunehub tasks MODEL.onnx`, and a model's tasks as a job's
//! task list (`tune` and `submit` take MODEL.onnx). The client extracts the tasks; the server
//! only ever sees text-form workloads with weights.

use anyhow::Result;
use serde_json::json;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use tunehub_onnx::{InputShapes, TaskList};
use tunehub_proto::v1 as pb;
use tunehub_server::cli::{ModelArgs, TasksArgs, UsageError};
use tunehub_server::workload;

/// A model's tasks; a bad model (unreadable, malformed, a dynamic dimension without a value,
/// an unsupported operator with `strict`) is bad input, one line naming the node and operator.
pub fn load(
    path: &str,
    batch: Option<i64>,
    shapes: &[String],
    strict: bool,
) -> Result<TaskList, UsageError> {
    let shapes = InputShapes {
        batch,
        shapes: shapes
            .iter()
            .map(|s| InputShapes::parse_shape(s).map_err(|e| UsageError(format!("--shape {e}"))))
            .collect::<Result<_, _>>()?,
    };
    tunehub_onnx::extract_file(Path::new(path), &shapes, strict)
        .map_err(|e| UsageError(format!("{path}: {e}")))
}

pub fn load_with(path: &str, m: &ModelArgs) -> Result<TaskList, UsageError> {
    load(path, m.model_batch, &m.shapes, m.strict)
}

/// The job's tasks: each task's text form with its weight and `trials` candidates.
pub fn task_specs(list: &TaskList, trials: u32) -> Vec<pb::TaskSpec> {
    list.tasks
        .iter()
        .map(|t| pb::TaskSpec {
            workload: Some(workload::of_net_task(t)),
            trials,
            weight: f64::from(t.weight),
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

pub async fn tasks(args: TasksArgs) -> Result<ExitCode> {
    let path = args.model.to_string_lossy().into_owned();
    let list = load(&path, args.batch, &args.shapes, args.strict)?;
    let mut out = String::new();
    if args.json {
        let v = json!({
            "model": path,
            "tasks": list.tasks,
            "skipped": list.skipped,
            "glue_nodes": list.glue,
            "flops": list.flops(),
        });
        let _ = writeln!(out, "{v}");
    } else {
        let _ = writeln!(
            out,
            "{:<5} {:>6} {:>10}  {:<24} TASK  (NODES)",
            "TASK", "WEIGHT", "MFLOP", "WORKLOAD"
        );
        for (i, t) in list.tasks.iter().enumerate() {
            let _ = writeln!(
                out,
                "{:<5} {:>6} {:>10.2}  {:<24} {}  ({})",
                i,
                t.weight,
                t.flops as f64 / 1e6,
                t.workload_key,
                t.label,
                t.nodes.join(", ")
            );
        }
        let _ = writeln!(
            out,
            "{} tasks, {} operators, {:.3} GFLOP; {} layout or constant nodes without a task",
            list.tasks.len(),
            list.tasks.iter().map(|t| t.weight).sum::<u32>(),
            list.flops() as f64 / 1e9,
            list.glue
        );
        for s in &list.skipped {
            let _ = writeln!(out, "skipped {} ({}): {}", s.node, s.op, s.reason);
        }
    }
    crate::emit(&out)?;
    Ok(ExitCode::SUCCESS)
}
