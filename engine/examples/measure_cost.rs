//! What measuring a batch of candidates costs: wall time, build and run seconds per
//! candidate, with the default measure options (the search's).
//!
//! `cargo run --release -p tunehub-engine --example measure_cost -- [candidates]`

use std::time::Instant;
use tunehub_engine::measure::{MeasureOptions, Measurer};
use tunehub_engine::ops;
use tunehub_engine::sample::RandomSampler;
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let target = Target::detect();
    let task = Task::new(ops::matmul(512, 512, 512).unwrap(), "matmul(512,512,512)");
    let t = Instant::now();
    task.reference();
    println!(
        "reference (once per task): {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let mut sampler = RandomSampler::new(&task.dag, &target, 7);
    let scheds: Vec<_> = (0..n).map(|_| sampler.sample()).collect();
    let mut m = Measurer::new(&target, MeasureOptions::default());
    // Seeds the calibration reference and any per-task cache outside the timed batch.
    m.measure(&task, &scheds[..1]);
    let t = Instant::now();
    let rs = m.measure(&task, &scheds);
    let wall = t.elapsed().as_secs_f64();
    let ok = rs.iter().filter(|r| r.is_ok()).count();
    let noisy = rs.iter().filter(|r| r.noisy).count();
    let build: f64 = rs.iter().map(|r| r.build_s).sum();
    let run: f64 = rs.iter().map(|r| r.run_s).sum();
    println!(
        "{n} candidates ({ok} ok, {noisy} noisy): wall {wall:.1} s = {:.3} s/candidate; build {:.3} s/candidate (summed over parallel jobs), run {:.3} s/candidate",
        wall / n as f64,
        build / n as f64,
        run / n as f64
    );
}
