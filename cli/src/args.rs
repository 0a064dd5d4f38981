//! Argument groups several commands share, and their meaning in the API's terms.

use clap::{Args, ValueEnum, value_parser};
use std::time::{SystemTime, UNIX_EPOCH};
use tunehub_engine::measure::MeasureOptions;
use tunehub_onnx::{Extraction, Layout};
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
    /// of weight x best time (the network's end-to-end time) the most; with several tasks
    /// their trials are one pool (a slow, heavy task takes more than its own, a light one less).
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

    /// With a MODEL: the layout its f32 convolutions are tuned and built in: nchw (the
    /// model's), nhwc (channels last: vectors span channels; the build converts once at each
    /// end of a run of convolutions), winograd (nhwc, with each 3x3 stride-1 convolution as
    /// Winograd's F(4x4 or 2x2, 3x3): an input transform, a batched product, an output
    /// transform), or auto: a job tunes nhwc's tasks and winograd's together, a build takes the
    /// tuned layout whose kernels take least, each 3x3 stride-1 convolution in the form whose
    /// tuned kernels take least. Tune several into one database to compare.
    #[arg(long, value_name = "LAYOUT", value_enum, default_value_t = LayoutArg::Auto)]
    pub layout: LayoutArg,
}

/// A `--layout` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LayoutArg {
    Nchw,
    Nhwc,
    Winograd,
    /// tunehub's choice.
    Auto,
}

impl LayoutArg {
    /// The layout asked for; `None` for auto.
    pub fn layout(self) -> Option<Layout> {
        match self {
            LayoutArg::Nchw => Some(Layout::Nchw),
            LayoutArg::Nhwc => Some(Layout::Nhwc),
            LayoutArg::Winograd => Some(Layout::Winograd),
            LayoutArg::Auto => None,
        }
    }
}

impl ModelArgs {
    /// How the model's tasks are extracted for tuning (auto: every form a build chooses among).
    pub fn extraction(&self) -> Extraction {
        Extraction {
            strict: self.strict,
            layout: self.layout.layout(),
        }
    }

    /// The layout a build asks for: "auto" lets the service choose.
    pub fn layout_name(&self) -> &'static str {
        self.layout.layout().map_or("auto", Layout::name)
    }
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

/// How each candidate is timed (Ansor's measure options). A flag not given takes the default
/// of what is tuned: an operator warm ([`MeasureOptions::default`]), a model's tasks cold
/// ([`MeasureOptions::cold`]: one run per repeat from a flushed cache, as a network runs them).
#[derive(Debug, Clone, Args)]
pub struct MeasureArgs {
    /// Kernel runs per timed repeat (grown until a repeat lasts --min-repeat-ms) [default: 3;
    /// a model's tasks: 1]
    #[arg(long, value_name = "N", value_parser = value_parser!(u32).range(1..=1_000_000))]
    pub number: Option<u32>,

    /// Timed repeats per candidate; each gives one cost [default: 2; a model's tasks: 10]
    #[arg(long, value_name = "N", value_parser = value_parser!(u32).range(1..=1000))]
    pub repeat: Option<u32>,

    /// Smallest duration of one timed repeat, in milliseconds [default: 25; a model's tasks: 0]
    #[arg(long, value_name = "MS", value_parser = value_parser!(u32).range(0..=600_000))]
    pub min_repeat_ms: Option<u32>,

    /// Untimed runs before timing [default: 1]
    #[arg(long, value_name = "N", value_parser = value_parser!(u32).range(0..=1000))]
    pub warmup: Option<u32>,

    /// Evict the kernel's arguments from the CPU caches before each timed repeat (times from a
    /// cold cache; the default for a model's tasks)
    #[arg(long, conflicts_with = "warm_cache")]
    pub flush_cache: bool,

    /// Time a model's tasks as an operator is timed (warm: no flush, several runs per repeat),
    /// each kernel with what its previous run left in cache
    #[arg(long)]
    pub warm_cache: bool,

    /// Limit on one candidate's run, in seconds; a candidate past it is recorded as a timeout
    /// [default: 10]
    #[arg(long, value_name = "SECONDS", value_parser = positive_seconds)]
    pub timeout_s: Option<f64>,

    /// Noise guard: a candidate timed while the calibration loop ran below this fraction of the
    /// machine's usual speed is re-measured, then stored flagged noisy. 0 turns the guard off
    /// [default: 0.85]
    #[arg(long, value_name = "FRACTION", value_parser = fraction)]
    pub noise_threshold: Option<f64>,
}

impl MeasureArgs {
    /// The options as the API takes them: every field set, the flags over `base` (the
    /// defaults of what is tuned), so the job measures as this command says.
    pub fn to_proto(&self, base: &MeasureOptions) -> pb::MeasureOptions {
        let o = self.options(base);
        pb::MeasureOptions {
            number: Some(o.number),
            repeat: Some(o.repeat),
            min_repeat_ms: Some(o.min_repeat_ms),
            warmup: Some(o.warmup),
            flush_cache: Some(o.flush_cache),
            timeout_s: Some(o.run_timeout_s),
            noise_threshold: Some(o.noise_threshold),
        }
    }

    /// The flags over `base`.
    pub fn options(&self, base: &MeasureOptions) -> MeasureOptions {
        // Warm is the operator's timing whole, not only the flush turned off.
        let warm = MeasureOptions::default();
        let base = if self.warm_cache { &warm } else { base };
        MeasureOptions {
            number: self.number.unwrap_or(base.number),
            repeat: self.repeat.unwrap_or(base.repeat),
            min_repeat_ms: self.min_repeat_ms.unwrap_or(base.min_repeat_ms),
            warmup: self.warmup.unwrap_or(base.warmup),
            // The warm base never flushes, and --flush-cache conflicts with --warm-cache.
            flush_cache: self.flush_cache || base.flush_cache,
            run_timeout_s: self.timeout_s.unwrap_or(base.run_timeout_s),
            noise_threshold: self.noise_threshold.unwrap_or(base.noise_threshold),
            ..base.clone()
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
