//! The `tunehub` command line: arguments (clap derive; the doc comments are the `--help` text)
//! and how bad input is reported.
//!
//! Bad input, whether clap finds it or a command does (an unknown operator, a parse error),
//! exits with status 2 and one line on stderr, before anything is stored.

use crate::config::{ClientArgs, ServerArgs, TargetArgs};
use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum, value_parser};
use std::path::PathBuf;
use tunehub_engine::measure::MeasureOptions;
use tunehub_engine::search::DEFAULT_BATCH;

/// The most trials one `tune` run may ask for.
pub const MAX_TRIALS: u32 = 100_000;

/// tunehub: auto-tuning of tensor programs (Ansor-style search, measured on real hardware).
#[derive(Debug, Parser)]
#[command(name = "tunehub", version, propagate_version = true)]
pub struct Cli {
    /// More log output on stderr: -v info, -vv debug, -vvv trace. RUST_LOG, when set, wins.
    #[arg(short, long, action = ArgAction::Count, global = true)]
    pub verbose: u8,

    /// Log lines on stderr as text, or as one JSON object per line (for log collectors); a
    /// job's lines carry its id, a task's its index, a worker's its id.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = LogFormat::Text,
          env = "TUNEHUB_LOG_FORMAT", global = true)]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Tune one operator, or every task of an ONNX model (MODEL.onnx in place of the OP_SPEC),
    /// on this machine: starts an embedded server on the SQLite file (loopback only), submits
    /// one job, shows its progress and prints the result (for a model, its end-to-end
    /// estimate). Every measured candidate is kept in the database.
    Tune(TuneArgs),
    /// List the tuning tasks of an ONNX model: one per distinct fused operator, with its weight
    /// (occurrences), FLOPs and the ONNX nodes it covers, and the nodes skipped (unsupported).
    Tasks(TasksArgs),
    /// List the operator library: each operator's parameters and their defaults.
    Ops,
    /// Print the best stored schedule of a workload, read from the database file directly.
    Best(BestArgs),
    /// Run the tuning server: gRPC API, job runner measuring on this machine, record database.
    Server(ServerArgs),
    /// Submit a tuning job to a server (one task per OP_SPEC or --expr, or the tasks of an ONNX
    /// model given as MODEL.onnx) and print its id.
    Submit(SubmitArgs),
    /// List a server's jobs, newest first.
    Jobs(JobsArgs),
    /// Follow a job until it ends: a progress bar per task.
    Watch(WatchArgs),
    /// Cancel a queued or running job (it stops after its current batch).
    Cancel(CancelArgs),
    /// Ask a server for the best schedule of a workload (or write its C source), the top k, or
    /// what has been tuned.
    Query(QueryArgs),
    /// Write a kernel pack: the best kernels of workloads (or of an ONNX model's tasks) on a
    /// target as DIR/NAME.c, DIR/NAME.h and DIR/manifest.json, ready to build into a library.
    Pack(PackArgs),
    /// Export or import records as JSON lines.
    #[command(subcommand)]
    Records(RecordsCommand),
    /// List the server's measurement workers: id, target, status, last heartbeat,
    /// measurements done, errors (and why a quarantined one is).
    Workers(WorkersArgs),
}

#[derive(Debug, Clone, Args)]
pub struct WorkersArgs {
    /// One JSON object per worker.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

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

#[derive(Debug, Clone, Args)]
pub struct TasksArgs {
    /// The ONNX model file.
    #[arg(value_name = "MODEL")]
    pub model: PathBuf,

    /// The value of every input's dynamic first (batch) dimension.
    #[arg(long, value_name = "N", value_parser = value_parser!(i64).range(1..=65536))]
    pub batch: Option<i64>,

    /// An input's whole shape, e.g. `input=1x3x224x224` (repeatable).
    #[arg(long = "shape", value_name = "NAME=D0xD1x...")]
    pub shapes: Vec<String>,

    /// An unsupported operator is an error instead of a skipped node.
    #[arg(long)]
    pub strict: bool,

    /// One JSON object: the tasks (with their text form), the skipped nodes.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct SubmitArgs {
    /// Library operators to tune, one task each, e.g. `matmul(512,512,512)`; the operator's
    /// constant weight is packed by default (`tunehub ops`), `layout_free=B` names the packed
    /// inputs, `layout_free=none` packs none. An ONNX model file (MODEL.onnx) adds its tasks,
    /// extracted here: the server gets the task list, not the model. A shape range, one or two
    /// extents as lo..hi (`matmul(m=1..512,n=768,k=768)`), is a job of its own: up to 8
    /// representative shapes, --trials each (`tunehub query --range` shows its dispatch table).
    #[arg(value_name = "OP_SPEC")]
    pub op_specs: Vec<String>,

    /// A computation in the text form, one task each (repeatable).
    #[arg(long, value_name = "TEXT")]
    pub expr: Vec<String>,

    /// Candidates to measure per task.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = value_parser!(u32).range(1..))]
    pub trials: u32,

    /// Weight of each task in order (OP_SPECs first, then --expr ones); missing ones are 1.
    #[arg(long = "weight", value_name = "W")]
    pub weights: Vec<f64>,

    /// Device class: `local` (the server's machine) or a target key. Repeatable: one job per
    /// target, sharing a group id (printed first, then a `JOB TARGET` line per job).
    #[arg(long, value_name = "TARGET", default_value = "local")]
    pub target: Vec<String>,

    /// Candidates per round [default: the server's].
    #[arg(long, value_name = "N", value_parser = value_parser!(u32).range(1..=1024))]
    pub batch: Option<u32>,

    /// Seed of the search [default: chosen by the server].
    #[arg(long, value_name = "N", value_parser = value_parser!(u64).range(1..))]
    pub seed: Option<u64>,

    /// A name for listings.
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub name: String,

    /// How the job's rounds are shared among its tasks.
    #[arg(long, value_enum, default_value_t = SchedulerArg::Gradient)]
    pub scheduler: SchedulerArg,

    /// Among the queued jobs of its target pool, a higher priority starts first (-10 to 10);
    /// jobs sharing a pool of workers get its devices in proportion to 2^(priority/5).
    #[arg(long, value_name = "P", default_value_t = 0, allow_negative_numbers = true,
          value_parser = value_parser!(i32).range(-10..=10))]
    pub priority: i32,

    #[command(flatten)]
    pub model: ModelArgs,

    #[command(flatten)]
    pub measure: MeasureArgs,

    /// Follow the job after submitting it (as `tunehub watch`).
    #[arg(long)]
    pub watch: bool,

    /// Print the job as JSON.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, Clone, Args)]
pub struct JobsArgs {
    /// Only jobs in this state (repeatable): queued, running, done, failed, cancelled.
    #[arg(long = "state", value_name = "STATE")]
    pub states: Vec<String>,

    /// Only the jobs of this group (a multi-target submission: one job per target).
    #[arg(long, value_name = "GROUP")]
    pub group: Option<String>,

    /// Most jobs to list.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub limit: u32,

    /// One JSON object per job.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, Clone, Args)]
pub struct WatchArgs {
    /// The job's id (from `tunehub submit` or `tunehub jobs`), or a group's (`g-...`: a line
    /// per target as its jobs progress).
    #[arg(value_name = "JOB")]
    pub job: String,

    /// Print each event as a JSON line instead of progress bars.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, Clone, Args)]
pub struct CancelArgs {
    /// The job's id, or a group's (`g-...`: each of its jobs).
    #[arg(value_name = "JOB")]
    pub job: String,

    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, Clone, Args)]
pub struct QueryArgs {
    /// A library operator, e.g. `matmul(512,512,512)` (its weight packed by default, as
    /// tuned; `layout_free=...` as tuned otherwise).
    #[arg(value_name = "OP_SPEC", conflicts_with_all = ["expr", "key"])]
    pub op_spec: Option<String>,

    /// The computation in the text form.
    #[arg(long, value_name = "TEXT", conflicts_with = "key")]
    pub expr: Option<String>,

    /// A workload key.
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,

    /// Target: `local` (the server's machine) or a target key.
    #[arg(long, value_name = "TARGET", default_value = "local")]
    pub target: String,

    /// Also print the best kernel's C source.
    #[arg(long)]
    pub print_source: bool,

    /// Write the best kernel's C source to FILE.
    #[arg(long, value_name = "FILE")]
    pub out_c: Option<PathBuf>,

    /// Write the best kernel's C header (its prototypes and calling contract) to FILE.
    #[arg(long, value_name = "FILE")]
    pub out_h: Option<PathBuf>,

    /// The start of the kernel's C symbol [default: tunehub_].
    #[arg(long, value_name = "PREFIX", default_value = "")]
    pub prefix: String,

    /// The K fastest records instead of the best one.
    #[arg(long, value_name = "K")]
    pub top: Option<u32>,

    /// With no record of the workload on the target, answer from the nearest tuned workloads
    /// of its structure (same operator at other extents), their best schedule adapted: marked
    /// as transferred, with a predicted time.
    #[arg(long, conflicts_with = "top")]
    pub transfer: bool,

    /// With --transfer, on the server's own machine: measure the top transferred candidates
    /// now and store them as records; the answer is then the measured best.
    #[arg(long, requires = "transfer")]
    pub measure: bool,

    /// A shape range's dispatch table, e.g. `matmul(m=1..512,n=768,k=768)` (as submitted: its
    /// weight packed by default): which interval of the ranged extents each representative shape
    /// serves, with its best record. Any shape of a tuned range is answered by the plain query.
    #[arg(long, value_name = "SPEC", conflicts_with_all = ["op_spec", "expr", "key", "top", "print_source", "out_c", "out_h", "transfer", "list"])]
    pub range: Option<String>,

    /// List the targets and workloads tuned so far, with their trial counts (no workload).
    #[arg(long, conflicts_with_all = ["op_spec", "expr", "key", "top", "print_source", "out_c", "out_h", "transfer", "range"])]
    pub list: bool,

    /// Print JSON.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, Clone, Args)]
pub struct PackArgs {
    /// Library operators (as tuned: `matmul(512,512,512)`, its weight packed by default) or an
    /// ONNX model (MODEL.onnx: every task of it).
    #[arg(value_name = "OP_SPEC")]
    pub op_specs: Vec<String>,

    /// A computation in the text form (repeatable).
    #[arg(long, value_name = "TEXT")]
    pub expr: Vec<String>,

    /// Target: `local` (the server's machine) or a target key.
    #[arg(long, value_name = "TARGET", default_value = "local")]
    pub target: String,

    /// The directory the three files are written to (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    /// The pack's name: NAME.c, NAME.h (a C identifier) [default: tunehub_pack].
    #[arg(long, value_name = "NAME", default_value = "")]
    pub name: String,

    /// The start of every kernel's C symbol [default: tunehub_].
    #[arg(long, value_name = "PREFIX", default_value = "")]
    pub prefix: String,

    #[command(flatten)]
    pub model: ModelArgs,

    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, Subcommand)]
pub enum RecordsCommand {
    /// Write records as JSON lines (workload and target lines first).
    Export(ExportArgs),
    /// Read records from JSON lines; all or nothing.
    Import(ImportArgs),
    /// Keep the fastest records of each (workload, target) of a records file, for a pre-tuned
    /// pack (offline: no server).
    Distill(DistillArgs),
}

#[derive(Debug, Clone, Args)]
pub struct DistillArgs {
    /// The JSON lines file (an export); `-` reads stdin.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    /// Records kept per (workload, target): the fastest trusted successes.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..))]
    pub top: u32,

    /// Write here instead of stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// Only this workload key.
    #[arg(long, value_name = "KEY")]
    pub workload: Option<String>,

    /// Only this target key.
    #[arg(long, value_name = "KEY")]
    pub target: Option<String>,

    /// Write to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,

    /// The file's format: tunehub's JSON lines, or TVM auto_scheduler (Ansor) log lines for
    /// the operators with a TE twin (matmul, batch_matmul, dense, conv2d_nchw, conv2d_nhwc,
    /// depthwise_conv2d_nchw; definitions in bench/ansor_apply.py); the rest is left out and
    /// counted on stderr.
    #[arg(long, value_enum, default_value = "tunehub")]
    pub format: RecordFormat,

    /// The TVM target the Ansor lines name, e.g. "llvm -mcpu=znver3 -num-cores 8" (required
    /// with --format ansor).
    #[arg(long, value_name = "TARGET", required_if_eq("format", "ansor"))]
    pub tvm_target: Option<String>,

    #[command(flatten)]
    pub client: ClientArgs,
}

/// A record file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RecordFormat {
    /// tunehub's JSON lines (workload, target and record lines).
    Tunehub,
    /// TVM auto_scheduler (Ansor, TVM 0.19) log lines.
    Ansor,
}

#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// The JSON lines file; `-` reads stdin.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    /// The file's format (see `records export --format`). Ansor lines are mapped to tunehub's
    /// steps on this side, each line that does not map named, and then checked by the server
    /// as any import.
    #[arg(long, value_enum, default_value = "tunehub")]
    pub format: RecordFormat,

    /// With --format ansor: the key of the target (known to the server) the records were
    /// measured on. Default: this machine, as tunehub detects it.
    #[arg(long, value_name = "KEY")]
    pub target: Option<String>,

    #[command(flatten)]
    pub client: ClientArgs,
}

/// The computation to work on: a library operator or the text form, exactly one.
#[derive(Debug, Clone, Args)]
#[group(required = true, multiple = false)]
pub struct WorkloadArgs {
    /// A library operator with its parameters, e.g. `matmul(512,512,512)` (`tunehub ops`
    /// lists them); the operator's constant weight is packed by default, `layout_free=B` names
    /// the packed inputs, `layout_free=none` packs none. `tunehub tune` also takes an ONNX
    /// model file (MODEL.onnx): its tasks, extracted here (the server gets the task list, not
    /// the model); and a shape range (one or two extents as lo..hi,
    /// `dense(m=16..512,n=768,k=768)`): its representative shapes tuned as one job, --trials
    /// each, and its dispatch table printed.
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

#[derive(Debug, Clone, Args)]
pub struct TuneArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs,

    /// Candidates to measure in all (1 to 100000); with a MODEL, per task.
    #[arg(long, value_name = "N", default_value_t = 64,
          value_parser = value_parser!(u32).range(1..=i64::from(MAX_TRIALS)))]
    pub trials: u32,

    /// Candidates per batch: built in parallel, then run one at a time.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BATCH as u32, value_parser = value_parser!(u32).range(1..=1024))]
    pub batch: u32,

    #[command(flatten)]
    pub db: DbArgs,

    /// Seed of the search [default: from the clock; the summary prints it].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// Evolutionary search population per round (Ansor's is 2048; smaller rounds are faster
    /// and search less) [default: 2048].
    #[arg(long, value_name = "N", env = "TUNEHUB_POPULATION",
          value_parser = value_parser!(u64).range(1..=1_000_000))]
    pub population: Option<u64>,

    /// Print the best kernel's C source after tuning.
    #[arg(long)]
    pub print_source: bool,

    /// Write the best kernel's C source to FILE.
    #[arg(long, value_name = "FILE")]
    pub out_c: Option<PathBuf>,

    #[command(flatten)]
    pub target: TargetArgs,

    #[command(flatten)]
    pub measure: MeasureArgs,

    #[command(flatten)]
    pub model: ModelArgs,

    /// With a MODEL: how the job's rounds are shared among its tasks.
    #[arg(long, value_enum, default_value_t = SchedulerArg::Gradient)]
    pub scheduler: SchedulerArg,

    /// Print one JSON object on stdout as the summary, instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct BestArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs,

    #[command(flatten)]
    pub db: DbArgs,

    /// Target key to look up [default: this machine's, with the overrides below].
    #[arg(long, value_name = "KEY", conflicts_with = "TargetArgs")]
    pub target_key: Option<String>,

    /// The target as `tune` saw it: give the same overrides to find its records.
    #[command(flatten)]
    pub target: TargetArgs,

    /// Also print the best kernel's C source.
    #[arg(long)]
    pub print_source: bool,

    /// Write the best kernel's C source to FILE.
    #[arg(long, value_name = "FILE")]
    pub out_c: Option<PathBuf>,

    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Bad input found after argument parsing (an unknown operator, a parse error): reported like a
/// clap error, exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Exit status for bad input (clap's, and ours).
pub const USAGE_EXIT: u8 = 2;

/// Clap's error as one line: its message without the usage block and the "--help" hint, with
/// the lines that belong to the message (missing arguments, tips) joined.
pub fn one_line_clap_error(err: &clap::Error) -> String {
    let text = err.to_string();
    let msg: Vec<String> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty())
        .map(|l| {
            if l.starts_with("tip:") {
                format!("({l})")
            } else {
                l.to_string()
            }
        })
        .collect();
    let line = msg.join(" ");
    if line.starts_with("error:") {
        line
    } else {
        format!("error: {line}")
    }
}

/// One line for any message: newlines inside (say, from a compiler) would break "one line".
pub fn one_line(msg: &str) -> String {
    msg.split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use clap::error::ErrorKind;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("tunehub").chain(args.iter().copied()))
    }

    fn tune(args: &[&str]) -> TuneArgs {
        match parse(&[&["tune"], args].concat()).unwrap().command {
            Command::Tune(t) => t,
            c => panic!("not tune: {c:?}"),
        }
    }

    #[test]
    fn the_command_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn tune_defaults() {
        let t = tune(&["matmul(64,64,64)", "--db", "x.db"]);
        assert_eq!(t.workload.op_spec.as_deref(), Some("matmul(64,64,64)"));
        assert_eq!(t.workload.expr, None);
        assert_eq!(
            (t.trials, t.batch, t.seed),
            (64, DEFAULT_BATCH as u32, None)
        );
        assert_eq!(t.db.db, "x.db");
        assert!(!t.print_source && !t.json && t.out_c.is_none());
        assert_eq!(t.target.cflags_list(), None);
        let d = MeasureOptions::default();
        let o = t.measure.options();
        assert_eq!(
            (o.number, o.repeat, o.min_repeat_ms, o.run_timeout_s),
            (d.number, d.repeat, d.min_repeat_ms, d.run_timeout_s)
        );
    }

    #[test]
    fn tune_with_every_flag() {
        let t = tune(&[
            "--expr",
            "C[i, j] = ...",
            "--trials",
            "100000",
            "--batch",
            "8",
            "--seed",
            "7",
            "--print-source",
            "--out-c",
            "k.c",
            "--cores",
            "2",
            "--cc",
            "clang",
            "--cflags",
            "-O3 -ffast-math",
            "--march",
            "native",
            "--number",
            "5",
            "--repeat",
            "2",
            "--min-repeat-ms",
            "0",
            "--timeout-s",
            "2.5",
            "--json",
            "-vv",
        ]);
        assert_eq!(t.workload.expr.as_deref(), Some("C[i, j] = ..."));
        assert_eq!((t.trials, t.batch, t.seed), (100_000, 8, Some(7)));
        assert!(t.print_source && t.json);
        assert_eq!(t.out_c, Some(PathBuf::from("k.c")));
        assert_eq!(
            (
                t.target.cores,
                t.target.compiler.as_deref(),
                t.target.march.as_deref()
            ),
            (Some(2), Some("clang"), Some("native"))
        );
        assert_eq!(t.target.cflags_list().unwrap(), ["-O3", "-ffast-math"]);
        let o = t.measure.options();
        assert_eq!(
            (o.number, o.repeat, o.min_repeat_ms, o.run_timeout_s),
            (5, 2, 0, 2.5)
        );
    }

    #[test]
    fn verbosity_counts_anywhere() {
        assert_eq!(parse(&["-vv", "ops"]).unwrap().verbose, 2);
        assert_eq!(parse(&["ops", "-v"]).unwrap().verbose, 1);
    }

    #[test]
    fn bad_arguments_are_rejected() {
        let kind = |args: &[&str]| parse(args).unwrap_err().kind();
        // Trials out of range.
        assert_eq!(
            kind(&["tune", "matmul(8,8,8)", "--trials", "0"]),
            ErrorKind::ValueValidation
        );
        assert_eq!(
            kind(&["tune", "matmul(8,8,8)", "--trials", "100001"]),
            ErrorKind::ValueValidation
        );
        assert_eq!(
            kind(&["tune", "matmul(8,8,8)", "--trials=-3"]),
            ErrorKind::ValueValidation
        );
        assert_eq!(
            kind(&["tune", "matmul(8,8,8)", "--batch", "0"]),
            ErrorKind::ValueValidation
        );
        assert_eq!(
            kind(&["tune", "matmul(8,8,8)", "--cores", "0"]),
            ErrorKind::ValueValidation
        );
        assert_eq!(
            kind(&["tune", "matmul(8,8,8)", "--timeout-s", "0"]),
            ErrorKind::ValueValidation
        );
        assert_eq!(
            kind(&["tune", "matmul(8,8,8)", "--timeout-s", "inf"]),
            ErrorKind::ValueValidation
        );
        // Exactly one of OP_SPEC and --expr.
        assert_eq!(kind(&["tune"]), ErrorKind::MissingRequiredArgument);
        assert_eq!(
            kind(&["tune", "matmul(8,8,8)", "--expr", "x"]),
            ErrorKind::ArgumentConflict
        );
        assert_eq!(kind(&["best"]), ErrorKind::MissingRequiredArgument);
        assert_eq!(
            kind(&["tune", "matmul(8,8,8)", "--bogus"]),
            ErrorKind::UnknownArgument
        );
        assert_eq!(
            kind(&[]),
            ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        );
    }

    #[test]
    fn best_args() {
        match parse(&[
            "best",
            "matmul(8,8,8)",
            "--target-key",
            "abc",
            "--print-source",
            "--out-c",
            "best.c",
        ])
        .unwrap()
        .command
        {
            Command::Best(b) => {
                assert_eq!(b.workload.op_spec.as_deref(), Some("matmul(8,8,8)"));
                assert_eq!(b.target_key.as_deref(), Some("abc"));
                assert!(b.print_source && !b.json);
                assert_eq!(b.out_c, Some(PathBuf::from("best.c")));
            }
            c => panic!("not best: {c:?}"),
        }
        match parse(&["best", "matmul(8,8,8)", "--cores", "4", "--cc", "clang"])
            .unwrap()
            .command
        {
            Command::Best(b) => assert_eq!(
                (b.target.cores, b.target.compiler.as_deref()),
                (Some(4), Some("clang"))
            ),
            c => panic!("not best: {c:?}"),
        }
        // A target key names the target outright: overrides make no sense with it.
        let err =
            parse(&["best", "matmul(8,8,8)", "--target-key", "k", "--cores", "4"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict);
    }

    #[test]
    fn clap_errors_become_one_line() {
        for args in [
            &["tune", "matmul(8,8,8)", "--trials", "0"][..],
            &["tune"],
            &["tune", "matmul(8,8,8)", "--expr", "x"],
            &["tune", "matmul(8,8,8)", "--trils", "3"],
            &["frobnicate"],
        ] {
            let line = one_line_clap_error(&parse(args).unwrap_err());
            assert!(
                line.starts_with("error: ") && !line.contains('\n'),
                "{args:?}: {line:?}"
            );
        }
        let line =
            one_line_clap_error(&parse(&["tune", "matmul(8,8,8)", "--trials", "0"]).unwrap_err());
        assert!(line.contains("--trials") && line.contains("0"), "{line}");
        let line = one_line_clap_error(&parse(&["tune"]).unwrap_err());
        assert!(
            line.contains("OP_SPEC") && line.contains("--expr"),
            "{line}"
        );
        let line =
            one_line_clap_error(&parse(&["tune", "matmul(8,8,8)", "--trils", "3"]).unwrap_err());
        assert!(
            line.contains("(tip: a similar argument exists: '--trials')"),
            "{line}"
        );
    }

    #[test]
    fn every_flag_has_help() {
        fn walk(cmd: &clap::Command) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if id != "help" && id != "version" {
                    assert!(
                        arg.get_help().is_some(),
                        "{} --{id} has no help",
                        cmd.get_name()
                    );
                }
            }
            for sub in cmd.get_subcommands() {
                assert!(
                    sub.get_about().is_some() || sub.get_name() == "help",
                    "{} has no about",
                    sub.get_name()
                );
                walk(sub);
            }
        }
        walk(&Cli::command());
    }

    #[test]
    fn one_line_joins_lines() {
        assert_eq!(one_line("a\n  b\n\nc"), "a | b | c");
    }
}
