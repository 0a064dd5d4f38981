//! `tunehub-bench measure-settings`: what longer tuning measurements buy in ranking, against
//! what they cost in time: the figures behind `MeasureOptions::default()`.
//!
//! `cargo run -p tunehub-bench -- measure-settings RECORDS.jsonl [--top 48] [--passes 3]
//! [--settings 1x25,3x50] [--reference 5x100]`
//!
//! Each workload's `top` fastest distinct schedules of a dataset (the region where a search
//! picks its best) are measured in interleaved passes under every setting (`REPEATxMS`:
//! repeats, and the minimum ms of one repeat) and under a long reference setting. The truth is
//! the reference's mean over its passes. For each setting and pass, the reading the search
//! ranks by (the mean of its repeats) is scored against the truth: pairwise order agreement,
//! top-5 recall, and the regret of its pick (the truth's cost of the kernel the reading calls
//! the fastest, over the truly fastest); beside it, the run time per candidate.

use crate::remeasure::{fastest_distinct, median};
use anyhow::{Context, Result, bail};
use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;
use tunehub_costmodel::dataset::read_records;
use tunehub_engine::measure::{MeasureOptions, Measurer};
use tunehub_engine::ops;
use tunehub_engine::ops::split_layout_free;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;

#[derive(clap::Args)]
pub struct SettingsArgs {
    /// The dataset whose schedules are measured (the `records.jsonl` of `search --out`).
    records: PathBuf,
    /// Fastest distinct schedules per workload.
    #[arg(long, default_value_t = 48)]
    top: usize,
    /// Interleaved passes; each gives every kernel one reading per setting.
    #[arg(long, default_value_t = 3)]
    passes: usize,
    /// The settings compared, `REPEATxMS` each, comma-separated.
    #[arg(long, default_value = "1x25,3x50")]
    settings: String,
    /// The long setting whose mean over the passes is taken as the truth.
    #[arg(long, default_value = "5x100")]
    reference: String,
}

fn parse_setting(s: &str) -> Result<MeasureOptions> {
    let (r, ms) = s
        .trim()
        .split_once('x')
        .with_context(|| format!("setting {s:?} is not REPEATxMS"))?;
    Ok(MeasureOptions {
        repeat: r.parse()?,
        min_repeat_ms: ms.parse()?,
        ..MeasureOptions::default()
    })
}

/// Share of ordered pairs (by the truth, 1% apart or more) that `reading` orders the same way.
fn pairwise(reading: &[f64], truth: &[f64]) -> f64 {
    let (mut agree, mut all) = (0, 0);
    for i in 0..truth.len() {
        for j in 0..truth.len() {
            if truth[i] * 1.01 < truth[j] {
                all += 1;
                agree += usize::from(reading[i] < reading[j]);
            }
        }
    }
    agree as f64 / all.max(1) as f64
}

fn order(v: &[f64]) -> Vec<usize> {
    let mut ix: Vec<usize> = (0..v.len()).collect();
    ix.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    ix
}

pub fn run(a: SettingsArgs) -> Result<()> {
    let records = read_records(BufReader::new(
        File::open(&a.records).with_context(|| format!("opening {}", a.records.display()))?,
    ))?;
    let names: Vec<&str> = a.settings.split(',').map(str::trim).collect();
    let settings: Vec<MeasureOptions> = names
        .iter()
        .map(|s| parse_setting(s))
        .collect::<Result<_>>()?;
    let reference = parse_setting(&a.reference)?;
    if a.passes == 0 {
        bail!("--passes must be at least 1");
    }
    let target = Target::detect();
    let mut workloads: Vec<String> = vec![];
    for r in &records {
        if !workloads.contains(&r.workload) {
            workloads.push(r.workload.clone());
        }
    }
    println!(
        "{} workloads, top {} per workload, {} passes, reference {}",
        workloads.len(),
        a.top,
        a.passes,
        a.reference
    );
    println!("workload | setting | pairwise | top-5 recall | pick regret | run s / candidate");
    for w in &workloads {
        let dag = ops::build_op(&split_layout_free(w).0)?;
        let task = Task::from_desc(dag, w.as_str()).map_err(anyhow::Error::msg)?;
        let scheds: Vec<Schedule> = fastest_distinct(&records, w, a.top)
            .iter()
            .map(|(_, ix)| Schedule::from_json_value(&records[ix[0]].steps))
            .collect::<Result<_, _>>()?;
        let n = scheds.len();
        // readings[setting][pass][kernel]; the reference is the last setting.
        let all: Vec<&MeasureOptions> = settings.iter().chain([&reference]).collect();
        let mut readings: Vec<Vec<Vec<f64>>> = vec![vec![]; all.len()];
        let mut run_s = vec![vec![]; all.len()];
        for pass in 0..a.passes {
            let mut ord: Vec<usize> = (0..n).collect();
            if pass % 2 == 1 {
                ord.reverse();
            }
            let batch: Vec<Schedule> = ord.iter().map(|&i| scheds[i].clone()).collect();
            for (k, opts) in all.iter().enumerate() {
                let mut m = Measurer::new(&target, (*opts).clone());
                let mut reading = vec![f64::INFINITY; n];
                for (&i, r) in ord.iter().zip(m.measure(&task, &batch)) {
                    if r.is_ok() && !r.noisy {
                        reading[i] = r.mean_cost();
                    }
                    run_s[k].push(r.run_s);
                }
                readings[k].push(reading);
            }
        }
        let refs = &readings[all.len() - 1];
        let truth: Vec<f64> = (0..n)
            .map(|i| refs.iter().map(|p| p[i]).sum::<f64>() / a.passes as f64)
            .collect();
        let keep: Vec<usize> = (0..n).filter(|&i| truth[i].is_finite()).collect();
        let truth: Vec<f64> = keep.iter().map(|&i| truth[i]).collect();
        let best = truth.iter().cloned().fold(f64::INFINITY, f64::min);
        let top5: Vec<usize> = order(&truth).into_iter().take(5).collect();
        for (k, name) in names.iter().chain([&a.reference.as_str()]).enumerate() {
            let (mut pw, mut rec, mut regret) = (vec![], vec![], vec![]);
            for pass in &readings[k] {
                let r: Vec<f64> = keep.iter().map(|&i| pass[i]).collect();
                pw.push(pairwise(&r, &truth));
                let mine: Vec<usize> = order(&r).into_iter().take(5).collect();
                rec.push(mine.iter().filter(|i| top5.contains(i)).count() as f64 / 5.0);
                regret.push(truth[order(&r)[0]] / best - 1.0);
            }
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
            println!(
                "{w} | {name}{} | {:.3} | {:.2} | {:+.2}% | {:.3}",
                if k == all.len() - 1 { " (ref)" } else { "" },
                mean(&pw),
                mean(&rec),
                100.0 * mean(&regret),
                median(run_s[k].clone())
            );
        }
    }
    Ok(())
}
