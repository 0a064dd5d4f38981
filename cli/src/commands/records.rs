//! `tunehub records`: export, import (tunehub's JSON lines or Ansor's logs) and distill.

use crate::session::{ServiceArgs, Session};
use crate::usage::{UsageError, emit, status_error};
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use tokio_stream::StreamExt;
use tunehub_engine::target::Target;
use tunehub_proto::v1 as pb;
use tunehub_server::interchange::ansor;

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

/// A record file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RecordFormat {
    /// tunehub's JSON lines (workload, target and record lines).
    Tunehub,
    /// TVM auto_scheduler (Ansor, TVM 0.19) log lines.
    Ansor,
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
    pub service: ServiceArgs,
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
    pub service: ServiceArgs,
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

pub async fn run(cmd: RecordsCommand) -> Result<ExitCode> {
    match cmd {
        RecordsCommand::Export(a) => export(a).await,
        RecordsCommand::Import(a) => import(a).await,
        RecordsCommand::Distill(a) => distill(a),
    }
}

async fn export(a: ExportArgs) -> Result<ExitCode> {
    let tvm_target = match a.format {
        RecordFormat::Ansor => {
            let t = a.tvm_target.clone().unwrap_or_default();
            ansor::check_tvm_target(&t).map_err(UsageError)?;
            Some(t)
        }
        RecordFormat::Tunehub => None,
    };
    let mut session = Session::open(&a.service).await?;
    let written = write_export(&mut session, &a, tvm_target.as_deref()).await;
    session.close().await?;
    written
}

/// Streams the export into the output (Ansor lines once every line is in).
async fn write_export(
    session: &mut Session,
    a: &ExportArgs,
    tvm_target: Option<&str>,
) -> Result<ExitCode> {
    let mut stream = session
        .clients
        .records
        .export(pb::ExportRequest {
            workload_key: a.workload.clone().unwrap_or_default(),
            target_key: a.target.clone().unwrap_or_default(),
        })
        .await
        .map_err(status_error)?
        .into_inner();
    let mut out: Box<dyn Write> = match &a.out {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let mut n = 0usize;
    let mut held = vec![];
    while let Some(msg) = stream.next().await {
        for line in msg.map_err(status_error)?.lines {
            if tvm_target.is_some() {
                // Ansor lines are made once every workload and target line has been read.
                held.push(line);
            } else {
                writeln!(out, "{line}")?;
                n += 1;
            }
        }
    }
    if let Some(tvm_target) = tvm_target {
        let exported = ansor::export(&held, tvm_target).map_err(UsageError)?;
        for line in &exported.lines {
            writeln!(out, "{line}")?;
        }
        n = exported.lines.len();
        eprintln!(
            "{n} of {} records written as Ansor lines for {tvm_target:?}",
            exported.records
        );
        for (reason, count) in &exported.skipped {
            eprintln!("  left out {count}: {reason}");
        }
    }
    out.flush()?;
    tracing::info!(lines = n, "exported");
    Ok(ExitCode::SUCCESS)
}

async fn import(a: ImportArgs) -> Result<ExitCode> {
    let reader: Box<dyn BufRead> = if a.file.as_os_str() == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(&a.file)
                .with_context(|| format!("opening {}", a.file.display()))?,
        ))
    };
    let mut lines = reader
        .lines()
        .collect::<std::io::Result<Vec<String>>>()
        .context("reading the records")?;
    if a.format == RecordFormat::Ansor {
        let numbered: Vec<(usize, String)> = lines
            .into_iter()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| (i + 1, l))
            .collect();
        let target = match a.target {
            Some(k) => ansor::ImportTarget::Known(k),
            None => ansor::ImportTarget::Described(Box::new(Target::detect())),
        };
        lines = ansor::import(&numbered, &target).map_err(UsageError)?;
    } else if a.target.is_some() {
        return Err(UsageError("--target is for --format ansor".into()).into());
    }
    let chunks: Vec<pb::RecordLines> = lines
        .chunks(256)
        .map(|c| pb::RecordLines { lines: c.to_vec() })
        .collect();
    let mut session = Session::open_or_create(&a.service).await?;
    let r = session
        .clients
        .records
        .import(tokio_stream::iter(chunks))
        .await
        .map_err(status_error);
    session.close().await?;
    let r = r?.into_inner();
    emit(&format!(
        "imported {} new records ({} already known), {} workloads, {} targets\n",
        r.records_new, r.records_known, r.workloads, r.targets
    ))?;
    Ok(ExitCode::SUCCESS)
}

fn distill(a: DistillArgs) -> Result<ExitCode> {
    let reader: Box<dyn BufRead> = if a.file.as_os_str() == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(&a.file)
                .map_err(|e| UsageError(format!("{}: {e}", a.file.display())))?,
        ))
    };
    let (lines, d) = tunehub_server::interchange::distill::distill(reader, a.top as usize)
        .map_err(|e| UsageError(format!("{}: {e}", a.file.display())))?;
    let mut text = lines.join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    match &a.out {
        Some(p) => std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))?,
        None => emit(&text)?,
    }
    eprintln!(
        "kept {} of {} records ({} workload-target pairs, the fastest {} each)",
        d.records_kept, d.records_read, d.pairs, a.top
    );
    Ok(ExitCode::SUCCESS)
}
