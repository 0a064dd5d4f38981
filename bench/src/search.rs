//! `tunehub-bench search`: tunes a fixed set of workloads with a fixed trial budget and prints,
//! per workload and seed, the best GFLOP/s (re-measured), the tuning wall time split into search,
//! build and run, the best of as many purely random schedules, OpenBLAS for the matmuls, the
//! best-so-far curve, and the bandwidth reached against the roof that applies (see
//! `bandwidth` and `mathroof`); then a closing table with each workload's worst seed. Writes
//! the curves as SVG and everything as JSON.
//!
//! `cargo run -p tunehub-bench -- search [--workloads matmul512,conv2d] [--trials 200]
//! [--seeds 0,1,2] [--model xgb|random]`
//! (the dev profile builds every crate it runs with opt-level 2; a release build would compile
//! XGBoost's C++ a second time).
//!
//! Models across targets (issue 29.6): records of one target (`search --threads 2 --out A`),
//! then `search --threads 1 --pretrain A/records.jsonl --pretrain-other-target`: each seed
//! tuned from a cold model and from the model of the other target's records, side by side.
//!
//! Check the machine is quiet first (`../shared/tools/machine-check`): a neighbour on one core
//! halves 2-thread figures.

use crate::bandwidth::{self, Prober, Roof, Roofs};
use crate::mathroof::MathRates;
use crate::{blas, plot};
use anyhow::{Context, Result, bail};
use serde_json::json;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tunehub_costmodel::dataset::{DatasetRecord, write_records};
use tunehub_engine::measure::{MeasureOptions, Measurer};
use tunehub_engine::ops;
use tunehub_engine::sample::RandomSampler;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::search::{
    CostModel, DEFAULT_BATCH, RandomModel, SchedulerKind, SearchParams, TuneOptions, tune,
};
use tunehub_engine::target::{Target, TargetOverrides};
use tunehub_engine::task::Task;

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
}

impl TuningMeasureArgs {
    pub fn options(&self) -> MeasureOptions {
        MeasureOptions {
            number: self.number,
            repeat: self.repeat,
            min_repeat_ms: self.min_repeat_ms,
            ..MeasureOptions::default()
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
    trials: usize,
    #[arg(long, default_value_t = DEFAULT_BATCH)]
    batch: usize,
    /// Evolutionary population per round.
    #[arg(long, default_value_t = 2048)]
    population: usize,
    #[arg(long, default_value_t = 4)]
    generations: usize,
    /// Cost model: xgb (XGBoost, Ansor's pack-sum objective) or random (the search without a
    /// model).
    #[arg(long, default_value = "xgb")]
    model: String,
    /// Random schedules measured as the baseline (0: none).
    #[arg(long, default_value_t = 200)]
    random_trials: usize,
    /// Threads of the kernels (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Seeds, comma-separated: each workload is tuned once per seed and its worst seed is the
    /// figure of the closing table (the stability rule).
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
    /// Start the XGBoost model from one trained on the records of this dataset's other
    /// workloads (measured on this target), as the server starts a job from the model it saved
    /// for the job's target: then the first round is ranked by the model too. The tuned
    /// workload's own records are left out.
    #[arg(long)]
    pretrain: Option<PathBuf>,
    /// The --pretrain dataset was measured on another target (models across targets, issue
    /// 29.6: e.g. the records of a `--threads 2` run, evaluated with `--threads 1`): the tuned
    /// workload's own records in it are kept (none is this target's), and each seed is tuned
    /// twice, from a cold model and from the transferred one, compared by the trials each took
    /// to reach 90% of the cold run's final best.
    #[arg(long, requires = "pretrain")]
    pretrain_other_target: bool,
    /// Where the SVG, the JSON and the measured records (`records.jsonl`, the cost model's
    /// dataset format: `cargo run -p tunehub-costmodel --example ranking -- FILE`) go.
    #[arg(long, default_value = "bench-out")]
    out: PathBuf,
}

fn make_model(name: &str, seed: u64) -> Result<Box<dyn CostModel>> {
    match name {
        "random" => Ok(Box::new(RandomModel::new(seed))),
        "xgb" => Ok(Box::new(tunehub_costmodel::XgbModel::new(
            tunehub_costmodel::XgbParams {
                seed,
                ..tunehub_costmodel::XgbParams::default()
            },
        ))),
        _ => bail!("unknown model {name:?} (random, xgb)"),
    }
}

/// An XGBoost model trained on every task of `tasks` but `exclude`, saved and loaded back: what
/// the server hands a new job on a target it has tuned other workloads on (or, `exclude` none,
/// on a target with no model of its own: the nearest other target's).
fn pretrained_model(
    tasks: &[tunehub_costmodel::samples::TaskSamples],
    exclude: Option<&str>,
    seed: u64,
) -> Result<Box<dyn CostModel>> {
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
    Ok(Box::new(tunehub_costmodel::XgbModel::load(&m.save()?)?))
}

/// Ansor's final re-measurement: more runs, several repeats, on a settled kernel.
fn final_opts() -> MeasureOptions {
    MeasureOptions {
        number: 10,
        repeat: 5,
        min_repeat_ms: 200,
        warmup: 1,
        ..MeasureOptions::default()
    }
}

/// Final measurements per kernel, the best kept. This machine's clock wanders by up to a fifth
/// between seconds (the same kernel measured 150-200 GFLOP/s in one minute), so one
/// measurement says more about the moment than the kernel; the tuned kernel, the random one
/// and OpenBLAS each get the same number of tries.
pub const REMEASURES: usize = 3;

fn remeasure(fin: &mut Measurer, task: &Task, sched: &Schedule) -> f64 {
    (0..REMEASURES)
        .map(|_| {
            let r = fin.measure(task, std::slice::from_ref(sched));
            if r[0].is_ok() {
                task.gflops(r[0].mean_cost())
            } else {
                0.0
            }
        })
        .fold(0.0, f64::max)
}

/// Candidates re-measured once each at the end to pick the kernel that is reported: a single
/// short tuning measurement can read a fifth fast, so the run's best by its own reading is
/// often not its fastest kernel (batch_matmul: a 178 GFLOP/s reading re-measured at 142).
pub const FINALISTS: usize = 5;

/// The fastest of the `FINALISTS` best-read candidates (`(schedule, mean cost)`, failed and
/// noisy ones left out by the caller), each re-measured once, then re-measured
/// `REMEASURES` times on its own: the pick and the figure come from separate measurements, so
/// the figure has the same estimator as a single kernel's.
fn pick_and_remeasure(
    fin: &mut Measurer,
    task: &Task,
    mut measured: Vec<(Schedule, f64)>,
) -> Option<(Schedule, f64)> {
    measured.sort_by(|a, b| a.1.total_cmp(&b.1));
    // Random sampling can draw a schedule twice: it is one finalist.
    let mut seen = std::collections::HashSet::new();
    measured.retain(|(s, _)| seen.insert(s.clone()));
    measured.truncate(FINALISTS);
    let mut finalists: Vec<Schedule> = measured.into_iter().map(|(s, _)| s).collect();
    if finalists.is_empty() {
        return None;
    }
    let picks = fin.measure(task, &finalists);
    // A noisy reading counts here: noise only slows a kernel, so a noisy finalist that still
    // reads fastest is the fastest. Left out, a bias+GELU run whose fast kernel read noisy
    // reported its other finalist, 60x slower.
    let fastest = picks
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_ok())
        .min_by(|a, b| a.1.mean_cost().total_cmp(&b.1.mean_cost()))
        .map_or(0, |(i, _)| i);
    let winner = finalists.swap_remove(fastest);
    let g = remeasure(fin, task, &winner);
    Some((winner, g))
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
    if a.layout_free {
        println!("(--layout-free is the default now; --no-layout-free turns it off)");
    }
    println!(
        "target {} ({}, {} threads), model {}, {} trials per workload, batch {}, population {}, seeds {:?}",
        target.key(),
        target.cpu_model,
        target.cores,
        a.model,
        a.trials,
        a.batch,
        a.population,
        a.seeds
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
        for (k, &seed) in a.seeds.iter().enumerate() {
            if a.seeds.len() > 1 {
                println!("  -- seed {seed}");
            }
            let first = k == 0;
            let cold = if a.pretrain_other_target {
                println!("  (cold model)");
                let cold = tune_one(
                    &a,
                    &target,
                    &task,
                    &desc,
                    name,
                    seed,
                    first,
                    None,
                    &mut records,
                    &mut panels,
                    &mut report,
                )?;
                println!("  (model transferred from the other target's records)");
                cold
            } else {
                None
            };
            let Some(r) = tune_one(
                &a,
                &target,
                &task,
                &desc,
                name,
                seed,
                first && !a.pretrain_other_target,
                pretrain.as_deref(),
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

/// Tunes `task` with one seed and prints its figures; the random baseline and OpenBLAS only
/// on the `first` seed (they do not depend on the search's seed much, and cost a tuning's
/// measurements).
#[allow(clippy::too_many_arguments)]
fn tune_one(
    a: &SearchArgs,
    target: &Target,
    task: &Arc<Task>,
    desc: &str,
    name: &str,
    seed: u64,
    first: bool,
    pretrain: Option<&[tunehub_costmodel::samples::TaskSamples]>,
    records: &mut Vec<DatasetRecord>,
    panels: &mut Vec<plot::Panel>,
    report: &mut Vec<serde_json::Value>,
) -> Result<Option<SeedRun>> {
    let tune_opts = a.measure.options();
    let mut measurer = Measurer::new(target, tune_opts.clone());
    let mut model = match pretrain {
        Some(tasks) => {
            let exclude = (!a.pretrain_other_target).then_some(desc);
            pretrained_model(tasks, exclude, seed)?
        }
        None => make_model(&a.model, seed)?,
    };
    let opts = TuneOptions {
        trials: a.trials,
        batch: a.batch,
        params: SearchParams {
            population: a.population,
            generations: a.generations,
            ..SearchParams::default()
        },
        scheduler: SchedulerKind::Gradient,
        seed,
    };
    let (mut search_s, mut measure_s, mut build_s, mut run_s) = (0.0, 0.0, 0.0, 0.0);
    let mut curve = vec![];
    // Best so far after every trial, in the order the search proposed them.
    let mut trial_curve: Vec<(usize, f64)> = vec![];
    let mut rounds = vec![];
    // Every correct, quiet measurement of the run, for the final pick.
    let mut measured: Vec<(Schedule, f64)> = vec![];
    let t0 = Instant::now();
    let searches = tune(
        &[(task.clone(), 1.0)],
        &mut measurer,
        model.as_mut(),
        &opts,
        |round| {
            let (r, results) = (&round.report, &round.results);
            for (sch, x) in round.batch.iter().zip(results) {
                records.push(DatasetRecord::new(desc, sch, x));
                if x.is_ok() && !x.noisy {
                    measured.push((sch.clone(), x.mean_cost()));
                }
            }
            for x in results {
                let prev = trial_curve.last().map_or(0.0, |p| p.1);
                let g = if x.is_ok() && !x.noisy {
                    task.gflops(x.mean_cost())
                } else {
                    0.0
                };
                trial_curve.push((trial_curve.len() + 1, prev.max(g)));
            }
            search_s += r.search_s;
            measure_s += r.measure_s;
            build_s += r.build_s;
            run_s += r.run_s;
            let g = r.best_cost.map_or(0.0, |c| task.gflops(c));
            println!(
                "  round {:>2}: {:>4} trials, best {:>7.1} GFLOP/s, search {:.2} s (model {:.2} s), measure {:.1} s, {} errors",
                r.round, r.total_trials, g, r.search_s, r.model_s, r.measure_s, r.errors
            );
            curve.push((r.total_trials, g));
            rounds.push(json!({"trials": r.total_trials, "best_gflops": g, "search_s": r.search_s, "model_s": r.model_s, "measure_s": r.measure_s}));
            ControlFlow::Continue(())
        },
    )?;
    let wall = t0.elapsed().as_secs_f64();
    let s = &searches[0];
    let mut fin = Measurer::new(target, final_opts());
    let Some((best, best_g)) = pick_and_remeasure(&mut fin, task, measured) else {
        println!("  no valid kernel found");
        return Ok(None);
    };

    let random_g = if first && a.random_trials > 0 {
        let mut sampler = RandomSampler::new(&task.dag, target, seed ^ 0xbe7c);
        let cands: Vec<Schedule> = (0..a.random_trials).map(|_| sampler.sample()).collect();
        let rs = measurer.measure(task, &cands);
        for (sch, x) in cands.iter().zip(&rs) {
            records.push(DatasetRecord::new(desc, sch, x));
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
        "  best {best_g:.1} GFLOP/s (re-measured: fastest of the {FINALISTS} best read, best of {REMEASURES}), tuning wall {wall:.1} s = search {search_s:.1} s + measure {measure_s:.1} s (build {build_s:.1} s, run {run_s:.1} s summed per candidate); search per round {:.2} s; rejected {}",
        search_s / s.stats.rounds.max(1) as f64,
        s.stats.rejected
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
        curve: curve.clone(),
        refs,
    });
    report.push(json!({
        "workload": name, "spec": task.desc, "seed": seed, "best_gflops": best_g, "wall_s": wall,
        "search_s": search_s, "measure_s": measure_s, "build_s": build_s, "run_s": run_s,
        "rounds": rounds, "random_best_gflops": random_g, "trials_to_90pct": to_90,
        "trial_curve": trial_curve.iter().map(|p| p.1).collect::<Vec<f64>>(),
        "blas": blas_g.map(|(c, g)| json!({"core": c, "gflops": g})),
        "best_schedule": best.to_json_value(),
    }));
    Ok(Some(SeedRun {
        seed,
        gflops: best_g,
        wall_s: wall,
        curve: trial_curve,
    }))
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
}
