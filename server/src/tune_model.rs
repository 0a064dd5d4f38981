//! `tunehub tune MODEL.onnx`: every task of a model as one job on the embedded server (Ansor's
//! gradient task scheduler with the tasks' weights by default), its end-to-end estimate after
//! every round, and a summary: each task's best and share, the estimate.

use crate::commands::{estimate_text, measure_proto, status_error};
use crate::tune::{TrialsDone, embedded, follow, progress_bar, run_seed, target_overrides};
use anyhow::{Context, Result, bail};
use serde_json::json;
use std::fmt::Write as _;
use std::process::ExitCode;
use tunehub_engine::target::Target;
use tunehub_onnx::TaskList;
use tunehub_proto::v1 as pb;
use tunehub_server::cli::{SchedulerArg, TuneArgs};

pub async fn tune_model(args: &TuneArgs, path: &str) -> Result<ExitCode> {
    // The model is read and its tasks checked before the database is touched.
    let list = crate::model::load_with(path, &args.model)?;
    crate::model::warn_skipped(&list);
    let target = Target::detect().with_overrides(&target_overrides(&args.target));
    let seed = run_seed(args);
    let n = u32::try_from(list.tasks.len()).context("too many tasks")?;
    let (running, mut c) = embedded(args, target, n).await?;
    let job = c
        .jobs
        .submit(pb::SubmitRequest {
            tasks: crate::model::task_specs(&list, args.trials),
            target: "local".into(),
            measure: Some(measure_proto(&args.measure)),
            batch_size: args.batch,
            seed,
            scheduler: match args.scheduler {
                SchedulerArg::Gradient => pb::SchedulerKind::Gradient,
                SchedulerArg::RoundRobin => pb::SchedulerKind::RoundRobin,
            } as i32,
            name: format!("tunehub tune {path}"),
            priority: 0,
            targets: vec![],
            range: None,
        })
        .await
        .map_err(status_error)?
        .into_inner()
        .job
        .context("the server returned no job")?;
    tracing::info!(job = %job.id, tasks = n, seed, "tuning {path}");
    let bar = progress_bar(args.trials.saturating_mul(n));
    bar.set_message("estimate: none yet");
    let mut done = TrialsDone::default();
    let job = follow(&running, &mut c, &job.id, &bar, |bar, e| match e {
        pb::job_event::Event::Round(t) => done.round(bar, &t),
        pb::job_event::Event::Estimate(e) => {
            bar.set_message(format!("estimate {}", estimate_text(&e)));
        }
        _ => {}
    })
    .await?;
    drop(c);
    running.shutdown().await?;
    if job.state == pb::JobState::Failed as i32 {
        bail!("the tuning job failed: {}", job.error);
    }
    let summary = Summary {
        path,
        list: &list,
        job: &job,
    };
    if args.json {
        crate::emit(&format!("{}\n", summary.json()))?;
    } else {
        crate::emit(&summary.text())?;
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
        let _ = writeln!(
            t,
            "model     {}  ({} tasks, {} operators, {:.3} GFLOP)",
            self.path,
            l.tasks.len(),
            l.tasks.iter().map(|t| t.weight).sum::<u32>(),
            l.flops() as f64 / 1e9
        );
        let _ = writeln!(t, "target    {}", j.target_key);
        let _ = writeln!(t, "seed      {}", j.seed);
        for (i, (task, p)) in l.tasks.iter().zip(&j.tasks).enumerate() {
            let best = match (p.best_seconds, p.best_gflops) {
                (Some(s), Some(g)) => format!(
                    "best {:.4} ms  {g:.2} GFLOP/s  {:.1}%",
                    s * 1e3,
                    p.share.unwrap_or(0.0) * 100.0
                ),
                _ => "no successful kernel".into(),
            };
            let _ = writeln!(
                t,
                "task {i:<4} x{} {}  {}/{} trials ({} ok)  {best}",
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
