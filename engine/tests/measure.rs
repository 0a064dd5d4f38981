//! Build and measurement with the real compiler and real child processes.

use std::time::{Duration, Instant};

use tunehub_engine::data::input_tensor;
use tunehub_engine::ir::DType;
use tunehub_engine::measure::{
    ArgSpec, BuildInput, Builder, ErrorCode, LocalBuilder, LocalRunner, MeasureOptions,
    MeasureResult, RunInput, Runner, measure_batch,
};
use tunehub_engine::target::{Target, TargetOverrides};

const N: usize = 1000;

/// Small and quick: tests run side by side, so timing quality is not what is tested here.
fn opts() -> MeasureOptions {
    MeasureOptions {
        number: 1,
        repeat: 2,
        min_repeat_ms: 1,
        warmup: 1,
        run_timeout_s: 10.0,
        // Tests run side by side and disturb each other's calibration: the guard is tested on
        // its own below.
        noise_threshold: 0.0,
        noise_retries: 0,
        calib_ms: 2,
        ..MeasureOptions::default()
    }
}

fn args() -> Vec<ArgSpec> {
    let a = |name: &str, stage, is_output| ArgSpec {
        name: name.into(),
        shape: vec![N as i64],
        stage,
        is_output,
        dtype: DType::F32,
        packed_len: None,
        data: Default::default(),
    };
    vec![a("A", 0, false), a("B", 1, false), a("C", 2, true)]
}

fn expected() -> Vec<Vec<f64>> {
    let (a, b) = (input_tensor(0, N), input_tensor(1, N));
    vec![a.iter().zip(&b).map(|(x, y)| f64::from(x + y)).collect()]
}

/// A vector-add kernel whose loop body is `body` (over `i`, bound `n`).
fn kernel(n: usize, body: &str) -> String {
    format!(
        "void tunehub_kernel(const float* restrict A, const float* restrict B, float* restrict C) {{\n\
         #pragma omp parallel for simd\n\
         for (int i = 0; i < {n}; i++) {{ {body} }}\n}}\n"
    )
}

fn good() -> String {
    kernel(N, "C[i] = A[i] + B[i];")
}

fn input(src: String) -> BuildInput {
    BuildInput {
        kernel_source: src,
        args: args(),
        threads: 1,
    }
}

fn measure_one(src: String, o: MeasureOptions) -> MeasureResult {
    let target = Target::detect();
    let builder = LocalBuilder::new(&target, &o);
    let mut runner = LocalRunner::new(&target, o);
    let exp = expected();
    measure_batch(&builder, &mut runner, &[(input(src), &exp)]).remove(0)
}

#[test]
fn a_correct_kernel_measures_ok() {
    let r = measure_one(good(), opts());
    assert_eq!(r.error, ErrorCode::NoError, "{}", r.error_msg);
    assert!(r.is_ok());
    assert_eq!(r.costs.len(), 2);
    assert!(
        r.costs.iter().all(|&c| c > 0.0 && c < 1e-2),
        "{:?}",
        r.costs
    );
    assert!(r.build_s > 0.0 && r.run_s > 0.0);
    assert!(!r.noisy);
}

#[test]
fn two_threads_and_cache_flush_measure_ok() {
    let target = Target::detect();
    let o = MeasureOptions {
        flush_cache: true,
        repeat: 3,
        ..opts()
    };
    let builder = LocalBuilder::new(&target, &o);
    let built = builder
        .build(&[BuildInput {
            threads: 2,
            ..input(good())
        }])
        .remove(0)
        .expect("builds");
    let mut runner = LocalRunner::new(&target, o);
    let exp = expected();
    let r = runner
        .run(&[RunInput {
            built: &built,
            args: &args(),
            expected: &exp,
            threads: 2,
        }])
        .remove(0);
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(r.costs.len(), 3);
    assert_eq!(r.build_s, built.build_s);
}

#[test]
fn several_outputs_are_checked_in_argument_order() {
    let spec = |name: &str, n: i64, stage, is_output| ArgSpec {
        name: name.into(),
        shape: vec![n],
        stage,
        is_output,
        dtype: DType::F32,
        packed_len: None,
        data: Default::default(),
    };
    let args = vec![
        spec("X", 8, 0, false),
        spec("S", 8, 1, true),
        spec("D", 4, 2, true),
    ];
    let x = input_tensor(0, 8);
    let sum: Vec<f64> = x.iter().map(|v| f64::from(v + 1.0)).collect();
    let dbl: Vec<f64> = x[..4].iter().map(|v| f64::from(v * 2.0)).collect();
    let src = "void tunehub_kernel(const float* restrict X, float* restrict S, float* restrict D) {\n\
               for (int i = 0; i < 8; i++) S[i] = X[i] + 1.0f;\n\
               for (int i = 0; i < 4; i++) D[i] = X[i] * 2.0f;\n}\n";
    let target = Target::detect();
    let builder = LocalBuilder::new(&target, &opts());
    let mut runner = LocalRunner::new(&target, opts());
    let good = [sum.clone(), dbl.clone()];
    let mut bad_d = dbl.clone();
    bad_d[3] += 1.0;
    let bad = [sum, bad_d];
    let bi = BuildInput {
        kernel_source: src.into(),
        args,
        threads: 1,
    };
    let rs = measure_batch(&builder, &mut runner, &[(bi.clone(), &good), (bi, &bad)]);
    assert!(rs[0].is_ok(), "{:?}", rs[0]);
    assert_eq!(rs[1].error, ErrorCode::WrongAnswer);
    assert!(
        rs[1].error_msg.contains("output `D`") && rs[1].error_msg.contains("flat index 3"),
        "{}",
        rs[1].error_msg
    );
}

#[test]
fn a_segfault_is_a_runtime_error() {
    let r = measure_one(
        kernel(N, "C[i] = A[i] + B[i]; if (i == 0) *(volatile int*)0 = 1;"),
        opts(),
    );
    assert_eq!(r.error, ErrorCode::RuntimeError, "{}", r.error_msg);
    assert!(r.error_msg.contains("SIGSEGV (11)"), "{}", r.error_msg);
    assert!(r.costs.is_empty());
}

#[test]
fn a_non_zero_exit_is_a_runtime_error_with_stderr() {
    let src = format!(
        "#include <stdio.h>\n#include <stdlib.h>\n{}",
        kernel(
            N,
            "if (i == 0) { fprintf(stderr, \"bad things\\n\"); exit(7); }"
        )
    );
    let r = measure_one(src, opts());
    assert_eq!(r.error, ErrorCode::RuntimeError);
    assert!(
        r.error_msg.contains("status 7") && r.error_msg.contains("bad things"),
        "{}",
        r.error_msg
    );
}

#[test]
fn an_infinite_loop_times_out_and_is_killed() {
    // Every OpenMP thread spins: the group kill must end them all.
    let src = "void tunehub_kernel(const float* restrict A, const float* restrict B, float* restrict C) {\n\
               volatile int spin = 1;\n\
               #pragma omp parallel\n\
               while (spin) {}\n}\n";
    let o = MeasureOptions {
        run_timeout_s: 1.0,
        ..opts()
    };
    let target = Target::detect();
    let builder = LocalBuilder::new(&target, &o);
    let built = builder
        .build(&[BuildInput {
            threads: 2,
            ..input(src.into())
        }])
        .remove(0)
        .expect("builds");
    let mut runner = LocalRunner::new(&target, o);
    let exp = expected();
    // The kernel never ends by itself: that the run returns at all is the kill.
    let r = runner
        .run(&[RunInput {
            built: &built,
            args: &args(),
            expected: &exp,
            threads: 2,
        }])
        .remove(0);
    assert_eq!(r.error, ErrorCode::RunTimeout, "{}", r.error_msg);
    assert!(
        r.run_s >= 1.0,
        "stopped before its timeout: run_s {}",
        r.run_s
    );
}

#[test]
fn a_wrong_kernel_is_a_wrong_answer() {
    let r = measure_one(kernel(N, "C[i] = A[i] + B[i] + 1.0f;"), opts());
    assert_eq!(r.error, ErrorCode::WrongAnswer);
    assert!(
        r.error_msg.contains("1000 of 1000") && r.error_msg.contains("flat index 0"),
        "{}",
        r.error_msg
    );
    assert!(r.costs.is_empty());
}

#[test]
fn an_unwritten_element_is_a_wrong_answer() {
    let r = measure_one(kernel(N - 1, "C[i] = A[i] + B[i];"), opts());
    assert_eq!(r.error, ErrorCode::WrongAnswer);
    assert!(
        r.error_msg.contains("1 of 1000")
            && r.error_msg.contains("index 999")
            && r.error_msg.contains("NaN")
    );
}

#[test]
fn a_syntax_error_is_a_compile_error_with_the_message() {
    let r = measure_one(kernel(N, "C[i] = A[i] + ;"), opts());
    assert_eq!(r.error, ErrorCode::CompileError);
    assert!(
        r.error_msg.contains("kernel.c:3") && r.error_msg.contains("error"),
        "{}",
        r.error_msg
    );
    assert!(r.build_s > 0.0);
}

#[test]
fn a_signature_mismatch_is_a_compile_error() {
    let src = "void tunehub_kernel(const float* restrict A, float* restrict C) { C[0] = A[0]; }\n";
    let r = measure_one(src.into(), opts());
    assert_eq!(r.error, ErrorCode::CompileError);
    assert!(r.error_msg.contains("conflicting types"), "{}", r.error_msg);
}

#[test]
fn a_missing_compiler_is_a_compile_error() {
    let target = Target::detect().with_overrides(&TargetOverrides {
        compiler: Some("no-such-compiler-xyz".into()),
        ..Default::default()
    });
    let r = LocalBuilder::new(&target, &opts())
        .build(&[input(good())])
        .remove(0)
        .unwrap_err();
    assert_eq!(r.error, ErrorCode::CompileError);
    assert!(
        r.error_msg.contains("no-such-compiler-xyz") && r.error_msg.contains("not found"),
        "{}",
        r.error_msg
    );
}

#[test]
fn a_hanging_compiler_is_a_compile_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let cc = dir.path().join("slow-cc");
    std::fs::write(&cc, "#!/bin/sh\n[ \"$1\" = --probe ] && exit 0\nsleep 30\n").unwrap();
    std::fs::set_permissions(&cc, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // A process forked meanwhile by another test thread holds the write handle until it execs
    // (ETXTBSY on exec): wait until the script runs.
    let written = Instant::now();
    while let Err(e) = std::process::Command::new(&cc).arg("--probe").status() {
        assert_eq!(e.raw_os_error(), Some(libc::ETXTBSY), "{e}");
        assert!(
            written.elapsed() < Duration::from_secs(10),
            "{} stays busy",
            cc.display()
        );
        std::thread::yield_now();
    }
    let mut target = Target::detect();
    target.compiler = cc.to_string_lossy().into_owned();
    let o = MeasureOptions {
        build_timeout_s: 0.5,
        ..opts()
    };
    let t = Instant::now();
    let r = LocalBuilder::new(&target, &o)
        .build(&[input(good())])
        .remove(0)
        .unwrap_err();
    assert_eq!(r.error, ErrorCode::CompileTimeout, "{}", r.error_msg);
    // Killed, not awaited: back before the compiler would have ended by itself.
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
}

#[test]
fn a_batch_carries_on_past_bad_kernels() {
    let o = MeasureOptions {
        run_timeout_s: 1.0,
        ..opts()
    };
    let target = Target::detect();
    let builder = LocalBuilder::new(&target, &o).with_jobs(2);
    let mut runner = LocalRunner::new(&target, o);
    let exp = expected();
    let srcs = [
        kernel(N, "C[i] = A[i] + B[i]; if (i == 0) *(volatile int*)0 = 1;"),
        kernel(N, "C[i] = A[i] + B[i]; volatile int s = 1; while (s) {}"),
        kernel(N, "C[i] = A[i] + B[i] + 1.0f;"),
        kernel(N, "C[i] = A[i] + ;"),
        good(),
    ];
    let inputs: Vec<(BuildInput, &[Vec<f64>])> = srcs
        .into_iter()
        .map(|s| (input(s), exp.as_slice()))
        .collect();
    let rs = measure_batch(&builder, &mut runner, &inputs);
    let codes: Vec<ErrorCode> = rs.iter().map(|r| r.error).collect();
    assert_eq!(
        codes,
        [
            ErrorCode::RuntimeError,
            ErrorCode::RunTimeout,
            ErrorCode::WrongAnswer,
            ErrorCode::CompileError,
            ErrorCode::NoError
        ]
    );
    assert!(
        rs[4].is_ok() && rs[4].costs.iter().all(|&c| c > 0.0),
        "{:?}",
        rs[4]
    );
}

#[test]
fn a_slowed_machine_flags_the_result_noisy_after_retries() {
    // A threshold no calibration can meet: every attempt looks slowed.
    let o = MeasureOptions {
        noise_threshold: 1e9,
        noise_retries: 1,
        ..opts()
    };
    let r = measure_one(good(), o);
    assert!(r.is_ok(), "{r:?}");
    assert!(r.noisy);
    // The threshold of 0 never flags.
    let r = measure_one(
        good(),
        MeasureOptions {
            noise_threshold: 0.0,
            ..opts()
        },
    );
    assert!(r.is_ok() && !r.noisy);
}

#[test]
fn a_missing_reference_count_is_reported() {
    let target = Target::detect();
    let builder = LocalBuilder::new(&target, &opts());
    let mut runner = LocalRunner::new(&target, opts());
    let r = measure_batch(&builder, &mut runner, &[(input(good()), &[])]).remove(0);
    assert_eq!(r.error, ErrorCode::UnknownError);
    assert!(
        r.error_msg.contains("0 reference tensors for 1 output"),
        "{}",
        r.error_msg
    );
}
