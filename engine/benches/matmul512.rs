//! Issue figures for matmul 512x512x512 f32, measured side by side in one run:
//! (a) the naive schedule, (b) the best of 64 random schedules, (c) a hand-written schedule in
//! our steps, (d) OpenBLAS `cblas_sgemm` through the same harness (built, run and checked
//! against the reference exactly like our kernels). Needs Debian's libopenblas-dev for (d).
//!
//! (c') is (c) with B marked layout-free (packed once outside the timed kernel, as Ansor's
//! layout rewrite does).
//!
//! `cargo bench -p tunehub-engine --bench matmul512 [-- --threads N] [--hand-only]`
//! (`--hand-only`: (c), (c') and (d) alone, for quick comparisons)

use tunehub_engine::codegen::GeneratedKernel;
use tunehub_engine::measure::{
    BuildInput, LocalBuilder, LocalRunner, MeasureOptions, MeasureResult, Measurer, measure_batch,
};
use tunehub_engine::ops;
use tunehub_engine::sample::RandomSampler;
use tunehub_engine::schedule::{Schedule, hand};
use tunehub_engine::target::{Target, TargetOverrides};
use tunehub_engine::task::Task;

const N: i64 = 512;

fn openblas_kernel(task: &Task, target: &Target) -> GeneratedKernel {
    // The signature our harness expects, with the work done by the vendor library.
    let naive = tunehub_engine::codegen::generate(&task.dag, &Schedule::default(), target)
        .expect("naive lowers");
    let source = format!(
        "#include <cblas.h>\nvoid tunehub_kernel(const float* restrict A, const float* restrict B, float* restrict C) {{\n  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, {N}, {N}, {N}, 1.0f, A, {N}, B, {N}, 0.0f, C, {N});\n}}\n"
    );
    GeneratedKernel {
        source,
        args: naive.args,
    }
}

fn line(name: &str, task: &Task, r: &MeasureResult) {
    if r.is_ok() {
        let costs: Vec<String> = r.costs.iter().map(|c| format!("{:.3}", c * 1e3)).collect();
        println!(
            "{name:<34} {:>8.1} GFLOP/s (best repeat {:>6.1})  mean {:.3} ms  repeats [{}]{}",
            task.gflops(r.mean_cost()),
            task.gflops(r.min_cost()),
            r.mean_cost() * 1e3,
            costs.join(" "),
            if r.noisy { "  NOISY" } else { "" }
        );
    } else {
        println!(
            "{name:<34} error {}: {}",
            r.error,
            r.error_msg.lines().next().unwrap_or("")
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let threads = args
        .iter()
        .position(|a| a == "--threads")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok());
    let target = Target::detect().with_overrides(&TargetOverrides {
        cores: threads,
        ..TargetOverrides::default()
    });
    // Ansor's settings (number 3, min_repeat_ms 100) with 5 repeats to show the spread.
    let opts = MeasureOptions {
        number: 3,
        repeat: 5,
        min_repeat_ms: 100,
        warmup: 1,
        ..MeasureOptions::default()
    };
    let task = Task::new(ops::matmul(N, N, N).unwrap(), "matmul(512,512,512)");
    println!(
        "target {} ({}, {} threads), compiler {}",
        target.key(),
        target.cpu_model,
        target.cores,
        target.compiler_version
    );
    println!("flags {}", target.compile_flags().join(" "));
    let mut m = Measurer::new(&target, opts.clone());

    let hand_only = args.iter().any(|a| a == "--hand-only");
    let naive = m.measure(&task, &[Schedule::default()]);
    line("(a) naive schedule", &task, &naive[0]);

    if !hand_only {
        let mut sampler = RandomSampler::new(&task.dag, &target, 2026);
        let random: Vec<Schedule> = (0..64).map(|_| sampler.sample()).collect();
        let t0 = std::time::Instant::now();
        let results = m.measure(&task, &random);
        let ok = results.iter().filter(|r| r.is_ok()).count();
        let (bi, best) = results
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.mean_cost().total_cmp(&b.1.mean_cost()))
            .unwrap();
        line(&format!("(b) best of 64 random ({ok} ok)"), &task, best);
        println!(
            "    64 random candidates measured in {:.1} s; best: {}",
            t0.elapsed().as_secs_f64(),
            random[bi].to_json()
        );
    }

    let packed = Task::new(
        ops::matmul(N, N, N).unwrap(),
        "matmul(512,512,512,layout_free=B)",
    )
    .with_layout_free(&["B"])
    .expect("B is an input");
    let mut hand_best = f64::INFINITY;
    for (ti, tj) in [(4, 64), (6, 64), (8, 32), (8, 64)] {
        if N % ti != 0 {
            continue;
        }
        let r = m.measure(&task, &[hand::matmul_register_tiled(N, ti, tj)]);
        line(&format!("(c) hand schedule {ti}x{tj}"), &task, &r[0]);
        hand_best = hand_best.min(r[0].mean_cost());
        let r = m.measure(&packed, &[hand::matmul_register_tiled(N, ti, tj)]);
        line(
            &format!("(c') hand {ti}x{tj}, B layout-free"),
            &packed,
            &r[0],
        );
    }

    let mut blas_builder = LocalBuilder::new(&target, &opts);
    blas_builder.libs.push("-lopenblas".into());
    let k = openblas_kernel(&task, &target);
    let reference = task.reference();
    let input = BuildInput {
        kernel_source: k.source,
        args: k.args,
        threads: target.cores,
    };
    // Debian's OpenBLAS picks its kernels from the CPU model; on a VM that hides the model it
    // falls back to Haswell (AVX2). Measure what it picks and its AVX-512 kernels forced.
    let mut blas_best = f64::INFINITY;
    for core in [None, Some("SkylakeX")] {
        let mut runner = LocalRunner::new(&target, opts.clone());
        if let Some(c) = core {
            runner = runner.with_env("OPENBLAS_CORETYPE", c);
        }
        let blas = measure_batch(
            &blas_builder,
            &mut runner,
            &[(input.clone(), reference.as_slice())],
        );
        line(
            &format!("(d) OpenBLAS sgemm, core {}", core.unwrap_or("auto")),
            &task,
            &blas[0],
        );
        blas_best = blas_best.min(blas[0].mean_cost());
    }
    if blas_best.is_finite() && hand_best.is_finite() {
        println!(
            "best hand schedule / best OpenBLAS (GFLOP/s ratio) = {:.2}",
            blas_best / hand_best
        );
    }
}
