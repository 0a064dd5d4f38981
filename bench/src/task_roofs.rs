//! Each task of a network against its roof (issue 61's budget per layer): after a model's job,
//! which tasks stay below half of what the machine allows them, and what the model's estimate
//! would gain if each reached half.
//!
//! A task's roof is the slower of its FMA time at the machine's peak (`machine-check`'s figure,
//! given) and its compulsory bytes over the bandwidth that serves them. A model's tasks are
//! timed from a flushed cache (`MeasureOptions::cold`): their bytes come from main memory, so
//! the cold roof is the DRAM probe's; a warm job's is the probe run at the task's own bytes
//! ([`Roofs::roof_for`]). The share is roof time / best time (1.0: at the roof).
//!
//! `tunehub-bench task-roofs MODEL.onnx --db DB --fma-peak GFLOPS` reads the bests a database
//! holds (no tuning); `tunehub-bench network --fma-peak` prints the same table after its job.

use crate::bandwidth::{Prober, Roofs};
use anyhow::{Context, Result, bail};
use clap::Args;
use std::fmt::Write as _;
use std::path::PathBuf;
use tunehub::embedded::{Embedded, EmbeddedOptions};
use tunehub::workload;
use tunehub_engine::ir::ComputeDag;
use tunehub_engine::target::{Target, TargetOverrides};
use tunehub_onnx::{Extraction, InputShapes, Layout, NetTask};
use tunehub_proto::v1 as pb;

/// Below this share of its roof a task is listed.
const LISTED_BELOW: f64 = 0.5;

#[derive(Args)]
pub struct TaskRoofsArgs {
    /// The ONNX model.
    model: PathBuf,
    /// The database holding the model's tuned records (what `tunehub tune MODEL.onnx` or
    /// `tunehub-bench network --db` stored).
    #[arg(long)]
    db: PathBuf,
    /// The machine's FMA peak in GFLOP/s on the kernels' threads (`machine-check`).
    #[arg(long)]
    fma_peak: f64,
    /// The tasks were timed warm (`--warm-cache`): the roof of each is the probe at its own
    /// bytes, not main memory's.
    #[arg(long)]
    warm_cache: bool,
    /// The value of every input's dynamic first dimension.
    #[arg(long)]
    model_batch: Option<i64>,
    /// Cores the kernels ran on.
    #[arg(long)]
    cores: Option<usize>,
    /// The layout the convolutions were tuned in (`tunehub tune --layout`) [default: auto].
    #[arg(long)]
    layout: Option<Layout>,
}

/// One task after a job: its best time, if it has one.
pub struct TaskBest<'a> {
    pub task: &'a NetTask,
    pub best_s: Option<f64>,
}

/// One task against its roof.
pub struct RoofRow {
    pub label: String,
    pub weight: f64,
    pub best_ms: f64,
    pub roof_ms: f64,
    /// `fma` or the bandwidth that bounds it (`DRAM read`, `L2 triad`...).
    pub bound: String,
    /// Roof time / best time.
    pub share: f64,
}

impl RoofRow {
    /// What the model's estimate would lose (ms, all occurrences) if this task reached
    /// `share` of its roof; zero when it is there already.
    pub fn gain_at(&self, share: f64) -> f64 {
        self.weight * (self.best_ms - self.roof_ms / share).max(0.0)
    }
}

/// The DAG of a network task: its library operator's, or its text form's.
fn dag_of(t: &NetTask) -> Result<ComputeDag> {
    match &t.op_spec {
        Some(spec) => Ok(spec.task()?.dag),
        None => tunehub_engine::text::parse(&t.expr)
            .with_context(|| format!("the text form of {}", t.label)),
    }
}

/// Every task with a best, against its roof.
pub fn rows(
    tasks: &[TaskBest],
    fma_peak_gflops: f64,
    cold: bool,
    roofs: &Roofs,
    prober: &Prober,
) -> Result<Vec<RoofRow>> {
    let dram = roofs.levels.last().context("no memory level was probed")?;
    let mut out = vec![];
    for t in tasks {
        let Some(best_s) = t.best_s else { continue };
        let dag = dag_of(t.task)?;
        let roof = roofs.roof_for(prober, None, &dag)?;
        let (gbs, kind) = if cold {
            let (gbs, kind) = if roof.read_mostly {
                (dram.read_gbs, "read")
            } else {
                (dram.triad_gbs, "triad")
            };
            (gbs, format!("DRAM {kind}"))
        } else {
            let (gbs, kind) = roof.applies();
            (gbs, format!("{} {kind}", roof.level))
        };
        let memory_s = roof.bytes as f64 / gbs / 1e9;
        let compute_s = t.task.flops as f64 / fma_peak_gflops / 1e9;
        let roof_s = memory_s.max(compute_s);
        out.push(RoofRow {
            label: t.task.label.clone(),
            weight: f64::from(t.task.weight),
            best_ms: best_s * 1e3,
            roof_ms: roof_s * 1e3,
            bound: if compute_s >= memory_s {
                "fma".into()
            } else {
                kind
            },
            share: roof_s / best_s,
        });
    }
    Ok(out)
}

/// The table of the tasks below half their roof, worst gain first, and its total.
pub fn markdown(rows: &[RoofRow], estimate_ms: f64) -> String {
    let mut md = String::new();
    let mut low: Vec<&RoofRow> = rows.iter().filter(|r| r.share < LISTED_BELOW).collect();
    low.sort_by(|a, b| b.gain_at(LISTED_BELOW).total_cmp(&a.gain_at(LISTED_BELOW)));
    let _ = writeln!(
        md,
        "\n{} of {} tasks are below half their roof:\n",
        low.len(),
        rows.len()
    );
    if low.is_empty() {
        return md;
    }
    let _ = writeln!(
        md,
        "| task | weight | best ms | roof ms | bound | share | gain at half the roof, ms |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|");
    for r in &low {
        let _ = writeln!(
            md,
            "| {} | {} | {:.4} | {:.4} | {} | {:.0}% | {:.4} |",
            r.label,
            r.weight,
            r.best_ms,
            r.roof_ms,
            r.bound,
            r.share * 100.0,
            r.gain_at(LISTED_BELOW)
        );
    }
    let gain: f64 = low.iter().map(|r| r.gain_at(LISTED_BELOW)).sum();
    let _ = writeln!(
        md,
        "\nAt half their roof these tasks would take {gain:.4} ms off the estimate of \
         {estimate_ms:.4} ms ({:.0}%).",
        100.0 * gain / estimate_ms.max(1e-12)
    );
    md
}

/// `tunehub-bench task-roofs`: the table for the bests a database holds.
pub async fn run(a: TaskRoofsArgs) -> Result<()> {
    if !a.db.exists() {
        bail!("{} does not exist", a.db.display());
    }
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
    let target = Target::detect().with_overrides(&TargetOverrides {
        cores: a.cores,
        ..TargetOverrides::default()
    });
    let prober = Prober::new(&target)?;
    let roofs = Roofs::measure(&target, &prober)?;
    roofs.print();
    let mut service = Embedded::start(EmbeddedOptions::new(a.db.to_string_lossy(), target)).await?;
    let mut bests = vec![];
    for t in &list.tasks {
        let r = service
            .clients
            .query
            .best(pb::BestRequest {
                workload: Some(workload::of_net_task(t)),
                target: "local".into(),
                omit_kernel: true,
                ..Default::default()
            })
            .await
            .with_context(|| format!("Query.Best of {}", t.label))?
            .into_inner();
        bests.push(TaskBest {
            task: t,
            best_s: r.record.filter(|_| r.found).map(|rec| rec.seconds),
        });
    }
    service.shutdown().await?;
    let rows = rows(&bests, a.fma_peak, !a.warm_cache, &roofs, &prober)?;
    let estimate_ms: f64 = rows.iter().map(|r| r.weight * r.best_ms).sum();
    println!(
        "# {}: {} tasks, {} with a best in {}; estimate {estimate_ms:.4} ms",
        a.model.display(),
        list.tasks.len(),
        rows.len(),
        a.db.display()
    );
    print!("{}", markdown(&rows, estimate_ms));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(weight: f64, best_ms: f64, roof_ms: f64) -> RoofRow {
        RoofRow {
            label: "t".into(),
            weight,
            best_ms,
            roof_ms,
            bound: "fma".into(),
            share: roof_ms / best_ms,
        }
    }

    #[test]
    fn the_gain_counts_every_occurrence_and_never_goes_negative() {
        // 4 ms against a 1 ms roof: at half the roof it takes 2 ms, 2 ms saved per occurrence.
        assert_eq!(row(3.0, 4.0, 1.0).gain_at(0.5), 6.0);
        assert_eq!(row(1.0, 1.5, 1.0).gain_at(0.5), 0.0);
    }

    #[test]
    fn only_tasks_below_half_their_roof_are_listed() {
        let rows = [row(1.0, 4.0, 1.0), row(1.0, 1.5, 1.0)];
        let md = markdown(&rows, 5.5);
        assert!(
            md.contains("1 of 2 tasks are below half their roof"),
            "{md}"
        );
        assert!(md.contains("| 25% |"), "{md}");
        assert!(!md.contains("| 67% |"), "{md}");
    }
}
