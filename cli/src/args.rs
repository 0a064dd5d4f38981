//! Argument groups several commands share, and their meaning in the API's terms.

use clap::{Args, ValueEnum, value_parser};
use std::time::{SystemTime, UNIX_EPOCH};
use tunehub_engine::measure::MeasureOptions;
use tunehub_proto::v1 as pb;

/// Candidates measured per task when a command is not told (`tune`, `submit`).
pub const DEFAULT_TRIALS: u32 = 64;

/// The most trials one `tune` run may ask for.
pub const MAX_TRIALS: u32 = 100_000;

/// How a job's rounds are shared among its tasks; the API's names (`round-robin`, `gradient`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchedulerArg {
    /// One round per task in turn, whatever the weights.
    RoundRobin,
    /// Ansor's gradient task scheduler: each round goes to the task expected to lower the sum
    /// of weight x best time (the network's end-to-end time) the most.
    Gradient,
}

/// How an ONNX model's tasks are extracted (`tune`, `submit`).
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// With a MODEL: the value of every input's dynamic first (batch) dimension.
    #[arg(long, value_name = "N", value_parser = value_parser!(i64).range(1..=65536))]
    pub model_batch: Option<i64>,

    /// With a MODEL: an input's whole shape, e.g. `input=1x3x224x224` (repeatable).
    #[arg(long = "shape", value_name = "NAME=D0xD1x...")]
    pub shapes: Vec<String>,

    /// With a MODEL: an unsupported operator is an error instead of a skipped node.
    #[arg(long)]
    pub strict: bool,
}

/// The computation to work on: a library operator or the text form, exactly one.
#[derive(Debug, Clone, Args)]
#[group(required = true, multiple = false)]
pub struct WorkloadArgs {
    /// A library operator with its parameters, e.g. `matmul(512,512,512)` (`tunehub ops`
    /// lists them); the operator's constant weight is packed by default, `layout_free=B` names
    /// the packed inputs, `layout_free=none` packs none. Or an ONNX model file (MODEL.onnx):
    /// its tasks, extracted here (the server gets the task list, not the model); or a shape
    /// range (one or two extents as lo..hi, `dense(m=16..512,n=768,k=768)`): its
    /// representative shapes tuned as one job, --trials each, and its dispatch table printed.
    #[arg(value_name = "OP_SPEC")]
    pub op_spec: Option<String>,

    /// The computation in tunehub's text form, instead of an OP_SPEC.
    #[arg(long, value_name = "TEXT")]
    pub expr: Option<String>,
}

/// The database of workloads, targets and records.
#[derive(Debug, Clone, Args)]
pub struct DbArgs {
    /// SQLite database file (created if missing), or a sqlite:// URL.
    #[arg(
        long,
        value_name = "PATH",
        env = "TUNEHUB_DB",
        default_value = "tunehub.db"
    )]
    pub db: String,
}

/// How each candidate is timed (Ansor's measure options).
#[derive(Debug, Clone, Args)]
pub struct MeasureArgs {
    /// Kernel runs per timed repeat (grown until a repeat lasts --min-repeat-ms).
    #[arg(long, value_name = "N", default_value_t = MeasureOptions::default().number,
          value_parser = value_parser!(u32).range(1..=1_000_000))]
    pub number: u32,

    /// Timed repeats per candidate; each gives one cost.
    #[arg(long, value_name = "N", default_value_t = MeasureOptions::default().repeat,
          value_parser = value_parser!(u32).range(1..=1000))]
    pub repeat: u32,

    /// Smallest duration of one timed repeat, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = MeasureOptions::default().min_repeat_ms,
          value_parser = value_parser!(u32).range(0..=600_000))]
    pub min_repeat_ms: u32,

    /// Untimed runs before timing.
    #[arg(long, value_name = "N", default_value_t = MeasureOptions::default().warmup,
          value_parser = value_parser!(u32).range(0..=1000))]
    pub warmup: u32,

    /// Flush the CPU caches before each timed repeat (times from a cold cache).
    #[arg(long)]
    pub flush_cache: bool,

    /// Limit on one candidate's run, in seconds; a candidate past it is recorded as a timeout.
    #[arg(long, value_name = "SECONDS", default_value_t = MeasureOptions::default().run_timeout_s,
          value_parser = positive_seconds)]
    pub timeout_s: f64,

    /// Noise guard: a candidate timed while the calibration loop ran below this fraction of the
    /// machine's usual speed is re-measured, then stored flagged noisy. 0 turns the guard off.
    #[arg(long, value_name = "FRACTION", default_value_t = MeasureOptions::default().noise_threshold,
          value_parser = fraction)]
    pub noise_threshold: f64,
}

impl MeasureArgs {
    /// The options as the API takes them: every field set, so the job measures as the flags
    /// (or their defaults, which are the engine's) say.
    pub fn to_proto(&self) -> pb::MeasureOptions {
        pb::MeasureOptions {
            number: Some(self.number),
            repeat: Some(self.repeat),
            min_repeat_ms: Some(self.min_repeat_ms),
            warmup: Some(self.warmup),
            flush_cache: Some(self.flush_cache),
            timeout_s: Some(self.timeout_s),
            noise_threshold: Some(self.noise_threshold),
        }
    }

    pub fn options(&self) -> MeasureOptions {
        MeasureOptions {
            number: self.number,
            repeat: self.repeat,
            min_repeat_ms: self.min_repeat_ms,
            warmup: self.warmup,
            flush_cache: self.flush_cache,
            run_timeout_s: self.timeout_s,
            noise_threshold: self.noise_threshold,
            ..MeasureOptions::default()
        }
    }
}

fn fraction(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        Ok(_) => Err("must be between 0 and 1".into()),
        Err(e) => Err(e.to_string()),
    }
}

fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 86_400.0 => Ok(v),
        Ok(_) => Err("must be more than 0 and at most 86400 seconds".into()),
        Err(e) => Err(e.to_string()),
    }
}

impl SchedulerArg {
    pub fn to_proto(self) -> pb::SchedulerKind {
        match self {
            SchedulerArg::RoundRobin => pb::SchedulerKind::RoundRobin,
            SchedulerArg::Gradient => pb::SchedulerKind::Gradient,
        }
    }
}

/// The job seed of a run: the one given, or one from the clock. Never 0, which the API reads as
/// "choose one": a given 0 is `u64::MAX`, a seed of its own (so `--seed 0` and `--seed 1` are
/// two runs, and the benchmarks' seed 0 is `tunehub tune --seed 0`).
pub fn run_seed(seed: Option<u64>) -> u64 {
    match seed {
        Some(0) => u64::MAX,
        Some(s) => s,
        None => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            .max(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_is_never_the_apis_choose_one() {
        assert_eq!(run_seed(Some(0)), u64::MAX);
        assert_eq!(run_seed(Some(7)), 7);
        assert_ne!(run_seed(None), 0);
    }
}
