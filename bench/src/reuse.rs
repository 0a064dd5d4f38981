//! `tunehub-bench reuse`: what the database's reuse buys (issue 29), each database an embedded
//! server measuring on this machine (a throwaway SQLite file per database).
//!
//! - **Zero-shot**: per family, its neighbour shapes are tuned (`--trials` each) into one
//!   database; then each held-out shape is answered by transfer with its top candidates
//!   measured now (`allow_transfer` + `measure_transfer`, what `tunehub query --transfer
//!   --measure` does). Beside it, the held-out shape's own cold tuning (`--trials`, a fresh
//!   database). The figure: zero-shot GFLOP/s as a share of the own tuning's, per shape, and
//!   their median, minimum and spread.
//! - **Warm start**: for a matmul, a conv2d and a dense, 5 nearby shapes are tuned (once);
//!   then, per seed, the shape itself is tuned cold in a fresh database (`--trials`) and warm
//!   in a copy of the neighbours' one (its first batch seeded from its neighbours), in rounds
//!   of `--batch`; the warm run stops once it reaches the level read. The figure: trials
//!   until the warm run's best is within 95% of the cold run's final best (GFLOP/s), against
//!   the cold run's own trials to get there, counted per trial from the records' order (and,
//!   in brackets, per round).
//!   `--warm-from seeds,model` adds an ablation: warm runs from the seeds alone (the copy's
//!   saved model deleted) and from the saved model alone (no neighbour found, so no seeds).
//!
//! Every time is a measured kernel on this machine (the transferred answers too: measured, not
//! predicted). The run is long (tens of 200-trial tunings): a benchmark, never a test.
//!
//! `tunehub-bench reuse [--trials 200] [--part zero-shot,warm-start] [--seeds 0,1,2]`

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use serde_json::json;
use std::fmt::Write as _;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tunehub_engine::search::DEFAULT_BATCH;
use tunehub_engine::target::Target;
use tunehub_proto::v1 as pb;
use tunehub_server::client::Clients;
use tunehub_server::config::Limits;
use tunehub_server::server::RunningServer;
use tunehub_server::workload;

/// One family of a structure: shapes tuned as neighbours, and shapes held out.
struct Family {
    name: &'static str,
    tuned: &'static [&'static str],
    held_out: &'static [&'static str],
}

/// ResNet-50's convolutions, BERT's and GPT-2's dense layers, attention's batched matmuls.
/// Held-out shapes lie between or beside tuned ones of the same structure (operator, layout,
/// epilogue), as a compiler's new model would.
const FAMILIES: &[Family] = &[
    Family {
        name: "ResNet-50 1x1 convs",
        tuned: &[
            "conv2d_nchw(n=1,c=64,h=56,w=56,f=256,kh=1,kw=1)",
            "conv2d_nchw(n=1,c=512,h=28,w=28,f=128,kh=1,kw=1)",
            "conv2d_nchw(n=1,c=256,h=14,w=14,f=1024,kh=1,kw=1)",
            "conv2d_nchw(n=1,c=2048,h=7,w=7,f=512,kh=1,kw=1)",
        ],
        held_out: &[
            "conv2d_nchw(n=1,c=256,h=56,w=56,f=64,kh=1,kw=1)",
            "conv2d_nchw(n=1,c=128,h=28,w=28,f=512,kh=1,kw=1)",
            "conv2d_nchw(n=1,c=1024,h=14,w=14,f=256,kh=1,kw=1)",
            "conv2d_nchw(n=1,c=512,h=7,w=7,f=2048,kh=1,kw=1)",
            "conv2d_nchw(n=1,c=256,h=56,w=56,f=128,kh=1,kw=1)",
            "conv2d_nchw(n=1,c=1024,h=14,w=14,f=512,kh=1,kw=1)",
        ],
    },
    Family {
        name: "ResNet-50 3x3 convs",
        tuned: &[
            "conv2d_nchw(n=1,c=64,h=56,w=56,f=64,kh=3,kw=3,pad=1)",
            "conv2d_nchw(n=1,c=256,h=14,w=14,f=256,kh=3,kw=3,pad=1)",
        ],
        held_out: &[
            "conv2d_nchw(n=1,c=128,h=28,w=28,f=128,kh=3,kw=3,pad=1)",
            "conv2d_nchw(n=1,c=512,h=7,w=7,f=512,kh=3,kw=3,pad=1)",
        ],
    },
    Family {
        name: "BERT dense (sequence 128)",
        tuned: &[
            "dense(m=128,n=768,k=768,bias=1,relu=0)",
            "dense(m=128,n=3072,k=768,bias=1,relu=0)",
            "dense(m=128,n=768,k=3072,bias=1,relu=0)",
        ],
        held_out: &[
            "dense(m=128,n=2304,k=768,bias=1,relu=0)",
            "dense(m=256,n=768,k=768,bias=1,relu=0)",
            "dense(m=64,n=3072,k=768,bias=1,relu=0)",
            "dense(m=128,n=1024,k=1024,bias=1,relu=0)",
            "dense(m=128,n=4096,k=1024,bias=1,relu=0)",
        ],
    },
    Family {
        name: "GPT-2 decode dense (one row)",
        tuned: &[
            "dense(m=1,n=768,k=768,bias=1,relu=0)",
            "dense(m=1,n=3072,k=768,bias=1,relu=0)",
            "dense(m=1,n=768,k=3072,bias=1,relu=0)",
        ],
        held_out: &[
            "dense(m=1,n=2304,k=768,bias=1,relu=0)",
            "dense(m=1,n=1024,k=1024,bias=1,relu=0)",
            "dense(m=1,n=4096,k=1024,bias=1,relu=0)",
            "dense(m=1,n=1024,k=4096,bias=1,relu=0)",
        ],
    },
    Family {
        name: "attention batched matmuls",
        tuned: &[
            "batch_matmul(b=12,m=128,n=128,k=64)",
            "batch_matmul(b=12,m=128,n=64,k=128)",
        ],
        held_out: &[
            "batch_matmul(b=12,m=256,n=256,k=64)",
            "batch_matmul(b=16,m=128,n=128,k=64)",
            "batch_matmul(b=12,m=256,n=64,k=256)",
        ],
    },
];

/// The warm-start cases: the shape, and its 5 nearby tuned shapes.
const WARM: &[(&str, [&str; 5])] = &[
    (
        "matmul(m=384,n=384,k=384)",
        [
            "matmul(m=256,n=256,k=256)",
            "matmul(m=512,n=512,k=512)",
            "matmul(m=256,n=512,k=384)",
            "matmul(m=512,n=256,k=384)",
            "matmul(m=384,n=384,k=256)",
        ],
    ),
    (
        "conv2d_nchw(n=1,c=96,h=28,w=28,f=96,kh=3,kw=3,pad=1)",
        [
            "conv2d_nchw(n=1,c=64,h=28,w=28,f=64,kh=3,kw=3,pad=1)",
            "conv2d_nchw(n=1,c=128,h=28,w=28,f=128,kh=3,kw=3,pad=1)",
            "conv2d_nchw(n=1,c=96,h=56,w=56,f=96,kh=3,kw=3,pad=1)",
            "conv2d_nchw(n=1,c=96,h=14,w=14,f=96,kh=3,kw=3,pad=1)",
            "conv2d_nchw(n=1,c=64,h=28,w=28,f=128,kh=3,kw=3,pad=1)",
        ],
    ),
    (
        "dense(m=64,n=1536,k=768,bias=1,relu=0)",
        [
            "dense(m=32,n=1536,k=768,bias=1,relu=0)",
            "dense(m=128,n=1536,k=768,bias=1,relu=0)",
            "dense(m=64,n=768,k=768,bias=1,relu=0)",
            "dense(m=64,n=3072,k=768,bias=1,relu=0)",
            "dense(m=64,n=1536,k=1024,bias=1,relu=0)",
        ],
    ),
];

#[derive(Args)]
pub struct ReuseArgs {
    /// Trials of every tuning: the neighbours, the held-out shapes' own, warm and cold runs.
    #[arg(long, default_value_t = 200)]
    trials: u32,
    /// Which parts to run.
    #[arg(long, value_delimiter = ',', default_value = "zero-shot,warm-start")]
    part: Vec<String>,
    /// Seeds of the warm-start runs (each a warm and a cold tuning per case).
    #[arg(long, value_delimiter = ',', default_value = "0,1,2")]
    seeds: Vec<u64>,
    /// Candidates per round of the warm-start runs: the product's default. The curves are read
    /// per trial whatever the batch (a batch of 8 also leaves no room for exploration).
    #[arg(long, alias = "curve-batch", default_value_t = DEFAULT_BATCH as u32)]
    batch: u32,
    /// Only the first N families (zero-shot) or cases (warm start): a short run.
    #[arg(long)]
    limit: Option<usize>,
    /// Only the warm-start cases whose shape contains this text (e.g. `conv2d`).
    #[arg(long)]
    case: Option<String>,
    /// What each seed's warm runs start from, one run per value: `both` as the service does,
    /// `seeds` or `model` alone (an ablation).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "both")]
    warm_from: Vec<WarmFrom>,
    /// Evolutionary population per round.
    #[arg(long, default_value_t = 2048)]
    population: usize,
    /// Where the report and the JSON go.
    #[arg(long, default_value = "bench-out/reuse")]
    out: PathBuf,
}

/// One task's best-so-far GFLOP/s: (trials done, best).
struct Curves {
    /// After each round, as the job reported it (what `stop_at` reads).
    rounds: Vec<(u32, f64)>,
    /// After each trial that improved it (see `Db::per_trial`).
    trials: Vec<(u32, f64)>,
}

/// The points where the best of `(mean cost, noisy)` readings, taken in order, improves: the
/// trial's 1-based index and its GFLOP/s. Failed and noisy readings count as trials only.
fn running_best(rows: &[(Option<f64>, i64)], flops: u64) -> Vec<(u32, f64)> {
    let mut out: Vec<(u32, f64)> = vec![];
    for (i, &(cost, noisy)) in rows.iter().enumerate() {
        let Some(cost) = cost.filter(|c| *c > 0.0 && noisy == 0) else {
            continue;
        };
        let g = flops as f64 / cost / 1e9;
        if out.last().is_none_or(|&(_, b)| g > b) {
            out.push((i as u32 + 1, g));
        }
    }
    out
}

/// What a warm run starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum WarmFrom {
    /// The neighbours' adapted bests as its first batch, and the target's saved model.
    Both,
    /// The seeds alone: the copy's saved model is deleted, so the run's model starts cold.
    Seeds,
    /// The saved model alone: the copy's best records are deleted, so no neighbour is found.
    Model,
}

impl WarmFrom {
    fn name(self) -> &'static str {
        match self {
            WarmFrom::Both => "seeds + model",
            WarmFrom::Seeds => "seeds",
            WarmFrom::Model => "model",
        }
    }
}

/// A database and the embedded server on it (no job loop: `tune` runs each job itself).
struct Db {
    dir: tempfile::TempDir,
    running: RunningServer,
    c: Clients,
}

impl Db {
    async fn fresh(a: &ReuseArgs) -> Result<Db> {
        Self::open(a, tempfile::tempdir()?).await
    }

    async fn open(a: &ReuseArgs, dir: tempfile::TempDir) -> Result<Db> {
        let (running, c) = crate::embedded::start(
            &dir.path().join("reuse.db"),
            Target::detect(),
            a.population,
            Limits::default(),
        )
        .await?;
        Ok(Db { dir, running, c })
    }

    /// A new database holding a copy of a stopped one's files (its records and saved model):
    /// every seed's warm run starts from the same tuned neighbours.
    async fn copy_of(a: &ReuseArgs, stopped: &Path, from: WarmFrom) -> Result<Db> {
        let dir = tempfile::tempdir()?;
        for entry in std::fs::read_dir(stopped)? {
            let entry = entry?;
            std::fs::copy(entry.path(), dir.path().join(entry.file_name()))
                .with_context(|| format!("copying {}", entry.path().display()))?;
        }
        let forget = match from {
            WarmFrom::Both => None,
            WarmFrom::Seeds => Some("DELETE FROM cost_models"),
            WarmFrom::Model => Some("DELETE FROM best_records"),
        };
        if let Some(sql) = forget {
            let url = format!("sqlite://{}", dir.path().join("reuse.db").display());
            let pool = sqlx::SqlitePool::connect(&url).await?;
            sqlx::query(sql).execute(&pool).await?;
            pool.close().await;
        }
        Self::open(a, dir).await
    }

    /// Tunes `specs` as one job; per task, its curves (see `Curves`).
    async fn tune(
        &mut self,
        specs: &[&str],
        trials: u32,
        batch: u32,
        seed: u64,
        stop_at: Option<f64>,
    ) -> Result<Vec<Curves>> {
        let tasks = specs
            .iter()
            .map(|s| pb::TaskSpec {
                workload: Some(workload::from_op_spec(s)),
                trials,
                weight: 1.0,
            })
            .collect();
        let req = pb::SubmitRequest {
            tasks,
            target: "local".into(),
            batch_size: batch,
            seed,
            name: "tunehub-bench reuse".into(),
            ..Default::default()
        };
        let mut curves: Vec<Vec<(u32, f64)>> = vec![vec![]; specs.len()];
        let j = crate::embedded::run_job(&self.running, &mut self.c, req, |e| {
            if let pb::job_event::Event::Round(t) = e
                && let (Some(curve), Some(g)) = (curves.get_mut(t.index as usize), t.best_gflops)
            {
                curve.push((t.trials_done, g));
            }
            // Every task's best reached the level: the rest of the budget would change nothing
            // the figure reads.
            let reached = stop_at.is_some_and(|level| {
                curves
                    .iter()
                    .all(|c| c.last().is_some_and(|&(_, g)| g >= level))
            });
            if reached {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .await?;
        let stopped = stop_at.is_some() && j.state == pb::JobState::Cancelled as i32;
        if j.state != pb::JobState::Done as i32 && !stopped {
            bail!("the job ended {:?}: {}", j.state(), j.error);
        }
        // The final point (a watcher may see rounds merged, never the end missed).
        for (curve, t) in curves.iter_mut().zip(&j.tasks) {
            if let Some(g) = t.best_gflops
                && curve.last() != Some(&(t.trials_done, g))
            {
                curve.push((t.trials_done, g));
            }
        }
        let mut out = vec![];
        for (rounds, t) in curves.into_iter().zip(&j.tasks) {
            let trials = self.per_trial(&t.workload_key, t.flops).await?;
            out.push(Curves { rounds, trials });
        }
        Ok(out)
    }

    /// A workload's best-so-far after each of its trials, from its records in the order they
    /// were stored. A batch is stored in the order it was proposed (the warm start's seeds
    /// first, nearest neighbour first, then the model's picks best first), so trial k is the
    /// run's k-th candidate: a finer count than a round's.
    async fn per_trial(&self, workload_key: &str, flops: u64) -> Result<Vec<(u32, f64)>> {
        let url = format!(
            "sqlite://{}?mode=ro",
            self.dir.path().join("reuse.db").display()
        );
        let pool = sqlx::SqlitePool::connect(&url).await?;
        // What the job ranks by: the mean cost of a successful, quiet measurement.
        let rows: Vec<(Option<f64>, i64)> = sqlx::query_as(
            "SELECT mean_cost, noisy FROM records WHERE workload_key = ? ORDER BY rowid",
        )
        .bind(workload_key)
        .fetch_all(&pool)
        .await?;
        pool.close().await;
        Ok(running_best(&rows, flops))
    }

    /// Stops the server; its directory (deleted when dropped) holds the database files.
    async fn stop(self) -> Result<tempfile::TempDir> {
        drop(self.c);
        self.running.shutdown().await?;
        Ok(self.dir)
    }
}

pub async fn run(a: ReuseArgs) -> Result<()> {
    std::fs::create_dir_all(&a.out)?;
    let mut md = String::new();
    let mut out = json!({"trials": a.trials});
    let t0 = Instant::now();
    if a.part.iter().any(|p| p == "zero-shot") {
        let (text, v) = zero_shot(&a).await?;
        md.push_str(&text);
        out["zero_shot"] = v;
    }
    if a.part.iter().any(|p| p == "warm-start") {
        let (text, v) = warm_start(&a).await?;
        md.push_str(&text);
        out["warm_start"] = v;
    }
    let _ = writeln!(md, "\nWall time: {:.0} s.", t0.elapsed().as_secs_f64());
    print!("{md}");
    std::fs::write(a.out.join("report.md"), &md)?;
    std::fs::write(a.out.join("reuse.json"), format!("{out}\n"))?;
    eprintln!("wrote {}/report.md, reuse.json", a.out.display());
    Ok(())
}

fn best(curve: &[(u32, f64)]) -> Option<f64> {
    curve.iter().map(|c| c.1).reduce(f64::max)
}

async fn zero_shot(a: &ReuseArgs) -> Result<(String, serde_json::Value)> {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## Zero-shot answers ({} trials per tuned neighbour and per own tuning)\n",
        a.trials
    );
    let _ = writeln!(
        md,
        "| family | held-out shape | zero-shot GFLOP/s (measured) | own GFLOP/s | share | source | distance |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|");
    let mut shares = vec![];
    let mut rows = vec![];
    for f in FAMILIES.iter().take(a.limit.unwrap_or(usize::MAX)) {
        let mut db = Db::fresh(a).await?;
        eprintln!("{}: tuning {} neighbours", f.name, f.tuned.len());
        db.tune(f.tuned, a.trials, 64, 1, None).await?;
        let mut zero = vec![];
        for s in f.held_out {
            let ask = |measure_transfer| pb::BestRequest {
                workload: Some(workload::from_op_spec(s)),
                target: "local".into(),
                allow_transfer: true,
                measure_transfer,
                omit_kernel: true,
                ..Default::default()
            };
            // The zero-shot answer (its source and distance), then its top candidates measured.
            // A shape with no answer is a row without a figure, and the status says why.
            let answer = match db.c.query.best(ask(false)).await {
                Ok(r) => r.into_inner(),
                Err(e) => {
                    eprintln!("{s}: no zero-shot answer: {:?} {}", e.code(), e.message());
                    zero.push((f64::NAN, format!("none ({:?})", e.code()), f64::NAN));
                    continue;
                }
            };
            let t = answer.transfer.clone().unwrap_or_default();
            let measured =
                db.c.query
                    .best(ask(true))
                    .await
                    .with_context(|| format!("measuring the zero-shot candidates of {s}"))?
                    .into_inner();
            // Still a transfer: every measurement was dropped (failed or noisy); no figure.
            let g = match (&measured.transfer, &measured.record) {
                (None, Some(r)) => r.gflops,
                _ => {
                    eprintln!("{s}: every measured candidate was dropped");
                    f64::NAN
                }
            };
            zero.push((g, t.source_description, t.distance));
        }
        db.stop().await?;
        for (s, (g, source, distance)) in f.held_out.iter().zip(zero) {
            let mut own = Db::fresh(a).await?;
            eprintln!("{}: own tuning of {s}", f.name);
            let curves = own.tune(&[s], a.trials, 64, 1, None).await?;
            own.stop().await?;
            let own_g = best(&curves[0].rounds).unwrap_or(f64::NAN);
            let share = g / own_g;
            shares.push(share);
            let _ = writeln!(
                md,
                "| {} | `{s}` | {g:.1} | {own_g:.1} | {share:.2} | {source} | {distance:.2} |",
                f.name
            );
            rows.push(json!({"family": f.name, "shape": s, "zero_shot_gflops": g,
                "own_gflops": own_g, "share": share, "source": source, "distance": distance}));
        }
    }
    let mut sorted: Vec<f64> = shares.iter().copied().filter(|s| s.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let q = |p| crate::procs::quantile(&sorted, p);
    let _ = writeln!(
        md,
        "\n{} of {} held-out shapes with both figures: share median {:.2}, minimum {:.2}, \
         quartiles {:.2}-{:.2}, maximum {:.2}.\n",
        sorted.len(),
        shares.len(),
        q(0.5),
        q(0.0),
        q(0.25),
        q(0.75),
        q(1.0)
    );
    Ok((md, json!({"rows": rows, "median": q(0.5), "min": q(0.0)})))
}

/// Trials until a curve's best reaches `level` GFLOP/s.
fn trials_to(curve: &[(u32, f64)], level: f64) -> Option<u32> {
    curve.iter().find(|c| c.1 >= level).map(|c| c.0)
}

async fn warm_start(a: &ReuseArgs) -> Result<(String, serde_json::Value)> {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## Warm start (5 nearby shapes tuned with {} trials; rounds of {})\n",
        a.trials, a.batch
    );
    let _ = writeln!(
        md,
        "| shape | seed | cold best GFLOP/s | cold trials to 95% (by rounds) | warm from | warm trials to 95% of cold (by rounds) | warm / cold trials | warm best (stopped at 95%) |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
    let mut rows = vec![];
    let t0 = Instant::now();
    let cases = WARM
        .iter()
        .filter(|(shape, _)| a.case.as_ref().is_none_or(|c| shape.contains(c.as_str())));
    for (shape, near) in cases.take(a.limit.unwrap_or(usize::MAX)) {
        // The neighbours are tuned once (seed 0); each seed's warm run gets its own copy.
        eprintln!("warm start: neighbours of {shape}");
        let mut tuned = Db::fresh(a).await?;
        tuned.tune(near, a.trials, 64, 0, None).await?;
        let neighbours = tuned.stop().await?;
        for &seed in &a.seeds {
            let mut cold = Db::fresh(a).await?;
            eprintln!("warm start: cold {shape}, seed {seed}");
            let c = cold.tune(&[shape], a.trials, a.batch, seed, None).await?;
            cold.stop().await?;
            // The warm run stops once it reaches the level the figure reads.
            let level = 0.95 * best(&c[0].rounds).unwrap_or(f64::NAN);
            let cold_best = best(&c[0].rounds).unwrap_or(f64::NAN);
            let ct = trials_to(&c[0].trials, level);
            let ct_rounds = trials_to(&c[0].rounds, level);
            for &from in &a.warm_from {
                let mut warm = Db::copy_of(a, neighbours.path(), from).await?;
                eprintln!(
                    "warm start: warm {shape}, seed {seed}, from {}",
                    from.name()
                );
                let w = warm
                    .tune(&[shape], a.trials, a.batch, seed, Some(level))
                    .await?;
                warm.stop().await?;
                let wt = trials_to(&w[0].trials, level);
                let wt_rounds = trials_to(&w[0].rounds, level);
                let ratio = match (wt, ct) {
                    (Some(w), Some(c)) => format!("{:.3}", f64::from(w) / f64::from(c)),
                    _ => "-".into(),
                };
                let show = |t: Option<u32>, r: Option<u32>| match (t, r) {
                    (Some(t), Some(r)) => format!("{t} ({r})"),
                    _ => "not reached".into(),
                };
                let _ = writeln!(
                    md,
                    "| `{shape}` | {seed} | {cold_best:.1} | {} | {} | {} | {ratio} | {:.1} |",
                    show(ct, ct_rounds),
                    from.name(),
                    show(wt, wt_rounds),
                    best(&w[0].rounds).unwrap_or(f64::NAN)
                );
                eprintln!(
                    "{} ({:.0} s)",
                    md.lines().last().unwrap_or_default(),
                    t0.elapsed().as_secs_f64()
                );
                rows.push(json!({"shape": shape, "seed": seed, "cold_best": cold_best,
                    "warm_from": from.name(), "cold_trials_to_95": ct, "warm_trials_to_95": wt,
                    "cold_rounds_to_95": ct_rounds, "warm_rounds_to_95": wt_rounds,
                    "cold_curve": c[0].rounds, "warm_curve": w[0].rounds,
                    "cold_trial_curve": c[0].trials, "warm_trial_curve": w[0].trials}));
            }
        }
    }
    Ok((md, json!(rows)))
}

#[cfg(test)]
mod tests {
    use super::running_best;

    #[test]
    fn the_running_best_counts_every_trial_and_ranks_only_quiet_successes() {
        // 2 GFLOP per run; costs in seconds: 1 s = 2 GFLOP/s.
        let rows = [
            (None, 0),      // a failure: a trial, no reading
            (Some(1.0), 0), // 2 GFLOP/s
            (Some(0.1), 1), // noisy: not ranked
            (Some(2.0), 0), // slower
            (Some(0.5), 0), // 4 GFLOP/s
        ];
        assert_eq!(running_best(&rows, 2_000_000_000), vec![(2, 2.0), (5, 4.0)]);
        assert!(running_best(&[(None, 0)], 1).is_empty());
    }
}
