//! `tunehub-bench reuse`: what the database's reuse buys (issue 29), each database an embedded
//! server measuring on this machine (a throwaway SQLite file per database).
//!
//! - **Zero-shot**: per family, its neighbour shapes are tuned (`--trials` each) into one
//!   database; then each held-out shape is answered by transfer with its top candidates
//!   measured now (`allow_transfer` + `measure_transfer`, what `tunehub query --transfer
//!   --measure` does). Beside it, the held-out shape's own cold tuning (`--trials`, a fresh
//!   database). The figure: zero-shot GFLOP/s as a share of the own tuning's, per shape, and
//!   their median, minimum and spread; read once as the runs measured them, and once with the
//!   answer's kernel and the own best's measured again side by side (`--passes`), since the
//!   two runs are minutes apart and a machine's readings drift between runs.
//! - **Warm start**: for a matmul, a conv2d and a dense, 5 nearby shapes are tuned (once);
//!   then, per seed, the shape itself is tuned cold in a fresh database (`--trials`) and warm
//!   in a copy of the neighbours' one (its first batch seeded from its neighbours), in rounds
//!   of `--batch`; the warm run stops once it reaches the level read. The figure: trials
//!   until the warm run's best is within 95% of the cold run's final best (GFLOP/s), against
//!   the cold run's own trials to get there, counted per trial from the records' order (and,
//!   in brackets, per round). The same machine reads one kernel up to 1.6x apart from one run
//!   to the next (an Emerald Rapids Xeon), so after each seed every kernel that improved a
//!   run's best is measured again side by side (`--passes` interleaved passes) and the figure
//!   is read a second time from those readings.
//!   `--warm-from seeds,model` adds an ablation: warm runs from the seeds alone (the copy's
//!   saved model deleted) and from the saved model alone (no neighbour found, so no seeds).
//! - **Resume** (`--part resume`): the warm-start cases tuned in one job, and in a job stopped
//!   after its first round and continued by another on its records, as after a crash: does
//!   the search pick up where it was (see `resume`)?
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
use std::sync::Arc;
use std::time::Instant;
use tunehub_engine::measure::{MeasureOptions, Measurer};
use tunehub_engine::schedule::Schedule;
use tunehub_engine::search::DEFAULT_BATCH;
use tunehub_engine::search::DEFAULT_POPULATION;
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;
use tunehub_proto::v1 as pb;

use tunehub::embedded::{Embedded, EmbeddedOptions};
use tunehub::workload;

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
    /// Which parts to run: `zero-shot`, `warm-start`, `resume`.
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
    #[arg(long, default_value_t = DEFAULT_POPULATION)]
    population: usize,
    /// Interleaved passes of the side-by-side measurements (all parts).
    #[arg(long, default_value_t = 5)]
    passes: usize,
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
    /// The kernel (steps JSON) of each of those trials, to measure again side by side.
    kernels: Vec<String>,
    /// The task, as the server measured it.
    task: Arc<Task>,
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
    service: Embedded,
}

impl Db {
    async fn fresh(a: &ReuseArgs) -> Result<Db> {
        Self::open(a, tempfile::tempdir()?).await
    }

    async fn open(a: &ReuseArgs, dir: tempfile::TempDir) -> Result<Db> {
        let db = dir.path().join("reuse.db");
        let service = Embedded::start(EmbeddedOptions {
            population: a.population,
            ..EmbeddedOptions::new(db.to_string_lossy(), Target::detect())
        })
        .await?;
        Ok(Db { dir, service })
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
            .map(|s| {
                Ok(pb::TaskSpec {
                    workload: Some(workload::from_op_spec(s)?),
                    trials,
                    weight: 1.0,
                    alternative: false,
                })
            })
            .collect::<Result<_>>()?;
        let req = pb::SubmitRequest {
            tasks,
            target: "local".into(),
            batch_size: batch,
            seed,
            name: "tunehub-bench reuse".into(),
            ..Default::default()
        };
        let mut curves: Vec<Vec<(u32, f64)>> = vec![vec![]; specs.len()];
        let j = self
            .service
            .run(req, |e| {
                if let pb::job_event::Event::Round(t) = e
                    && let (Some(curve), Some(g)) =
                        (curves.get_mut(t.index as usize), t.best_gflops)
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
        for ((rounds, t), spec) in curves.into_iter().zip(&j.tasks).zip(specs) {
            let (trials, kernels) = self.per_trial(&t.workload_key, t.flops).await?;
            // The task as the server made it of the submitted workload.
            let task = tunehub_server::workload::task_of(&workload::from_op_spec(spec)?)
                .context("an op spec is a task")?
                .map_err(anyhow::Error::msg)?;
            if task.key != t.workload_key {
                bail!(
                    "{spec} makes key {}, the server's is {}",
                    task.key,
                    t.workload_key
                );
            }
            let task = Arc::new(task);
            out.push(Curves {
                rounds,
                trials,
                kernels,
                task,
            });
        }
        Ok(out)
    }

    /// A workload's best-so-far after each of its trials, from its records in the order they
    /// were stored. A batch is stored in the order it was proposed (the warm start's seeds
    /// first, nearest neighbour first, then the model's picks best first), so trial k is the
    /// run's k-th candidate: a finer count than a round's. With the steps of each improving
    /// trial.
    async fn per_trial(
        &self,
        workload_key: &str,
        flops: u64,
    ) -> Result<(Vec<(u32, f64)>, Vec<String>)> {
        let url = format!(
            "sqlite://{}?mode=ro",
            self.dir.path().join("reuse.db").display()
        );
        let pool = sqlx::SqlitePool::connect(&url).await?;
        // What the job ranks by: the mean cost of a successful, quiet measurement.
        let rows: Vec<(Option<f64>, i64, String)> = sqlx::query_as(
            "SELECT mean_cost, noisy, steps_json FROM records WHERE workload_key = ? ORDER BY rowid",
        )
        .bind(workload_key)
        .fetch_all(&pool)
        .await?;
        pool.close().await;
        let costs: Vec<(Option<f64>, i64)> = rows.iter().map(|r| (r.0, r.1)).collect();
        let points = running_best(&costs, flops);
        let kernels = points
            .iter()
            .map(|&(t, _)| rows[t as usize - 1].2.clone())
            .collect();
        Ok((points, kernels))
    }

    /// Stops the server; its directory (deleted when dropped) holds the database files.
    async fn stop(self) -> Result<tempfile::TempDir> {
        self.service.shutdown().await?;
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
    if a.part.iter().any(|p| p == "resume") {
        let (text, v) = resume(&a).await?;
        md.push_str(&text);
        out["resume"] = v;
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
    table_head(
        &mut md,
        &[
            "family",
            "held-out shape",
            "zero-shot GFLOP/s (measured)",
            "own GFLOP/s",
            "share",
            "side by side: zero-shot / own GFLOP/s",
            "share side by side",
            "source",
            "distance",
        ],
    );
    let mut shares = vec![];
    let mut shares_again = vec![];
    let mut rows = vec![];
    for f in FAMILIES.iter().take(a.limit.unwrap_or(usize::MAX)) {
        let mut db = Db::fresh(a).await?;
        eprintln!("{}: tuning {} neighbours", f.name, f.tuned.len());
        db.tune(f.tuned, a.trials, 64, 1, None).await?;
        let mut zero = vec![];
        for s in f.held_out {
            let w = workload::from_op_spec(s)?;
            let ask = |measure_transfer| pb::BestRequest {
                workload: Some(w.clone()),
                target: "local".into(),
                allow_transfer: true,
                measure_transfer,
                omit_kernel: true,
                ..Default::default()
            };
            // The zero-shot answer (its source and distance), then its top candidates measured.
            // A shape with no answer is a row without a figure, and the status says why.
            let answer = match db.service.clients.query.best(ask(false)).await {
                Ok(r) => r.into_inner(),
                Err(e) => {
                    eprintln!("{s}: no zero-shot answer: {:?} {}", e.code(), e.message());
                    zero.push((f64::NAN, None, format!("none ({:?})", e.code()), f64::NAN));
                    continue;
                }
            };
            let t = answer.transfer.clone().unwrap_or_default();
            let measured = db
                .service
                .clients
                .query
                .best(ask(true))
                .await
                .with_context(|| format!("measuring the zero-shot candidates of {s}"))?
                .into_inner();
            // Still a transfer: every measurement was dropped (failed or noisy); no figure.
            let (g, kernel) = match (&measured.transfer, &measured.record) {
                (None, Some(r)) => (r.gflops, Some(r.steps_json.clone())),
                _ => {
                    eprintln!("{s}: every measured candidate was dropped");
                    (f64::NAN, None)
                }
            };
            zero.push((g, kernel, t.source_description, t.distance));
        }
        db.stop().await?;
        for (s, (g, kernel, source, distance)) in f.held_out.iter().zip(zero) {
            let mut own = Db::fresh(a).await?;
            eprintln!("{}: own tuning of {s}", f.name);
            let mut curves = own.tune(&[s], a.trials, 64, 1, None).await?;
            own.stop().await?;
            let c = curves.remove(0);
            let own_g = best(&c.rounds).unwrap_or(f64::NAN);
            let share = g / own_g;
            shares.push(share);
            // The two figures above were read in runs minutes apart, and one machine reads a
            // kernel up to 1.6x apart from one run to the next (an Emerald Rapids Xeon): the
            // answer's kernel and the own best's measured again side by side.
            let (z_again, own_again) = match (kernel, c.kernels.last()) {
                (Some(z), Some(o)) => {
                    let kernels = vec![z.clone(), o.clone()];
                    let again = measure_again(Arc::clone(&c.task), kernels, a.passes).await?;
                    (again[&z], again[o])
                }
                _ => (f64::NAN, f64::NAN),
            };
            let share_again = z_again / own_again;
            shares_again.push(share_again);
            let _ = writeln!(
                md,
                "| {} | `{s}` | {g:.1} | {own_g:.1} | {share:.2} | {z_again:.1} / {own_again:.1} | {share_again:.2} | {source} | {distance:.2} |",
                f.name
            );
            eprintln!("{}", md.lines().last().unwrap_or_default());
            rows.push(json!({"family": f.name, "shape": s, "zero_shot_gflops": g,
                "own_gflops": own_g, "share": share, "passes": a.passes,
                "zero_shot_gflops_side_by_side": z_again, "own_gflops_side_by_side": own_again,
                "share_side_by_side": share_again, "source": source, "distance": distance}));
        }
    }
    let _ = writeln!(md);
    let mut summary = json!({"rows": rows});
    for (name, key, shares) in [
        ("as read in the runs", "", &shares),
        (
            &*format!("side by side ({} interleaved passes)", a.passes),
            "_side_by_side",
            &shares_again,
        ),
    ] {
        let mut sorted: Vec<f64> = shares.iter().copied().filter(|s| s.is_finite()).collect();
        sorted.sort_by(f64::total_cmp);
        let q = |p| crate::procs::quantile(&sorted, p);
        let _ = writeln!(
            md,
            "{} of {} held-out shapes with both figures, {name}: share median {:.2}, \
             minimum {:.2}, quartiles {:.2}-{:.2}, maximum {:.2}.\n",
            sorted.len(),
            shares.len(),
            q(0.5),
            q(0.0),
            q(0.25),
            q(0.75),
            q(1.0)
        );
        summary[format!("median{key}")] = json!(q(0.5));
        summary[format!("min{key}")] = json!(q(0.0));
    }
    Ok((md, summary))
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
    table_head(
        &mut md,
        &[
            "shape",
            "seed",
            "cold best GFLOP/s",
            "cold trials to 95% (by rounds)",
            "warm from",
            "warm trials to 95% of cold (by rounds)",
            "warm / cold trials",
            "warm best (stopped at 95%)",
        ],
    );
    let mut side = String::new();
    let _ = writeln!(
        side,
        "\n### The same runs, their kernels measured again side by side\n\nAfter each seed's runs, every kernel that improved a run's best is measured again in {} interleaved passes (best reading each), so that the machine's drift between runs does not decide the figure: 95% of the cold run's best so measured, and the first trial of each run whose kernel reaches it.\n",
        a.passes
    );
    table_head(
        &mut side,
        &[
            "shape",
            "seed",
            "warm from",
            "cold best GFLOP/s",
            "cold trials to 95%",
            "warm trials to 95%",
            "warm / cold trials",
            "warm trial 1 / cold best",
        ],
    );
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
            let c = cold
                .tune(&[shape], a.trials, a.batch, seed, None)
                .await?
                .remove(0);
            cold.stop().await?;
            // The warm run stops once it reaches the level the figure reads.
            let level = 0.95 * best(&c.rounds).unwrap_or(f64::NAN);
            let cold_best = best(&c.rounds).unwrap_or(f64::NAN);
            let ct = trials_to(&c.trials, level);
            let ct_rounds = trials_to(&c.rounds, level);
            let mut warms = vec![];
            for &from in &a.warm_from {
                let mut warm = Db::copy_of(a, neighbours.path(), from).await?;
                eprintln!(
                    "warm start: warm {shape}, seed {seed}, from {}",
                    from.name()
                );
                let w = warm
                    .tune(&[shape], a.trials, a.batch, seed, Some(level))
                    .await?
                    .remove(0);
                warm.stop().await?;
                let wt = trials_to(&w.trials, level);
                let wt_rounds = trials_to(&w.rounds, level);
                let show = |t: Option<u32>, r: Option<u32>| match (t, r) {
                    (Some(t), Some(r)) => format!("{t} ({r})"),
                    _ => "not reached".into(),
                };
                let _ = writeln!(
                    md,
                    "| `{shape}` | {seed} | {cold_best:.1} | {} | {} | {} | {} | {:.1} |",
                    show(ct, ct_rounds),
                    from.name(),
                    show(wt, wt_rounds),
                    ratio(wt, ct),
                    best(&w.rounds).unwrap_or(f64::NAN)
                );
                eprintln!(
                    "{} ({:.0} s)",
                    md.lines().last().unwrap_or_default(),
                    t0.elapsed().as_secs_f64()
                );
                rows.push(json!({"shape": shape, "seed": seed, "cold_best": cold_best,
                    "warm_from": from.name(), "cold_trials_to_95": ct, "warm_trials_to_95": wt,
                    "cold_rounds_to_95": ct_rounds, "warm_rounds_to_95": wt_rounds,
                    "cold_curve": c.rounds, "warm_curve": w.rounds,
                    "cold_trial_curve": c.trials, "warm_trial_curve": w.trials}));
                warms.push((from, w, rows.len() - 1));
            }
            let mut runs = vec![&c];
            runs.extend(warms.iter().map(|(_, w, _)| w));
            let again = side_by_side(&runs, a.passes).await?;
            let cold_again = again(&c);
            let cold_best_again = best(&cold_again).unwrap_or(f64::NAN);
            let level_again = 0.95 * cold_best_again;
            let ct_again = trials_to(&cold_again, level_again);
            for (from, w, row) in &warms {
                let warm_again = again(w);
                let wt_again = trials_to(&warm_again, level_again);
                let first = warm_again
                    .first()
                    .filter(|p| p.0 == 1)
                    .map(|p| p.1 / cold_best_again);
                let last = w.trials.last().map_or(0, |p| p.0);
                let _ = writeln!(
                    side,
                    "| `{shape}` | {seed} | {} | {cold_best_again:.1} | {} | {} | {} | {} |",
                    from.name(),
                    ct_again.map_or("not reached".into(), |t| t.to_string()),
                    wt_again.map_or(format!("not by {last} (stopped)"), |t| t.to_string()),
                    ratio(wt_again, ct_again),
                    first.map_or("-".into(), |f| format!("{f:.2}")),
                );
                eprintln!("{}", side.lines().last().unwrap_or_default());
                rows[*row]["side_by_side"] = json!({"passes": a.passes,
                    "cold_best": cold_best_again, "cold_trials_to_95": ct_again,
                    "warm_trials_to_95": wt_again, "warm_first_share": first,
                    "cold_trial_curve": cold_again, "warm_trial_curve": warm_again});
            }
        }
    }
    md.push_str(&side);
    Ok((md, json!(rows)))
}

/// A job resumed on its own records against the same job uninterrupted, per warm-start case
/// and seed: one job of `--trials` in a fresh database; and one stopped after its first round
/// (`--batch` trials), whose database a second job continues with the rest, its search re-fed
/// every record as a job resumed after a crash is. Both first rounds start from one seed.
/// The figure: each run's best after all its trials, measured again side by side, and the
/// trials each took to reach 95% of the uninterrupted run's best.
async fn resume(a: &ReuseArgs) -> Result<(String, serde_json::Value)> {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## A job resumed after its first round ({} trials in all; rounds of {}; kernels measured again side by side, {} passes)\n",
        a.trials, a.batch, a.passes
    );
    table_head(
        &mut md,
        &[
            "shape",
            "seed",
            "uninterrupted best GFLOP/s (as read)",
            "resumed best (as read)",
            "resumed / uninterrupted",
            "trials to 95% of the uninterrupted best: uninterrupted",
            "resumed",
        ],
    );
    if a.trials <= a.batch {
        bail!("--trials must exceed --batch: the resumed job needs a round of its own");
    }
    let mut rows = vec![];
    let cases = WARM
        .iter()
        .filter(|(shape, _)| a.case.as_ref().is_none_or(|c| shape.contains(c.as_str())));
    for (shape, _) in cases.take(a.limit.unwrap_or(usize::MAX)) {
        for &seed in &a.seeds {
            eprintln!("resume: uninterrupted {shape}, seed {seed}");
            let mut whole = Db::fresh(a).await?;
            let w = whole
                .tune(&[shape], a.trials, a.batch, seed, None)
                .await?
                .remove(0);
            whole.stop().await?;
            eprintln!("resume: first round of {shape}, seed {seed}, then the rest");
            let mut first = Db::fresh(a).await?;
            first.tune(&[shape], a.batch, a.batch, seed, None).await?;
            let stopped = first.stop().await?;
            let mut rest = Db::copy_of(a, stopped.path(), WarmFrom::Both).await?;
            let r = rest
                .tune(&[shape], a.trials - a.batch, a.batch, seed + 1, None)
                .await?
                .remove(0);
            rest.stop().await?;
            let again = side_by_side(&[&w, &r], a.passes).await?;
            let (w_again, r_again) = (again(&w), again(&r));
            let w_best = best(&w_again).unwrap_or(f64::NAN);
            let r_best = best(&r_again).unwrap_or(f64::NAN);
            let show = |t: Option<u32>| t.map_or("not reached".into(), |t| t.to_string());
            let _ = writeln!(
                md,
                "| `{shape}` | {seed} | {w_best:.1} ({:.1}) | {r_best:.1} ({:.1}) | {:.3} | {} | {} |",
                best(&w.trials).unwrap_or(f64::NAN),
                best(&r.trials).unwrap_or(f64::NAN),
                r_best / w_best,
                show(trials_to(&w_again, 0.95 * w_best)),
                show(trials_to(&r_again, 0.95 * w_best)),
            );
            eprintln!("{}", md.lines().last().unwrap_or_default());
            rows.push(json!({"shape": shape, "seed": seed, "passes": a.passes,
                "uninterrupted_best": w_best, "resumed_best": r_best,
                "uninterrupted_trial_curve": w_again, "resumed_trial_curve": r_again,
                "uninterrupted_as_read": w.trials, "resumed_as_read": r.trials}));
        }
    }
    Ok((md, json!(rows)))
}

/// A Markdown table's header row and separator.
fn table_head(md: &mut String, columns: &[&str]) {
    let _ = writeln!(md, "| {} |", columns.join(" | "));
    let _ = writeln!(md, "|{}", "---|".repeat(columns.len()));
}

/// `warm / cold`, or `-` when either is missing.
fn ratio(warm: Option<u32>, cold: Option<u32>) -> String {
    match (warm, cold) {
        (Some(w), Some(c)) => format!("{:.3}", f64::from(w) / f64::from(c)),
        _ => "-".into(),
    }
}

/// Measures every kernel that improved one of `runs`' best again, side by side
/// (`passes` interleaved passes, best reading each, on this machine's timing as the runs had
/// it), and returns a reader of a run's improving trials at those readings: (trial, GFLOP/s).
async fn side_by_side(
    runs: &[&Curves],
    passes: usize,
) -> Result<impl Fn(&Curves) -> Vec<(u32, f64)> + use<>> {
    let kernels = runs
        .iter()
        .flat_map(|r| r.kernels.iter().cloned())
        .collect();
    let gflops = measure_again(Arc::clone(&runs[0].task), kernels, passes).await?;
    Ok(move |run: &Curves| {
        run.trials
            .iter()
            .zip(&run.kernels)
            .map(|(&(t, _), k)| (t, gflops[k]))
            .collect()
    })
}

/// Measures `kernels` (steps JSON) of `task` again side by side: `passes` interleaved passes,
/// each kernel's best reading, on this machine's timing as the runs had it. GFLOP/s per
/// kernel (0 for one that failed or read only noisy). A kernel listed twice (runs that share
/// one, an answer that is the own best) is measured once.
async fn measure_again(
    task: Arc<Task>,
    listed: Vec<String>,
    passes: usize,
) -> Result<std::collections::HashMap<String, f64>> {
    let mut kernels: Vec<String> = vec![];
    for k in listed {
        if !kernels.contains(&k) {
            kernels.push(k);
        }
    }
    let scheds = kernels
        .iter()
        .map(|k| Schedule::from_json(k))
        .collect::<Result<Vec<_>, _>>()?;
    eprintln!(
        "{} kernels measured again side by side, {passes} passes",
        scheds.len()
    );
    Ok(tokio::task::spawn_blocking(move || {
        let mut m = Measurer::new(&Target::detect(), MeasureOptions::default());
        let measured = crate::remeasure::interleaved(&mut m, &task, &scheds, passes);
        kernels
            .into_iter()
            .enumerate()
            .map(|(i, k)| (k, task.gflops(measured.best(i))))
            .collect()
    })
    .await?)
}

#[cfg(test)]
mod tests {
    use super::{running_best, table_head};

    #[test]
    fn a_table_head_has_a_separator_per_column() {
        let mut md = String::new();
        table_head(&mut md, &["shape", "seed"]);
        assert_eq!(md, "| shape | seed |\n|---|---|\n");
    }

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
