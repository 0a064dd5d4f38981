//! `tunehub report JOB --out FILE.svg|FILE.html`: a job's tuning curves as a picture, drawn
//! from every candidate it measured (`Jobs.Trials`; `curves`): best GFLOP/s so far per task
//! against trials and against wall time, and for a job of several tasks its end-to-end
//! estimate against trials, beside a peer's latency given with `--peer-ms` and the measured
//! latency of the model built from the job (`--built DIR`, run here). An `.html` file
//! adds a table of the tasks; either works offline (nothing is fetched).

use crate::curves;
use crate::session::{ServiceArgs, Session};
use crate::usage::{UsageError, emit, status_error};
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use tunehub_proto::v1 as pb;

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// The job's id.
    #[arg(value_name = "JOB")]
    pub job: String,

    /// The file to write: `.svg` (the curves) or `.html` (a page with the curves and a table of
    /// the tasks).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,

    /// A peer's end-to-end latency in ms (ONNX Runtime's, Ansor's), drawn beside the estimate.
    #[arg(long, value_name = "MS")]
    pub peer_ms: Option<f64>,

    /// A model built from this job's records (`tunehub build`'s DIR): it is run here and its
    /// measured latency (the median of `--repeat` runs) drawn beside the estimate, at the
    /// job's trials.
    #[arg(long, value_name = "DIR")]
    pub built: Option<PathBuf>,

    /// Timed runs of the `--built` model.
    #[arg(long, default_value_t = 50, requires = "built")]
    pub repeat: u32,

    #[command(flatten)]
    pub service: ServiceArgs,
}

pub async fn run(args: ReportArgs) -> Result<ExitCode> {
    let ext = args.out.extension().and_then(|e| e.to_str()).unwrap_or("");
    let html = match ext {
        "svg" => false,
        "html" | "htm" => true,
        _ => {
            return Err(UsageError(format!(
                "--out {}: give a .svg or .html file",
                args.out.display()
            ))
            .into());
        }
    };
    if let Some(p) = args.peer_ms
        && !(p.is_finite() && p > 0.0)
    {
        return Err(UsageError(format!("--peer-ms {p}: give a positive latency")).into());
    }
    let mut session = Session::open(&args.service).await?;
    let answer = session
        .clients
        .jobs
        .trials(pb::JobTrialsRequest {
            id: args.job.clone(),
        })
        .await;
    session.close().await?;
    let answer = answer.map_err(status_error)?.into_inner();
    let built_ms = match &args.built {
        Some(dir) => Some(measure_built(dir, &answer, args.repeat)?),
        None => None,
    };
    let c = curves::curves(&answer, args.peer_ms, built_ms)?;
    let svg = curves::svg(&c)?;
    let text = if html { curves::html(&c, &svg) } else { svg };
    std::fs::write(&args.out, text).with_context(|| format!("writing {}", args.out.display()))?;
    let trials: usize = answer.tasks.iter().map(|t| t.trials.len()).sum();
    emit(&format!(
        "wrote {} ({} tasks, {trials} trials)\n",
        args.out.display(),
        c.tasks.len()
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// The median latency in ms of the model built in `dir`, on random inputs; a usage error when
/// it was not built from `job`'s tasks (none of its kernels serves a workload of the job).
fn measure_built(dir: &std::path::Path, job: &pb::JobTrialsResponse, repeat: u32) -> Result<f64> {
    if repeat == 0 {
        return Err(UsageError("--repeat 0: give at least 1 run".into()).into());
    }
    let mut lib = tunehub_compiler::Library::open(dir)
        .map_err(|e| UsageError(format!("--built {}: {e}", dir.display())))?;
    let keys: std::collections::HashSet<&str> = job
        .job
        .iter()
        .flat_map(|j| &j.tasks)
        .map(|t| t.workload_key.as_str())
        .collect();
    if !lib
        .manifest
        .tasks
        .iter()
        .any(|t| keys.contains(t.workload_key.as_str()))
    {
        return Err(UsageError(format!(
            "--built {}: none of its kernels serves a task of this job (build the job's model \
             from the database it tuned)",
            dir.display()
        ))
        .into());
    }
    let inputs = tunehub_compiler::check::random_inputs(&lib, 0);
    let t = lib.time(&inputs, (repeat / 10).max(1), repeat)?;
    Ok(t.median_ms)
}
