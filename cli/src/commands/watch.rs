//! `tunehub watch`: follows a job to its end, a progress bar per task, then its summary; or a
//! group's jobs, a line per target.

use super::group;
use crate::client::{ClientArgs, Clients, connect_with};
use crate::progress::{bar_message, bar_style, candidate};
use crate::show::job::{estimate_text, event_json, job_summary, state_name};
use crate::usage::{emit, status_error};
use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use std::process::ExitCode;
use std::time::Duration;
use tokio_stream::StreamExt;
use tunehub_proto::v1 as pb;

#[derive(Debug, Clone, Args)]
pub struct WatchArgs {
    /// The job's id (from `tunehub submit` or `tunehub jobs`), or a group's (`g-...`: a line
    /// per target as its jobs progress).
    #[arg(value_name = "JOB")]
    pub job: String,

    /// Print each event as a JSON line instead of progress bars.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub client: ClientArgs,
}

pub async fn run(args: WatchArgs) -> Result<ExitCode> {
    let mut c = connect_with(&args.client).await?;
    if group::is_group(&args.job) {
        return group::watch_group(&mut c, &args.job, args.json).await;
    }
    watch_job(&mut c, &args.job, args.json).await
}

/// Follows a job to its end; a progress bar per task (on a terminal), then a summary.
pub async fn watch_job(c: &mut Clients, id: &str, json_lines: bool) -> Result<ExitCode> {
    use pb::job_event::Event;
    let mut stream = c
        .jobs
        .watch(pb::WatchRequest { id: id.to_string() })
        .await
        .map_err(status_error)?
        .into_inner();
    let multi = MultiProgress::new();
    let mut bars: Vec<ProgressBar> = vec![];
    let style = bar_style();
    let mut last: Option<pb::Job> = None;
    let mut estimate_bar: Option<ProgressBar> = None;
    while let Some(ev) = stream.next().await {
        let ev = ev.map_err(status_error)?;
        if json_lines {
            emit(&format!("{}\n", event_json(&ev)))?;
        }
        match ev.event {
            Some(Event::Snapshot(job)) if !bars.is_empty() => {
                // Again, when why it waits changed (a quarantined worker, say).
                if !job.waiting.is_empty() && !json_lines {
                    let _ = multi.println(format!("waiting: {}", job.waiting));
                }
                last = Some(job);
            }
            Some(Event::Snapshot(job)) => {
                for t in &job.tasks {
                    let pb = multi.add(ProgressBar::new(u64::from(t.trials)));
                    pb.set_style(style.clone());
                    pb.set_position(u64::from(t.trials_done));
                    pb.set_message(bar_message(t));
                    pb.enable_steady_tick(Duration::from_millis(200));
                    bars.push(pb);
                }
                last = Some(job);
            }
            Some(Event::Round(t)) => {
                if let Some(b) = bars.get(t.index as usize) {
                    b.set_position(u64::from(t.trials_done));
                    b.set_message(bar_message(&t));
                }
            }
            Some(Event::Candidate(c)) => {
                if let Some(b) = bars.get(c.task_index as usize) {
                    candidate(b, u64::from(c.task_done), &c);
                }
            }
            Some(Event::Estimate(e)) if !json_lines && bars.len() > 1 => {
                estimate_bar
                    .get_or_insert_with(|| {
                        let b = multi.add(ProgressBar::new_spinner());
                        b.set_style(
                            ProgressStyle::with_template("  {msg}").expect("a valid template"),
                        );
                        b
                    })
                    .set_message(format!("end-to-end estimate {}", estimate_text(&e)));
            }
            Some(Event::NewBest(_) | Event::Error(_) | Event::Estimate(_)) | None => {}
            Some(Event::Done(job)) => {
                last = Some(job);
                break;
            }
        }
    }
    for b in bars.iter().chain(&estimate_bar) {
        b.finish_and_clear();
    }
    let job = last.context("the watch ended before the job did")?;
    if !json_lines {
        emit(&job_summary(&job))?;
    }
    match pb::JobState::try_from(job.state) {
        Ok(pb::JobState::Done) => Ok(ExitCode::SUCCESS),
        Ok(pb::JobState::Failed) => bail!("job {} failed: {}", job.id, job.error),
        _ => bail!("job {} ended {}", job.id, state_name(job.state)),
    }
}
