//! The command line: `Cli`, its commands, and `run`, which runs one. Each command is a module
//! with its arguments beside the code that runs them.

mod build;
mod cancel;
mod group;
mod jobs;
mod ops;
mod pack;
mod query;
mod records;
mod report;
mod run;
mod server;
mod submit;
mod tasks;
mod tune;
mod watch;
mod workers;

pub use build::BuildArgs;
pub use cancel::CancelArgs;
pub use jobs::JobsArgs;
pub use pack::PackArgs;
pub use query::QueryArgs;
pub use records::{DistillArgs, ExportArgs, ImportArgs, RecordFormat, RecordsCommand};
pub use report::ReportArgs;
pub use run::RunArgs;
pub use submit::SubmitArgs;
pub use tasks::TasksArgs;
pub use tune::TuneArgs;
pub use watch::WatchArgs;
pub use workers::WorkersArgs;

use clap::{ArgAction, Parser, Subcommand, ValueEnum};
use std::process::ExitCode;
use tunehub_server::config::ServerArgs;

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
    /// Run the tuning server: gRPC API, job runner measuring on this machine, record database.
    Server(ServerArgs),
    /// Submit a tuning job to a server (one task per OP_SPEC or --expr, or the tasks of an ONNX
    /// model given as MODEL.onnx) and print its id.
    Submit(SubmitArgs),
    /// List a server's jobs, newest first.
    Jobs(JobsArgs),
    /// Follow a job until it ends: a progress bar per task.
    Watch(WatchArgs),
    /// Draw a job's tuning curves (best GFLOP/s so far per task by trials and by wall time; a
    /// model's end-to-end estimate by trials) into an SVG or an HTML page.
    Report(ReportArgs),
    /// Cancel a queued or running job (it stops after its current batch).
    Cancel(CancelArgs),
    /// Ask a server, or a database file (--db), for the best schedule of a workload and its
    /// kernel (C source, header, calling contract), the top k, or what has been tuned.
    Query(QueryArgs),
    /// Write a kernel pack: the best kernels of workloads (or of an ONNX model's tasks) on a
    /// target as DIR/NAME.c, DIR/NAME.h and DIR/manifest.json, ready to build into a library.
    Pack(PackArgs),
    /// Compile an ONNX model into a C library that runs it whole (DIR/NAME.c, NAME.h,
    /// NAME.weights, manifest.json, libNAME.so), with every task's best kernel (tuned, or
    /// zero-shot from tuned neighbours), checked against tract on random inputs.
    Build(BuildArgs),
    /// Run a model `build` compiled: outputs' shapes and checksums (.npy files with --out-dir)
    /// and its latency, median and p90.
    Run(RunArgs),
    /// Export or import records as JSON lines.
    #[command(subcommand)]
    Records(RecordsCommand),
    /// List the server's measurement workers: id, target, status, last heartbeat,
    /// measurements done, errors (and why a quarantined one is).
    Workers(WorkersArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Runs one command.
pub async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Ops => ops::run(),
        Command::Tune(args) => tune::run(args).await,
        Command::Tasks(args) => tasks::run(args),
        Command::Server(args) => server::run(args).await,
        Command::Submit(args) => submit::run(args).await,
        Command::Jobs(args) => jobs::run(args).await,
        Command::Workers(args) => workers::run(args).await,
        Command::Watch(args) => watch::run(args).await,
        Command::Report(args) => report::run(args).await,
        Command::Cancel(args) => cancel::run(args).await,
        Command::Query(args) => query::run(args).await,
        Command::Pack(args) => pack::run(args).await,
        Command::Records(cmd) => records::run(cmd).await,
        Command::Build(args) => build::run(args).await,
        Command::Run(args) => run::run(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usage::one_line_clap_error;
    use clap::CommandFactory;
    use clap::error::ErrorKind;
    use std::path::PathBuf;
    use tunehub_engine::measure::MeasureOptions;
    use tunehub_engine::search::DEFAULT_BATCH;

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
        let o = t.measure.options(&MeasureOptions::default());
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
        let o = t.measure.options(&MeasureOptions::default());
        assert_eq!(
            (o.number, o.repeat, o.min_repeat_ms, o.run_timeout_s),
            (5, 2, 0, 2.5)
        );
    }

    #[test]
    fn measure_flags_go_over_the_defaults_of_what_is_tuned() {
        // A model's tasks: cold unless told; an operator: warm unless told.
        let cold = MeasureOptions::cold();
        let o = tune(&["m.onnx"]).measure.options(&cold);
        assert!(o.flush_cache);
        assert_eq!(
            (o.number, o.repeat, o.min_repeat_ms),
            (cold.number, cold.repeat, cold.min_repeat_ms)
        );
        let o = tune(&["m.onnx", "--warm-cache", "--number", "4"])
            .measure
            .options(&cold);
        assert!(!o.flush_cache);
        assert_eq!((o.number, o.repeat), (4, MeasureOptions::default().repeat));
        let warm = MeasureOptions::default();
        assert!(!tune(&["matmul(8,8,8)"]).measure.options(&warm).flush_cache);
        let o = tune(&["matmul(8,8,8)", "--flush-cache"])
            .measure
            .options(&warm);
        assert!(o.flush_cache);
        assert_eq!(o.number, warm.number);
        assert!(parse(&["tune", "m.onnx", "--flush-cache", "--warm-cache"]).is_err());
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

    /// A flag's default is said once: by clap, from the flag's default value, or in its help
    /// text when the value is decided elsewhere (the service, the clock); never both, and never
    /// an empty `[default: ]`.
    #[test]
    fn each_default_is_said_once() {
        fn walk(cmd: &clap::Command, path: &str) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
                let defaults = arg.get_default_values();
                let shown = !defaults.is_empty() && !arg.is_hide_default_value_set();
                assert!(
                    !(shown && help.contains("[default:")),
                    "{path} --{id}: a default in its help and another from clap"
                );
                assert!(
                    defaults.iter().all(|d| !d.is_empty()),
                    "{path} --{id}: an empty default"
                );
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()));
            }
        }
        walk(&Cli::command(), "tunehub");
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
}
