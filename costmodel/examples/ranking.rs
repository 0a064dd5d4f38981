//! The cost model evaluation: XGBoost pack-sum with its head model (the default) and without,
//! XGBoost rank objectives, the linfa linear baseline and random scores, on real measured
//! records (the `records.jsonl` of `tunehub-bench search` runs: the search's and the random
//! baseline's schedules), for held-out records of seen workloads (3-fold per task) and for
//! held-out workloads (leave one out).
//!
//! `cargo run -p tunehub-costmodel --example ranking -- [--folds K] [DATASET [REMEASURED]]`
//! (default costmodel/data/records.jsonl, 3 folds; more folds keep the test sets of a larger
//! dataset as small as those of the default one, since top-k recall gets harder as a test set
//! grows). REMEASURED, the same records measured again
//! (`tunehub-bench remeasure DATASET --out REMEASURED`), adds the row "second measurement": each
//! program ranked by its second reading, the ceiling the measurement's noise leaves to a model.
//! The learning curve trains the default model on a share of each task's training folds and
//! scores the same test folds: whether more records per task would rank better.
//! The costmodel crate is built with opt-level 2 in the dev profile, so this is the optimised
//! model without a second XGBoost C++ build for `release`.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::fs::File;
use std::io::BufReader;
use std::time::Instant;
use tunehub_costmodel::dataset::{read_records, to_task_samples};
use tunehub_costmodel::eval::{
    CLOSE_RUNNER_UP, LinearRanker, Metrics, RandomRanker, Ranker, RemeasuredRanker, XgbRanker,
    seen_workloads, seen_workloads_subsampled, unseen_workloads,
};
use tunehub_costmodel::linear::LinearModel;
use tunehub_costmodel::{Objective, XgbParams};

/// Seeds of the record shuffles that cut the folds.
const SPLITS: [u64; 5] = [42, 43, 44, 45, 46];

/// Shares of each task's training folds in the learning curve.
const SHARES: [f64; 4] = [0.125, 0.25, 0.5, 1.0];

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut folds = 3;
    if let Some(i) = args.iter().position(|a| a == "--folds") {
        folds = args
            .get(i + 1)
            .and_then(|k| k.parse().ok())
            .filter(|&k: &usize| k >= 2)
            .expect("--folds takes a number of at least 2");
        args.drain(i..i + 2);
    }
    let path = args
        .first()
        .cloned()
        .unwrap_or_else(|| "costmodel/data/records.jsonl".into());
    let load = |path: &str| {
        let records = read_records(BufReader::new(File::open(path).expect("open the dataset")))
            .expect("read the dataset");
        let tasks = to_task_samples(&records).expect("replay the dataset");
        (records, tasks)
    };
    let (records, tasks) = load(&path);
    println!("{path}: {} records", records.len());
    for t in &tasks {
        let ok = t.samples.iter().filter(|s| s.cost.is_finite()).count();
        let best = t
            .samples
            .iter()
            .map(|s| s.cost)
            .fold(f64::INFINITY, f64::min);
        let worst = t
            .samples
            .iter()
            .map(|s| s.cost)
            .filter(|c| c.is_finite())
            .fold(0.0, f64::max);
        println!(
            "  {:<52} {:>4} records, {:>4} ok, best {:.3} ms, worst/best {:.0}x",
            t.key,
            t.samples.len(),
            ok,
            best * 1e3,
            worst / best
        );
    }
    let xgb = |objective, head| XgbParams {
        objective,
        head,
        ..XgbParams::default()
    };
    let mut rankers: Vec<Box<dyn Ranker>> = vec![
        Box::new(XgbRanker(XgbParams::default(), None)),
        Box::new(XgbRanker(xgb(Objective::PackSum, None), None)),
        Box::new(XgbRanker(xgb(Objective::RankPairwise, None), None)),
        Box::new(XgbRanker(xgb(Objective::RankNdcg, None), None)),
        Box::new(LinearRanker(LinearModel::new(10.0))),
        Box::new(RandomRanker(ChaCha8Rng::seed_from_u64(7))),
    ];
    if let Some(again) = args.get(1) {
        rankers.push(Box::new(RemeasuredRanker::new(&load(again).1)));
    }
    let header = || {
        println!(
            "  {:<22} {:>8} {:>6} {:>6} {:>8} {:>8} {:>8} {:>8} {:>5} {:>8}",
            "model",
            "pairwise",
            "top-1",
            "top-5",
            "near-5",
            "apeak@5",
            "apeak@8",
            "apeak@32",
            "sets",
            "time s"
        )
    };
    let row = |name: &str, m: &Metrics, secs: f64| {
        println!(
            "  {:<22} {:>8.3} {:>6.2} {:>6.2} {:>8.2} {:>8.3} {:>8.3} {:>8.3} {:>5} {:>8.1}",
            name, m.pairwise, m.top1, m.top5, m.near5, m.apeak5, m.apeak8, m.apeak32, m.sets, secs
        )
    };
    // One split puts a task's few fastest kernels in one fold or another, and top-k recall over
    // 8 tasks x 3 folds moves by a tenth between splits: the mean of several splits.
    println!(
        "\nheld-out records of seen workloads ({folds} folds per task, all tasks trained together; mean of {} splits)",
        SPLITS.len()
    );
    header();
    let mut close = 0.0;
    for r in rankers.iter_mut() {
        let t = Instant::now();
        let per_split: Vec<Metrics> = SPLITS
            .iter()
            .map(|&seed| seen_workloads(r.as_mut(), &tasks, folds, seed).expect("evaluate"))
            .collect();
        let mut m = Metrics::mean(&per_split);
        m.sets = per_split.iter().map(|x| x.sets).sum();
        row(&r.name(), &m, t.elapsed().as_secs_f64());
        close = m.close_runner_up;
    }
    // The same for every model: in that share of the sets, the strict top-5 turns on an order
    // of two kernels less than 1% apart.
    println!(
        "  test sets whose second-fastest kernel is within {:.0}% of the fastest: {:.2}",
        CLOSE_RUNNER_UP * 100.0,
        close
    );
    println!(
        "\nlearning curve: {} on a share of each task's training folds, same test folds",
        XgbParams::default().name()
    );
    println!(
        "  {:<22} {:>8} {:>6} {:>6} {:>8} {:>8}",
        "records per task", "pairwise", "top-1", "top-5", "near-5", "apeak@5"
    );
    let mean_len = tasks.iter().map(|t| t.samples.len()).sum::<usize>() as f64 / tasks.len() as f64;
    for share in SHARES {
        let mut r = XgbRanker(XgbParams::default(), None);
        let per_split: Vec<Metrics> = SPLITS
            .iter()
            .map(|&seed| {
                seen_workloads_subsampled(&mut r, &tasks, folds, seed, share).expect("evaluate")
            })
            .collect();
        let m = Metrics::mean(&per_split);
        let trained = mean_len * (folds - 1) as f64 / folds as f64 * share;
        println!(
            "  {:<22} {:>8.3} {:>6.2} {:>6.2} {:>8.2} {:>8.3}",
            format!("{trained:.0} ({:.0}%)", share * 100.0),
            m.pairwise,
            m.top1,
            m.top5,
            m.near5,
            m.apeak5
        );
    }
    println!("\nheld-out workloads (train on the others, score all records of the one left out)");
    header();
    for r in rankers.iter_mut() {
        let t = Instant::now();
        let m = unseen_workloads(r.as_mut(), &tasks).expect("evaluate");
        row(&r.name(), &m, t.elapsed().as_secs_f64());
    }
}
