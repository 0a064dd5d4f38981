//! `tunehub tune 'OP(m=LO..HI,...)'`: a shape range tuned on this machine as one job on the
//! embedded server (its representative shapes are the job's tasks, --trials each), then its
//! dispatch table: which shapes each representative serves, with its best record.

use super::{TuneArgs, embedded, run_job};
use crate::args::run_seed;
use crate::progress::{TrialsDone, progress_bar};
use crate::show::range::{range_json, range_text};
use crate::usage::{UsageError, emit, status_error};
use crate::workload;
use anyhow::{Result, bail};
use std::process::ExitCode;
use tunehub_engine::measure::MeasureOptions;
use tunehub_engine::transfer::range::MAX_REPRESENTATIVES;
use tunehub_proto::v1 as pb;

pub async fn run(args: &TuneArgs, spec: &str) -> Result<ExitCode> {
    // Parsed before the database is touched (the service checks it again, in full).
    let req_range = workload::range_from_spec(spec, args.trials)?;
    if args.print_source || args.out_c.is_some() {
        return Err(UsageError(
            "--print-source and --out-c take one shape; a range's shapes are answered by \
             `tunehub query` once it is tuned"
                .into(),
        )
        .into());
    }
    let seed = run_seed(args.seed);
    let mut service = embedded(args, MAX_REPRESENTATIVES as u32).await?;
    let req = pb::SubmitRequest {
        range: Some(req_range.clone()),
        target: "local".into(),
        measure: Some(args.measure.to_proto(&MeasureOptions::default())),
        batch_size: args.batch,
        seed,
        scheduler: args.scheduler.to_proto() as i32,
        name: format!("tunehub tune {}", req_range.spec),
        ..Default::default()
    };
    // The bar's length is known once the service has chosen the representatives.
    let bar = progress_bar(0);
    let mut done = TrialsDone::default();
    let job = run_job(&mut service, req, &bar, |bar, e| match e {
        pb::job_event::Event::Snapshot(j) => {
            let n = j.tasks.len() as u32;
            bar.set_length(u64::from(args.trials.saturating_mul(n)));
            bar.set_message(format!("{n} representative shapes"));
        }
        pb::job_event::Event::Round(t) => done.round(bar, &t),
        pb::job_event::Event::Candidate(c) => done.candidate(bar, &c),
        _ => {}
    })
    .await?;
    let table = service
        .clients
        .query
        .range(pb::RangeRequest {
            spec: req_range.spec.clone(),
            options: req_range.options.clone(),
            target: "local".into(),
        })
        .await
        .map_err(status_error)?
        .into_inner();
    service.shutdown().await?;
    if job.state == pb::JobState::Failed as i32 {
        bail!("the tuning job failed: {}", job.error);
    }
    if args.json {
        let mut v = range_json(&table);
        v["seed"] = serde_json::json!(job.seed);
        emit(&format!("{v}\n"))?;
    } else {
        emit(&range_text(&table))?;
    }
    if table.entries.iter().all(|e| e.record_id.is_empty()) {
        bail!(
            "no representative shape of {} has a successful kernel",
            req_range.spec
        );
    }
    Ok(ExitCode::SUCCESS)
}
