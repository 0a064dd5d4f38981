//! `tunehub tune MODEL.onnx`: every task of a model as one job on the embedded server (Ansor's
//! gradient task scheduler with the tasks' weights by default), its end-to-end estimate after
//! every round, and a summary: each task's best and share, the estimate.

use super::{TuneArgs, embedded, run_job};
use crate::args::run_seed;
use crate::model;
use crate::progress::{TrialsDone, progress_bar};
use crate::show::job::estimate_text;
use crate::show::time::time_text;
use crate::usage::emit;
use anyhow::{Context, Result, bail};
use serde_json::json;
use std::fmt::Write as _;
use std::process::ExitCode;
use tunehub_engine::measure::MeasureOptions;
use tunehub_onnx::TaskList;
use tunehub_proto::v1 as pb;

pub async fn run(args: &TuneArgs, path: &str) -> Result<ExitCode> {
    // The model is read and its tasks checked before the database is touched.
    let list = model::load_with(path, &args.model)?;
    model::warn_skipped(&list);
    let n = u32::try_from(list.tasks.len()).context("too many tasks")?;
    let mut service = embedded(args, n).await?;
    let req = pb::SubmitRequest {
        tasks: model::task_specs(&list, args.trials),
        target: "local".into(),
        // A model's tasks are timed as the network runs them: cold.
        measure: Some(args.measure.to_proto(&MeasureOptions::cold())),
        batch_size: args.batch,
        seed: run_seed(args.seed),
        scheduler: args.scheduler.to_proto() as i32,
        name: format!("tunehub tune {path}"),
        ..Default::default()
    };
    let bar = progress_bar(args.trials.saturating_mul(n));
    bar.set_message("estimate: none yet");
    let mut done = TrialsDone::default();
    let job = run_job(&mut service, req, &bar, |bar, e| match e {
        pb::job_event::Event::Round(t) => done.round(bar, &t),
        pb::job_event::Event::Candidate(c) => done.candidate(bar, &c),
        pb::job_event::Event::Estimate(e) => {
            bar.set_message(format!("estimate {}", estimate_text(&e)));
        }
        _ => {}
    })
    .await?;
    service.shutdown().await?;
    if job.state == pb::JobState::Failed as i32 {
        bail!("the tuning job failed: {}", job.error);
    }
    let summary = Summary {
        path,
        list: &list,
        job: &job,
        db: &args.db.db,
    };
    if args.json {
        emit(&format!("{}\n", summary.json()))?;
    } else {
        emit(&summary.text())?;
    }
    match &job.estimate {
        Some(_) => Ok(ExitCode::SUCCESS),
        None => bail!("no task of {path} has a successful kernel: no estimate"),
    }
}

struct Summary<'a> {
    path: &'a str,
    list: &'a TaskList,
    job: &'a pb::Job,
    db: &'a str,
}

impl Summary<'_> {
    fn json(&self) -> serde_json::Value {
        let tasks: Vec<_> = self
            .list
            .tasks
            .iter()
            .zip(&self.job.tasks)
            .map(|(t, p)| {
                json!({
                    "label": t.label, "workload_key": p.workload_key, "weight": t.weight,
                    "flops": t.flops, "nodes": t.nodes, "trials_done": p.trials_done,
                    "ok": p.ok, "errors": p.errors, "best_seconds": p.best_seconds,
                    "best_gflops": p.best_gflops, "share": p.share,
                    "alternative": p.alternative,
                })
            })
            .collect();
        json!({
            "model": self.path,
            "job_id": self.job.id,
            "target_key": self.job.target_key,
            "seed": self.job.seed,
            "estimate": self.job.estimate.as_ref().map(|e| json!({"seconds": e.seconds, "missing": e.missing})),
            "tasks": tasks,
            "skipped": self.list.skipped,
        })
    }

    fn text(&self) -> String {
        let (l, j) = (self.list, self.job);
        let mut t = String::new();
        let network = || l.tasks.iter().filter(|t| !t.alternative);
        let _ = writeln!(
            t,
            "model     {}  ({} tasks, {} operators, {:.3} GFLOP; {} alternatives)",
            self.path,
            network().count(),
            network().map(|t| t.weight).sum::<u32>(),
            l.flops() as f64 / 1e9,
            l.tasks.len() - network().count()
        );
        let _ = writeln!(t, "target    {}", j.target_key);
        let _ = writeln!(t, "seed      {}", j.seed);
        let _ = writeln!(t, "{}", super::job_line(&j.id, self.db));
        for (i, (task, p)) in l.tasks.iter().zip(&j.tasks).enumerate() {
            let best = match (p.best_seconds, p.best_gflops) {
                (Some(s), Some(g)) => format!(
                    "best {}  {g:.2} GFLOP/s  {:.1}%",
                    time_text(s),
                    p.share.unwrap_or(0.0) * 100.0
                ),
                _ => "no successful kernel".into(),
            };
            let alt = if task.alternative {
                " (alternative)"
            } else {
                ""
            };
            let _ = writeln!(
                t,
                "task {i:<4} x{} {}{alt}  {}/{} trials ({} ok)  {best}",
                task.weight, task.label, p.trials_done, p.trials, p.ok
            );
        }
        for s in &l.skipped {
            let _ = writeln!(t, "skipped   {} ({}): {}", s.node, s.op, s.reason);
        }
        if let Some(e) = &j.estimate {
            let _ = writeln!(
                t,
                "estimate  {} end to end (sum of weight x best time; layout glue, copies and \
                 skipped nodes not counted)",
                estimate_text(e)
            );
        }
        t
    }
}
