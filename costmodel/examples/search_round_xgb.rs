//! Times search rounds guided by the XGBoost model, without measuring anything: the model is
//! trained on the dataset's records of one workload (as after a few rounds of a real job), then
//! `next_batch` runs a few times. The figure the search issue asks for (under 1 s per round)
//! with the model's share apart; `perf record` on this is the round's profile.
//!
//! `cargo run --release -p tunehub-costmodel --example search_round_xgb -- [WORKLOAD] [DATASET]`
//! (WORKLOAD as written in the dataset, default the conv2d of `tunehub-bench search`).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::fs::File;
use std::io::BufReader;
use std::sync::Arc;
use std::time::Instant;
use tunehub_costmodel::dataset::read_records;
use tunehub_costmodel::{XgbModel, XgbParams};
use tunehub_engine::ops::OpSpec;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::search::{SearchParams, TaskSearch};
use tunehub_engine::target::Target;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let desc = args.first().map_or(
        "conv2d_nchw(n=1,c=64,h=56,w=56,f=64,kh=3,kw=3,pad=1,layout_free=kernel)",
        |s| s.as_str(),
    );
    let path = args
        .get(1)
        .map_or("costmodel/data/records.jsonl", |s| s.as_str());
    let records = read_records(BufReader::new(File::open(path).expect("open the dataset")))
        .expect("read the dataset");
    // As the dataset wrote it: no `layout_free=` means none.
    let task = OpSpec::parse(desc)
        .expect("a valid op spec")
        .unpacked_by_default()
        .task()
        .expect("a valid workload");
    let task = Arc::new(task);
    let target = Target::detect();
    let mut search = TaskSearch::new(task, &target, SearchParams::default(), 1);
    let mut n = 0;
    for r in records.iter().filter(|r| r.workload == desc && !r.noisy) {
        let sched = Schedule::from_json_value(&r.steps).expect("a valid step list");
        search.add_measured(&sched, &r.result());
        n += 1;
    }
    assert!(n > 0, "no records of {desc} in {path}");
    let mut model = XgbModel::new(XgbParams::default());
    for round in 0..4 {
        let (model_before, t) = (search.stats.model_s, Instant::now());
        let batch = search.next_batch(&mut model, 64).expect("a batch");
        println!(
            "round {round}: {} proposed in {:.3} s (model {:.3} s; round 0 trains on {n} records); {} lowered, {} scored so far",
            batch.len(),
            t.elapsed().as_secs_f64(),
            search.stats.model_s - model_before,
            search.stats.lowered,
            search.stats.scored,
        );
    }
}
