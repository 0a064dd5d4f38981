//! Measures given schedules of one workload side by side (and prints their C with `--c`): to
//! take a record from a benchmark's `records.jsonl` or a hand-written step list and see what
//! it runs at.
//!
//! `cargo run --release -p tunehub-engine --example measure_schedule -- WORKLOAD [--c] STEPS...`
//! (`TH_MEASURE=number,repeat,min_repeat_ms` sets the measurement; default 5,5,50;
//! `TH_CFLAGS="-O2 ..."` appends compiler flags, a later `-O` overriding the default;
//! `TH_THREADS=1` runs the kernels on that many threads: on a busy machine a 1-thread
//! comparison still means something; `TH_MARCH=x86-64-v3` writes and builds the kernels for that
//! x86 level, its vector width and registers with it: an AVX2 kernel on an AVX-512 host)
//! WORKLOAD is a task description (`matmul(512,512,512,layout_free=B)`) or a text form; each
//! STEPS is a schedule's JSON step list (`[]` is the naive schedule).

use tunehub_engine::codegen::generate_with;
use tunehub_engine::measure::{MeasureOptions, Measurer};
use tunehub_engine::ops::OpSpec;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::target::{Target, TargetOverrides};
use tunehub_engine::task::Task;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(desc) = args.first() else {
        eprintln!("usage: measure_schedule WORKLOAD [--c] STEPS...");
        std::process::exit(2);
    };
    let print_c = args.iter().any(|a| a == "--c");
    // A text form has a `[` (`Y[i] = ...`); anything else is an op spec, read as the records
    // wrote it: no `layout_free=` means none.
    let task = if desc.contains('[') {
        Task::new(
            tunehub_engine::text::parse(desc).expect("a valid text form"),
            desc.as_str(),
        )
    } else {
        OpSpec::parse(desc)
            .expect("a valid op spec")
            .unpacked_by_default()
            .task()
            .expect("a valid workload")
    };
    let mut target = Target::detect();
    if let Some(n) = std::env::var("TH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        target.cores = n;
    }
    if let Ok(f) = std::env::var("TH_CFLAGS") {
        target
            .cflags
            .extend(f.split_whitespace().map(str::to_string));
    }
    if let Ok(march) = std::env::var("TH_MARCH") {
        let features: &[&str] = match march.as_str() {
            "x86-64-v4" => &["sse2", "avx", "avx2", "fma", "avx512f"],
            "x86-64-v3" => &["sse2", "avx", "avx2", "fma"],
            _ => &["sse2"],
        };
        target = target.with_overrides(&TargetOverrides {
            march: Some(march.clone()),
            features: Some(features.iter().map(|f| f.to_string()).collect()),
            ..Default::default()
        });
    }
    let scheds: Vec<Schedule> = args[1..]
        .iter()
        .filter(|a| *a != "--c")
        .map(|a| Schedule::from_json(a).expect("a valid step list"))
        .collect();
    if print_c {
        for s in &scheds {
            let k = generate_with(&task.dag, s, &target, &task.lower_options()).expect("lowers");
            println!("{}", k.source);
        }
    }
    let m3: Vec<u32> = std::env::var("TH_MEASURE")
        .unwrap_or_else(|_| "5,5,50".into())
        .split(',')
        .map(|v| v.parse().expect("TH_MEASURE=number,repeat,min_repeat_ms"))
        .collect();
    let mut m = Measurer::new(
        &target,
        MeasureOptions {
            number: m3[0],
            repeat: m3[1],
            min_repeat_ms: m3[2],
            warmup: 1,
            ..MeasureOptions::default()
        },
    );
    for (s, r) in scheds.iter().zip(m.measure(&task, &scheds)) {
        if r.is_ok() {
            println!(
                "{:>8.1} GFLOP/s{} build {:.2} s  {}",
                task.gflops(r.mean_cost()),
                if r.noisy { " NOISY" } else { "" },
                r.build_s,
                s.to_json()
            );
        } else {
            println!("error {}: {}  {}", r.error, r.error_msg, s.to_json());
        }
    }
}
