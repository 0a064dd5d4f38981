//! `tunehub tune OP_SPEC` (or `--expr`): one operator's job, and what it found.

use super::{TuneArgs, embedded, run_job};
use crate::args::{WorkloadArgs, run_seed};
use crate::progress::{best_message, candidate, progress_bar};
use crate::show::record::record_json;
use crate::show::time::time_text;
use crate::show::workload::{label, short};
use crate::usage::{UsageError, emit, status_error};
use crate::workload;
use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::ExitCode;
use tunehub_engine::measure::MeasureOptions;
use tunehub_proto::v1 as pb;

/// The API's workload of OP_SPEC or --expr, checked here: bad input is refused before the
/// database is opened, so it creates no file.
fn build_workload(w: &WorkloadArgs) -> Result<pb::Workload, UsageError> {
    let workload = match (&w.op_spec, &w.expr) {
        (Some(spec), None) => workload::from_op_spec(spec)?,
        (None, Some(src)) => workload::from_expr(src),
        // clap's argument group admits exactly one of the two.
        _ => return Err(UsageError("give exactly one of OP_SPEC and --expr".into())),
    };
    workload::check(&workload)?;
    Ok(workload)
}

fn gflops(flops: u64, seconds: f64) -> f64 {
    flops as f64 / seconds / 1e9
}

/// The best record and the record counts of the workload, asked through the API.
async fn best_now(
    c: &mut crate::client::Clients,
    w: &pb::Workload,
    with_source: bool,
) -> Result<pb::BestResponse> {
    c.query
        .best_batch(pb::BestBatchRequest {
            workloads: vec![w.clone()],
            target: "local".into(),
            with_source,
            allow_transfer: false,
            symbol_prefix: String::new(),
            omit_kernel: true,
        })
        .await
        .map_err(status_error)?
        .into_inner()
        .results
        .pop()
        .context("the server answered no result")
}

pub async fn run(args: &TuneArgs) -> Result<ExitCode> {
    let workload = build_workload(&args.workload)?;
    let seed = run_seed(args.seed);
    let mut service = embedded(args, 1).await?;
    let before = best_now(&mut service.clients, &workload, false).await?;
    let best_before = before.record.as_ref().map(|r| r.record_id.clone());
    let req = pb::SubmitRequest {
        tasks: vec![pb::TaskSpec {
            workload: Some(workload.clone()),
            trials: args.trials,
            weight: 1.0,
            alternative: false,
        }],
        target: "local".into(),
        measure: Some(args.measure.to_proto(&MeasureOptions::default())),
        batch_size: args.batch,
        seed,
        scheduler: pb::SchedulerKind::Gradient as i32,
        name: "tunehub tune".into(),
        ..Default::default()
    };
    let bar = progress_bar(args.trials);
    bar.set_message(best_message(before.record.as_ref().map(|r| r.gflops)));
    let job = run_job(&mut service, req, &bar, |bar, e| match e {
        pb::job_event::Event::Round(t) => {
            bar.set_position(u64::from(t.trials_done));
            bar.set_message(best_message(t.best_gflops));
        }
        pb::job_event::Event::Candidate(c) => candidate(bar, u64::from(c.task_done), &c),
        _ => {}
    })
    .await?;
    let t = job.tasks.first().context("the job has no task")?.clone();

    let after = best_now(
        &mut service.clients,
        &workload,
        args.print_source || args.out_c.is_some(),
    )
    .await?;
    service.shutdown().await?;

    let state = pb::JobState::try_from(job.state).unwrap_or(pb::JobState::Unspecified);
    if state == pb::JobState::Failed {
        bail!("the tuning job failed: {}", job.error);
    }
    let interrupted = state == pb::JobState::Cancelled;
    let improved = after.record.as_ref().map(|r| &r.record_id) != best_before.as_ref()
        && after.record.is_some();
    let errors: BTreeMap<String, u32> = t.error_counts.clone().into_iter().collect();
    let stats = RunStats {
        trials: t.trials_done,
        ok: t.ok,
        noisy: t.noisy,
        errors,
        first_error: (!t.last_error.is_empty()).then(|| t.last_error.clone()),
        new_records: t.new_records,
        duplicates: t.trials_done - t.new_records,
        dropped: t.dropped,
        improved,
        interrupted,
        exhausted: t.exhausted,
    };
    let known = before.records_total;
    let failure = failure(&stats, after.record.is_some(), known);

    let source = (!after.source.is_empty()).then(|| after.source.clone());
    if let (Some(path), Some(src)) = (&args.out_c, &source) {
        std::fs::write(path, src)
            .with_context(|| format!("writing the kernel source to {}", path.display()))?;
    }
    let summary = TuneSummary {
        task: &t,
        target_key: &job.target_key,
        job_id: &job.id,
        db: &args.db.db,
        seed: job.seed,
        known,
        stats: &stats,
        best: after.record.as_ref(),
        total: after.records_total,
    };
    if args.json {
        let mut v = summary.json();
        if let Some(f) = &failure {
            v["error"] = json!(f);
        }
        if let (true, Some(src)) = (args.print_source, &source) {
            v["source"] = json!(src);
        }
        emit(&format!("{v}\n"))?;
    } else if failure.is_none() {
        let mut text = summary.text();
        if let (true, Some(src)) = (args.print_source, &source) {
            text.push_str(src);
            if !src.ends_with('\n') {
                text.push('\n');
            }
        }
        emit(&text)?;
    }
    match failure {
        Some(f) => Err(anyhow!(f)),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// Why a finished run has no answer, if it has none: `has_best` says whether the database now
/// holds a best record for the task, `known` how many records it held before.
fn failure(stats: &RunStats, has_best: bool, known: u64) -> Option<String> {
    if stats.trials > 0 && stats.ok == 0 {
        return Some(format!(
            "no candidate succeeded in {} trials ({}); last error: {}",
            stats.trials,
            stats.errors_text(),
            stats.first_error.as_deref().unwrap_or("-")
        ));
    }
    if has_best {
        return None;
    }
    Some(if stats.trials == 0 && stats.interrupted {
        "interrupted before any candidate was measured".to_string()
    } else if stats.trials == 0 {
        format!(
            "the sampler found no candidate that is not already recorded ({known} recorded, none succeeded)"
        )
    } else {
        // A time taken while the machine was slowed is never called the best, but the
        // measurements are kept: say what gets an answer.
        format!(
            "all {} successful candidates were timed on a noisy machine (kept, flagged noisy); \
             no time to trust as the best: run again when the machine is quieter (the search \
             continues from its records), or pass --noise-threshold 0 to turn the noise guard \
             off and accept times taken under load",
            stats.ok
        )
    })
}

/// What one `tune` run did (from its job's progress).
#[derive(Debug, Default)]
struct RunStats {
    trials: u32,
    /// Successes, the noisy ones included, and of them the noisy ones (never a best).
    ok: u32,
    noisy: u32,
    /// Failures by error name.
    errors: BTreeMap<String, u32>,
    first_error: Option<String>,
    new_records: u32,
    duplicates: u32,
    /// Results of an interrupted batch not recorded.
    dropped: u32,
    /// Whether the best record moved during this run.
    improved: bool,
    interrupted: bool,
    exhausted: bool,
}

impl RunStats {
    fn errors_text(&self) -> String {
        self.errors
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The end-of-run report.
struct TuneSummary<'a> {
    task: &'a pb::TaskProgress,
    target_key: &'a str,
    job_id: &'a str,
    db: &'a str,
    seed: u64,
    known: u64,
    stats: &'a RunStats,
    best: Option<&'a pb::ScheduleRecord>,
    total: u64,
}

impl TuneSummary<'_> {
    fn best_json(&self) -> Value {
        self.best.map_or(Value::Null, |b| {
            let mut v = record_json(b);
            v["this_run"] = json!(self.stats.improved);
            v
        })
    }
    fn json(&self) -> Value {
        let s = self.stats;
        json!({
            "workload_key": self.task.workload_key,
            "description": self.task.description,
            "layout_free": crate::show::workload::layout_free(self.task.options.as_ref()),
            "flops": self.task.flops,
            "target_key": self.target_key,
            "job_id": self.job_id,
            "seed": self.seed,
            "trials": s.trials,
            "ok": s.ok,
            "noisy": s.noisy,
            "errors": s.errors,
            "new_records": s.new_records,
            "duplicates": s.duplicates,
            "dropped_on_interrupt": s.dropped,
            "already_recorded": self.known,
            "records_total": self.total,
            "interrupted": s.interrupted,
            "exhausted": s.exhausted,
            "best": self.best_json(),
        })
    }

    fn text(&self) -> String {
        let s = self.stats;
        let mut t = String::new();
        let _ = writeln!(
            t,
            "workload  {}  {}  ({:.3} GFLOP)",
            self.task.workload_key,
            short(&label(&self.task.description, self.task.options.as_ref())),
            self.task.flops as f64 / 1e9
        );
        let _ = writeln!(t, "target    {}", self.target_key);
        let _ = writeln!(t, "seed      {}", self.seed);
        let _ = writeln!(t, "{}", super::job_line(self.job_id, self.db));
        let failed = if s.errors.is_empty() {
            String::new()
        } else {
            format!(", failed: {}", s.errors_text())
        };
        let noisy = if s.noisy > 0 {
            format!(", {} noisy", s.noisy)
        } else {
            String::new()
        };
        let _ = writeln!(
            t,
            "trials    {} ({} ok{noisy}{failed})",
            s.trials,
            s.ok.saturating_sub(s.noisy)
        );
        let _ = writeln!(
            t,
            "records   {} new, {} duplicate; {} in the database for this workload and target",
            s.new_records, s.duplicates, self.total
        );
        if s.interrupted {
            let dropped = match s.dropped {
                0 => String::new(),
                n => format!(
                    " ({n} failures of the last batch, perhaps caused by the interrupt, not recorded)"
                ),
            };
            let _ = writeln!(t, "stopped   interrupted{dropped}");
        } else if s.exhausted {
            let _ = writeln!(t, "stopped   the sampler found no more new candidates");
        }
        if let Some(b) = self.best {
            let cost = b.seconds;
            let when = if s.improved {
                "found in this run"
            } else {
                "from an earlier run"
            };
            let _ = writeln!(
                t,
                "best      {}  {:.2} GFLOP/s  (record {}, {when})",
                time_text(cost),
                gflops(self.task.flops, cost),
                b.record_id
            );
            let _ = writeln!(t, "steps     {}", b.steps_json);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_with_only_noisy_times_says_what_to_do() {
        let stats = RunStats {
            trials: 4,
            ok: 3,
            new_records: 4,
            ..RunStats::default()
        };
        let f = failure(&stats, false, 0).expect("no best: a failure");
        assert!(f.contains("all 3 successful candidates"), "{f}");
        assert!(f.contains("kept"), "{f}");
        assert!(f.contains("--noise-threshold 0"), "{f}");
        assert!(f.contains("quieter"), "{f}");
        assert_eq!(failure(&stats, true, 0), None);
    }
}
