//! `tunehub report JOB --out FILE.svg|FILE.html`: a job's tuning curves as a picture, drawn
//! from every candidate it measured (`Jobs.Trials`; `curves`): best GFLOP/s so far per task
//! against trials and against wall time, and for a job of several tasks its end-to-end
//! estimate against trials, beside a peer's latency given with `--peer-ms`. An `.html` file
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
    let c = curves::curves(&answer, args.peer_ms)?;
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
