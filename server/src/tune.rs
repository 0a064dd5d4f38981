//! `tunehub tune` and `tunehub best`: the commands that drive the engine's search API (the text
//! form, target detection, tasks, the random sampler, code generation and the measurer) on this
//! machine, keeping every result in the record store.
//!
//! Every call into the engine's planned modules is in this file, so that fitting it to their
//! final signatures is local.

use anyhow::{Context, Result, anyhow, bail};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tunehub_engine::codegen;
use tunehub_engine::ir::ComputeDag;
use tunehub_engine::measure::{ErrorCode, MeasureResult, Measurer};
use tunehub_engine::ops;
use tunehub_engine::sample::RandomSampler;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::target::{Target, TargetOverrides};
use tunehub_engine::task::Task;
use tunehub_engine::text;
use tunehub_server::cli::{BestArgs, TargetArgs, TuneArgs, UsageError, WorkloadArgs, one_line};
use tunehub_server::records::{self, CommitOutcome, NewRecord, Record, RecordStore, SqlStore};

/// Consecutive already-seen samples after which the sampler is taken to have run out of new
/// candidates (small spaces, such as an elementwise chain's, are exhausted quickly).
const MAX_DUPLICATE_STREAK: usize = 1000;

/// What records measured by this process are marked with.
const WORKER: &str = "local";

/// The DAG and its description, from OP_SPEC or --expr. Bad input is a `UsageError`.
fn build_workload(w: &WorkloadArgs) -> Result<(ComputeDag, String), UsageError> {
    match (&w.op_spec, &w.expr) {
        (Some(spec), None) => {
            // `layout_free=B` names inputs, not a shape: it is the task's (see `tune`).
            let (op, _) = tunehub_engine::task::split_layout_free(spec);
            let dag = ops::build_op(&op).map_err(|e| UsageError(e.to_string()))?;
            Ok((dag, spec.trim().to_string()))
        }
        (None, Some(src)) => {
            let dag = text::parse(src).map_err(|e| UsageError(format!("--expr: {e}")))?;
            Ok((dag, src.trim().to_string()))
        }
        // clap's argument group admits exactly one of the two.
        _ => Err(UsageError("give exactly one of OP_SPEC and --expr".into())),
    }
}

fn target_overrides(t: &TargetArgs) -> TargetOverrides {
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

/// Set on the first Ctrl-C (the tuning loop stops after the current batch); a second Ctrl-C
/// exits at once. Each commit is its own transaction, so either way the database is whole.
fn interrupt_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let set = Arc::clone(&flag);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            set.store(true, Ordering::SeqCst);
            eprintln!("interrupted: finishing the current batch (Ctrl-C again to quit now)");
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    });
    flag
}

/// A failure that the Ctrl-C itself may have caused: the terminal's SIGINT also reaches the
/// compiler and kernel processes the measurer started, which then fail as if the candidate
/// had. Such results of an interrupted batch are dropped rather than recorded against the
/// candidate (a later run measures it again).
fn maybe_interrupt_casualty(r: &MeasureResult) -> bool {
    !matches!(
        r.error,
        ErrorCode::NoError | ErrorCode::InvalidSchedule | ErrorCode::WrongAnswer
    )
}

/// Up to `want` schedules not measured before, with their canonical steps JSON. Fewer when the
/// sampler keeps repeating itself (the space is nearly exhausted).
fn sample_batch(
    sampler: &mut RandomSampler,
    want: usize,
    seen: &mut HashSet<String>,
) -> Result<(Vec<Schedule>, Vec<String>)> {
    let (mut schedules, mut steps) = (Vec::with_capacity(want), Vec::with_capacity(want));
    let mut streak = 0;
    while schedules.len() < want && streak < MAX_DUPLICATE_STREAK {
        let schedule = sampler.sample();
        // The store's hash, so that candidates recorded by earlier runs count as seen.
        let json = records::canonical_steps(&schedule.to_json())
            .context("the sampler wrote invalid steps JSON")?;
        if seen.insert(records::schedule_hash(&json)) {
            schedules.push(schedule);
            steps.push(json);
            streak = 0;
        } else {
            streak += 1;
        }
    }
    Ok((schedules, steps))
}

/// What one `tune` run did.
#[derive(Debug, Default)]
struct RunStats {
    /// Candidates measured.
    trials: u32,
    ok: u32,
    /// Failures by error name.
    errors: BTreeMap<&'static str, u32>,
    first_error: Option<String>,
    new_records: u32,
    duplicates: u32,
    /// Results of an interrupted batch not recorded (see `maybe_interrupt_casualty`).
    dropped: u32,
    /// Whether the best record moved during this run.
    improved: bool,
    interrupted: bool,
    exhausted: bool,
}

impl RunStats {
    fn count(&mut self, r: &MeasureResult) {
        self.trials += 1;
        if r.is_ok() {
            self.ok += 1;
        } else {
            *self.errors.entry(r.error.name()).or_default() += 1;
            if self.first_error.is_none() {
                self.first_error = Some(format!("{}: {}", r.error.name(), one_line(&r.error_msg)));
            }
        }
    }

    fn errors_text(&self) -> String {
        self.errors
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn progress_bar(trials: u32) -> ProgressBar {
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

fn best_message(flops: u64, best_cost: Option<f64>) -> String {
    best_cost.map_or_else(
        || "best: none yet".into(),
        |c| format!("best {:.2} GFLOP/s", gflops(flops, c)),
    )
}

pub async fn tune(args: TuneArgs) -> Result<ExitCode> {
    // All input is checked before the database is touched: bad input stores nothing.
    let (dag, desc) = build_workload(&args.workload)?;
    let target = Target::detect().with_overrides(&target_overrides(&args.target));
    let target_key = target.key();
    let layout_free = args
        .workload
        .op_spec
        .as_deref()
        .map(|s| tunehub_engine::task::split_layout_free(s).1)
        .unwrap_or_default();
    let names: Vec<&str> = layout_free.iter().map(String::as_str).collect();
    let task = Arc::new(
        Task::new(dag, desc)
            .with_layout_free(&names)
            .map_err(UsageError)?,
    );
    let seed = args.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });

    let store = SqlStore::open(&args.db.db).await?;
    let dag_json = serde_json::to_string(&task.dag).context("serializing the DAG")?;
    store
        .put_workload(&task.key, &task.desc, &dag_json, task.flops)
        .await?;
    let target_json = serde_json::to_string(&target).context("serializing the target")?;
    store.put_target(&target_key, &target_json).await?;

    // Candidates an earlier run measured on this target are not measured again.
    let mut seen: HashSet<String> = store
        .records(&task.key, &target_key)
        .await?
        .into_iter()
        .map(|r| r.schedule_hash)
        .collect();
    let known = seen.len();
    let mut best_cost = store
        .best(&task.key, &target_key)
        .await?
        .and_then(|r| r.mean_cost);
    tracing::info!(workload = %task.key, target = %target_key, seed, known, "tuning {}", short_desc(&task.desc));

    let stop = interrupt_flag();
    let mut sampler = RandomSampler::new(&task.dag, &target, seed);
    let mut measurer = Measurer::new(&target, args.measure.options());
    let mut stats = RunStats::default();
    let pb = progress_bar(args.trials);
    pb.set_message(best_message(task.flops, best_cost));

    while stats.trials < args.trials && !stop.load(Ordering::SeqCst) {
        let want = (args.trials - stats.trials).min(args.batch) as usize;
        let (schedules, steps) = sample_batch(&mut sampler, want, &mut seen)?;
        if schedules.is_empty() {
            stats.exhausted = true;
            break;
        }
        // Building and running block (compilers, child processes): off the async threads.
        let t = Arc::clone(&task);
        let (m, results) = tokio::task::spawn_blocking(move || {
            let results = measurer.measure(&t, &schedules);
            (measurer, results)
        })
        .await
        .context("the measurer panicked")?;
        measurer = m;
        if results.len() != steps.len() {
            bail!(
                "the measurer returned {} results for {} candidates",
                results.len(),
                steps.len()
            );
        }
        let interrupted = stop.load(Ordering::SeqCst);
        for (steps_json, result) in steps.into_iter().zip(&results) {
            if interrupted && maybe_interrupt_casualty(result) {
                stats.dropped += 1;
                continue;
            }
            stats.count(result);
            let record =
                NewRecord::from_measure(&task.key, &target_key, steps_json, result, Some(WORKER));
            match store.commit(&record).await? {
                CommitOutcome::Inserted { is_new_best } => {
                    stats.new_records += 1;
                    if is_new_best {
                        stats.improved = true;
                        best_cost = record.mean_cost();
                    }
                }
                // Another process measured the same candidate meanwhile.
                CommitOutcome::Duplicate => stats.duplicates += 1,
            }
        }
        pb.set_position(u64::from(stats.trials));
        pb.set_message(best_message(task.flops, best_cost));
        tracing::info!(
            trials = stats.trials,
            ok = stats.ok,
            "{}",
            best_message(task.flops, best_cost)
        );
    }
    pb.finish_and_clear();
    stats.interrupted = stop.load(Ordering::SeqCst);

    let best = store.best(&task.key, &target_key).await?;
    let total = store.count(&task.key, &target_key).await?;
    let failure = if stats.trials > 0 && stats.ok == 0 {
        Some(format!(
            "no candidate succeeded in {} trials ({}); first error: {}",
            stats.trials,
            stats.errors_text(),
            stats.first_error.as_deref().unwrap_or("-")
        ))
    } else if best.is_none() {
        Some(if stats.trials == 0 && stats.interrupted {
            "interrupted before any candidate was measured".to_string()
        } else if stats.trials == 0 {
            format!(
                "the sampler found no candidate that is not already recorded ({known} recorded, none succeeded)"
            )
        } else {
            format!(
                "all {} successful candidates were timed on a noisy machine; no time to trust",
                stats.ok
            )
        })
    } else {
        None
    };

    let source = match (&best, args.print_source || args.out_c.is_some()) {
        (Some(b), true) => Some(kernel_source(&task.dag, &target, b)?),
        _ => None,
    };
    if let (Some(path), Some(src)) = (&args.out_c, &source) {
        std::fs::write(path, src)
            .with_context(|| format!("writing the kernel source to {}", path.display()))?;
    }

    let summary = TuneSummary {
        task: &task,
        target_key: &target_key,
        seed,
        known,
        stats: &stats,
        best: best.as_ref(),
        total: total.total,
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

/// The best record's kernel, generated again from its steps.
fn kernel_source(dag: &ComputeDag, target: &Target, best: &Record) -> Result<String> {
    let schedule = Schedule::from_json(&best.steps_json)
        .map_err(|e| anyhow!("record {}: its steps no longer replay: {e}", best.id))?;
    codegen::kernel_source(dag, &schedule, target)
        .map_err(|e| anyhow!("record {}: generating its kernel: {e}", best.id))
}

/// The end-of-run report.
struct TuneSummary<'a> {
    task: &'a Task,
    target_key: &'a str,
    seed: u64,
    known: usize,
    stats: &'a RunStats,
    best: Option<&'a Record>,
    total: u64,
}

impl TuneSummary<'_> {
    fn best_json(&self) -> Value {
        self.best.map_or(Value::Null, |b| {
            record_json(b, self.task.flops, Some(self.stats.improved))
        })
    }

    fn json(&self) -> Value {
        let s = self.stats;
        json!({
            "workload_key": self.task.key,
            "description": self.task.desc,
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
            short_desc(&self.task.desc),
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
            let cost = b.mean_cost.unwrap_or(f64::NAN);
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
                b.id
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
    let (dag, desc) = build_workload(&args.workload)?;
    let key = dag.workload_key();
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
    let flops = dag.flop_count();
    let counts = store.count(&key, &target_key).await?;
    let source = if args.print_source {
        let json = store
            .target_json(&target_key)
            .await?
            .with_context(|| format!("target {target_key} has records but no description"))?;
        let target: Target =
            serde_json::from_str(&json).with_context(|| format!("reading target {target_key}"))?;
        Some(kernel_source(&dag, &target, &best)?)
    } else {
        None
    };
    if args.json {
        let mut v = json!({
            "workload_key": key,
            "description": desc,
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
