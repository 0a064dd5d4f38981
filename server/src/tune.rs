//! `tunehub tune` and `tunehub best`.
//!
//! `tune` is a client of the same API as every other: it starts an embedded server on the
//! SQLite file (loopback, a random token, a local runner), submits one job, follows it, asks for
//! the best record, prints, and stops the server. `best` reads the database file directly.

use crate::commands::{measure_proto, status_error};
use anyhow::{Context, Result, anyhow, bail};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio_stream::StreamExt;
use tunehub_engine::package;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::target::{Target, TargetOverrides};
use tunehub_engine::task::Task;
use tunehub_proto::v1 as pb;
use tunehub_server::cli::{BestArgs, MAX_TRIALS, TuneArgs, UsageError, WorkloadArgs};
use tunehub_server::client::{self, Clients};
use tunehub_server::config::{ClientConfig, Limits, ServerConfig, TargetArgs};
use tunehub_server::jobs::{self, LocalBackend};
use tunehub_server::records::{Record, RecordStore, SqlStore};
use tunehub_server::server;
use tunehub_server::workload;

/// What records measured by `tune` are marked with.
const WORKER: &str = "local";

/// The task and the API's workload of OP_SPEC or --expr: a `layout_free=` argument inside
/// OP_SPEC becomes the workload's typed option here, at the door. Bad input is a `UsageError`.
fn build_workload(w: &WorkloadArgs) -> Result<(Task, pb::Workload), UsageError> {
    let workload = match (&w.op_spec, &w.expr) {
        (Some(spec), None) => workload::from_op_spec(spec),
        (None, Some(src)) => workload::from_expr(src),
        // clap's argument group admits exactly one of the two.
        _ => return Err(UsageError("give exactly one of OP_SPEC and --expr".into())),
    };
    let task = workload::task_of(&workload)
        .expect("an op spec or a text form")
        .map_err(UsageError)?;
    Ok((task, workload))
}

/// How a task is shown to people: its description with its options.
fn task_label(task: &Task) -> String {
    workload::label(
        &task.desc,
        workload::options_to_pb(&task.options()).as_ref(),
    )
}

pub(crate) fn target_overrides(t: &TargetArgs) -> TargetOverrides {
    TargetOverrides {
        cores: t.cores.map(|c| c as usize),
        compiler: t.compiler.clone(),
        cflags: t.cflags_list(),
        march: t.march.clone(),
        ..TargetOverrides::default()
    }
}

fn gflops(flops: u64, seconds: f64) -> f64 {
    flops as f64 / seconds / 1e9
}

/// The first line of a multi-line workload description (the text form spans lines).
fn short_desc(desc: &str) -> &str {
    let first = desc.lines().next().unwrap_or("");
    if first.len() < desc.len() {
        first.trim_end()
    } else {
        desc
    }
}

pub(crate) fn progress_bar(trials: u32) -> ProgressBar {
    // indicatif draws on stderr, and not at all when stderr is not a terminal.
    let pb = ProgressBar::new(u64::from(trials));
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} {elapsed_precise} [{bar:30}] {pos}/{len} trials  {msg}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    pb.enable_steady_tick(Duration::from_millis(200));
    pb
}

fn best_message(best_gflops: Option<f64>) -> String {
    best_gflops.map_or_else(
        || "best: none yet".into(),
        |g| format!("best {g:.2} GFLOP/s"),
    )
}

/// The best record and the record counts of the workload, asked through the API.
async fn best_now(
    c: &mut Clients,
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

/// Runs the submitted job on the embedded server to its end (Ctrl-C cancels it), showing its
/// progress: `on_event` updates `bar` from each of its events. The job as it ended.
pub(crate) async fn follow(
    running: &server::RunningServer,
    c: &mut Clients,
    job_id: &str,
    bar: &ProgressBar,
    mut on_event: impl FnMut(&ProgressBar, pb::job_event::Event),
) -> Result<pb::Job> {
    let runner = tokio::spawn(jobs::run_one(running.ctx.clone(), job_id.to_string()));
    cancel_on_interrupt(c.clone(), job_id.to_string());
    let mut events = c
        .jobs
        .watch(pb::WatchRequest {
            id: job_id.to_string(),
        })
        .await
        .map_err(status_error)?
        .into_inner();
    let mut end = None;
    while let Some(ev) = events.next().await {
        match ev.map_err(status_error)?.event {
            Some(pb::job_event::Event::Done(j)) => {
                end = Some(j);
                break;
            }
            Some(e) => on_event(bar, e),
            None => {}
        }
    }
    bar.finish_and_clear();
    runner.await.context("the job runner panicked")??;
    end.context("the job's progress stream ended early")
}

/// Trials done over all tasks, from each task's latest Round event (for a job's one bar).
#[derive(Default)]
pub(crate) struct TrialsDone(std::collections::HashMap<u32, u32>);

impl TrialsDone {
    pub(crate) fn round(&mut self, bar: &ProgressBar, t: &pb::TaskProgress) {
        self.0.insert(t.index, t.trials_done);
        bar.set_position(u64::from(self.0.values().sum::<u32>()));
    }
}

/// The first Ctrl-C cancels the job (it stops after the current batch); a second exits at
/// once. Each batch is one transaction, so either way the database is whole.
pub(crate) fn cancel_on_interrupt(mut c: Clients, job_id: String) {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("interrupted: finishing the current batch (Ctrl-C again to quit now)");
            let _ = c.jobs.cancel(pb::CancelJobRequest { id: job_id }).await;
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    });
}

/// The seed of a run: given, or from the clock; never 0, which the API reads as "choose one".
pub(crate) fn run_seed(args: &TuneArgs) -> u64 {
    let seed = args.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    seed.max(1)
}

/// The embedded server (loopback only, a token of its own, this machine's runner) and a
/// client of it.
pub(crate) async fn embedded(
    args: &TuneArgs,
    target: Target,
    max_tasks_per_job: u32,
) -> Result<(server::RunningServer, Clients)> {
    let token = format!("{:032x}", rand::random::<u128>());
    let cfg = ServerConfig {
        advertise_addr: None,
        listen: "127.0.0.1:0".parse().expect("a valid address"),
        metrics_addr: None,
        db: args.db.db.clone(),
        tokens: vec![tunehub_server::auth::ApiToken::admin(0, token.clone())],
        allow_unauthenticated: false,
        tls: None,
        tls_worker_ca: None,
        limits: Limits {
            max_trials_per_job: MAX_TRIALS.saturating_mul(max_tasks_per_job),
            max_tasks_per_job,
            ..Limits::default()
        },
        lease_ms: 30_000,
        poll_ms: 200,
        heartbeat_ms: 1000,
        cache_ttl_ms: 0,
        jobs_per_pool: tunehub_server::jobs::DEFAULT_JOBS_PER_POOL,
        instance: WORKER.into(),
        target: TargetOverrides::default(),
        population: args.population.map_or(2048, |p| p as usize),
        run_jobs: false,
        tune_transferred: None,
    };
    let running = server::start_with(&cfg, Arc::new(LocalBackend::new(target))).await?;
    let c = client::connect(&ClientConfig {
        server: format!("http://{}", running.addr),
        token: Some(token),
        ca_cert: None,
    })
    .await?;
    Ok((running, c))
}

pub async fn tune(args: TuneArgs) -> Result<ExitCode> {
    if let Some(model) = args
        .workload
        .op_spec
        .as_deref()
        .filter(|s| tunehub_onnx::is_model_path(s))
    {
        return crate::tune_model::tune_model(&args, model).await;
    }
    if let Some(spec) = args
        .workload
        .op_spec
        .as_deref()
        .filter(|s| workload::is_range(s))
    {
        return crate::tune_range::tune_range(&args, spec).await;
    }
    // All input is checked before the database is touched: bad input stores nothing.
    let (task, workload) = build_workload(&args.workload)?;
    let target = Target::detect().with_overrides(&target_overrides(&args.target));
    let seed = run_seed(&args);
    let (running, mut c) = embedded(&args, target, 1).await?;

    let before = best_now(&mut c, &workload, false).await?;
    let best_before = before.record.as_ref().map(|r| r.record_id.clone());
    let job = c
        .jobs
        .submit(pb::SubmitRequest {
            tasks: vec![pb::TaskSpec {
                workload: Some(workload.clone()),
                trials: args.trials,
                weight: 1.0,
            }],
            target: "local".into(),
            measure: Some(measure_proto(&args.measure)),
            batch_size: args.batch,
            seed,
            scheduler: pb::SchedulerKind::Gradient as i32,
            name: "tunehub tune".into(),
            priority: 0,
            targets: vec![],
            range: None,
        })
        .await
        .map_err(status_error)?
        .into_inner()
        .job
        .context("the server returned no job")?;
    tracing::info!(job = %job.id, workload = %task.key, seed, known = before.records_total, "tuning {}", short_desc(&task_label(&task)));
    let bar = progress_bar(args.trials);
    bar.set_message(best_message(before.record.as_ref().map(|r| r.gflops)));
    let job = follow(&running, &mut c, &job.id, &bar, |bar, e| {
        if let pb::job_event::Event::Round(t) = e {
            bar.set_position(u64::from(t.trials_done));
            bar.set_message(best_message(t.best_gflops));
        }
    })
    .await?;
    let t = job.tasks.first().context("the job has no task")?.clone();

    let after = best_now(&mut c, &workload, args.print_source || args.out_c.is_some()).await?;
    drop(c);
    running.shutdown().await?;

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
        task: &task,
        target_key: &job.target_key,
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
        crate::emit(&format!("{v}\n"))?;
    } else if failure.is_none() {
        let mut text = summary.text();
        if let (true, Some(src)) = (args.print_source, &source) {
            text.push_str(src);
            if !src.ends_with('\n') {
                text.push('\n');
            }
        }
        crate::emit(&text)?;
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
    ok: u32,
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

/// The best record's linkable kernel (as the Query API answers it: named for the pair, with the
/// task's layout-free inputs packed as measured).
fn kernel_source(
    task: &Task,
    description: String,
    target_key: &str,
    target: &Target,
    best: &Record,
) -> Result<String> {
    let schedule = Schedule::from_json(&best.steps_json)
        .map_err(|e| anyhow!("record {}: its steps no longer replay: {e}", best.id))?;
    let provenance = package::Provenance {
        record_id: best.id.clone(),
        workload_key: task.key.clone(),
        target_key: target_key.to_string(),
        description,
        gflops: best.mean_cost.map_or(0.0, |c| task.flops as f64 / c / 1e9),
    };
    package::kernel(task, &schedule, target, provenance, "")
        .map(|k| k.source)
        .map_err(|e| anyhow!("record {}: generating its kernel: {e}", best.id))
}

/// The end-of-run report.
struct TuneSummary<'a> {
    task: &'a Task,
    target_key: &'a str,
    seed: u64,
    known: u64,
    stats: &'a RunStats,
    best: Option<&'a pb::ScheduleRecord>,
    total: u64,
}

impl TuneSummary<'_> {
    fn best_json(&self) -> Value {
        self.best.map_or(Value::Null, |b| {
            let mut v = crate::commands::record_json(b);
            v["this_run"] = json!(self.stats.improved);
            v
        })
    }
    fn json(&self) -> Value {
        let s = self.stats;
        json!({
            "workload_key": self.task.key,
            "description": self.task.desc,
            "layout_free": self.task.options().layout_free,
            "flops": self.task.flops,
            "target_key": self.target_key,
            "seed": self.seed,
            "trials": s.trials,
            "ok": s.ok,
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
            self.task.key,
            short_desc(&task_label(self.task)),
            self.task.flops as f64 / 1e9
        );
        let _ = writeln!(t, "target    {}", self.target_key);
        let _ = writeln!(t, "seed      {}", self.seed);
        let failed = if s.errors.is_empty() {
            String::new()
        } else {
            format!(", failed: {}", s.errors_text())
        };
        let _ = writeln!(t, "trials    {} ({} ok{failed})", s.trials, s.ok);
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
                "best      {:.4} ms  {:.2} GFLOP/s  (record {}, {when})",
                cost * 1e3,
                gflops(self.task.flops, cost),
                b.record_id
            );
            let _ = writeln!(t, "steps     {}", b.steps_json);
        }
        t
    }
}

/// A record as the JSON outputs show it.
fn record_json(b: &Record, flops: u64, this_run: Option<bool>) -> Value {
    let cost = b.mean_cost.unwrap_or(f64::NAN);
    let mut v = json!({
        "record_id": b.id,
        "mean_ms": cost * 1e3,
        "gflops": gflops(flops, cost),
        "costs": b.costs,
        "worker": b.worker,
        "created_at_ms": b.created_at,
        "steps": serde_json::from_str::<Value>(&b.steps_json).unwrap_or(Value::Null),
    });
    if let Some(r) = this_run {
        v["this_run"] = json!(r);
    }
    v
}

/// Whether the database named by --db exists; `best` only reads, so it does not create one.
fn database_exists(db: &str) -> bool {
    db.contains("://") || db.starts_with("sqlite:") || Path::new(db).exists()
}

pub async fn best(args: BestArgs) -> Result<ExitCode> {
    let (task, _) = build_workload(&args.workload)?;
    let desc = task_label(&task);
    let key = task.key.clone();
    let target_key = match &args.target_key {
        Some(k) => k.clone(),
        None => Target::detect()
            .with_overrides(&target_overrides(&args.target))
            .key(),
    };
    if !database_exists(&args.db.db) {
        bail!(
            "no database at {} (`tunehub tune` creates it; --db or TUNEHUB_DB choose another)",
            args.db.db
        );
    }
    let store = SqlStore::open(&args.db.db).await?;
    let Some(best) = store.best(&key, &target_key).await? else {
        let others = store.targets_of(&key).await?;
        let also = others
            .iter()
            .filter(|(t, _)| *t != target_key)
            .map(|(t, n)| format!("{t} ({n})"))
            .collect::<Vec<_>>();
        let hint = if also.is_empty() {
            String::new()
        } else {
            format!("; records exist on: {}", also.join(", "))
        };
        bail!(
            "no successful record of workload {key} ({}) on target {target_key}{hint}",
            short_desc(&desc)
        );
    };
    let flops = task.flops;
    let counts = store.count(&key, &target_key).await?;
    let source = if args.print_source || args.out_c.is_some() {
        let json = store
            .target_json(&target_key)
            .await?
            .with_context(|| format!("target {target_key} has records but no description"))?;
        let target: Target =
            serde_json::from_str(&json).with_context(|| format!("reading target {target_key}"))?;
        // Named by the stored description, as the Query API names it.
        let description = store
            .workload(&key)
            .await?
            .and_then(|w| w.description)
            .unwrap_or_else(|| task.desc.clone());
        Some(kernel_source(
            &task,
            description,
            &target_key,
            &target,
            &best,
        )?)
    } else {
        None
    };
    if let (Some(path), Some(src)) = (&args.out_c, &source) {
        std::fs::write(path, src)
            .with_context(|| format!("writing the kernel source to {}", path.display()))?;
    }
    let source = source.filter(|_| args.print_source);
    if args.json {
        let mut v = json!({
            "workload_key": key,
            "description": task.desc,
            "layout_free": task.options().layout_free,
            "flops": flops,
            "target_key": target_key,
            "records_total": counts.total,
            "records_ok": counts.ok,
            "best": record_json(&best, flops, None),
        });
        if let Some(src) = &source {
            v["source"] = json!(src);
        }
        crate::emit(&format!("{v}\n"))?;
    } else {
        let cost = best.mean_cost.unwrap_or(f64::NAN);
        let mut t = String::new();
        let _ = writeln!(
            t,
            "workload  {key}  {}  ({:.3} GFLOP)",
            short_desc(&desc),
            flops as f64 / 1e9
        );
        let _ = writeln!(t, "target    {target_key}");
        let _ = writeln!(t, "records   {} ({} ok)", counts.total, counts.ok);
        let _ = writeln!(
            t,
            "best      {:.4} ms  {:.2} GFLOP/s  (record {})",
            cost * 1e3,
            gflops(flops, cost),
            best.id
        );
        let _ = writeln!(t, "steps     {}", best.steps_json);
        if let Some(src) = &source {
            t.push_str(src);
        }
        crate::emit(&t)?;
    }
    Ok(ExitCode::SUCCESS)
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
