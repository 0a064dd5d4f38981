//! `tunehub jobs`: a server's jobs, or a database file's (`--db`: what `tunehub tune` ran), newest
//! first.

use crate::session::{ServiceArgs, Session};
use crate::show::job::{
    all_noisy, all_noisy_text, best_gflops_cell, job_json, outcomes_cell, parse_state, state_name,
    trials,
};
use crate::show::workload::{label, short};
use crate::usage::{emit, status_error};
use anyhow::Result;
use clap::Args;
use std::fmt::Write as _;
use std::process::ExitCode;
use tunehub_proto::v1 as pb;

#[derive(Debug, Clone, Args)]
pub struct JobsArgs {
    /// Only jobs in this state (repeatable): queued, running, done, failed, cancelled.
    #[arg(long = "state", value_name = "STATE")]
    pub states: Vec<String>,

    /// Only the jobs of this group (a multi-target submission: one job per target).
    #[arg(long, value_name = "GROUP")]
    pub group: Option<String>,

    /// Most jobs to list.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub limit: u32,

    /// One JSON object per job.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub service: ServiceArgs,
}

pub async fn run(args: JobsArgs) -> Result<ExitCode> {
    let states = args
        .states
        .iter()
        .map(|s| parse_state(s).map(|s| s as i32))
        .collect::<Result<Vec<_>>>()?;
    let mut session = Session::open(&args.service).await?;
    let listed = session
        .clients
        .jobs
        .list(pb::ListJobsRequest {
            states,
            limit: args.limit,
            group: args.group.clone().unwrap_or_default(),
        })
        .await;
    session.close().await?;
    let jobs = listed.map_err(status_error)?.into_inner().jobs;
    let mut out = String::new();
    if args.json {
        for j in &jobs {
            let _ = writeln!(out, "{}", job_json(j));
        }
    } else {
        let _ = writeln!(
            out,
            "{:<20} {:<9} {:>3} {:<28} {:>13} {:>14} {:>12}  TASKS",
            "JOB", "STATE", "PRI", "TARGET (SERVER)", "TRIALS", "OK/NOISY/ERR", "BEST GF/s"
        );
        for j in &jobs {
            let (done, total) = trials(j);
            let tasks: Vec<String> = j
                .tasks
                .iter()
                .map(|t| short(&label(&t.description, t.options.as_ref())).to_string())
                .collect();
            // Where it runs: its target pool, and the server running it.
            let server = if j.state == pb::JobState::Running as i32 && !j.claimed_by.is_empty() {
                format!(" ({})", j.claimed_by)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "{:<20} {:<9} {:>3} {:<28} {:>13} {:>14} {:>12}  {}",
                j.id,
                state_name(j.state),
                j.priority,
                format!("{}{server}", j.target_key),
                format!("{done}/{total}"),
                outcomes_cell(j),
                best_gflops_cell(j),
                tasks.join(", ")
            );
            if !j.group.is_empty() {
                let _ = writeln!(out, "{:<20} group: {}", "", j.group);
            }
            if !j.waiting.is_empty() {
                let _ = writeln!(out, "{:<20} waiting: {}", "", j.waiting);
            }
            for t in j.tasks.iter().filter(|t| all_noisy(t)) {
                let _ = writeln!(out, "{:<20} task {}: {}", "", t.index, all_noisy_text(t));
            }
            // The unusual start only: a model carried over from another target.
            if j.model.starts_with("transferred") {
                let _ = writeln!(out, "{:<20} model: {}", "", j.model);
            }
        }
    }
    emit(&out)?;
    Ok(ExitCode::SUCCESS)
}
