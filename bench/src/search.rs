//! `tunehub-bench search`: tunes a fixed set of workloads with a fixed trial budget and prints,
//! per workload and seed, the best GFLOP/s (re-measured), the tuning wall time split into search,
//! build and run, the best of as many purely random schedules, OpenBLAS for the matmuls, the
//! best-so-far curve, and the bandwidth reached against the roof that applies (see
//! `bandwidth` and `mathroof`); then a closing table with each workload's worst seed. Writes
//! the curves as SVG and everything as JSON.
//!
//! `cargo run -p tunehub-bench -- search [--workloads matmul512,conv2d] [--trials 200]
//! [--seeds 0,1,2] [--model xgb|random] [--db FILE]`
//! (the dev profile builds every crate it runs with opt-level 2; a release build would compile
//! XGBoost's C++ a second time).
//!
//! # The product's path
//!
//! Each (workload, seed) is tuned as one job on the embedded service (`tunehub::embedded`, as
//! `tunehub tune` runs it): submitted through the API with `tunehub tune`'s defaults (batch,
//! population, measurement, the packed weight), run by the server's job driver, followed
//! through Watch. So every figure here is the product's: its cost model start (saved,
//! transferred or cold), warm start and resume, its stored records. By default each job gets a
//! fresh SQLite file, so seeds stay independent and a tuning is a user's first `tunehub tune`
//! (cold model, no records); `--db FILE` shares one database across the runs (and with
//! `tunehub --db FILE`), so the saved model, warm starts and the records of earlier runs apply.
//! What the bench reads of a job:
//!
//! - per round, the search, model and measurement times: the task's sums in its progress
//!   (`TaskProgress.rounds`, `search_s`, ...), a round's the difference of two Round events;
//! - every measured record, for `records.jsonl`, the per-trial curve and the final pick:
//!   `Records.Export` of the (workload, target) after the job, those stored since it was
//!   submitted, in the order they were stored (the batches' order);
//! - `--model random`: the job's `cost_model = "random"` (no model, Ansor's `RandomModel`);
//! - `--pretrain`: the model trained here is saved into the job's database as the target's
//!   model before the job, so the driver starts from it as a server starts a job from the
//!   model it saved; with `--pretrain-other-target`, saved under another target (this one
//!   with `--pretrain-threads` cores), which the driver then transfers (`Job.model`).
//!
//! The random baseline, OpenBLAS, the roofs and the final re-measurement of the finalists run
//! here, outside the tuning, on this machine.
//!
//! Seeds: bench seed `s` is the job's seed `s` (so `--seeds 3` is `tunehub tune --seed 3`),
//! but 0, which a submission reads as "choose one", is sent as `u64::MAX` (`job_seed`). The
//! driver derives the search's seed from the job's (`seed + task + claim * 2^32`), so no seed
//! replays a run of the bench before it used the service (which searched with seed `s`).
//!
//! Models across targets (issue 29.6): records of one target (`search --threads 2 --out A`),
//! then `search --threads 1 --pretrain A/records.jsonl --pretrain-other-target
//! --pretrain-threads 2`: each seed tuned from a cold model and from the model of the other
//! target's records, side by side.
//!
//! Check the machine is quiet first (`../shared/tools/machine-check`): a neighbour on one core
//! halves 2-thread figures.

use crate::bandwidth::{self, Prober, Roof, Roofs};
use crate::finalists::{FINALISTS, REMEASURES, final_opts, pick_and_remeasure};
use crate::mathroof::MathRates;
use crate::{blas, plot};
use anyhow::{Context, Result, bail};
use serde_json::json;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tokio_stream::StreamExt;
use tunehub::embedded::{Embedded, EmbeddedOptions};
use tunehub::usage::status_error;
use tunehub::workload;
use tunehub_costmodel::dataset::{DatasetRecord, write_records};
use tunehub_engine::measure::{ErrorCode, MeasureOptions, MeasureResult, Measurer};
use tunehub_engine::ops::{self, LayoutFree, OpSpec};
use tunehub_engine::sample::RandomSampler;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::search::{DEFAULT_BATCH, DEFAULT_POPULATION};
use tunehub_engine::target::{Target, TargetOverrides};
use tunehub_engine::task::Task;
use tunehub_proto::v1 as pb;
use tunehub_server::api::records::{Line, parse_line};
use tunehub_server::config::Limits;
use tunehub_server::jobs::start_model::MODEL_KIND;
use tunehub_server::jobs::store::JobStore;
use tunehub_server::records::{RecordStore, SqlStore};

/// The issues' workload set: (short name, op spec or text form, its constant weight, packed
/// unless `--no-layout-free`, as `tunehub tune` packs `ops::constant_weight`). The spec
/// string is the one `../shared/peers/ansor.py` takes too (library ops only).
const WORKLOADS: &[(&str, &str, Option<&str>)] = &[
    ("matmul512", "matmul(512,512,512)", Some("B")),
    ("matmul1024", "matmul(1024,1024,1024)", Some("B")),
    (
        "dense",
        "dense(m=1,n=1000,k=1024,bias=1,relu=1)",
        Some("weight"),
    ),
    (
        "conv2d",
        "conv2d_nchw(n=1,c=64,h=56,w=56,f=64,kh=3,kw=3,pad=1)",
        Some("kernel"),
    ),
    (
        "conv2d_nhwc",
        "conv2d_nhwc(n=1,h=56,w=56,c=64,f=64,kh=3,kw=3,pad=1)",
        Some("kernel"),
    ),
    (
        "depthwise",
        "depthwise_conv2d_nchw(n=1,c=32,h=112,w=112,kh=3,kw=3,pad=1)",
        Some("kernel"),
    ),
    ("batch_matmul", "batch_matmul(b=12,m=128,n=128,k=64)", None),
    ("softmax", "softmax(m=128,n=1000)", None),
    // Issue 28: memory-bound and strided operators.
    (
        "conv2d_s2",
        "conv2d_nchw(n=1,c=128,h=56,w=56,f=128,kh=3,kw=3,stride=2,pad=1)",
        Some("kernel"),
    ),
    (
        "conv1x1_s2",
        "conv2d_nchw(n=1,c=256,h=56,w=56,f=512,kh=1,kw=1,stride=2)",
        Some("kernel"),
    ),
    (
        "depthwise_s2",
        "depthwise_conv2d_nchw(n=1,c=144,h=56,w=56,kh=3,kw=3,stride=2,pad=1)",
        Some("kernel"),
    ),
    (
        "gemv4096",
        "dense(m=1,n=4096,k=4096,bias=0,relu=0)",
        Some("weight"),
    ),
    (
        "gemv3072",
        "dense(m=1,n=3072,k=768,bias=1,relu=0)",
        Some("weight"),
    ),
    (
        "dense_m8",
        "dense(m=8,n=4096,k=4096,bias=0,relu=0)",
        Some("weight"),
    ),
    (
        "maxpool_s2",
        "max_pool2d(n=1,c=64,h=112,w=112,kh=3,kw=3,stride=2,pad=1)",
        None,
    ),
    ("softmax1536", "softmax(m=1536,n=128)", None),
    ("layernorm", LAYER_NORM, None),
    ("bias_gelu", BIAS_GELU, None),
];

/// Layer norm over the last axis of 128x768 (eps 1e-5), scale and shift, in the text form.
const LAYER_NORM: &str = "S[i] += X[i,k] where i<128, k<768
D[i,j] = X[i,j] - S[i] * 0.0013020833333333333 where i<128, j<768
V[i] += D[i,k] * D[i,k] where i<128, k<768
Y[i,j] = D[i,j] * rsqrt(V[i] * 0.0013020833333333333 + 0.00001) * G[j] + B[j] where i<128, j<768";

/// A bias add and GELU (its tanh form) over 128x3072, in the text form.
const BIAS_GELU: &str = "T[i,j] = A[i,j] + Bias[j] where i<128, j<3072
Y[i,j] = 0.5 * T[i,j] * (1 + tanh(0.7978845608028654 * (T[i,j] + 0.044715 * T[i,j] * T[i,j] * T[i,j]))) where i<128, j<3072";

/// A workload's DAG from its op spec or text form (a text form has a `[`).
pub fn build(spec: &str) -> Result<tunehub_engine::ir::ComputeDag> {
    if spec.contains('[') {
        Ok(tunehub_engine::text::parse(spec)?)
    } else {
        Ok(ops::build_op(spec)?)
    }
}

/// The tuning measurement of one reading, shared by `search` and `remeasure` so that a
/// re-measured cost is the same estimator as the search's: runs per repeat, repeats, minimum
/// ms per repeat. The defaults are the product's (`MeasureOptions::default()`, what `tunehub
/// tune` and the service use), so that the benchmark's figures are the product's.
#[derive(clap::Args)]
pub struct TuningMeasureArgs {
    /// Tuning measurement: runs per repeat.
    #[arg(long, default_value_t = MeasureOptions::default().number)]
    number: u32,
    /// Tuning measurement: repeats.
    #[arg(long, default_value_t = MeasureOptions::default().repeat)]
    repeat: u32,
    /// Tuning measurement: minimum ms per repeat.
    #[arg(long, default_value_t = MeasureOptions::default().min_repeat_ms)]
    min_repeat_ms: u32,
    /// Tuning measurement: the noise guard's threshold (0 turns it off: for smoke runs on a
    /// busy machine, where every reading would be flagged noisy and none kept).
    #[arg(long, default_value_t = MeasureOptions::default().noise_threshold)]
    noise_threshold: f64,
}

impl TuningMeasureArgs {
    pub fn options(&self) -> MeasureOptions {
        MeasureOptions {
            number: self.number,
            repeat: self.repeat,
            min_repeat_ms: self.min_repeat_ms,
            noise_threshold: self.noise_threshold,
            ..MeasureOptions::default()
        }
    }

    /// The same options as a submission's (unset fields: the service's defaults, which are
    /// `MeasureOptions::default()`).
    pub fn to_proto(&self) -> pb::MeasureOptions {
        pb::MeasureOptions {
            number: Some(self.number),
            repeat: Some(self.repeat),
            min_repeat_ms: Some(self.min_repeat_ms),
            noise_threshold: Some(self.noise_threshold),
            ..pb::MeasureOptions::default()
        }
    }
}

#[derive(clap::Args)]
pub struct SearchArgs {
    /// Comma-separated short names (see the list in --help of the source), or "all".
    #[arg(long, default_value = "all")]
    workloads: String,
    /// Trials per workload.
    #[arg(long, default_value_t = 200)]
    trials: u32,
    #[arg(long, default_value_t = DEFAULT_BATCH as u32)]
    batch: u32,
    /// Evolutionary population per round (the service's `--population`).
    #[arg(long, default_value_t = DEFAULT_POPULATION)]
    population: usize,
    /// Cost model: xgb (XGBoost, Ansor's pack-sum objective) or random (the search without a
    /// model): the job's `cost_model`.
    #[arg(long, default_value = "xgb")]
    model: String,
    /// Random schedules measured as the baseline (0: none).
    #[arg(long, default_value_t = 200)]
    random_trials: usize,
    /// Threads of the kernels (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Seeds, comma-separated: each workload is tuned once per seed and its worst seed is the
    /// figure of the closing table (the stability rule). Seed s is the job's seed s,
    /// except 0, sent as 18446744073709551615 (a job's seed 0 means "choose one").
    #[arg(long, alias = "seed", value_delimiter = ',', default_value = "0")]
    seeds: Vec<u64>,
    #[command(flatten)]
    measure: TuningMeasureArgs,
    /// Each workload's constant weight is layout-free (packed once outside the timed kernel)
    /// by default, as `tunehub tune` marks a library operator's weight; this flag is kept for
    /// old command lines and changes nothing.
    #[arg(long, hide = true)]
    layout_free: bool,
    /// Leave the weights in their given layout (`tunehub tune 'OP(...,layout_free=none)'`).
    #[arg(long)]
    no_layout_free: bool,
    /// Skip OpenBLAS even when it is installed.
    #[arg(long)]
    no_blas: bool,
    /// Print the memory roofs, and each workload's own, then stop (nothing is tuned).
    #[arg(long)]
    roofs_only: bool,
    /// One database (a SQLite file, created if missing) for every job of the run, as
    /// `tunehub tune --db FILE` keeps one: each job then starts from the model the previous one
    /// saved, warm from tuned workloads of its structure, and never measures a schedule of the
    /// workload twice. Default: a fresh database per (workload, seed), deleted afterwards.
    #[arg(long, value_name = "FILE", conflicts_with = "pretrain_other_target")]
    db: Option<PathBuf>,
    /// Start the XGBoost model from one trained on the records of this dataset's other
    /// workloads (measured on this target), saved as the target's model in the job's database
    /// before the job, as a server starts a job from the model it saved for the job's target:
    /// then the first round is ranked by the model too. The tuned workload's own records are
    /// left out.
    #[arg(long)]
    pretrain: Option<PathBuf>,
    /// The --pretrain dataset was measured on another target (models across targets, issue
    /// 29.6: e.g. the records of a `--threads 2` run, evaluated with `--threads 1`): the tuned
    /// workload's own records in it are kept (none is this target's), the model is saved under
    /// the other target (see --pretrain-threads), so that the job starts from it as from the
    /// nearest target's, and each seed is tuned twice, from a cold model and from the
    /// transferred one, compared by the trials each took to reach 90% of the cold run's final
    /// best. Each run on its own fresh database (not with --db).
    #[arg(long, requires = "pretrain")]
    pretrain_other_target: bool,
    /// The other target of --pretrain-other-target: this machine with this many cores (default:
    /// all of its cores if --threads chose fewer, else twice --threads).
    #[arg(long, requires = "pretrain_other_target")]
    pretrain_threads: Option<usize>,
    /// Where the SVG, the JSON and the measured records (`records.jsonl`, the cost model's
    /// dataset format: `cargo run -p tunehub-costmodel --example ranking -- FILE`) go.
    #[arg(long, default_value = "bench-out")]
    out: PathBuf,
}

/// The job seed of bench seed `s`: `tunehub tune --seed s`'s (0, which a submission reads as
/// "choose one", is `u64::MAX`).
pub fn job_seed(s: u64) -> u64 {
    tunehub::args::run_seed(Some(s))
}

/// An XGBoost model trained on every task of `tasks` but `exclude`, as bytes (its own
/// serialisation, what the server saves), and the samples it was trained on: what the server
/// hands a new job on a target it has tuned other workloads on (or, `exclude` none, on a target
/// with no model of its own: the nearest other target's).
fn pretrained_model(
    tasks: &[tunehub_costmodel::samples::TaskSamples],
    exclude: Option<&str>,
    seed: u64,
) -> Result<(Vec<u8>, u64)> {
    let exclude = exclude.unwrap_or("");
    let mut m = tunehub_costmodel::XgbModel::new(tunehub_costmodel::XgbParams {
        seed,
        ..tunehub_costmodel::XgbParams::default()
    });
    let mut n = 0;
    for t in tasks.iter().filter(|t| t.key != exclude) {
        n += t.samples.len();
        m.add_samples(&t.key, t.samples.iter().cloned());
    }
    m.retrain()?;
    let whose = if exclude.is_empty() {
        "workloads of the other target"
    } else {
        "other workloads"
    };
    println!(
        "(model pretrained on {n} kernels of {} {whose})",
        tasks.iter().filter(|t| t.key != exclude).count()
    );
    Ok((m.save()?, n as u64))
}

/// A model to save into a job's database before the job: its bytes, the samples it was
/// trained on, and the target it is saved under.
struct SavedModel {
    bytes: Vec<u8>,
    trained_on: u64,
    target: Target,
}

/// Saves `m` as the cost model of its target in the database `db` (created if missing), as
/// the job driver saves a finished job's model: the next job on its target starts from it, a
/// job on another target transfers it if it has none of its own.
async fn save_model(db: &str, m: &SavedModel) -> Result<()> {
    let jobs = JobStore::new(
        SqlStore::open(db)
            .await
            .with_context(|| format!("opening {db}"))?,
    );
    let key = m.target.key();
    let json = serde_json::to_string(&m.target)?;
    jobs.records().put_target(&key, &json).await?;
    jobs.save_cost_model(&key, MODEL_KIND, &m.bytes, m.trained_on)
        .await?;
    jobs.records().pool().close().await;
    Ok(())
}

/// The first trial count of a best-so-far curve at `frac` of its final value: how fast a
/// search gets close (the cost model's figure of merit).
fn trials_to_reach(curve: &[(usize, f64)], frac: f64) -> Option<usize> {
    let last = curve.last()?.1;
    curve
        .iter()
        .find(|&&(_, g)| g >= frac * last && last > 0.0)
        .map(|&(t, _)| t)
}

/// Best GFLOP/s so far after each trial of `measured` (in the order measured); failed and
/// noisy trials count as 0.
fn best_so_far(task: &Task, measured: &[(Schedule, MeasureResult)]) -> Vec<(usize, f64)> {
    let mut curve: Vec<(usize, f64)> = Vec::with_capacity(measured.len());
    for (_, x) in measured {
        let prev = curve.last().map_or(0.0, |p| p.1);
        let g = if x.is_ok() && !x.noisy {
            task.gflops(x.mean_cost())
        } else {
            0.0
        };
        curve.push((curve.len() + 1, prev.max(g)));
    }
    curve
}

/// One seed's tuning of one workload.
struct SeedRun {
    seed: u64,
    gflops: f64,
    wall_s: f64,
    /// Best GFLOP/s so far after each trial (as read while tuning).
    curve: Vec<(usize, f64)>,
}

/// The first trial at which a best-so-far curve reaches `level` GFLOP/s.
fn trials_to_level(curve: &[(usize, f64)], level: f64) -> Option<usize> {
    curve.iter().find(|&&(_, g)| g >= level).map(|&(t, _)| t)
}

/// What a closing-table row holds: the workload over its seeds.
struct Row {
    name: String,
    spec: String,
    runs: Vec<SeedRun>,
    roof: Option<Roof>,
}

/// A task's sums as its progress shows them (`TaskProgress`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Sums {
    rounds: u32,
    errors: u32,
    search_s: f64,
    model_s: f64,
    measure_s: f64,
    build_s: f64,
    run_s: f64,
}

impl Sums {
    fn of(t: &pb::TaskProgress) -> Sums {
        Sums {
            rounds: t.rounds,
            errors: t.errors,
            search_s: t.search_s,
            model_s: t.model_s,
            measure_s: t.measure_s,
            build_s: t.build_s,
            run_s: t.run_s,
        }
    }
}

/// The rounds since the previous line: `first..=last` (one round unless a watcher saw several
/// at once), the trials and best after them, the times and errors they took.
#[derive(Debug, Clone, PartialEq)]
struct RoundLine {
    first: u32,
    last: u32,
    trials: u32,
    best_gflops: f64,
    took: Sums,
}

impl RoundLine {
    fn print(&self) {
        let rounds = if self.first == self.last {
            format!("round {:>2}", self.last)
        } else {
            format!("rounds {}-{}", self.first, self.last)
        };
        let t = &self.took;
        println!(
            "  {rounds}: {:>4} trials, best {:>7.1} GFLOP/s, search {:.2} s (model {:.2} s), measure {:.1} s, {} errors",
            self.trials, self.best_gflops, t.search_s, t.model_s, t.measure_s, t.errors
        );
    }
}

/// Per-round lines from a task's cumulative progress (the job's Round events, then its end): a
/// round's figures are the difference between two progress reports. The driver stores a
/// batch's records, then the task's row with the round's times: a watcher that read between
/// the two sees the trials before the round, which then goes into the next line.
#[derive(Default)]
struct RoundLog {
    seen: Sums,
}

impl RoundLog {
    /// The line for the rounds `t` adds, if it adds any.
    fn update(&mut self, t: &pb::TaskProgress) -> Option<RoundLine> {
        if t.rounds <= self.seen.rounds {
            return None;
        }
        let (now, was) = (Sums::of(t), self.seen);
        self.seen = now;
        Some(RoundLine {
            first: was.rounds + 1,
            last: now.rounds,
            trials: t.trials_done,
            best_gflops: t.best_gflops.unwrap_or(0.0),
            took: Sums {
                rounds: now.rounds - was.rounds,
                errors: now.errors.saturating_sub(was.errors),
                search_s: now.search_s - was.search_s,
                model_s: now.model_s - was.model_s,
                measure_s: now.measure_s - was.measure_s,
                build_s: now.build_s - was.build_s,
                run_s: now.run_s - was.run_s,
            },
        })
    }
}

/// One job of the bench, ended.
struct JobRun {
    job: pb::Job,
    /// Seconds from the submission to the job's end.
    wall_s: f64,
    lines: Vec<RoundLine>,
    /// Every record the job stored, in the order its batches proposed them.
    measured: Vec<(Schedule, MeasureResult)>,
}

/// Tunes `w` as one job on an embedded service on the database `db` (measuring on `target`):
/// submitted, run and followed as `tunehub tune` does; each round printed as it is stored.
async fn run_job(
    a: &SearchArgs,
    target: &Target,
    db: &str,
    w: pb::Workload,
    name: &str,
    seed: u64,
) -> Result<JobRun> {
    let mut service = Embedded::start(EmbeddedOptions {
        population: a.population,
        limits: Limits {
            max_trials_per_job: a.trials.max(Limits::default().max_trials_per_job),
            max_tasks_per_job: 1,
            ..Limits::default()
        },
        ..EmbeddedOptions::new(db, target.clone())
    })
    .await?;
    let req = pb::SubmitRequest {
        tasks: vec![pb::TaskSpec {
            workload: Some(w),
            trials: a.trials,
            weight: 1.0,
            alternative: false,
        }],
        target: "local".into(),
        measure: Some(a.measure.to_proto()),
        batch_size: a.batch,
        seed: job_seed(seed),
        scheduler: pb::SchedulerKind::Gradient as i32,
        name: format!("tunehub-bench search {name} seed {seed}"),
        cost_model: a.model.clone(),
        ..Default::default()
    };
    let mut log = RoundLog::default();
    let mut lines = vec![];
    let t0 = Instant::now();
    let job = service
        .run(req, |e| {
            if let pb::job_event::Event::Round(t) = e
                && let Some(line) = log.update(&t)
            {
                line.print();
                lines.push(line);
            }
            ControlFlow::Continue(())
        })
        .await?;
    let wall_s = t0.elapsed().as_secs_f64();
    if job.state != pb::JobState::Done as i32 {
        bail!("the job ended {:?}: {}", job.state(), job.error);
    }
    let task = job.tasks.first().context("the job has no task")?;
    // The rounds the last event did not show (a watcher sees rounds merged, never the end
    // missed).
    if let Some(line) = log.update(task) {
        line.print();
        lines.push(line);
    }
    let measured = job_records(&mut service, &job, task).await?;
    service.shutdown().await?;
    Ok(JobRun {
        job,
        wall_s,
        lines,
        measured,
    })
}

/// The records job `job` stored for its task `t`, in the order its batches proposed them:
/// `Records.Export` of the task's (workload, target), oldest first (a batch's records in the
/// order they were stored, see `SqlStore::export_records`), those stored since the job was
/// submitted (a shared database holds earlier runs' too).
async fn job_records(
    service: &mut Embedded,
    job: &pb::Job,
    t: &pb::TaskProgress,
) -> Result<Vec<(Schedule, MeasureResult)>> {
    let mut lines = service
        .clients
        .records
        .export(pb::ExportRequest {
            workload_key: t.workload_key.clone(),
            target_key: job.target_key.clone(),
        })
        .await
        .map_err(status_error)?
        .into_inner();
    let mut out = vec![];
    while let Some(msg) = lines.next().await {
        for line in msg.map_err(status_error)?.lines {
            let Line::Record(r) = parse_line(&line).map_err(anyhow::Error::msg)? else {
                continue;
            };
            if r.created_at.is_some_and(|at| at < job.created_at_ms) {
                continue;
            }
            let schedule = Schedule::from_json(&r.steps_json)?;
            let result = MeasureResult {
                costs: r.costs,
                error: ErrorCode::from_code(r.error_code).unwrap_or(ErrorCode::UnknownError),
                error_msg: r.error_msg,
                build_s: r.build_s,
                run_s: r.run_s,
                noisy: r.noisy,
            };
            out.push((schedule, result));
        }
    }
    if out.len() != t.new_records as usize {
        println!(
            "  (read back {} records; the job stored {} new: another writer on the database?)",
            out.len(),
            t.new_records
        );
    }
    Ok(out)
}

/// Where a run's jobs are stored.
enum Db {
    /// A fresh database per job, in a directory deleted afterwards.
    Fresh,
    /// One database for every job (`--db`).
    Shared(PathBuf),
}

impl Db {
    /// The database of the next job: its path, and the directory to keep until it ends.
    fn next(&self) -> Result<(String, Option<tempfile::TempDir>)> {
        match self {
            Db::Fresh => {
                let dir = tempfile::tempdir()?;
                let path = dir.path().join("search.db");
                Ok((path.to_string_lossy().into_owned(), Some(dir)))
            }
            Db::Shared(p) => Ok((p.to_string_lossy().into_owned(), None)),
        }
    }
}

/// A workload of the set as the API takes it: the op spec with its constant weight packed
/// (unless `no_layout_free`), as `tunehub tune` sends it, or the text form.
fn api_workload(spec: &str, no_layout_free: bool) -> Result<pb::Workload> {
    if spec.contains('[') {
        Ok(workload::from_expr(spec))
    } else if no_layout_free {
        let spec = OpSpec::parse(spec)?.with_layout_free(LayoutFree::none())?;
        Ok(workload::of_spec(&spec))
    } else {
        Ok(workload::from_op_spec(spec)?)
    }
}

pub fn run(a: SearchArgs) -> Result<()> {
    let target = Target::detect().with_overrides(&TargetOverrides {
        cores: a.threads,
        ..TargetOverrides::default()
    });
    let chosen: Vec<(&str, &str, Option<&str>)> = if a.workloads == "all" {
        WORKLOADS.to_vec()
    } else {
        a.workloads
            .split(',')
            .map(|w| {
                WORKLOADS
                    .iter()
                    .find(|(n, _, _)| *n == w.trim())
                    .copied()
                    .with_context(|| {
                        let names: Vec<&str> = WORKLOADS.iter().map(|w| w.0).collect();
                        format!("unknown workload {w:?} (known: {})", names.join(", "))
                    })
            })
            .collect::<Result<_>>()?
    };
    if a.seeds.is_empty() {
        bail!("--seeds names no seed");
    }
    if !matches!(a.model.as_str(), "xgb" | "random") {
        bail!("unknown model {:?} (random, xgb)", a.model);
    }
    if a.layout_free {
        println!("(--layout-free is the default now; --no-layout-free turns it off)");
    }
    let db = match &a.db {
        Some(p) => Db::Shared(p.clone()),
        None => Db::Fresh,
    };
    println!(
        "target {} ({}, {} threads), model {}, {} trials per workload, batch {}, population {}, seeds {:?}; each a job on the embedded service, {}",
        target.key(),
        target.cpu_model,
        target.cores,
        a.model,
        a.trials,
        a.batch,
        a.population,
        a.seeds,
        match &a.db {
            Some(p) => format!("all on {}", p.display()),
            None => "each on a fresh database".into(),
        }
    );
    let roofs = match Prober::new(&target).and_then(|p| Ok((Roofs::measure(&target, &p)?, p))) {
        Ok(r) => {
            r.0.print();
            Some(r)
        }
        Err(e) => {
            println!("(no memory roofs: {e:#})");
            None
        }
    };
    let math = match MathRates::measure(&target) {
        Ok(m) => {
            m.print();
            Some(m)
        }
        Err(e) => {
            println!("(no vector-math roof: {e:#})");
            None
        }
    };
    let pretrain = match &a.pretrain {
        Some(_) if a.model != "xgb" => bail!("--pretrain needs --model xgb"),
        Some(path) => {
            let file =
                std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
            let recs = tunehub_costmodel::dataset::read_records(std::io::BufReader::new(file))?;
            Some(tunehub_costmodel::dataset::to_task_samples(&recs)?)
        }
        None => None,
    };
    // The target a --pretrain-other-target model is saved under.
    let donor = a.pretrain_other_target.then(|| {
        let all = Target::detect().cores;
        let cores = a.pretrain_threads.unwrap_or(if target.cores != all {
            all
        } else {
            target.cores * 2
        });
        target.clone().with_overrides(&TargetOverrides {
            cores: Some(cores),
            ..TargetOverrides::default()
        })
    });
    if let Some(d) = &donor {
        if d.key() == target.key() {
            bail!("--pretrain-threads names this target's own core count");
        }
        println!(
            "(the pretrained model is saved under target {} ({} threads))",
            d.key(),
            d.cores
        );
    }
    let rt = crate::runtime()?;
    std::fs::create_dir_all(&a.out)?;
    let mut panels = vec![];
    let mut report = vec![];
    let mut records: Vec<DatasetRecord> = vec![];
    let mut rows: Vec<Row> = vec![];
    // Models across targets: (workload, seed, cold run, transferred run).
    let mut across = vec![];
    for (name, spec, weight) in chosen {
        let dag = build(spec)?;
        let task = match weight.filter(|_| !a.no_layout_free) {
            Some(w) => Task::new(dag, spec).with_layout_free(&[w]),
            None => Ok(Task::new(dag, spec)),
        };
        let task = Arc::new(task.map_err(anyhow::Error::msg)?);
        // The dataset's workload names the packed weights as a job would.
        let desc = match weight.filter(|_| !a.no_layout_free) {
            Some(w) => format!("{},layout_free={w})", spec.trim_end_matches(')')),
            None => spec.to_string(),
        };
        if !a.no_layout_free && weight.is_some() {
            println!("(layout rewrite on for {})", weight.unwrap_or(""));
        }
        let bytes = bandwidth::compulsory_bytes(&task.dag);
        println!(
            "\n== {name}: {} ({:.1} MFLOP, {:.2} MB to move at least once)",
            spec.lines().next().unwrap_or(spec),
            task.flops as f64 / 1e6,
            bytes as f64 / 1e6
        );
        let roof = match &roofs {
            Some((roofs, prober)) => {
                let roof = roofs.roof_for(prober, math.as_ref(), &task.dag)?;
                let (gbs, kind) = roof.applies();
                println!(
                    "  roof: {gbs:.1} GB/s ({kind}, probed at this working set, held by {}; read {:.1}, triad {:.1})",
                    roof.level, roof.read_gbs, roof.triad_gbs
                );
                if let Some(m) = &roof.math {
                    let calls: Vec<String> =
                        m.calls.iter().map(|(f, n)| format!("{n} {f}")).collect();
                    println!(
                        "  vector math: {} per call, at least {:.1} us",
                        calls.join(", "),
                        m.seconds * 1e6
                    );
                }
                Some(roof)
            }
            None => None,
        };
        let mut row = Row {
            name: name.to_string(),
            spec: spec.to_string(),
            runs: vec![],
            roof,
        };
        if a.roofs_only {
            rows.push(row);
            continue;
        }
        let w = api_workload(spec, a.no_layout_free)?;
        let one = Tuning {
            a: &a,
            rt: &rt,
            db: &db,
            target: &target,
            task: &task,
            workload: &w,
            desc: &desc,
            name,
        };
        for (k, &seed) in a.seeds.iter().enumerate() {
            if a.seeds.len() > 1 {
                println!("  -- seed {seed}");
            }
            let first = k == 0;
            // The model a job starts from, saved into its database first.
            let model = |target: &Target, exclude: Option<&str>| -> Result<Option<SavedModel>> {
                let Some(tasks) = &pretrain else {
                    return Ok(None);
                };
                let (bytes, trained_on) = pretrained_model(tasks, exclude, seed)?;
                Ok(Some(SavedModel {
                    bytes,
                    trained_on,
                    target: target.clone(),
                }))
            };
            let (cold, start) = match &donor {
                Some(donor) => {
                    println!("  (cold model)");
                    let cold =
                        one.tune(seed, first, None, &mut records, &mut panels, &mut report)?;
                    println!("  (model transferred from the other target's records)");
                    (cold, model(donor, None)?)
                }
                None => (None, model(&target, Some(&desc))?),
            };
            let Some(r) = one.tune(
                seed,
                first && donor.is_none(),
                start,
                &mut records,
                &mut panels,
                &mut report,
            )?
            else {
                continue;
            };
            if let Some(roof) = &row.roof {
                let (gbs, share) = bandwidth::achieved(roof, task.flops as f64 / r.gflops / 1e9);
                let (roof_gbs, kind) = roof.applies();
                println!(
                    "  bandwidth: {gbs:.1} GB/s of {roof_gbs:.1} ({}, {kind}): {:.0}% of the roof",
                    roof.level,
                    share * 100.0
                );
            }
            if let Some(cold) = cold {
                across.push((name, seed, cold, r.curve.clone(), r.gflops));
            }
            row.runs.push(r);
        }
        rows.push(row);
    }
    if a.roofs_only {
        return Ok(());
    }
    if !across.is_empty() {
        println!(
            "\nmodels across targets: trials to reach 90% of the cold run's final best (as read \
             while tuning), cold | transferred (-: not reached)"
        );
        let show = |n: Option<usize>| n.map_or("-".to_string(), |n| n.to_string());
        for (name, seed, cold, warm, warm_g) in &across {
            let level = 0.9 * cold.curve.last().map_or(0.0, |p| p.1);
            println!(
                "{name} seed {seed} | {} | {} | final GFLOP/s (re-measured) {:.1} | {:.1}",
                show(trials_to_level(&cold.curve, level)),
                show(trials_to_level(warm, level)),
                cold.gflops,
                warm_g
            );
        }
    }
    println!(
        "\nspec | tunehub GFLOP/s (worst seed) | per seed | achieved GB/s | roof GB/s (level) | share | tuning wall s (worst seed's)"
    );
    for row in &rows {
        let Some(worst) = row.runs.iter().min_by(|x, y| x.gflops.total_cmp(&y.gflops)) else {
            println!("{} | no valid kernel", row.name);
            continue;
        };
        let per: Vec<String> = row
            .runs
            .iter()
            .map(|r| format!("{}:{:.1}", r.seed, r.gflops))
            .collect();
        let flops = build(&row.spec)?.flop_count() as f64;
        let (bw, roof) = match &row.roof {
            Some(roof) => {
                let (gbs, share) = bandwidth::achieved(roof, flops / worst.gflops / 1e9);
                let (roof_gbs, kind) = roof.applies();
                (
                    format!("{gbs:.1}"),
                    format!("{roof_gbs:.1} ({}, {kind}) | {share:.2}", roof.level),
                )
            }
            None => ("-".into(), "- | -".into()),
        };
        println!(
            "{} `{}` | {:.1} | {} | {bw} | {roof} | {:.1}",
            row.name,
            row.spec.lines().next().unwrap_or(&row.spec),
            worst.gflops,
            per.join(" "),
            worst.wall_s
        );
    }
    let svg = a.out.join("curves.svg");
    std::fs::write(&svg, plot::svg(&panels))?;
    let js = a.out.join("results.json");
    let roofs_json = roofs.as_ref().map(|(r, _)| {
        r.levels
            .iter()
            .map(|l| json!({"level": l.name, "probed_bytes": l.probed, "read_gbs": l.read_gbs, "triad_gbs": l.triad_gbs}))
            .collect::<Vec<_>>()
    });
    std::fs::write(
        &js,
        serde_json::to_string_pretty(&json!({"target": target.key(), "roofs": roofs_json,
                "math_per_second": math.as_ref().map(|m| m.per_second.clone()), "workloads": report,
                "workload_roofs": rows.iter().map(|r| json!({"workload": r.name,
                    "roof": r.roof.as_ref().map(|f| json!({"level": f.level,
                        "probed_bytes": f.probed, "read_gbs": f.read_gbs,
                        "triad_gbs": f.triad_gbs, "applies": f.applies().1,
                        "math_floor_s": f.math.as_ref().map(|m| m.seconds)}))}))
                    .collect::<Vec<_>>()}))?,
    )?;
    let rec = a.out.join("records.jsonl");
    write_records(
        std::io::BufWriter::new(std::fs::File::create(&rec)?),
        &records,
    )?;
    println!(
        "\nwrote {}, {} and {} ({} records)",
        svg.display(),
        js.display(),
        rec.display(),
        records.len()
    );
    Ok(())
}

/// What the tunings of one workload share.
struct Tuning<'a> {
    a: &'a SearchArgs,
    rt: &'a tokio::runtime::Runtime,
    db: &'a Db,
    target: &'a Target,
    /// The workload as built here (for the re-measurements and the random baseline): the
    /// job's task, which the server builds from `workload`.
    task: &'a Arc<Task>,
    workload: &'a pb::Workload,
    /// Its name in the dataset.
    desc: &'a str,
    name: &'a str,
}

impl Tuning<'_> {
    /// Tunes the workload with one seed as a job (its database holding `start` as a saved
    /// model first) and prints its figures; the random baseline and OpenBLAS only on the
    /// `first` seed (they do not depend on the search's seed much, and cost a tuning's
    /// measurements).
    fn tune(
        &self,
        seed: u64,
        first: bool,
        start: Option<SavedModel>,
        records: &mut Vec<DatasetRecord>,
        panels: &mut Vec<plot::Panel>,
        report: &mut Vec<serde_json::Value>,
    ) -> Result<Option<SeedRun>> {
        let (a, target, task, name) = (self.a, self.target, self.task, self.name);
        let (db, _dir) = self.db.next()?;
        let run = self.rt.block_on(async {
            if let Some(m) = &start {
                save_model(&db, m).await?;
            }
            run_job(a, target, &db, self.workload.clone(), name, seed).await
        })?;
        let (job, wall) = (&run.job, run.wall_s);
        let t = job.tasks.first().context("the job has no task")?;
        if t.workload_key != task.key {
            bail!(
                "the job's workload {} is not the bench's {} ({name})",
                t.workload_key,
                task.key
            );
        }
        println!(
            "  job {} (seed {}), model {}, {} rounds stored",
            job.id, job.seed, job.model, t.rounds
        );
        for (sch, x) in &run.measured {
            records.push(DatasetRecord::new(self.desc, sch, x));
        }
        // Every correct, quiet measurement of the run, for the final pick.
        let measured: Vec<(Schedule, f64)> = run
            .measured
            .iter()
            .filter(|(_, x)| x.is_ok() && !x.noisy)
            .map(|(s, x)| (s.clone(), x.mean_cost()))
            .collect();
        // Best so far after every trial, in the order the search proposed them.
        let trial_curve = best_so_far(task, &run.measured);
        let curve: Vec<(usize, f64)> = run
            .lines
            .iter()
            .map(|l| (l.trials as usize, l.best_gflops))
            .collect();
        let rounds: Vec<serde_json::Value> = run
            .lines
            .iter()
            .map(|l| {
                json!({"round": l.last, "rounds": l.took.rounds, "trials": l.trials,
                    "best_gflops": l.best_gflops, "search_s": l.took.search_s,
                    "model_s": l.took.model_s, "measure_s": l.took.measure_s})
            })
            .collect();

        let mut fin = Measurer::new(target, final_opts());
        let Some((best, best_g)) = pick_and_remeasure(&mut fin, task, measured) else {
            println!("  no valid kernel found");
            return Ok(None);
        };
        let random_g = if first && a.random_trials > 0 {
            let mut measurer = Measurer::new(target, a.measure.options());
            let mut sampler = RandomSampler::new(&task.dag, target, seed ^ 0xbe7c);
            let cands: Vec<Schedule> = (0..a.random_trials).map(|_| sampler.sample()).collect();
            let rs = measurer.measure(task, &cands);
            for (sch, x) in cands.iter().zip(&rs) {
                records.push(DatasetRecord::new(self.desc, sch, x));
            }
            let ok = cands.iter().zip(&rs).filter(|(_, x)| x.is_ok() && !x.noisy);
            let measured = ok.map(|(c, x)| (c.clone(), x.mean_cost())).collect();
            pick_and_remeasure(&mut fin, task, measured).map(|(_, g)| g)
        } else {
            None
        };
        let blas_g = if first && !a.no_blas && name.starts_with("matmul") {
            blas::sgemm_gflops(task, target, &final_opts())
        } else {
            None
        };
        println!(
            "  best {best_g:.1} GFLOP/s (re-measured: fastest of the {FINALISTS} best read, best of {REMEASURES}), tuning wall {wall:.1} s = search {:.1} s + measure {:.1} s (build {:.1} s, run {:.1} s summed per candidate); search per round {:.2} s",
            t.search_s,
            t.measure_s,
            t.build_s,
            t.run_s,
            t.search_s / f64::from(t.rounds.max(1)),
        );
        let to_90 = trials_to_reach(&trial_curve, 0.9);
        if let Some(n) = to_90 {
            println!("  trials to reach 90% of the run's final best: {n}");
        }
        if let Some(g) = random_g {
            println!(
                "  best of {} random schedules: {g:.1} GFLOP/s (picked and re-measured alike)",
                a.random_trials
            );
        }
        if let Some((core, g)) = &blas_g {
            println!("  OpenBLAS sgemm ({core}): {g:.1} GFLOP/s");
        }
        let mut refs = vec![];
        if let Some(g) = random_g {
            refs.push((format!("random x{}", a.random_trials), g));
        }
        if let Some((core, g)) = &blas_g {
            refs.push((format!("OpenBLAS {core}"), *g));
        }
        panels.push(plot::Panel {
            title: format!("{name} seed {seed} (best {best_g:.1})"),
            curve,
            refs,
        });
        report.push(json!({
            "workload": name, "spec": task.desc, "seed": seed, "best_gflops": best_g, "wall_s": wall,
            "search_s": t.search_s, "model_s": t.model_s, "measure_s": t.measure_s,
            "build_s": t.build_s, "run_s": t.run_s,
            "rounds": rounds, "random_best_gflops": random_g, "trials_to_90pct": to_90,
            "trial_curve": trial_curve.iter().map(|p| p.1).collect::<Vec<f64>>(),
            "blas": blas_g.map(|(c, g)| json!({"core": c, "gflops": g})),
            "best_schedule": best.to_json_value(),
            "job": {"id": job.id, "seed": job.seed, "model": job.model,
                "cost_model": job.cost_model, "rounds": t.rounds, "trials_done": t.trials_done,
                "new_records": t.new_records, "dropped": t.dropped,
                "db": self.a.db.as_ref().map(|p| p.display().to_string())},
        }));
        Ok(Some(SeedRun {
            seed,
            gflops: best_g,
            wall_s: wall,
            curve: trial_curve,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bench packs what `tunehub tune` packs, so that its figures are a user's.
    #[test]
    fn the_packed_weights_are_the_command_lines() {
        for (name, spec, weight) in WORKLOADS {
            let want = ops::OpSpec::parse(spec)
                .ok()
                .and_then(|s| ops::constant_weight(s.name()));
            assert_eq!(*weight, want, "{name}");
            assert!(build(spec).is_ok(), "{name}");
        }
    }

    /// The job's workload (as the server builds it from the API's) is the task the bench
    /// re-measures, packed or not: the job's schedules apply to it.
    #[test]
    fn the_jobs_workload_is_the_benchs_task() {
        for (name, spec, weight) in WORKLOADS {
            for no_layout_free in [false, true] {
                let w = api_workload(spec, no_layout_free).unwrap();
                let theirs = tunehub_server::workload::task_of(&w)
                    .expect("a workload")
                    .expect("a valid workload");
                let dag = build(spec).unwrap();
                let ours = match weight.filter(|_| !no_layout_free) {
                    Some(w) => Task::new(dag, *spec).with_layout_free(&[w]).unwrap(),
                    None => Task::new(dag, *spec),
                };
                assert_eq!(
                    theirs.key, ours.key,
                    "{name}, no_layout_free {no_layout_free}"
                );
            }
        }
    }

    /// Bench seeds are job seeds, but 0 (the service's "choose one"): none collide.
    #[test]
    fn every_seed_is_a_fixed_job_seed() {
        assert_eq!(job_seed(1), 1);
        assert_eq!(job_seed(42), 42);
        assert_ne!(job_seed(0), 0);
        assert!((1..1000).all(|s| job_seed(s) != job_seed(0)));
    }

    fn progress(rounds: u32, trials: u32, search_s: f64, errors: u32) -> pb::TaskProgress {
        pb::TaskProgress {
            rounds,
            trials_done: trials,
            errors,
            search_s,
            model_s: search_s / 2.0,
            measure_s: 2.0 * search_s,
            best_gflops: Some(f64::from(trials)),
            ..Default::default()
        }
    }

    /// A round's line is the difference of two progress reports; a report whose round's
    /// times are not stored yet adds no line, and the next one covers both rounds.
    #[test]
    fn round_lines_are_differences_of_the_sums() {
        let mut log = RoundLog::default();
        assert_eq!(log.update(&progress(0, 0, 0.0, 0)), None);
        let l = log.update(&progress(1, 64, 1.0, 3)).unwrap();
        assert_eq!((l.first, l.last, l.trials, l.took.errors), (1, 1, 64, 3));
        assert_eq!((l.took.search_s, l.took.measure_s), (1.0, 2.0));
        // Trials of round 2 stored, its times not yet.
        assert_eq!(log.update(&progress(1, 128, 1.0, 5)), None);
        let l = log.update(&progress(3, 192, 4.0, 6)).unwrap();
        assert_eq!((l.first, l.last, l.trials, l.took.rounds), (2, 3, 192, 2));
        assert_eq!(
            (l.took.search_s, l.took.model_s, l.took.errors),
            (3.0, 1.5, 3)
        );
        assert_eq!(log.update(&progress(3, 192, 4.0, 6)), None, "seen already");
    }

    /// The per-trial curve: failed and noisy trials read 0, the best so far carries on.
    #[test]
    fn the_per_trial_curve_is_the_best_so_far() {
        let task = Task::new(build("matmul(8,8,8)").unwrap(), "matmul(8,8,8)");
        let ok = |s: f64, noisy: bool| MeasureResult {
            costs: vec![s],
            error: ErrorCode::NoError,
            error_msg: String::new(),
            build_s: 0.0,
            run_s: 0.0,
            noisy,
        };
        let failed = MeasureResult {
            costs: vec![],
            error: ErrorCode::CompileError,
            ..ok(0.0, false)
        };
        let s = Schedule::default();
        let g = |x: f64| task.gflops(x);
        let curve = best_so_far(
            &task,
            &[
                (s.clone(), failed),
                (s.clone(), ok(2e-6, false)),
                (s.clone(), ok(1e-7, true)),
                (s.clone(), ok(1e-6, false)),
                (s.clone(), ok(3e-6, false)),
            ],
        );
        assert_eq!(
            curve,
            [
                (1, 0.0),
                (2, g(2e-6)),
                (3, g(2e-6)),
                (4, g(1e-6)),
                (5, g(1e-6))
            ]
        );
        assert_eq!(trials_to_reach(&curve, 0.9), Some(4));
    }
}
