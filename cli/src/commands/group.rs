//! A multi-target submission's group (`g-...`, one job per target) as the CLI follows it:
//! list, watch (a line per target as its job progresses) and cancel each of its jobs.

use crate::client::Clients;
use crate::show::job::{best_gflops, event_json, job_summary, state_name, trials};
use crate::usage::{UsageError, emit, status_error};
use anyhow::{Result, bail};
use std::process::ExitCode;
use tokio_stream::{StreamExt, StreamMap};
use tunehub_proto::v1 as pb;

/// Whether an id the user gave names a group rather than a job.
pub fn is_group(id: &str) -> bool {
    id.starts_with("g-")
}

/// The group's jobs, oldest first (the submission's target order); an unknown group is a
/// usage error.
pub async fn jobs_of(c: &mut Clients, group: &str) -> Result<Vec<pb::Job>> {
    let mut jobs = c
        .jobs
        .list(pb::ListJobsRequest {
            group: group.to_string(),
            limit: 10_000,
            ..Default::default()
        })
        .await
        .map_err(status_error)?
        .into_inner()
        .jobs;
    if jobs.is_empty() {
        return Err(UsageError(format!("no job group '{group}'")).into());
    }
    jobs.sort_by(|a, b| (a.created_at_ms, &a.id).cmp(&(b.created_at_ms, &b.id)));
    Ok(jobs)
}

/// One target's progress, one line.
pub fn target_line(j: &pb::Job) -> String {
    let (done, total) = trials(j);
    // Several tasks have no one best: the fastest task's, said so.
    let best = match (best_gflops(j), j.tasks.len()) {
        (None, _) => "-".to_string(),
        (Some(g), 0 | 1) => format!("{g:.2} GFLOP/s"),
        (Some(g), n) => format!("{g:.2} GFLOP/s (the fastest of {n} tasks)"),
    };
    let waiting = if j.waiting.is_empty() {
        String::new()
    } else {
        format!("  waiting: {}", j.waiting)
    };
    format!(
        "{:<28} {:<20} {:<9} {done}/{total} trials  best {}{waiting}\n",
        j.target_key,
        j.id,
        state_name(j.state),
        best,
    )
}

/// Follows every job of a group to its end: a line per target whenever its job progresses,
/// then each job's summary. Succeeds when every job ends done.
pub async fn watch_group(c: &mut Clients, group: &str, json_lines: bool) -> Result<ExitCode> {
    use pb::job_event::Event;
    let mut jobs = jobs_of(c, group).await?;
    let mut streams = StreamMap::new();
    for (i, j) in jobs.iter().enumerate() {
        let s = c
            .jobs
            .watch(pb::WatchRequest { id: j.id.clone() })
            .await
            .map_err(status_error)?
            .into_inner();
        streams.insert(i, s);
    }
    let mut ended = vec![false; jobs.len()];
    while let Some((i, ev)) = streams.next().await {
        let ev = ev.map_err(status_error)?;
        if json_lines {
            emit(&format!("{}\n", event_json(&ev)))?;
        }
        let job = &mut jobs[i];
        let changed = match ev.event {
            Some(Event::Snapshot(j)) => {
                *job = j;
                true
            }
            Some(Event::Done(j)) => {
                *job = j;
                ended[i] = true;
                true
            }
            Some(Event::Round(t)) => {
                if let Some(slot) = job.tasks.get_mut(t.index as usize) {
                    *slot = t;
                }
                true
            }
            _ => false,
        };
        if changed && !json_lines {
            emit(&target_line(job))?;
        }
    }
    if ended.iter().any(|e| !e) {
        bail!("the watch of group {group} ended before its jobs did");
    }
    if !json_lines {
        for j in &jobs {
            emit(&job_summary(j))?;
        }
    }
    let not_done: Vec<String> = jobs
        .iter()
        .filter(|j| j.state != pb::JobState::Done as i32)
        .map(|j| format!("{} ({}) {}", j.id, j.target_key, state_name(j.state)))
        .collect();
    if !not_done.is_empty() {
        bail!("group {group}: not done: {}", not_done.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}

/// Cancels each job of a group; a line per job as it is now.
pub async fn cancel_group(c: &mut Clients, group: &str) -> Result<ExitCode> {
    let jobs = jobs_of(c, group).await?;
    let mut out = String::new();
    for j in jobs {
        let j = c
            .jobs
            .cancel(pb::CancelJobRequest { id: j.id })
            .await
            .map_err(status_error)?
            .into_inner();
        out.push_str(&format!(
            "{} {} {}\n",
            j.id,
            j.target_key,
            state_name(j.state)
        ));
    }
    emit(&out)?;
    Ok(ExitCode::SUCCESS)
}
