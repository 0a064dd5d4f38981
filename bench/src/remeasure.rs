//! `tunehub-bench remeasure`: sharpens a dataset's labels where the ranking metrics read them.
//! During tuning each candidate is measured once, briefly, and on this shared machine one such
//! reading can be off by several percent, about the gap between a task's best kernels; so "the
//! true best" of a dataset that top-k recall asks about is partly the luckiest reading. Here the
//! fastest records of every workload are measured again in interleaved passes (every kernel
//! once per pass, the order reversed on odd passes, so that a drift of the machine touches all
//! alike) with the tuning measurement's own settings, and their costs become those readings.
//!
//! `cargo run --release -p tunehub-bench -- remeasure IN.jsonl --out OUT.jsonl [--top 32] [--passes 3]`
//!
//! Prints, per workload, how far each kernel's readings spread across passes (the noise the
//! single tuning reading carried) and whether the dataset's best stayed the best.

use anyhow::{Context, Result};
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::PathBuf;
use tunehub_costmodel::dataset::{DatasetRecord, read_records, write_records};
use tunehub_engine::measure::{ErrorCode, Measurer};
use tunehub_engine::ops::split_layout_free;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;

#[derive(clap::Args)]
pub struct RemeasureArgs {
    /// The dataset to read (the `records.jsonl` that `search --out` writes).
    records: PathBuf,
    /// Where the dataset with re-measured costs goes.
    #[arg(long)]
    out: PathBuf,
    /// Fastest distinct schedules per workload measured again.
    #[arg(long, default_value_t = 32)]
    top: usize,
    /// Interleaved passes over them; each pass gives every kernel one reading.
    #[arg(long, default_value_t = 3)]
    passes: usize,
    // The measurement of one reading: the search benchmark's tuning defaults, so that the
    // re-measured costs are the same estimator as everyone else's in the file.
    #[command(flatten)]
    measure: crate::search::TuningMeasureArgs,
}

pub fn run(a: RemeasureArgs) -> Result<()> {
    let mut records = read_records(BufReader::new(
        File::open(&a.records).with_context(|| format!("opening {}", a.records.display()))?,
    ))?;
    let target = Target::detect();
    let opts = a.measure.options();
    let mut workloads: Vec<String> = vec![];
    for r in &records {
        if !workloads.contains(&r.workload) {
            workloads.push(r.workload.clone());
        }
    }
    println!(
        "{}: {} records, {} workloads; top {} per workload, {} passes",
        a.records.display(),
        records.len(),
        workloads.len(),
        a.top,
        a.passes
    );
    let mut measurer = Measurer::new(&target, opts);
    for w in &workloads {
        let dag = crate::search::build(&split_layout_free(w).0)?;
        let task = Task::from_desc(dag, w.as_str()).map_err(anyhow::Error::msg)?;
        let distinct = fastest_distinct(&records, w, a.top);
        let scheds: Vec<Schedule> = distinct
            .iter()
            .map(|(_, ix)| Schedule::from_json_value(&records[ix[0]].steps))
            .collect::<Result<_, _>>()?;
        let measured = interleaved(&mut measurer, &task, &scheds, a.passes);
        let new_cost = |i: usize| measured.best(i);
        // `distinct` is sorted by the old readings: the old best is kernel 0.
        let old_best_rank = 1
            + (1..scheds.len())
                .filter(|&i| new_cost(i) < new_cost(0))
                .count();
        let spreads: Vec<f64> = measured
            .readings
            .iter()
            .filter(|v| v.len() > 1)
            .map(|v| {
                let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
                let hi = v.iter().cloned().fold(0.0, f64::max);
                hi / lo - 1.0
            })
            .collect();
        let median_spread = median(spreads.clone());
        let old_vs_new: Vec<f64> = (0..scheds.len())
            .filter(|&i| new_cost(i).is_finite())
            .map(|i| distinct[i].0 / new_cost(i) - 1.0)
            .collect();
        println!(
            "  {w}: {} kernels; spread of a kernel's readings across passes: median {:.1}%, max {:.1}%; tuning reading vs re-measured: median {:+.1}%; the old best is now #{}",
            scheds.len(),
            100.0 * median_spread,
            100.0 * spreads.iter().cloned().fold(0.0, f64::max),
            100.0 * median(old_vs_new),
            old_best_rank
        );
        for (k, (_, ix)) in distinct.iter().enumerate() {
            for &i in ix {
                let r: &mut DatasetRecord = &mut records[i];
                if let Some((code, msg)) = &measured.failed[k] {
                    // A kernel that passed once and fails now is not a time to rank by.
                    r.costs.clear();
                    r.error = *code;
                    r.error_msg = format!("failed when re-measured: {msg}");
                } else if measured.readings[k].is_empty() {
                    r.noisy = true; // every pass was slowed: no trustworthy reading
                } else {
                    r.costs = measured.readings[k].clone();
                }
            }
        }
    }
    write_records(BufWriter::new(File::create(&a.out)?), &records)?;
    println!("wrote {}", a.out.display());
    Ok(())
}

/// Readings of kernels measured side by side.
pub struct Interleaved {
    /// Per kernel, its quiet readings (seconds), one per pass at most.
    pub readings: Vec<Vec<f64>>,
    /// Per kernel, the error of a pass where it failed.
    pub failed: Vec<Option<(ErrorCode, String)>>,
}

impl Interleaved {
    /// Kernel `i`'s best reading, infinite when it failed or every pass was noisy.
    pub fn best(&self, i: usize) -> f64 {
        if self.failed[i].is_some() {
            return f64::INFINITY;
        }
        self.readings[i]
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min)
    }
}

/// Measures `scheds` of `task` in `passes` interleaved passes: every kernel once per pass, the
/// order reversed on odd passes, so that a drift of the machine touches all alike.
pub fn interleaved(
    measurer: &mut Measurer,
    task: &Task,
    scheds: &[Schedule],
    passes: usize,
) -> Interleaved {
    let mut readings: Vec<Vec<f64>> = vec![vec![]; scheds.len()];
    let mut failed: Vec<Option<(ErrorCode, String)>> = vec![None; scheds.len()];
    for pass in 0..passes {
        let mut order: Vec<usize> = (0..scheds.len()).collect();
        if pass % 2 == 1 {
            order.reverse();
        }
        let batch: Vec<Schedule> = order.iter().map(|&i| scheds[i].clone()).collect();
        for (&i, r) in order.iter().zip(measurer.measure(task, &batch)) {
            if !r.is_ok() {
                failed[i] = Some((r.error, r.error_msg));
            } else if !r.noisy {
                readings[i].push(r.min_cost());
            }
        }
    }
    Interleaved { readings, failed }
}

/// A workload's `top` fastest distinct schedules (by their best reading; copies of one schedule
/// share the outcome), fastest first: the best reading and the indices of its records.
pub fn fastest_distinct(
    records: &[DatasetRecord],
    workload: &str,
    top: usize,
) -> Vec<(f64, Vec<usize>)> {
    let mut copies: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, r) in records.iter().enumerate() {
        if r.workload == workload && !r.noisy && r.cost().is_finite() {
            copies.entry(r.steps.to_string()).or_default().push(i);
        }
    }
    let mut distinct: Vec<(f64, Vec<usize>)> = copies
        .into_values()
        .map(|ix| {
            let best = ix
                .iter()
                .map(|&i| records[i].cost())
                .fold(f64::INFINITY, f64::min);
            (best, ix)
        })
        .collect();
    distinct.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1[0].cmp(&y.1[0])));
    distinct.truncate(top);
    distinct
}

pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
