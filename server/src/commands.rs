//! The commands that serve or talk to a server: `server`, `submit`, `jobs`, `watch`, `cancel`,
//! `query`, `records export|import`.

use anyhow::{Context, Result, anyhow, bail};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use serde_json::json;
use std::fmt::Write as _;
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::time::Duration;
use tokio_stream::StreamExt;
use tonic::{Code, Status};
use tunehub_engine::target::Target;
use tunehub_proto::v1 as pb;
use tunehub_server::api::ansor;
use tunehub_server::cli::{
    CancelArgs, DistillArgs, ExportArgs, ImportArgs, JobsArgs, QueryArgs, RecordFormat,
    RecordsCommand, SchedulerArg, SubmitArgs, UsageError, WatchArgs, WorkersArgs, one_line,
};
use tunehub_server::client::{self, Clients};
use tunehub_server::config::{ClientArgs, ClientConfig, ServerArgs, ServerConfig};
use tunehub_server::server;
use tunehub_server::workload::{self, label};

/// A refused call as the CLI reports it: bad input (INVALID_ARGUMENT, or NOT_FOUND: an unknown
/// target, job or workload key named by the user) exits 2 like a clap error, the rest 1.
pub fn status_error(s: Status) -> anyhow::Error {
    let msg = format!("{}: {}", code_name(s.code()), s.message());
    match s.code() {
        Code::InvalidArgument | Code::NotFound => UsageError(msg).into(),
        _ => anyhow!(msg),
    }
}

fn code_name(c: Code) -> &'static str {
    match c {
        Code::InvalidArgument => "invalid argument",
        Code::NotFound => "not found",
        Code::Unauthenticated => "unauthenticated",
        Code::PermissionDenied => "permission denied",
        Code::FailedPrecondition => "failed precondition",
        Code::ResourceExhausted => "resource exhausted",
        Code::Unavailable => "unavailable",
        _ => "server error",
    }
}

pub async fn connect(args: &ClientArgs) -> Result<Clients> {
    let cfg = ClientConfig::resolve(args).map_err(|e| UsageError(e.to_string()))?;
    client::connect(&cfg)
        .await
        .with_context(|| format!("is `tunehub server` running at {}?", cfg.server))
}

pub async fn serve(args: ServerArgs) -> Result<ExitCode> {
    let cfg = ServerConfig::resolve(&args).map_err(|e| UsageError(format!("{e:#}")))?;
    let running = server::start(&cfg).await?;
    // The first line on stdout, for scripts and tests that asked for port 0.
    crate::emit(&format!("listening on {}\n", running.addr))?;
    if let Some(m) = running.metrics_addr {
        crate::emit(&format!("metrics on {m}\n"))?;
    }
    running.run_until_signal().await?;
    Ok(ExitCode::SUCCESS)
}

pub fn measure_proto(m: &tunehub_server::cli::MeasureArgs) -> pb::MeasureOptions {
    pb::MeasureOptions {
        number: Some(m.number),
        repeat: Some(m.repeat),
        min_repeat_ms: Some(m.min_repeat_ms),
        warmup: Some(m.warmup),
        flush_cache: Some(m.flush_cache),
        timeout_s: Some(m.timeout_s),
        noise_threshold: Some(m.noise_threshold),
    }
}

pub async fn submit(args: SubmitArgs) -> Result<ExitCode> {
    // A shape range is a job of its own: its representative shapes are its tasks.
    let range = match args
        .op_specs
        .iter()
        .filter(|s| !tunehub_onnx::is_model_path(s) && workload::is_range(s))
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] => None,
        [one] if args.op_specs.len() == 1 && args.expr.is_empty() && args.weights.is_empty() => {
            Some(workload::range_from_spec(one, args.trials))
        }
        _ => {
            return Err(UsageError(
                "a shape range (lo..hi) is a job of its own: give it alone, without other \
                 OP_SPECs, --expr or --weight"
                    .into(),
            )
            .into());
        }
    };
    // A model's tasks come with their weights; they follow the other tasks.
    let (models, specs): (Vec<&String>, Vec<&String>) = args
        .op_specs
        .iter()
        .partition(|s| tunehub_onnx::is_model_path(s));
    let specs: Vec<&String> = specs
        .into_iter()
        .filter(|s| !workload::is_range(s))
        .collect();
    let mut model_tasks = vec![];
    for m in models {
        let list = crate::model::load_with(m, &args.model)?;
        crate::model::warn_skipped(&list);
        model_tasks.extend(crate::model::task_specs(&list, args.trials));
    }
    // `layout_free=B` inside an op spec becomes the workload's typed option here.
    let workloads: Vec<pb::Workload> = specs
        .iter()
        .map(|s| workload::from_op_spec(s))
        .chain(args.expr.iter().map(|e| workload::from_expr(e)))
        .collect();
    if workloads.is_empty() && model_tasks.is_empty() && range.is_none() {
        return Err(UsageError("give at least one OP_SPEC or --expr".into()).into());
    }
    if args.weights.len() > workloads.len() {
        return Err(UsageError(format!(
            "{} weights for {} tasks",
            args.weights.len(),
            workloads.len()
        ))
        .into());
    }
    let tasks = workloads
        .into_iter()
        .enumerate()
        .map(|(i, w)| pb::TaskSpec {
            workload: Some(w),
            trials: args.trials,
            weight: args.weights.get(i).copied().unwrap_or(1.0),
        })
        .chain(model_tasks)
        .collect();
    // One target as `target`, several as `targets` (one job each, in a group).
    let (target, targets) = match args.target.as_slice() {
        [one] => (one.clone(), vec![]),
        many => (String::new(), many.to_vec()),
    };
    let req = pb::SubmitRequest {
        tasks,
        target,
        targets,
        range,
        measure: Some(measure_proto(&args.measure)),
        batch_size: args.batch.unwrap_or(0),
        seed: args.seed.unwrap_or(0),
        scheduler: match args.scheduler {
            SchedulerArg::RoundRobin => pb::SchedulerKind::RoundRobin,
            SchedulerArg::Gradient => pb::SchedulerKind::Gradient,
        } as i32,
        name: args.name.clone(),
        priority: args.priority,
    };
    let mut c = connect(&args.client).await?;
    let resp = c.jobs.submit(req).await.map_err(status_error)?.into_inner();
    let job = resp.job.context("the server returned no job")?;
    if !job.group.is_empty() {
        // A group: its id, then a job per target.
        let mut out = String::new();
        if args.json {
            for j in &resp.jobs {
                let _ = writeln!(out, "{}", job_json(j));
            }
        } else {
            let _ = writeln!(out, "{}", job.group);
            for j in &resp.jobs {
                let _ = writeln!(out, "{} {}", j.id, j.target_key);
            }
        }
        crate::emit(&out)?;
        if args.watch {
            return crate::job_group::watch_group(&mut c, &job.group, false).await;
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.json {
        crate::emit(&format!("{}\n", job_json(&job)))?;
    } else {
        crate::emit(&format!("{}\n", job.id))?;
    }
    if args.watch {
        return watch_job(&mut c, &job.id, false).await;
    }
    Ok(ExitCode::SUCCESS)
}

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

fn parse_state(s: &str) -> Result<pb::JobState> {
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
        "errors": t.errors,
        "error_counts": t.error_counts,
        "new_records": t.new_records,
        "best_seconds": t.best_seconds,
        "best_gflops": t.best_gflops,
        "best_record_id": t.best_record_id,
        "last_error": t.last_error,
        "exhausted": t.exhausted,
        "share": t.share,
    })
}

fn estimate_json(e: Option<&pb::Estimate>) -> serde_json::Value {
    e.map_or(
        serde_json::Value::Null,
        |e| json!({"seconds": e.seconds, "missing": e.missing}),
    )
}

/// The end-to-end estimate for people: `12.3456 ms (2 tasks without a best, not counted)`.
pub fn estimate_text(e: &pb::Estimate) -> String {
    let missing = match e.missing {
        0 => String::new(),
        n => format!(" ({n} tasks without a best, not counted)"),
    };
    format!("{:.4} ms{missing}", e.seconds * 1e3)
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
        "group": j.group,
        "waiting": j.waiting,
        "tasks": j.tasks.iter().map(task_json).collect::<Vec<_>>(),
        "estimate": estimate_json(j.estimate.as_ref()),
    })
}

/// A description's first line (a model's task: its label, the text form's first comment).
fn short(desc: &str) -> &str {
    let first = desc.lines().next().unwrap_or("").trim_end();
    first.strip_prefix("# ").unwrap_or(first)
}

/// `tunehub workers`: the fleet as the server sees it.
pub async fn workers(args: WorkersArgs) -> Result<ExitCode> {
    let mut c = connect(&args.client).await?;
    let list = c
        .workers
        .list(pb::ListWorkersRequest {})
        .await
        .map_err(status_error)?
        .into_inner();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let mut out = String::new();
    if args.json {
        for w in &list.workers {
            let j = json!({
                "id": w.id, "device": w.device_id, "target": w.target_key, "status": w.status,
                "last_heartbeat_ms": w.last_heartbeat_ms, "measured": w.measured,
                "errors": w.errors, "quarantine_reason": w.quarantine_reason,
            });
            let _ = writeln!(out, "{j}");
        }
    } else {
        let _ = writeln!(
            out,
            "{:<14} {:<34} {:<12} {:>9} {:>9} {:>7}  DEVICE",
            "WORKER", "TARGET", "STATUS", "HEARTBEAT", "MEASURED", "ERRORS"
        );
        for w in &list.workers {
            let ago = format!(
                "{:.1}s ago",
                (now - w.last_heartbeat_ms).max(0) as f64 / 1e3
            );
            let _ = writeln!(
                out,
                "{:<14} {:<34} {:<12} {:>9} {:>9} {:>7}  {}",
                w.id, w.target_key, w.status, ago, w.measured, w.errors, w.device_id
            );
            if !w.quarantine_reason.is_empty() {
                let _ = writeln!(out, "  quarantined: {}", w.quarantine_reason);
            }
        }
        for (key, n) in &list.queued {
            let _ = writeln!(out, "{n} piece(s) waiting for a worker of {key}");
        }
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

pub async fn jobs(args: JobsArgs) -> Result<ExitCode> {
    let states = args
        .states
        .iter()
        .map(|s| parse_state(s).map(|s| s as i32))
        .collect::<Result<Vec<_>>>()?;
    let mut c = connect(&args.client).await?;
    let jobs = c
        .jobs
        .list(pb::ListJobsRequest {
            states,
            limit: args.limit,
            group: args.group.clone().unwrap_or_default(),
        })
        .await
        .map_err(status_error)?
        .into_inner()
        .jobs;
    let mut out = String::new();
    if args.json {
        for j in &jobs {
            let _ = writeln!(out, "{}", job_json(j));
        }
    } else {
        let _ = writeln!(
            out,
            "{:<20} {:<9} {:>3} {:<28} {:>13} {:>10}  TASKS",
            "JOB", "STATE", "PRI", "TARGET (SERVER)", "TRIALS", "BEST GF/s"
        );
        for j in &jobs {
            let done: u32 = j.tasks.iter().map(|t| t.trials_done).sum();
            let total: u32 = j.tasks.iter().map(|t| t.trials).sum();
            let best = j
                .tasks
                .iter()
                .filter_map(|t| t.best_gflops)
                .fold(None, |m: Option<f64>, g| Some(m.map_or(g, |m| m.max(g))));
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
                "{:<20} {:<9} {:>3} {:<28} {:>13} {:>10}  {}",
                j.id,
                state_name(j.state),
                j.priority,
                format!("{}{server}", j.target_key),
                format!("{done}/{total}"),
                best.map_or("-".into(), |g| format!("{g:.2}")),
                tasks.join(", ")
            );
            if !j.group.is_empty() {
                let _ = writeln!(out, "{:<20} group: {}", "", j.group);
            }
            if !j.waiting.is_empty() {
                let _ = writeln!(out, "{:<20} waiting: {}", "", j.waiting);
            }
            // The unusual start only: a model carried over from another target.
            if j.model.starts_with("transferred") {
                let _ = writeln!(out, "{:<20} model: {}", "", j.model);
            }
        }
    }
    crate::emit(&out)?;
    Ok(ExitCode::SUCCESS)
}

pub async fn cancel(args: CancelArgs) -> Result<ExitCode> {
    let mut c = connect(&args.client).await?;
    if crate::job_group::is_group(&args.job) {
        return crate::job_group::cancel_group(&mut c, &args.job).await;
    }
    let job = c
        .jobs
        .cancel(pb::CancelJobRequest { id: args.job })
        .await
        .map_err(status_error)?
        .into_inner();
    crate::emit(&format!("{} {}\n", job.id, state_name(job.state)))?;
    Ok(ExitCode::SUCCESS)
}

pub async fn watch(args: WatchArgs) -> Result<ExitCode> {
    let mut c = connect(&args.client).await?;
    if crate::job_group::is_group(&args.job) {
        return crate::job_group::watch_group(&mut c, &args.job, args.json).await;
    }
    watch_job(&mut c, &args.job, args.json).await
}

fn bar_message(t: &pb::TaskProgress) -> String {
    let best = t
        .best_gflops
        .map_or("best: none yet".into(), |g| format!("best {g:.2} GFLOP/s"));
    let errs = if t.errors > 0 {
        format!(", {} failed", t.errors)
    } else {
        String::new()
    };
    format!(
        "{}  {best}{errs}",
        short(&label(&t.description, t.options.as_ref()))
    )
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
    let style = ProgressStyle::with_template(
        "{spinner} {elapsed_precise} [{bar:30}] {pos}/{len} trials  {msg}",
    )
    .expect("a valid template")
    .progress_chars("=> ");
    let mut last: Option<pb::Job> = None;
    let mut estimate_bar: Option<ProgressBar> = None;
    while let Some(ev) = stream.next().await {
        let ev = ev.map_err(status_error)?;
        if json_lines {
            crate::emit(&format!("{}\n", event_json(&ev)))?;
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
        crate::emit(&job_summary(&job))?;
    }
    match pb::JobState::try_from(job.state) {
        Ok(pb::JobState::Done) => Ok(ExitCode::SUCCESS),
        Ok(pb::JobState::Failed) => bail!("job {} failed: {}", job.id, job.error),
        _ => bail!("job {} ended {}", job.id, state_name(job.state)),
    }
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
        None => ("none", serde_json::Value::Null),
    };
    json!({"job_id": ev.job_id, "at_ms": ev.at_ms, "event": kind, "data": body})
}

pub fn job_summary(j: &pb::Job) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "job       {}  {}", j.id, state_name(j.state));
    let _ = writeln!(t, "target    {}", j.target_key);
    for task in &j.tasks {
        let best = task.best_gflops.map_or("no successful record".into(), |g| {
            format!(
                "best {:.4} ms  {g:.2} GFLOP/s",
                task.best_seconds.unwrap_or(f64::NAN) * 1e3
            )
        });
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
            "task {}    {weight}{}  {}/{} trials ({} ok, {} failed)  {best}{share}",
            task.index,
            short(&label(&task.description, task.options.as_ref())),
            task.trials_done,
            task.trials,
            task.ok,
            task.errors
        );
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

fn workload_of(a: &QueryArgs) -> Result<pb::Workload> {
    match (&a.op_spec, &a.expr, &a.key) {
        (Some(s), None, None) => Ok(workload::from_op_spec(s)),
        (None, Some(e), None) => Ok(workload::from_expr(e)),
        (None, None, Some(k)) => Ok(workload::from_key(k)),
        _ => Err(UsageError(
            "give exactly one of OP_SPEC, --expr and --key (or --list, or --range)".into(),
        )
        .into()),
    }
}

/// A workload's layout-free inputs, for JSON outputs (`[]` for none).
fn layout_free(o: Option<&pb::WorkloadOptions>) -> Vec<String> {
    o.map(|o| o.layout_free.clone()).unwrap_or_default()
}

fn record_text(r: &pb::ScheduleRecord) -> String {
    format!(
        "best      {:.4} ms  {:.2} GFLOP/s  (record {}, by {})\nsteps     {}\n",
        r.seconds * 1e3,
        r.gflops,
        r.record_id,
        r.worker,
        r.steps_json
    )
}

pub async fn query(args: QueryArgs) -> Result<ExitCode> {
    let mut c = connect(&args.client).await?;
    if args.list {
        let r = c
            .query
            .list_tuned(pb::ListTunedRequest {})
            .await
            .map_err(status_error)?
            .into_inner();
        let mut out = String::new();
        if args.json {
            let v = json!({
                "targets": r.targets.iter().map(|t| json!({"key": t.key, "trials": t.trials})).collect::<Vec<_>>(),
                "workloads": r.workloads.iter().map(|w| json!({
                    "workload_key": w.workload_key, "description": w.description,
                    "layout_free": layout_free(w.options.as_ref()), "target_key": w.target_key,
                    "trials": w.trials, "ok": w.ok, "best_gflops": w.best_gflops})).collect::<Vec<_>>(),
            });
            let _ = writeln!(out, "{v}");
        } else {
            let _ = writeln!(out, "TARGET{:34} TRIALS", "");
            for t in &r.targets {
                let _ = writeln!(out, "{:<40} {:>6}", t.key, t.trials);
            }
            let _ = writeln!(
                out,
                "\nWORKLOAD{:10} {:<32} {:>6} {:>6} {:>10}  DESCRIPTION",
                "", "TARGET", "TRIALS", "OK", "BEST GF/s"
            );
            for w in &r.workloads {
                let _ = writeln!(
                    out,
                    "{:<18} {:<32} {:>6} {:>6} {:>10}  {}",
                    w.workload_key,
                    w.target_key,
                    w.trials,
                    w.ok,
                    w.best_gflops.map_or("-".into(), |g| format!("{g:.2}")),
                    short(&label(&w.description, w.options.as_ref()))
                );
            }
        }
        crate::emit(&out)?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(spec) = &args.range {
        let r = workload::range_from_spec(spec, 0);
        let resp = c
            .query
            .range(pb::RangeRequest {
                spec: r.spec,
                options: r.options,
                target: args.target.clone(),
            })
            .await
            .map_err(status_error)?
            .into_inner();
        let out = if args.json {
            format!("{}\n", range_json(&resp))
        } else {
            range_text(&resp)
        };
        crate::emit(&out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let workload = workload_of(&args)?;
    if let Some(k) = args.top {
        let r = c
            .query
            .top_k(pb::TopKRequest {
                workload: Some(workload),
                target: args.target.clone(),
                k,
                symbol_prefix: args.prefix.clone(),
                omit_kernel: !args.json,
            })
            .await
            .map_err(status_error)?
            .into_inner();
        let mut out = String::new();
        for (i, rec) in r.records.iter().enumerate() {
            if args.json {
                let mut v = record_json(rec);
                if let Some(k) = r.kernels.get(i) {
                    v["kernel"] = kernel_json(k);
                }
                let _ = writeln!(out, "{v}");
            } else {
                let _ = writeln!(
                    out,
                    "{:.4} ms  {:>8.2} GFLOP/s  {}  {}",
                    rec.seconds * 1e3,
                    rec.gflops,
                    rec.record_id,
                    rec.steps_json
                );
            }
        }
        crate::emit(&out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let want_kernel =
        args.print_source || args.out_c.is_some() || args.out_h.is_some() || args.json;
    let r = c
        .query
        .best(pb::BestRequest {
            workload: Some(workload),
            target: args.target.clone(),
            with_source: false,
            allow_transfer: args.transfer,
            symbol_prefix: args.prefix.clone(),
            omit_kernel: !want_kernel,
            measure_transfer: args.measure,
        })
        .await
        .map_err(status_error)?
        .into_inner();
    let rec = r.record.as_ref().context("the server sent no record")?;
    let kernel = r.kernel.as_ref();
    let source = kernel.map_or("", |k| k.source.as_str());
    for (path, text, what) in [
        (&args.out_c, source, "source"),
        (
            &args.out_h,
            kernel.map_or("", |k| k.header.as_str()),
            "header",
        ),
    ] {
        if let Some(path) = path {
            std::fs::write(path, text)
                .with_context(|| format!("writing the kernel {what} to {}", path.display()))?;
        }
    }
    if args.json {
        let mut v = json!({
            "workload_key": rec.workload_key,
            "description": r.description,
            "layout_free": layout_free(r.options.as_ref()),
            "flops": r.flops,
            "target_key": rec.target_key,
            "records_total": r.records_total,
            "records_ok": r.records_ok,
            "best": record_json(rec),
        });
        if let Some(tr) = &r.transfer {
            v["transfer"] = transfer_json(tr);
        }
        if let Some(g) = &r.range {
            v["range"] = json!({"id": g.id, "spec": g.spec});
        }
        if let Some(k) = kernel {
            v["kernel"] = kernel_json(k);
        }
        if args.print_source {
            v["source"] = json!(source);
        }
        crate::emit(&format!("{v}\n"))?;
    } else {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "workload  {}  {}  ({:.3} GFLOP)",
            rec.workload_key,
            short(&label(&r.description, r.options.as_ref())),
            r.flops as f64 / 1e9
        );
        let _ = writeln!(t, "target    {}", rec.target_key);
        let _ = writeln!(t, "records   {} ({} ok)", r.records_total, r.records_ok);
        if let Some(g) = &r.range {
            let _ = writeln!(t, "range     {} ({}): no record of its own", g.spec, g.id);
        }
        if let Some(tr) = &r.transfer {
            let _ = writeln!(
                t,
                "transfer  from {} ({}), record {}, distance {:.2}: predicted {:.4} ms, not measured",
                tr.source_workload_key,
                short(&tr.source_description),
                tr.source_record_id,
                tr.distance,
                tr.predicted_seconds * 1e3
            );
        }
        t.push_str(&record_text(rec));
        if let Some(k) = kernel {
            let _ = writeln!(t, "kernel    {}", k.symbol);
        }
        if args.print_source {
            t.push_str(source);
        }
        crate::emit(&t)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A range's dispatch table as JSON: the proto's fields by their names.
pub fn range_json(r: &pb::RangeResponse) -> serde_json::Value {
    let range = r.range.clone().unwrap_or_default();
    json!({
        "id": range.id,
        "spec": range.spec,
        "layout_free": layout_free(r.options.as_ref()),
        "target_key": r.target_key,
        "job_ids": r.job_ids,
        "entries": r.entries.iter().map(|e| json!({
            "intervals": e.intervals.iter().map(|i| json!({"extent": i.extent, "lo": i.lo, "hi": i.hi})).collect::<Vec<_>>(),
            "values": e.values,
            "workload_key": e.workload_key,
            "description": e.description,
            "record_id": e.record_id,
            "mean_ms": e.seconds * 1e3,
            "gflops": e.gflops,
            "records_total": e.records_total,
        })).collect::<Vec<_>>(),
    })
}

/// A range's dispatch table for people: a row per representative, the interval of each ranged
/// extent it serves.
pub fn range_text(r: &pb::RangeResponse) -> String {
    let range = r.range.clone().unwrap_or_default();
    let mut t = String::new();
    let _ = writeln!(
        t,
        "range     {}  ({})",
        label(&range.spec, r.options.as_ref()),
        range.id
    );
    let _ = writeln!(t, "target    {}", r.target_key);
    if !r.job_ids.is_empty() {
        let _ = writeln!(t, "jobs      {}", r.job_ids.join(", "));
    }
    let extents: Vec<String> = r
        .entries
        .first()
        .map(|e| {
            e.intervals
                .iter()
                .map(|i| i.extent.to_uppercase())
                .collect()
        })
        .unwrap_or_default();
    for x in &extents {
        let _ = write!(t, "{x:<14}");
    }
    let _ = writeln!(t, "{:<40} {:<32} {:>10}", "SERVED BY", "RECORD", "GFLOP/s");
    for e in &r.entries {
        for i in &e.intervals {
            let _ = write!(t, "{:<14}", format!("{}..{}", i.lo, i.hi));
        }
        let (record, gflops) = if e.record_id.is_empty() {
            ("(not tuned yet)".to_string(), "-".to_string())
        } else {
            (e.record_id.clone(), format!("{:.2}", e.gflops))
        };
        let _ = writeln!(t, "{:<40} {record:<32} {gflops:>10}", e.description);
    }
    t
}

fn transfer_json(t: &pb::Transfer) -> serde_json::Value {
    json!({
        "source_record_id": t.source_record_id,
        "source_workload_key": t.source_workload_key,
        "source_description": t.source_description,
        "distance": t.distance,
        "predicted_ms": t.predicted_seconds * 1e3,
        "dropped": t.dropped,
    })
}

/// A Kernel as JSON: the proto's fields by their names.
pub fn kernel_json(k: &pb::Kernel) -> serde_json::Value {
    json!({
        "symbol": k.symbol,
        "source": k.source,
        "header": k.header,
        "args": k.args.iter().map(|a| json!({
            "name": a.name, "role": a.role, "dtype": a.dtype, "shape": a.shape,
            "strides": a.strides, "alignment": a.alignment, "layout": a.layout,
            "pack_function": a.pack_function, "packed_elements": a.packed_elements,
        })).collect::<Vec<_>>(),
        "cflags": k.cflags,
        "ldflags": k.ldflags,
        "compiler": k.compiler,
        "compiler_version": k.compiler_version,
        "threads": k.threads,
        "set_num_threads": k.set_num_threads,
        "record_id": k.record_id,
        "workload_key": k.workload_key,
        "target_key": k.target_key,
        "description": k.description,
        "gflops": k.gflops,
    })
}

pub fn record_json(r: &pb::ScheduleRecord) -> serde_json::Value {
    json!({
        "record_id": r.record_id,
        "mean_ms": r.seconds * 1e3,
        "gflops": r.gflops,
        "costs": r.costs,
        "worker": r.worker,
        "created_at_ms": r.created_at_ms,
        "steps": serde_json::from_str::<serde_json::Value>(&r.steps_json).unwrap_or(serde_json::Value::Null),
    })
}

pub async fn records(cmd: RecordsCommand) -> Result<ExitCode> {
    match cmd {
        RecordsCommand::Export(a) => export(a).await,
        RecordsCommand::Import(a) => import(a).await,
        RecordsCommand::Distill(a) => distill(a),
    }
}

fn distill(a: DistillArgs) -> Result<ExitCode> {
    let reader: Box<dyn BufRead> = if a.file.as_os_str() == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(&a.file)
                .map_err(|e| UsageError(format!("{}: {e}", a.file.display())))?,
        ))
    };
    let (lines, d) = tunehub_server::api::distill::distill(reader, a.top as usize)
        .map_err(|e| UsageError(format!("{}: {e}", a.file.display())))?;
    let mut text = lines.join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    match &a.out {
        Some(p) => std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))?,
        None => crate::emit(&text)?,
    }
    eprintln!(
        "kept {} of {} records ({} workload-target pairs, the fastest {} each)",
        d.records_kept, d.records_read, d.pairs, a.top
    );
    Ok(ExitCode::SUCCESS)
}

async fn export(a: ExportArgs) -> Result<ExitCode> {
    let tvm_target = match a.format {
        RecordFormat::Ansor => {
            let t = a.tvm_target.clone().unwrap_or_default();
            ansor::check_tvm_target(&t).map_err(UsageError)?;
            Some(t)
        }
        RecordFormat::Tunehub => None,
    };
    let mut c = connect(&a.client).await?;
    let mut stream = c
        .records
        .export(pb::ExportRequest {
            workload_key: a.workload.unwrap_or_default(),
            target_key: a.target.unwrap_or_default(),
        })
        .await
        .map_err(status_error)?
        .into_inner();
    let mut out: Box<dyn Write> = match &a.out {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let mut n = 0usize;
    let mut held = vec![];
    while let Some(msg) = stream.next().await {
        for line in msg.map_err(status_error)?.lines {
            if tvm_target.is_some() {
                // Ansor lines are made once every workload and target line has been read.
                held.push(line);
            } else {
                writeln!(out, "{line}")?;
                n += 1;
            }
        }
    }
    if let Some(tvm_target) = &tvm_target {
        let exported = ansor::export(&held, tvm_target).map_err(UsageError)?;
        for line in &exported.lines {
            writeln!(out, "{line}")?;
        }
        n = exported.lines.len();
        eprintln!(
            "{n} of {} records written as Ansor lines for {tvm_target:?}",
            exported.records
        );
        for (reason, count) in &exported.skipped {
            eprintln!("  left out {count}: {reason}");
        }
    }
    out.flush()?;
    tracing::info!(lines = n, "exported");
    Ok(ExitCode::SUCCESS)
}

async fn import(a: ImportArgs) -> Result<ExitCode> {
    let reader: Box<dyn BufRead> = if a.file.as_os_str() == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(&a.file)
                .with_context(|| format!("opening {}", a.file.display()))?,
        ))
    };
    let mut lines = reader
        .lines()
        .collect::<std::io::Result<Vec<String>>>()
        .context("reading the records")?;
    if a.format == RecordFormat::Ansor {
        let numbered: Vec<(usize, String)> = lines
            .into_iter()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| (i + 1, l))
            .collect();
        let target = match a.target {
            Some(k) => ansor::ImportTarget::Known(k),
            None => ansor::ImportTarget::Described(Box::new(Target::detect())),
        };
        lines = ansor::import(&numbered, &target).map_err(UsageError)?;
    } else if a.target.is_some() {
        return Err(UsageError("--target is for --format ansor".into()).into());
    }
    let chunks: Vec<pb::RecordLines> = lines
        .chunks(256)
        .map(|c| pb::RecordLines { lines: c.to_vec() })
        .collect();
    let mut c = connect(&a.client).await?;
    let r = c
        .records
        .import(tokio_stream::iter(chunks))
        .await
        .map_err(status_error)?
        .into_inner();
    crate::emit(&format!(
        "imported {} new records ({} already known), {} workloads, {} targets\n",
        r.records_new, r.records_known, r.workloads, r.targets
    ))?;
    Ok(ExitCode::SUCCESS)
}
