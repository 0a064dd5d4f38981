//! `tunehub`: the command line. Parses arguments, sets up logging and the tokio runtime, runs one
//! command, and maps its outcome to an exit status: 0 done, 1 failed, 2 bad input (one line on
//! stderr, nothing stored).

use clap::Parser;
use clap::error::ErrorKind;
use std::io::Write;
use std::process::ExitCode;
use tracing_subscriber::EnvFilter;
use tunehub_server::cli::{self, Cli, Command, LogFormat, USAGE_EXIT, UsageError};
use tunehub_server::oplist;

mod commands;
mod job_group;
mod model;
mod pack;
mod tune;
mod tune_model;
mod tune_range;

/// The search allocates many small index expressions from several threads; see the workspace
/// manifest.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_exit(&e),
    };
    init_tracing(cli.verbose, cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) if e.downcast_ref::<UsageError>().is_some() => {
            eprintln!("error: {}", cli::one_line(&format!("{e:#}")));
            ExitCode::from(USAGE_EXIT)
        }
        Err(e) => {
            eprintln!("error: {}", cli::one_line(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Ops => {
            emit(&oplist::render())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Tune(args) => tune::tune(args).await,
        Command::Tasks(args) => model::tasks(args).await,
        Command::Best(args) => tune::best(args).await,
        Command::Server(args) => commands::serve(args).await,
        Command::Submit(args) => commands::submit(args).await,
        Command::Jobs(args) => commands::jobs(args).await,
        Command::Workers(args) => commands::workers(args).await,
        Command::Watch(args) => commands::watch(args).await,
        Command::Cancel(args) => commands::cancel(args).await,
        Command::Query(args) => commands::query(args).await,
        Command::Pack(args) => pack::pack(args).await,
        Command::Records(cmd) => commands::records(cmd).await,
    }
}

/// Help and version go to stdout with status 0; `tunehub` alone shows the help (status 2);
/// every other argument error is one line on stderr with status 2.
fn clap_exit(e: &clap::Error) -> ExitCode {
    if !e.use_stderr() || e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let _ = e.print();
        return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(USAGE_EXIT));
    }
    eprintln!("{}", cli::one_line_clap_error(e));
    ExitCode::from(USAGE_EXIT)
}

/// Logs go to stderr (stdout carries results); `-v` raises tunehub's own level, `RUST_LOG`
/// replaces the whole filter. JSON lines carry the fields of the spans they were logged in (the
/// job's and task's ids) in `spans`.
fn init_tracing(verbose: u8, format: LogFormat) {
    let level = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new(format!(
            "warn,tunehub={level},tunehub_server={level},tunehub_engine={level}"
        ))
    });
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => fmt.init(),
        LogFormat::Json => fmt
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .init(),
    }
}

/// Writes results to stdout; a closed pipe (`tunehub ops | head`) ends the output quietly.
pub(crate) fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}
