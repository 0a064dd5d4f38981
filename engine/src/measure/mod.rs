//! Build and measurement: a kernel's C source plus a generated timing harness become one
//! executable, built by the target's C compiler and run as an isolated child process that
//! times the kernel, checks its output against the reference, and reports.
//!
//! The `Builder` and `Runner` traits are the seams: the local implementations live here; the
//! worker fleet implements the same traits remotely.

pub mod builder;
pub mod check;
pub mod child;
pub mod error;
pub mod harness;
pub mod measurer;
pub mod noise;
pub mod runner;

pub use crate::codegen::ArgSpec;
pub use builder::{Builder, Built, LocalBuilder};
pub use error::ErrorCode;
pub use measurer::{MeasureBatch, Measurer, OnBuilt, OnResult};
pub use noise::Calibration;
pub use runner::{LocalRunner, RunInput, Runner, measure_batch, measure_batch_each};
use serde::{Deserialize, Serialize};

/// What the builder turns into an executable: the kernel `void tunehub_kernel(...)` with
/// arguments in `args` order (inputs `const float* restrict`, outputs `float* restrict`).
#[derive(Debug, Clone)]
pub struct BuildInput {
    pub kernel_source: String,
    pub args: Vec<ArgSpec>,
    /// Threads the kernel's parallel loops use (OpenMP), and the calibration uses.
    pub threads: usize,
}

/// Ansor's measure options, plus the noise guard.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MeasureOptions {
    /// Kernel runs per timed repeat (grown until a repeat lasts `min_repeat_ms`).
    pub number: u32,
    /// Timed repeats; each gives one cost (seconds per run).
    pub repeat: u32,
    pub min_repeat_ms: u32,
    /// Untimed runs before timing.
    pub warmup: u32,
    /// Evict the kernel's arguments from every cache level before each repeat (as TVM's
    /// `enable_cpu_cache_flush`: each run reads its tensors from memory).
    pub flush_cache: bool,
    /// Limit on one kernel executable's run, in seconds.
    pub run_timeout_s: f64,
    /// Limit on one compilation, in seconds.
    pub build_timeout_s: f64,
    /// A kernel timed while the calibration loop ran below this fraction of the machine's best
    /// calibration is re-measured (the machine was slowed by a neighbour).
    pub noise_threshold: f64,
    /// Re-measurements before a slowed result is kept, flagged as noisy.
    pub noise_retries: u32,
    /// Milliseconds of the FMA calibration loop run before and after each kernel's timing
    /// (0: no calibration, and so no noise guard).
    #[serde(default = "default_calib_ms")]
    pub calib_ms: u32,
}

/// 10 ms per window: long enough to see a neighbour that holds a core (it slows the whole
/// window), short enough that two windows cost a small part of a candidate's run.
fn default_calib_ms() -> u32 {
    10
}

/// The tuning measurement of the CLI, the service and the benchmark alike: two repeats of at
/// least 25 ms. Against a 5 x 100 ms reference on each task's 32 fastest kernels, three repeats
/// of 50 ms ranked no better (matmul 512 pick regret +1.2% against +0.1-0.9%, conv2d +5.4%
/// against +3.3% for two of 25 ms) at 2-4x the run time per candidate; the second repeat keeps
/// a spread in every record, and a new best is measured twice anyway
/// (docs/experiments/2026-11-25-tuning-defaults.md).
impl Default for MeasureOptions {
    fn default() -> Self {
        MeasureOptions {
            number: 3,
            repeat: 2,
            min_repeat_ms: 25,
            warmup: 1,
            flush_cache: false,
            run_timeout_s: 10.0,
            build_timeout_s: 60.0,
            noise_threshold: 0.85,
            noise_retries: 2,
            calib_ms: default_calib_ms(),
        }
    }
}

impl MeasureOptions {
    /// How a model's tasks are timed: one run per repeat, each from a flushed cache, ten
    /// repeats (Ansor's network set-up: `LocalRunner(repeat=10, enable_cpu_cache_flush=True)`).
    /// In a network a kernel's weights and inputs arrive cold; timed warm, GPT-2's matrix-vector
    /// products were 5-12x faster alone than in the built model, and the schedules chosen warm
    /// made it 1.55x slower than those chosen cold (docs/experiments/2026-12-03-compiled-models.md).
    pub fn cold() -> Self {
        MeasureOptions {
            number: 1,
            repeat: 10,
            min_repeat_ms: 0,
            flush_cache: true,
            ..MeasureOptions::default()
        }
    }

    /// One short run per kernel, no warm-up, no calibration and no noise guard (side-by-side
    /// runs would only trigger re-runs): for checking that kernels build, run and match the
    /// reference, not for timing them.
    pub fn check_only() -> Self {
        MeasureOptions {
            number: 1,
            repeat: 1,
            min_repeat_ms: 0,
            warmup: 0,
            run_timeout_s: 20.0,
            calib_ms: 0,
            noise_threshold: 0.0,
            ..MeasureOptions::default()
        }
    }
}

/// The outcome of measuring one candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasureResult {
    /// Seconds per kernel run, one per repeat (all kept: the spread is data). Empty on error.
    pub costs: Vec<f64>,
    pub error: ErrorCode,
    /// The compiler's message, the signal, the mismatch: whatever says what went wrong.
    pub error_msg: String,
    /// Seconds spent building, and running the executable (wall).
    pub build_s: f64,
    pub run_s: f64,
    /// The calibration ran slow around this measurement even after retries: not to be taken as
    /// the kernel's true speed.
    pub noisy: bool,
}

impl MeasureResult {
    pub fn error(error: ErrorCode, msg: impl Into<String>) -> Self {
        MeasureResult {
            costs: vec![],
            error,
            error_msg: msg.into(),
            build_s: 0.0,
            run_s: 0.0,
            noisy: false,
        }
    }

    pub fn is_ok(&self) -> bool {
        self.error == ErrorCode::NoError && !self.costs.is_empty()
    }

    /// Mean seconds per run, or infinity on error.
    pub fn mean_cost(&self) -> f64 {
        if self.is_ok() {
            self.costs.iter().sum::<f64>() / self.costs.len() as f64
        } else {
            f64::INFINITY
        }
    }

    /// The best (smallest) repeat, or infinity on error.
    pub fn min_cost(&self) -> f64 {
        if self.is_ok() {
            self.costs.iter().cloned().fold(f64::INFINITY, f64::min)
        } else {
            f64::INFINITY
        }
    }
}
