//! `tunehub tune 'OP(m=LO..HI,...)'`: a shape range tuned on this machine as one job on the
//! embedded server (its representative shapes are the job's tasks, --trials each), then its
//! dispatch table: which shapes each representative serves, with its best record.

use crate::commands::{measure_proto, range_json, range_text, status_error};
use crate::tune::{TrialsDone, embedded, follow, progress_bar, run_seed, target_overrides};
use anyhow::{Context, Result, bail};
use std::process::ExitCode;
use tunehub_engine::target::Target;
use tunehub_engine::transfer::range::{self, MAX_REPRESENTATIVES};
use tunehub_proto::v1 as pb;
use tunehub_server::cli::{SchedulerArg, TuneArgs, UsageError};
use tunehub_server::workload;

pub async fn tune_range(args: &TuneArgs, spec: &str) -> Result<ExitCode> {
    // Checked before the database is touched (the server checks it again, in full).
    let req_range = workload::range_from_spec(spec, args.trials);
    range::parse(&req_range.spec).map_err(|e| UsageError(e.to_string()))?;
    if args.print_source || args.out_c.is_some() {
        return Err(UsageError(
            "--print-source and --out-c take one shape; a range's shapes are answered by \
             `tunehub query` once it is tuned"
                .into(),
        )
        .into());
    }
    let target = Target::detect().with_overrides(&target_overrides(&args.target));
    let seed = run_seed(args);
    let (running, mut c) = embedded(args, target, MAX_REPRESENTATIVES as u32).await?;
    let job = c
        .jobs
        .submit(pb::SubmitRequest {
            tasks: vec![],
            range: Some(req_range.clone()),
            target: "local".into(),
            measure: Some(measure_proto(&args.measure)),
            batch_size: args.batch,
            seed,
            scheduler: match args.scheduler {
                SchedulerArg::Gradient => pb::SchedulerKind::Gradient,
                SchedulerArg::RoundRobin => pb::SchedulerKind::RoundRobin,
            } as i32,
            name: format!("tunehub tune {}", req_range.spec),
            priority: 0,
            targets: vec![],
        })
        .await
        .map_err(status_error)?
        .into_inner()
        .job
        .context("the server returned no job")?;
    let n = job.tasks.len() as u32;
    tracing::info!(job = %job.id, representatives = n, seed, "tuning the range {}", req_range.spec);
    let bar = progress_bar(args.trials.saturating_mul(n));
    bar.set_message(format!("{n} representative shapes"));
    let mut done = TrialsDone::default();
    let job = follow(&running, &mut c, &job.id, &bar, |bar, e| {
        if let pb::job_event::Event::Round(t) = e {
            done.round(bar, &t);
        }
    })
    .await?;
    let table = c
        .query
        .range(pb::RangeRequest {
            spec: req_range.spec.clone(),
            options: req_range.options.clone(),
            target: "local".into(),
        })
        .await
        .map_err(status_error)?
        .into_inner();
    drop(c);
    running.shutdown().await?;
    if job.state == pb::JobState::Failed as i32 {
        bail!("the tuning job failed: {}", job.error);
    }
    if args.json {
        let mut v = range_json(&table);
        v["seed"] = serde_json::json!(job.seed);
        crate::emit(&format!("{v}\n"))?;
    } else {
        crate::emit(&range_text(&table))?;
    }
    if table.entries.iter().all(|e| e.record_id.is_empty()) {
        bail!(
            "no representative shape of {} has a successful kernel",
            req_range.spec
        );
    }
    Ok(ExitCode::SUCCESS)
}
