//! Jobs as people and scripts read them: states, progress, events, the summary at the end.

use super::time::time_text;
use super::workload::{label, layout_free, short};
use crate::usage::{UsageError, one_line};
use anyhow::Result;
use serde_json::json;
use std::fmt::Write as _;
use tunehub_proto::v1 as pb;

pub fn state_name(s: i32) -> &'static str {
    match pb::JobState::try_from(s) {
        Ok(pb::JobState::Queued) => "queued",
        Ok(pb::JobState::Running) => "running",
        Ok(pb::JobState::Done) => "done",
        Ok(pb::JobState::Failed) => "failed",
        Ok(pb::JobState::Cancelled) => "cancelled",
        _ => "unknown",
    }
}

pub fn parse_state(s: &str) -> Result<pb::JobState> {
    Ok(match s {
        "queued" => pb::JobState::Queued,
        "running" => pb::JobState::Running,
        "done" => pb::JobState::Done,
        "failed" => pb::JobState::Failed,
        "cancelled" => pb::JobState::Cancelled,
        _ => {
            return Err(UsageError(format!(
                "unknown state '{s}' (queued, running, done, failed, cancelled)"
            ))
            .into());
        }
    })
}

/// A job's trials done and asked for, over its tasks.
pub fn trials(j: &pb::Job) -> (u32, u32) {
    (
        j.tasks.iter().map(|t| t.trials_done).sum(),
        j.tasks.iter().map(|t| t.trials).sum(),
    )
}

/// A job's candidates by outcome over its tasks, `ok/noisy/errors`: clean successes, those
/// timed on a slowed machine (never a best), failures.
pub fn outcomes_cell(j: &pb::Job) -> String {
    let (ok, noisy, errors) = j.tasks.iter().fold((0, 0, 0), |(o, n, e), t| {
        (o + t.ok.saturating_sub(t.noisy), n + t.noisy, e + t.errors)
    });
    format!("{ok}/{noisy}/{errors}")
}

/// Every success of the task was timed while the machine was slowed: it has no best.
pub fn all_noisy(t: &pb::TaskProgress) -> bool {
    t.ok > 0 && t.noisy == t.ok
}

/// Why a task whose successes are all noisy has no best, and what to do.
pub fn all_noisy_text(t: &pb::TaskProgress) -> String {
    format!(
        "no best: all {} successful measurements were timed while the machine was slowed \
         (noisy); tune again on a quieter machine (nothing else running), or pass a lower \
         --noise-threshold (say 0.7) to accept a busier one",
        t.noisy
    )
}

/// The fastest of a job's tasks' bests, in GFLOP/s.
pub fn best_gflops(j: &pb::Job) -> Option<f64> {
    j.tasks
        .iter()
        .filter_map(|t| t.best_gflops)
        .reduce(f64::max)
}

/// A job's best for a listing's column: its task's best GFLOP/s; with several tasks, the
/// fastest task's, labelled `max` (a model's tasks differ in kind and size: no one of them is
/// the job's best).
pub fn best_gflops_cell(j: &pb::Job) -> String {
    match (best_gflops(j), j.tasks.len()) {
        (None, _) => "-".into(),
        (Some(g), 0 | 1) => format!("{g:.2}"),
        (Some(g), _) => format!("max {g:.2}"),
    }
}

pub fn task_json(t: &pb::TaskProgress) -> serde_json::Value {
    json!({
        "index": t.index,
        "workload_key": t.workload_key,
        "description": t.description,
        "layout_free": layout_free(t.options.as_ref()),
        "flops": t.flops,
        "weight": t.weight,
        "trials": t.trials,
        "trials_done": t.trials_done,
        "ok": t.ok,
        "noisy": t.noisy,
        "errors": t.errors,
        "error_counts": t.error_counts,
        "new_records": t.new_records,
        "best_seconds": t.best_seconds,
        "best_gflops": t.best_gflops,
        "best_record_id": t.best_record_id,
        "last_error": t.last_error,
        "exhausted": t.exhausted,
        "share": t.share,
        "alternative": t.alternative,
        "rounds": t.rounds,
        "search_s": t.search_s,
        "model_s": t.model_s,
        "measure_s": t.measure_s,
        "build_s": t.build_s,
        "run_s": t.run_s,
    })
}

pub fn estimate_json(e: Option<&pb::Estimate>) -> serde_json::Value {
    e.map_or(
        serde_json::Value::Null,
        |e| json!({"seconds": e.seconds, "missing": e.missing}),
    )
}

/// The end-to-end estimate for people: `12.35 ms (2 tasks without a best, not counted)`.
pub fn estimate_text(e: &pb::Estimate) -> String {
    let missing = match e.missing {
        0 => String::new(),
        n => format!(" ({n} tasks without a best, not counted)"),
    };
    format!("{}{missing}", time_text(e.seconds))
}

pub fn job_json(j: &pb::Job) -> serde_json::Value {
    json!({
        "id": j.id,
        "name": j.name,
        "state": state_name(j.state),
        "target_key": j.target_key,
        "seed": j.seed,
        "batch_size": j.batch_size,
        "created_at_ms": j.created_at_ms,
        "updated_at_ms": j.updated_at_ms,
        "error": j.error,
        "claimed_by": j.claimed_by,
        "claims": j.claims,
        "owner": j.owner,
        "priority": j.priority,
        "model": j.model,
        "cost_model": j.cost_model,
        "group": j.group,
        "waiting": j.waiting,
        "tasks": j.tasks.iter().map(task_json).collect::<Vec<_>>(),
        "estimate": estimate_json(j.estimate.as_ref()),
    })
}

pub fn candidate_json(c: &pb::CandidateProgress) -> serde_json::Value {
    let stage = match c.stage() {
        pb::CandidateStage::Built => "built",
        pb::CandidateStage::Measured => "measured",
        pb::CandidateStage::Unspecified => "unspecified",
    };
    json!({
        "stage": stage,
        "round_built": c.round_built,
        "round_size": c.round_size,
        "task_index": c.task_index,
        "task_done": c.task_done,
        "task_trials": c.task_trials,
        "job_done": c.job_done,
        "job_trials": c.job_trials,
        "ok": c.ok,
        "noisy": c.noisy,
        "error": c.error,
        "trials_per_s": c.trials_per_s,
        "eta_s": c.eta_s,
    })
}

pub fn event_json(ev: &pb::JobEvent) -> serde_json::Value {
    use pb::job_event::Event;
    let (kind, body) = match &ev.event {
        Some(Event::Snapshot(j)) => ("snapshot", job_json(j)),
        Some(Event::Done(j)) => ("done", job_json(j)),
        Some(Event::Round(t)) => ("round", task_json(t)),
        Some(Event::NewBest(b)) => (
            "new_best",
            json!({"task_index": b.task_index, "record_id": b.record_id, "seconds": b.seconds, "gflops": b.gflops}),
        ),
        Some(Event::Error(e)) => (
            "error",
            json!({"task_index": e.task_index, "errors": e.errors, "message": e.message}),
        ),
        Some(Event::Estimate(e)) => ("estimate", estimate_json(Some(e))),
        Some(Event::Candidate(c)) => ("candidate", candidate_json(c)),
        None => ("none", serde_json::Value::Null),
    };
    json!({"job_id": ev.job_id, "at_ms": ev.at_ms, "event": kind, "data": body})
}

pub fn job_summary(j: &pb::Job) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "job       {}  {}", j.id, state_name(j.state));
    let _ = writeln!(t, "target    {}", j.target_key);
    for task in &j.tasks {
        let best = task.best_gflops.map_or_else(
            || {
                if all_noisy(task) {
                    "no trusted record (all noisy)".to_string()
                } else {
                    "no successful record".to_string()
                }
            },
            |g| {
                format!(
                    "best {}  {g:.2} GFLOP/s",
                    time_text(task.best_seconds.unwrap_or(f64::NAN))
                )
            },
        );
        let noisy = if task.noisy > 0 {
            format!("{} noisy, ", task.noisy)
        } else {
            String::new()
        };
        let weight = if task.weight == 1.0 {
            String::new()
        } else {
            format!("x{} ", task.weight)
        };
        let share = task
            .share
            .filter(|_| j.tasks.len() > 1)
            .map_or(String::new(), |s| {
                format!("  {:.1}% of the estimate", s * 100.0)
            });
        let _ = writeln!(
            t,
            "task {}    {weight}{}  {}/{} trials ({} ok, {noisy}{} failed)  {best}{share}",
            task.index,
            short(&label(&task.description, task.options.as_ref())),
            task.trials_done,
            task.trials,
            task.ok.saturating_sub(task.noisy),
            task.errors
        );
        if all_noisy(task) {
            let _ = writeln!(t, "          {}", all_noisy_text(task));
        }
    }
    if let (true, Some(e)) = (j.tasks.len() > 1, &j.estimate) {
        let _ = writeln!(
            t,
            "estimate  {} end to end (sum of weight x best time; layout glue and copies not counted)",
            estimate_text(e)
        );
    }
    if !j.error.is_empty() {
        let _ = writeln!(t, "error     {}", one_line(&j.error));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(index: u32, seconds: f64, gflops: f64) -> pb::TaskProgress {
        pb::TaskProgress {
            index,
            description: "matmul(m=2,n=2,k=2)".into(),
            weight: 1.0,
            trials: 4,
            trials_done: 4,
            ok: 4,
            best_seconds: Some(seconds),
            best_gflops: Some(gflops),
            ..Default::default()
        }
    }

    #[test]
    fn a_jobs_best_is_labelled_when_it_is_its_fastest_tasks() {
        let mut j = pb::Job {
            tasks: vec![task(0, 29e-9, 0.55)],
            ..Default::default()
        };
        assert_eq!(best_gflops_cell(&j), "0.55");
        j.tasks.push(task(1, 1e-6, 2.25));
        assert_eq!(best_gflops_cell(&j), "max 2.25");
        j.tasks.iter_mut().for_each(|t| t.best_gflops = None);
        assert_eq!(best_gflops_cell(&j), "-");
    }

    #[test]
    fn the_summary_shows_a_nanosecond_kernels_digits() {
        let j = pb::Job {
            id: "j-1".into(),
            tasks: vec![task(0, 29e-9, 0.55)],
            ..Default::default()
        };
        let s = job_summary(&j);
        assert!(s.contains("best 29.00 ns  0.55 GFLOP/s"), "{s}");
        let e = pb::Estimate {
            seconds: 1.5e-4,
            missing: 0,
        };
        assert_eq!(estimate_text(&e), "150.0 µs");
    }
}
