//! `tunehub submit`: a tuning job for a server (one task per OP_SPEC or --expr, a model's
//! tasks, or a shape range), its id printed; `--watch` follows it.

use super::group;
use super::watch::watch_job;
use crate::args::{DEFAULT_TRIALS, MeasureArgs, ModelArgs, SchedulerArg};
use crate::client::{ClientArgs, connect_with};
use crate::show::job::job_json;
use crate::usage::{UsageError, emit, status_error};
use crate::workload;
use anyhow::{Context, Result};
use clap::{Args, value_parser};
use std::fmt::Write as _;
use std::process::ExitCode;
use tunehub_engine::measure::MeasureOptions;
use tunehub_proto::v1 as pb;

#[derive(Debug, Clone, Args)]
pub struct SubmitArgs {
    /// Library operators to tune, one task each, e.g. `matmul(512,512,512)`; the operator's
    /// constant weight is packed by default (`tunehub ops`), `layout_free=B` names the packed
    /// inputs, `layout_free=none` packs none. An ONNX model file (MODEL.onnx) adds its tasks,
    /// extracted here: the server gets the task list, not the model. A shape range, one or two
    /// extents as lo..hi (`matmul(m=1..512,n=768,k=768)`), is a job of its own: up to 8
    /// representative shapes, --trials each (`tunehub query --range` shows its dispatch table).
    #[arg(value_name = "OP_SPEC")]
    pub op_specs: Vec<String>,

    /// A computation in the text form, one task each (repeatable).
    #[arg(long, value_name = "TEXT")]
    pub expr: Vec<String>,

    /// Candidates to measure per task (on average with the gradient scheduler: the job's
    /// trials are one pool it shares among the tasks).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_TRIALS, value_parser = value_parser!(u32).range(1..))]
    pub trials: u32,

    /// Weight of each task in order (OP_SPECs first, then --expr ones); missing ones are 1.
    #[arg(long = "weight", value_name = "W")]
    pub weights: Vec<f64>,

    /// Device class: `local` (the server's machine) or a target key. Repeatable: one job per
    /// target, sharing a group id (printed first, then a `JOB TARGET` line per job).
    #[arg(long, value_name = "TARGET", default_value = "local")]
    pub target: Vec<String>,

    /// Candidates per round [default: the server's].
    #[arg(long, value_name = "N", value_parser = value_parser!(u32).range(1..=1024))]
    pub batch: Option<u32>,

    /// Seed of the search [default: chosen by the server].
    #[arg(long, value_name = "N", value_parser = value_parser!(u64).range(1..))]
    pub seed: Option<u64>,

    /// A name for listings.
    #[arg(long, value_name = "TEXT")]
    pub name: Option<String>,

    /// How the job's rounds are shared among its tasks.
    #[arg(long, value_enum, default_value_t = SchedulerArg::Gradient)]
    pub scheduler: SchedulerArg,

    /// Among the queued jobs of its target pool, a higher priority starts first (-10 to 10);
    /// jobs sharing a pool of workers get its devices in proportion to 2^(priority/5).
    #[arg(long, value_name = "P", default_value_t = 0, allow_negative_numbers = true,
          value_parser = value_parser!(i32).range(-10..=10))]
    pub priority: i32,

    #[command(flatten)]
    pub model: ModelArgs,

    #[command(flatten)]
    pub measure: MeasureArgs,

    /// Follow the job after submitting it (as `tunehub watch`).
    #[arg(long)]
    pub watch: bool,

    /// Print the job as JSON.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub client: ClientArgs,
}

pub async fn run(args: SubmitArgs) -> Result<ExitCode> {
    // A shape range is a job of its own: its representative shapes are its tasks.
    let range = match args
        .op_specs
        .iter()
        .filter(|s| !tunehub_onnx::is_model_path(s) && workload::is_range(s))
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] => None,
        [one] if args.op_specs.len() == 1 && args.expr.is_empty() && args.weights.is_empty() => {
            Some(workload::range_from_spec(one, args.trials)?)
        }
        _ => {
            return Err(UsageError(
                "a shape range (lo..hi) is a job of its own: give it alone, without other \
                 OP_SPECs, --expr or --weight"
                    .into(),
            )
            .into());
        }
    };
    // A model's tasks come with their weights; they follow the other tasks.
    let (models, specs): (Vec<&String>, Vec<&String>) = args
        .op_specs
        .iter()
        .partition(|s| tunehub_onnx::is_model_path(s));
    let specs: Vec<&String> = specs
        .into_iter()
        .filter(|s| !workload::is_range(s))
        .collect();
    // A job with a model's tasks times them cold, as the network runs them.
    let base = if models.is_empty() {
        MeasureOptions::default()
    } else {
        MeasureOptions::cold()
    };
    let mut model_tasks = vec![];
    for m in models {
        let list = crate::model::load_with(m, &args.model)?;
        crate::model::warn_skipped(&list);
        model_tasks.extend(crate::model::task_specs(&list, args.trials));
    }
    // Each op spec parsed here, once, and sent in its canonical form.
    let workloads: Vec<pb::Workload> = specs
        .iter()
        .map(|s| workload::from_op_spec(s))
        .chain(args.expr.iter().map(|e| Ok(workload::from_expr(e))))
        .collect::<Result<_, _>>()?;
    if workloads.is_empty() && model_tasks.is_empty() && range.is_none() {
        return Err(UsageError("give at least one OP_SPEC or --expr".into()).into());
    }
    if args.weights.len() > workloads.len() {
        return Err(UsageError(format!(
            "{} weights for {} tasks",
            args.weights.len(),
            workloads.len()
        ))
        .into());
    }
    let tasks = workloads
        .into_iter()
        .enumerate()
        .map(|(i, w)| pb::TaskSpec {
            workload: Some(w),
            trials: args.trials,
            weight: args.weights.get(i).copied().unwrap_or(1.0),
            alternative: false,
        })
        .chain(model_tasks)
        .collect();
    // One target as `target`, several as `targets` (one job each, in a group).
    let (target, targets) = match args.target.as_slice() {
        [one] => (one.clone(), vec![]),
        many => (String::new(), many.to_vec()),
    };
    let req = pb::SubmitRequest {
        tasks,
        target,
        targets,
        range,
        measure: Some(args.measure.to_proto(&base)),
        batch_size: args.batch.unwrap_or(0),
        seed: args.seed.unwrap_or(0),
        scheduler: args.scheduler.to_proto() as i32,
        name: args.name.clone().unwrap_or_default(),
        priority: args.priority,
        cost_model: String::new(),
    };
    let mut c = connect_with(&args.client).await?;
    let resp = c.jobs.submit(req).await.map_err(status_error)?.into_inner();
    let job = resp.job.context("the server returned no job")?;
    if !job.group.is_empty() {
        // A group: its id, then a job per target.
        let mut out = String::new();
        if args.json {
            for j in &resp.jobs {
                let _ = writeln!(out, "{}", job_json(j));
            }
        } else {
            let _ = writeln!(out, "{}", job.group);
            for j in &resp.jobs {
                let _ = writeln!(out, "{} {}", j.id, j.target_key);
            }
        }
        emit(&out)?;
        if args.watch {
            return group::watch_group(&mut c, &job.group, false).await;
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.json {
        emit(&format!("{}\n", job_json(&job)))?;
    } else {
        emit(&format!("{}\n", job.id))?;
    }
    if args.watch {
        return watch_job(&mut c, &job.id, false).await;
    }
    Ok(ExitCode::SUCCESS)
}
