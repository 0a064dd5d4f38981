//! Feature extraction speed on 1000 random schedules each of matmul 512 and conv2d
//! (1x64x56x56, 64 filters, 3x3, pad 1). Sampling and lowering happen before the clock starts:
//! only `features::extract_values` (the model's path) is timed.
//!
//! `cargo bench -p tunehub-costmodel --bench features [-- REPEATS]` (repeats > 1 lengthen the
//! timed loop, for a profiler).

use std::hint::black_box;
use std::time::Instant;
use tunehub_costmodel::features::extract_values;
use tunehub_engine::ir::ComputeDag;
use tunehub_engine::lower::{LoweredFunc, lower};
use tunehub_engine::ops;
use tunehub_engine::sample::RandomSampler;
use tunehub_engine::target::Target;

const PROGRAMS: usize = 1000;

fn programs(dag: &ComputeDag, target: &Target) -> Vec<LoweredFunc> {
    let mut sampler = RandomSampler::new(dag, target, 1);
    (0..PROGRAMS)
        .filter_map(|_| lower(&sampler.sample().replay(dag).ok()?).ok())
        .collect()
}

fn main() {
    let target = Target::detect();
    let repeats: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1);
    let win = ops::Window {
        kh: 3,
        kw: 3,
        stride: 1,
        pad: 1,
        dilation: 1,
    };
    let cases = [
        ("matmul 512", ops::matmul(512, 512, 512).expect("matmul")),
        (
            "conv2d 1x64x56x56 F64 3x3 p1",
            ops::conv2d_nchw(1, 64, 56, 56, 64, win, false, false).expect("conv2d"),
        ),
    ];
    for (name, dag) in &cases {
        let funcs = programs(dag, &target);
        // One untimed pass warms caches and the allocator.
        black_box(funcs.iter().map(|f| extract_values(f).len()).sum::<usize>());
        let start = Instant::now();
        let mut stores = 0;
        for _ in 0..repeats {
            for f in &funcs {
                stores += black_box(extract_values(black_box(f))).len();
            }
        }
        let secs = start.elapsed().as_secs_f64() / repeats as f64;
        stores /= repeats;
        println!(
            "{name:<28} {} programs, {stores} stores in {:.1} ms: {:>10.0} stores/s {:>9.0} programs/s",
            funcs.len(),
            secs * 1e3,
            stores as f64 / secs,
            funcs.len() as f64 / secs,
        );
    }
}
