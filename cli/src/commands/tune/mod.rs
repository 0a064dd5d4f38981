//! `tunehub tune`: tunes on this machine, through a service embedded in this process on the
//! database file (loopback, a fresh token, the local runner): one operator (`op`), every task of
//! an ONNX model (`model`), or a shape range's representatives (`range`). Each is one job,
//! submitted, run and followed through the API as any client's, then summarised.

mod model;
mod op;
mod range;

use crate::args::{
    DEFAULT_TRIALS, DbArgs, MAX_TRIALS, MeasureArgs, ModelArgs, SchedulerArg, WorkloadArgs,
};
use crate::embedded::{Embedded, EmbeddedOptions, cancel_on_interrupt};
use crate::workload;
use anyhow::Result;
use clap::{Args, value_parser};
use indicatif::ProgressBar;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitCode;
use tunehub_engine::search::{DEFAULT_BATCH, DEFAULT_POPULATION};
use tunehub_engine::target::Target;
use tunehub_proto::v1 as pb;
use tunehub_server::checks::limits::MAX_BATCH;
use tunehub_server::config::{Limits, TargetArgs};

#[derive(Debug, Clone, Args)]
pub struct TuneArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs,

    /// Candidates to measure in all (1 to 100000); with a MODEL, per task on average (the
    /// gradient scheduler shares the job's trials among its tasks); with a range, per shape.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_TRIALS,
          value_parser = value_parser!(u32).range(1..=i64::from(MAX_TRIALS)))]
    pub trials: u32,

    /// Candidates per batch: built in parallel, then run one at a time.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BATCH as u32, value_parser = value_parser!(u32).range(1..=i64::from(MAX_BATCH)))]
    pub batch: u32,

    #[command(flatten)]
    pub db: DbArgs,

    /// Seed of the search [default: from the clock; the summary prints it].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// Evolutionary search population per round (Ansor's; smaller rounds are faster and search
    /// less).
    #[arg(long, value_name = "N", env = "TUNEHUB_POPULATION", default_value_t = DEFAULT_POPULATION as u64,
          value_parser = value_parser!(u64).range(1..=1_000_000))]
    pub population: u64,

    /// Print the best kernel's C source after tuning.
    #[arg(long)]
    pub print_source: bool,

    /// Write the best kernel's C source to FILE.
    #[arg(long, value_name = "FILE")]
    pub out_c: Option<PathBuf>,

    #[command(flatten)]
    pub target: TargetArgs,

    #[command(flatten)]
    pub measure: MeasureArgs,

    #[command(flatten)]
    pub model: ModelArgs,

    /// With a MODEL: how the job's rounds are shared among its tasks.
    #[arg(long, value_enum, default_value_t = SchedulerArg::Gradient)]
    pub scheduler: SchedulerArg,

    /// Print one JSON object on stdout as the summary, instead of text.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: TuneArgs) -> Result<ExitCode> {
    match args.workload.op_spec.as_deref() {
        Some(path) if tunehub_onnx::is_model_path(path) => model::run(&args, path).await,
        Some(spec) if workload::is_range(spec) => range::run(&args, spec).await,
        _ => op::run(&args).await,
    }
}

/// The embedded service on the database file, measuring on this machine (with the flags'
/// overrides), for a job of `tasks` tasks of up to `--trials` each.
async fn embedded(args: &TuneArgs, tasks: u32) -> Result<Embedded> {
    let target = Target::detect().with_overrides(&args.target.overrides());
    Embedded::start(EmbeddedOptions {
        population: args.population as usize,
        limits: Limits {
            max_trials_per_job: MAX_TRIALS.saturating_mul(tasks),
            max_tasks_per_job: tasks,
            ..Limits::default()
        },
        ..EmbeddedOptions::new(args.db.db.clone(), target)
    })
    .await
}

/// Submits `req` to the embedded service and runs the job here to its end (the first Ctrl-C
/// cancels it), showing its progress on `bar`: `on_event` updates the bar from each event. The
/// job as it ended.
pub(crate) async fn run_job(
    service: &mut Embedded,
    req: pb::SubmitRequest,
    bar: &ProgressBar,
    mut on_event: impl FnMut(&ProgressBar, pb::job_event::Event),
) -> Result<pb::Job> {
    let job = service.submit(req).await?;
    tracing::info!(job = %job.id, tasks = job.tasks.len(), seed = job.seed, "tuning");
    cancel_on_interrupt(service.clients.clone(), job.id.clone());
    let end = service
        .run_job(&job.id, |e| {
            on_event(bar, e);
            ControlFlow::Continue(())
        })
        .await;
    bar.finish_and_clear();
    end
}

/// The summary's line naming the job, and how to see its curves.
fn job_line(id: &str, db: &str) -> String {
    format!("job       {id}  (curves: tunehub report {id} --db {db} --out curves.html)")
}
