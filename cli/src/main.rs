//! `tunehub`: parses the arguments, sets up logging and the async runtime, runs one command,
//! and maps its outcome to an exit status: 0 done, 1 failed, 2 bad input (one line on stderr,
//! nothing stored).

use clap::Parser;
use clap::error::ErrorKind;
use std::io::IsTerminal;
use std::process::ExitCode;
use tracing_subscriber::EnvFilter;
use tunehub::Cli;
use tunehub::commands::{self, LogFormat};
use tunehub::usage::{USAGE_EXIT, UsageError, one_line, one_line_clap_error};

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
    match runtime.block_on(commands::run(cli.command)) {
        Ok(code) => code,
        Err(e) if e.downcast_ref::<UsageError>().is_some() => {
            eprintln!("error: {}", one_line(&format!("{e:#}")));
            ExitCode::from(USAGE_EXIT)
        }
        Err(e) => {
            eprintln!("error: {}", one_line(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

/// Help and version go to stdout with status 0; `tunehub` alone shows the help (status 2);
/// every other argument error is one line on stderr with status 2.
fn clap_exit(e: &clap::Error) -> ExitCode {
    if !e.use_stderr() || e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let _ = e.print();
        return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(USAGE_EXIT));
    }
    eprintln!("{}", one_line_clap_error(e));
    ExitCode::from(USAGE_EXIT)
}

/// Colours for a person at a terminal only: a log file or a collector's pipe gets plain text
/// (tracing-subscriber colours whatever the output is). NO_COLOR, when set and not empty, turns
/// them off at a terminal too, as tracing-subscriber's own default does.
fn colour() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
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
        .with_writer(std::io::stderr)
        .with_ansi(colour());
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
