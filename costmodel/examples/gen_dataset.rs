//! Generates the evaluation dataset: random valid schedules of a few small-to-medium workloads,
//! measured for real on this machine, appended to a JSON-lines file (see `dataset.rs`).
//!
//! `cargo run -p tunehub-costmodel --example gen_dataset -- [OUT] [RECORDS_PER_WORKLOAD]`
//! (defaults: costmodel/data/records.jsonl, 240). Batches are flushed as they finish, so an
//! interrupted run keeps what it measured.

use std::fs::OpenOptions;
use std::io::BufWriter;
use std::time::Instant;
use tunehub_costmodel::dataset::{DatasetRecord, write_records};
use tunehub_engine::measure::{MeasureOptions, Measurer};
use tunehub_engine::ops;
use tunehub_engine::sample::RandomSampler;
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;

const WORKLOADS: [&str; 6] = [
    "matmul(128,128,128)",
    "matmul(256,256,256)",
    "dense(m=64,n=256,k=256,bias=1,relu=1)",
    "batch_matmul(4,64,64,64)",
    "conv2d_nchw(n=1,c=16,h=14,w=14,f=32,kh=3,kw=3,pad=1)",
    "matmul(64,512,128)",
];
const BATCH: usize = 16;

fn main() {
    let mut args = std::env::args().skip(1);
    let out = args
        .next()
        .unwrap_or_else(|| "costmodel/data/records.jsonl".into());
    let per: usize = args.next().map_or(240, |s| s.parse().expect("a count"));
    let target = Target::detect();
    // Modest options: the dataset only needs orderings, and the machine is shared.
    let opts = MeasureOptions {
        number: 1,
        repeat: 3,
        min_repeat_ms: 20,
        warmup: 1,
        noise_retries: 1,
        calib_ms: 10,
        run_timeout_s: 5.0,
        ..MeasureOptions::default()
    };
    let mut measurer = Measurer::new(&target, opts);
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&out)
        .expect("open the output");
    let mut w = BufWriter::new(file);
    let start = Instant::now();
    for (wi, spec) in WORKLOADS.iter().enumerate() {
        let dag = ops::build_op(spec).expect("a library op");
        let task = Task::new(dag.clone(), *spec);
        let mut sampler = RandomSampler::new(&dag, &target, 1000 + wi as u64);
        let mut done = 0;
        while done < per {
            let n = BATCH.min(per - done);
            let scheds: Vec<_> = (0..n).map(|_| sampler.sample()).collect();
            let results = measurer.measure(&task, &scheds);
            let recs: Vec<DatasetRecord> = scheds
                .iter()
                .zip(&results)
                .map(|(s, r)| DatasetRecord::new(spec, s, r))
                .collect();
            write_records(&mut w, &recs).expect("write");
            std::io::Write::flush(&mut w).expect("flush");
            done += n;
            let ok = results.iter().filter(|r| r.is_ok()).count();
            eprintln!(
                "{spec}: {done}/{per} ({ok}/{n} ok in this batch), {:.0} s",
                start.elapsed().as_secs_f64()
            );
        }
    }
}
