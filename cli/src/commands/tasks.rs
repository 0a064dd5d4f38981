//! `tunehub tasks`: an ONNX model's tuning tasks, extracted here.

use crate::model;
use crate::usage::emit;
use anyhow::Result;
use clap::{Args, value_parser};
use serde_json::json;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use tunehub_onnx::{Extraction, Layout};

#[derive(Debug, Clone, Args)]
pub struct TasksArgs {
    /// The ONNX model file.
    #[arg(value_name = "MODEL")]
    pub model: PathBuf,

    /// The value of every input's dynamic first (batch) dimension.
    #[arg(long, value_name = "N", value_parser = value_parser!(i64).range(1..=65536))]
    pub batch: Option<i64>,

    /// An input's whole shape, e.g. `input=1x3x224x224` (repeatable).
    #[arg(long = "shape", value_name = "NAME=D0xD1x...")]
    pub shapes: Vec<String>,

    /// An unsupported operator is an error instead of a skipped node.
    #[arg(long)]
    pub strict: bool,

    /// The layout the f32 convolutions' tasks are written in: nchw (the model's), nhwc or
    /// winograd [default: what `tunehub tune` tunes, the tasks of nhwc and of winograd
    /// together, for a build to choose the form of each convolution].
    #[arg(long, value_name = "LAYOUT", value_parser = parse_layout)]
    pub layout: Option<Layout>,

    /// One JSON object: the tasks (with their text form), the skipped nodes.
    #[arg(long)]
    pub json: bool,
}

/// A `--layout` value.
fn parse_layout(s: &str) -> Result<Layout, String> {
    s.parse()
}

pub fn run(args: TasksArgs) -> Result<ExitCode> {
    let path = args.model.to_string_lossy().into_owned();
    let how = Extraction {
        strict: args.strict,
        layout: args.layout,
    };
    let list = model::load(&path, args.batch, &args.shapes, &how)?;
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
            // An alternative is marked: another form of a computation (`alt` after its index).
            let index = if t.alternative {
                format!("{i} alt")
            } else {
                i.to_string()
            };
            let _ = writeln!(
                out,
                "{:<5} {:>6} {:>10.2}  {:<24} {}  ({})",
                index,
                t.weight,
                t.flops as f64 / 1e6,
                t.workload_key,
                t.label,
                t.nodes.join(", ")
            );
            // The workload as `tune`, `query` and `submit` take it: a library operator's
            // canonical op spec, its layout in it (a text form is in --json's `expr`).
            if let Some(spec) = &t.op_spec {
                let _ = writeln!(out, "{:<43} {spec}", "");
            }
        }
        let network = || list.tasks.iter().filter(|t| !t.alternative);
        let _ = writeln!(
            out,
            "{} tasks, {} operators, {:.3} GFLOP; {} layout or constant nodes without a task",
            network().count(),
            network().map(|t| t.weight).sum::<u32>(),
            list.flops() as f64 / 1e9,
            list.glue
        );
        let alternatives = list.tasks.len() - network().count();
        if alternatives > 0 {
            let _ = writeln!(
                out,
                "and {alternatives} alternative tasks (alt): the Winograd form of convolutions, \
                 tuned too for `build` to choose each convolution's faster form"
            );
        }
        for s in &list.skipped {
            let _ = writeln!(out, "skipped {} ({}): {}", s.node, s.op, s.reason);
        }
    }
    emit(&out)?;
    Ok(ExitCode::SUCCESS)
}
