//! `tunehub-bench network MODEL.onnx`: a whole network tuned as one job (what `tunehub tune
//! MODEL.onnx` does, on an embedded server with a throwaway database): per task its best
//! GFLOP/s and share of the end-to-end estimate, the estimate against trials and wall time, an
//! SVG of each, and the peer's latency beside it when given (`bench/onnx_peer.py` measures ONNX
//! Runtime on the same model and thread count).

use crate::plot::{Panel, svg_with};
use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::json;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Instant;
use tunehub::embedded::{Embedded, EmbeddedOptions};
use tunehub::workload;
use tunehub_engine::measure::MeasureOptions;
use tunehub_engine::search::DEFAULT_POPULATION;
use tunehub_engine::target::{Target, TargetOverrides};
use tunehub_onnx::{Extraction, InputShapes, Layout, TaskList};
use tunehub_proto::v1 as pb;
use tunehub_server::api::jobs::measure_over;

#[derive(Args)]
pub struct NetworkArgs {
    /// The ONNX model.
    model: PathBuf,
    /// Candidates per task (the job's budget is this times the task count).
    #[arg(long, default_value_t = 64)]
    trials: u32,
    /// Candidates per round.
    #[arg(long, default_value_t = tunehub_engine::search::DEFAULT_BATCH as u32)]
    batch: u32,
    /// The value of every input's dynamic first dimension.
    #[arg(long)]
    model_batch: Option<i64>,
    /// Evolutionary population per round.
    #[arg(long, default_value_t = DEFAULT_POPULATION)]
    population: usize,
    /// Cores the kernels run on (the peer's thread count should match).
    #[arg(long)]
    cores: Option<usize>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The peer's latency in ms (ONNX Runtime, from bench/onnx_peer.py), drawn and compared.
    #[arg(long)]
    peer_ms: Option<f64>,
    /// Time each candidate warm (several runs per repeat, with what its previous run left in
    /// cache) instead of cold, the default of a model's tasks (`MeasureOptions::cold`: one run
    /// per repeat from a flushed cache, as `tunehub tune MODEL.onnx` times them).
    #[arg(long)]
    warm_cache: bool,
    /// Build the model with the tuned kernels (`tunehub build`) and time it: its measured
    /// latency beside the estimate.
    #[arg(long)]
    build: bool,
    /// Timed runs of the built model (and of ONNX Runtime), after a warm-up.
    #[arg(long, default_value_t = 200)]
    runs: u32,
    /// A Python with onnxruntime: ONNX Runtime is timed on the same file in the same run
    /// (bench/ort_latency.py), instead of --peer-ms.
    #[arg(long)]
    ort_python: Option<PathBuf>,
    /// Keep the records in this database (created if missing; reused if it holds some) instead
    /// of a throwaway one: a zero-shot build of another model can read them.
    #[arg(long)]
    db: Option<PathBuf>,
    /// Where the report, the JSON and the SVG go.
    #[arg(long, default_value = "bench-out/network")]
    out: PathBuf,
    /// The machine's FMA peak in GFLOP/s (`machine-check`): the report then lists the tasks
    /// below half their roof and what the estimate would gain (`task_roofs`).
    #[arg(long)]
    fma_peak: Option<f64>,
    /// The layout the convolutions are tuned in (`tunehub tune --layout`) [default: auto, every
    /// form a build chooses among per convolution]; the build takes the tuned layout whose
    /// kernels take least.
    #[arg(long)]
    layout: Option<Layout>,
    /// Per-task budgets below --trials at which the model is also built and timed (with
    /// --build): the measured latency against trials, each stage a job on the same database.
    #[arg(long, value_delimiter = ',')]
    checkpoints: Vec<u32>,
}

pub async fn run(a: NetworkArgs) -> Result<()> {
    let shapes = InputShapes {
        batch: a.model_batch,
        shapes: vec![],
    };
    let how = Extraction {
        layout: a.layout,
        ..Extraction::lenient()
    };
    let list = tunehub_onnx::extract_file(&a.model, &shapes, &how)
        .with_context(|| format!("extracting the tasks of {}", a.model.display()))?;
    let n = list.tasks.len() as u32;
    if !a.checkpoints.is_empty() && !a.build {
        bail!("--checkpoints builds the model: give --build too");
    }
    let dir = tempfile::tempdir()?;
    let db = a.db.clone().unwrap_or_else(|| dir.path().join("bench.db"));
    let target = Target::detect().with_overrides(&TargetOverrides {
        cores: a.cores,
        ..TargetOverrides::default()
    });
    // The embedded defaults' limits (a model of any size is taken whole by BuildModel), with
    // room for this job.
    let mut options = EmbeddedOptions::new(db.to_string_lossy(), target);
    options.population = a.population;
    options.limits.max_trials_per_job = a.trials.saturating_mul(n);
    options.limits.max_tasks_per_job = n;
    let threads = a.cores.unwrap_or(Target::detect().cores).max(1) as u32;
    // Each stage is a job on the same database that brings every task to the stage's budget;
    // the model is built and timed between stages, with the service stopped.
    let stages = stages(&a.checkpoints, a.trials)?;
    let mut wall = 0.0;
    let mut trials_before = 0;
    // (trials so far, tuning seconds, estimate seconds, tasks without a best)
    let mut curve: Vec<(u32, f64, f64, u32)> = vec![];
    let mut measured: Vec<Checkpoint> = vec![];
    let mut budget_before = 0;
    for (stage, &budget) in stages.iter().enumerate() {
        let mut service = Embedded::start(options.clone()).await?;
        let start = Instant::now();
        let mut done: HashMap<u32, u32> = HashMap::new();
        // Another seed per stage: the same one would draw the measured candidates again.
        let req = request(&list, &a, budget - budget_before, a.seed + stage as u64);
        let job = service
            .run(req, |e| {
                match e {
                    pb::job_event::Event::Round(t) => {
                        done.insert(t.index, t.trials_done);
                    }
                    pb::job_event::Event::Estimate(e) => {
                        let trials = trials_before + done.values().sum::<u32>();
                        let at = wall + start.elapsed().as_secs_f64();
                        eprintln!(
                            "{trials:>6} trials {at:>8.1} s  estimate {:.4} ms ({} tasks \
                             without a best)",
                            e.seconds * 1e3,
                            e.missing
                        );
                        curve.push((trials, at, e.seconds, e.missing));
                    }
                    _ => {}
                }
                ControlFlow::Continue(())
            })
            .await?;
        wall += start.elapsed().as_secs_f64();
        trials_before += job.tasks.iter().map(|t| t.trials_done).sum::<u32>();
        budget_before = budget;
        let last = stage + 1 == stages.len();
        let est = match job.estimate {
            Some(est) => est,
            None if last => bail!("no task has a successful kernel"),
            None => pb::Estimate::default(),
        };
        let dir = match last {
            true => a.out.join("built"),
            false => a.out.join(format!("built-{budget}")),
        };
        let files = if a.build {
            Some(crate::built::build(&mut service.clients, &a.model, &shapes, &dir).await?)
        } else {
            None
        };
        // Timed with the service stopped, in a process of its own.
        service.shutdown().await?;
        let built = match files {
            Some(f) => Some((f, crate::built::time(&dir, threads, a.runs)?)),
            None => None,
        };
        if let Some((_, b)) = &built {
            eprintln!(
                "{trials_before:>6} trials {wall:>8.1} s  built: median {:.4} ms",
                b.median_ms
            );
            // ONNX Runtime beside each checkpoint (the last one's is the report's): the
            // machine's state (what a neighbour leaves in the shared cache) moves the latency
            // of both.
            let ort_ms = match &a.ort_python {
                Some(py) if !last => {
                    Some(crate::built::ort_median_ms(py, &a.model, threads, a.runs)?)
                }
                _ => None,
            };
            measured.push(Checkpoint {
                trials: trials_before,
                wall_s: wall,
                median_ms: b.median_ms,
                ort_ms,
            });
        }
        if !last {
            continue;
        }
        return report(
            &a, &list, &job, est, built, wall, threads, &curve, &measured,
        );
    }
    unreachable!("`stages` ends with the budget")
}

/// The built model timed after some trials.
struct Checkpoint {
    /// Trials of every task so far.
    trials: u32,
    /// Seconds of tuning so far (builds and timing not counted).
    wall_s: f64,
    median_ms: f64,
    /// ONNX Runtime timed right after it (`None`: the run's, timed at the end).
    ort_ms: Option<f64>,
}

/// The per-task budgets the model is built at: the checkpoints below `trials`, then `trials`.
fn stages(checkpoints: &[u32], trials: u32) -> Result<Vec<u32>> {
    let mut v: Vec<u32> = checkpoints
        .iter()
        .copied()
        .filter(|&c| c < trials)
        .collect();
    if v.contains(&0) || v.len() != checkpoints.len() {
        bail!("--checkpoints must be between 1 and --trials ({trials}) exclusive");
    }
    v.sort_unstable();
    v.dedup();
    v.push(trials);
    Ok(v)
}

/// The job that brings every task `per_task` trials further.
fn request(list: &TaskList, a: &NetworkArgs, per_task: u32, seed: u64) -> pb::SubmitRequest {
    pb::SubmitRequest {
        tasks: list
            .tasks
            .iter()
            .map(|t| pb::TaskSpec {
                workload: Some(workload::of_net_task(t)),
                trials: per_task,
                weight: f64::from(t.weight),
                alternative: t.alternative,
            })
            .collect(),
        target: "local".into(),
        measure: Some(measure_over(
            &if a.warm_cache {
                MeasureOptions::default()
            } else {
                MeasureOptions::cold()
            },
            None,
        )),
        batch_size: a.batch,
        seed,
        scheduler: pb::SchedulerKind::Gradient as i32,
        name: "tunehub-bench network".into(),
        priority: 0,
        targets: vec![],
        range: None,
        cost_model: String::new(),
    }
}

/// The report, the JSON and the plots of a tuned (and maybe built) model.
#[allow(clippy::too_many_arguments)]
fn report(
    a: &NetworkArgs,
    list: &TaskList,
    job: &pb::Job,
    est: pb::Estimate,
    built: Option<(crate::built::BuiltFiles, crate::built::Timed)>,
    wall: f64,
    threads: u32,
    curve: &[(u32, f64, f64, u32)],
    measured: &[Checkpoint],
) -> Result<()> {
    let n = list.tasks.len();
    let peer_ms = match &a.ort_python {
        Some(py) => Some(crate::built::ort_median_ms(py, &a.model, threads, a.runs)?),
        None => a.peer_ms,
    };

    std::fs::create_dir_all(&a.out)?;
    let mut md = String::new();
    let name = a.model.display();
    let _ = writeln!(
        md,
        "# {name}: {} tasks, {} trials per task, {:.0} s of tuning\n",
        n, a.trials, wall
    );
    let _ = writeln!(md, "| task | weight | GFLOP | best ms | GFLOP/s | share |");
    let _ = writeln!(md, "|---|---|---|---|---|---|");
    for (t, p) in list.tasks.iter().zip(&job.tasks) {
        let _ = writeln!(
            md,
            "| {}{} | {} | {:.4} | {} | {} | {} |",
            t.label,
            if t.alternative { " (alternative)" } else { "" },
            t.weight,
            t.flops as f64 / 1e9,
            p.best_seconds
                .map_or("-".into(), |s| format!("{:.4}", s * 1e3)),
            p.best_gflops.map_or("-".into(), |g| format!("{g:.1}")),
            p.share.map_or("-".into(), |s| format!("{:.1}%", s * 100.0)),
        );
    }
    let _ = writeln!(
        md,
        "\nEnd-to-end estimate: {:.4} ms ({} tasks without a best); kernels only: layout glue \
         ({} nodes), copies and {} skipped nodes are not in it.",
        est.seconds * 1e3,
        est.missing,
        list.glue,
        list.skipped.len()
    );
    // What the build runs: its own kernels' estimate (a convolution's forms chosen one by one).
    let est_ms = built
        .as_ref()
        .map_or(est.seconds * 1e3, |(f, _)| f.estimate_ms);
    if let Some((f, b)) = &built {
        let _ = writeln!(
            md,
            "The build's layout: {}; the estimate of the kernels it runs: {est_ms:.4} ms.",
            f.layout
        );
        let _ = writeln!(
            md,
            "Built model (`tunehub build`, checked against tract): median {:.4} ms, p90 {:.4} ms \
             over {} runs on {threads} threads; measured / estimate = {:.3} ({:.4} ms outside \
             the estimate: glue, copies, the fork and join of each kernel); arena {} bytes for \
             {} bytes of intermediate tensors, weights {} bytes; {} zero-shot tasks.",
            b.median_ms,
            b.p90_ms,
            a.runs,
            b.median_ms / est_ms,
            b.median_ms - est_ms,
            f.arena_bytes,
            f.intermediate_bytes,
            f.weights_bytes,
            f.zero_shot
        );
        let p = &b.profile;
        let _ = writeln!(
            md,
            "Where it goes (medians of profiled runs): kernels {:.4} ms (the same kernels measured \
             alone: {:.4} ms, in-model / alone = {:.3}), glue {:.4} ms, layout conversions {:.4} \
             ms, inputs and outputs {:.4} ms.",
            p.kernels_ms,
            p.kernels_alone_ms,
            p.kernels_ms / p.kernels_alone_ms.max(1e-12),
            p.glue_ms,
            p.layout_ms,
            p.io_ms
        );
        // The stored estimate was timed while tuning, in whatever state the machine was then;
        // the cold pass times the same kernels again interleaved with the profiled runs.
        if let Some(cold) = p.kernels_cold_ms {
            let in_model = p.kernels_ms + p.glue_ms + p.layout_ms + p.io_ms;
            let _ = writeln!(
                md,
                "The estimate again, in this run: each kernel timed from a cold cache between \
                 the profiled runs, {cold:.4} ms (stored estimate / this = {:.3}); a profiled \
                 run {in_model:.4} ms, profiled run / estimate in this run = {:.3}.",
                est_ms / cold.max(1e-12),
                in_model / cold.max(1e-12)
            );
        }
    }
    // Against ONNX Runtime timed beside it, else the run's.
    let ratio = |m: &Checkpoint| m.ort_ms.or(peer_ms).map(|o| m.median_ms / o);
    if measured.len() > 1 {
        let _ = writeln!(
            md,
            "\nMeasured latency against trials (built and timed at each checkpoint, ONNX Runtime \
             timed right after it):\n\n\
             | trials (all tasks) | tuning s | median ms | / ONNX Runtime |\n|---|---|---|---|"
        );
        for m in measured {
            let vs = ratio(m).map_or("-".into(), |r| format!("{r:.3}"));
            let _ = writeln!(
                md,
                "| {} | {:.0} | {:.4} | {vs} |",
                m.trials, m.wall_s, m.median_ms
            );
        }
    }
    let first_below = measured
        .iter()
        .find(|m| ratio(m).is_some_and(|r| r < 1.0))
        .map(|m| json!({"trials": m.trials, "wall_s": m.wall_s}));
    if let Some(f) = &first_below {
        let _ = writeln!(
            md,
            "First measured below ONNX Runtime after {} trials ({:.0} s of tuning).",
            f["trials"],
            f["wall_s"].as_f64().unwrap_or_default()
        );
    }
    if let Some(peer) = peer_ms {
        let _ = writeln!(
            md,
            "ONNX Runtime: {peer:.4} ms; estimate / ONNX Runtime = {:.3}{}.",
            est_ms / peer,
            built.as_ref().map_or(String::new(), |(_, b)| format!(
                "; measured / ONNX Runtime = {:.3}",
                b.median_ms / peer
            ))
        );
    }
    if let Some(peak) = a.fma_peak {
        let target = Target::detect().with_overrides(&TargetOverrides {
            cores: a.cores,
            ..TargetOverrides::default()
        });
        let prober = crate::bandwidth::Prober::new(&target)?;
        let roofs = crate::bandwidth::Roofs::measure(&target, &prober)?;
        let bests: Vec<crate::task_roofs::TaskBest> = list
            .tasks
            .iter()
            .zip(&job.tasks)
            .map(|(t, p)| crate::task_roofs::TaskBest {
                task: t,
                best_s: p.best_seconds,
            })
            .collect();
        let rows = crate::task_roofs::rows(&bests, peak, !a.warm_cache, &roofs, &prober)?;
        md.push_str(&crate::task_roofs::markdown(&rows, est.seconds * 1e3));
    }
    for s in &list.skipped {
        let _ = writeln!(md, "- skipped {} ({}): {}", s.node, s.op, s.reason);
    }
    print!("{md}");
    std::fs::write(a.out.join("report.md"), &md)?;
    let refs: Vec<(String, f64)> = peer_ms
        .map(|p| ("ONNX Runtime".to_string(), p))
        .into_iter()
        .collect();
    let vs_trials = [
        Panel {
            title: format!("{name}: end-to-end estimate"),
            curve: curve
                .iter()
                .filter(|c| c.3 == 0)
                .map(|c| (c.0 as usize, c.2 * 1e3))
                .collect(),
            refs: refs.clone(),
        },
        Panel {
            title: format!("{name}: built, measured / ONNX Runtime"),
            curve: measured
                .iter()
                .filter_map(|m| Some((m.trials as usize, ratio(m)?)))
                .collect(),
            refs: vec![("ONNX Runtime".to_string(), 1.0)],
        },
    ];
    let vs_wall = [Panel {
        title: format!("{name}: end-to-end estimate"),
        curve: curve
            .iter()
            .filter(|c| c.3 == 0)
            .map(|c| (c.1.round() as usize, c.2 * 1e3))
            .collect(),
        refs,
    }];
    std::fs::write(
        a.out.join("network-trials.svg"),
        svg_with(&vs_trials, "trials", "ms"),
    )?;
    std::fs::write(
        a.out.join("network-wall.svg"),
        svg_with(&vs_wall, "s of tuning", "ms"),
    )?;
    let v = json!({
        "model": a.model, "trials_per_task": a.trials, "wall_s": wall,
        "estimate_s": est.seconds, "missing": est.missing, "peer_ms": peer_ms,
        "built_median_ms": built.as_ref().map(|(_, b)| b.median_ms), "built_p90_ms": built.as_ref().map(|(_, b)| b.p90_ms),
        "arena_bytes": built.as_ref().map(|(f, _)| f.arena_bytes), "threads": threads,
        "built_estimate_ms": built.as_ref().map(|(f, _)| f.estimate_ms), "built_layout": built.as_ref().map(|(f, _)| &f.layout),
        "profile": built.as_ref().map(|(_, b)| json!({"kernels_ms": b.profile.kernels_ms, "kernels_alone_ms": b.profile.kernels_alone_ms, "kernels_cold_ms": b.profile.kernels_cold_ms, "glue_ms": b.profile.glue_ms, "layout_ms": b.profile.layout_ms, "io_ms": b.profile.io_ms})),
        "measured": measured.iter().map(|m| json!({"trials": m.trials, "wall_s": m.wall_s, "median_ms": m.median_ms, "ort_ms": m.ort_ms.or(peer_ms)})).collect::<Vec<_>>(),
        "first_below_peer": first_below,
        "curve": curve.iter().map(|c| json!({"trials": c.0, "wall_s": c.1, "estimate_s": c.2, "missing": c.3})).collect::<Vec<_>>(),
        "tasks": list.tasks.iter().zip(&job.tasks).map(|(t, p)| json!({
            "label": t.label, "weight": t.weight, "flops": t.flops, "best_seconds": p.best_seconds,
            "best_gflops": p.best_gflops, "share": p.share, "trials_done": p.trials_done})).collect::<Vec<_>>(),
        "skipped": list.skipped,
    });
    std::fs::write(a.out.join("network.json"), format!("{v}\n"))?;
    eprintln!(
        "wrote {}/report.md, network.json, network-trials.svg, network-wall.svg",
        a.out.display()
    );
    Ok(())
}
