//! OpenBLAS `cblas_sgemm` through our own harness (built, run and checked against the
//! reference like our kernels), for the matmul workloads. Needs Debian's libopenblas-dev;
//! without it the comparison is skipped with a note.

use tunehub_engine::codegen::{self, GeneratedKernel};
use tunehub_engine::measure::{
    BuildInput, LocalBuilder, LocalRunner, MeasureOptions, measure_batch,
};
use tunehub_engine::schedule::Schedule;
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;

/// The best of OpenBLAS's own kernel choice and its AVX-512 kernels forced (on a VM that hides
/// the CPU model, Debian's OpenBLAS falls back to Haswell kernels): (core type, GFLOP/s).
pub fn sgemm_gflops(task: &Task, target: &Target, opts: &MeasureOptions) -> Option<(String, f64)> {
    let dims = task
        .desc
        .trim_start_matches("matmul(")
        .trim_end_matches(')');
    let d: Vec<i64> = dims
        .split(',')
        .filter_map(|x| x.trim().parse().ok())
        .collect();
    let [m, n, k] = d[..] else { return None };
    let naive = codegen::generate(&task.dag, &Schedule::default(), target).ok()?;
    let kernel = GeneratedKernel {
        source: format!(
            "#include <cblas.h>\nvoid tunehub_kernel(const float* restrict A, const float* restrict B, float* restrict C) {{\n  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, {m}, {n}, {k}, 1.0f, A, {k}, B, {n}, 0.0f, C, {n});\n}}\n"
        ),
        args: naive.args,
    };
    let mut builder = LocalBuilder::new(target, opts);
    builder.libs.push("-lopenblas".into());
    let reference = task.reference();
    let input = BuildInput {
        kernel_source: kernel.source,
        args: kernel.args,
        threads: target.cores,
    };
    let mut best: Option<(String, f64)> = None;
    for core in ["auto", "SkylakeX"] {
        let mut runner = LocalRunner::new(target, opts.clone());
        if core != "auto" {
            runner = runner.with_env("OPENBLAS_CORETYPE", core);
        }
        // The best of a few measurements, as for our kernels (see `search::remeasure`).
        let mut g = 0.0f64;
        for _ in 0..crate::finalists::REMEASURES {
            let r = measure_batch(
                &builder,
                &mut runner,
                &[(input.clone(), reference.as_slice())],
            );
            if !r[0].is_ok() {
                println!(
                    "  OpenBLAS ({core}) unavailable: {}",
                    r[0].error_msg.lines().next().unwrap_or("")
                );
                break;
            }
            g = g.max(task.gflops(r[0].mean_cost()));
        }
        if g == 0.0 {
            continue;
        }
        println!("  OpenBLAS sgemm, core {core}: {g:.1} GFLOP/s");
        if best.as_ref().is_none_or(|b| g > b.1) {
            best = Some((core.to_string(), g));
        }
    }
    best
}
