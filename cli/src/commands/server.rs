//! `tunehub server`: runs the service (gRPC API, job runner, fleet, database) until a signal.

use crate::usage::{UsageError, emit};
use anyhow::Result;
use std::process::ExitCode;
use tunehub_server::config::{ServerArgs, ServerConfig};
use tunehub_server::server;

pub async fn run(args: ServerArgs) -> Result<ExitCode> {
    let cfg = ServerConfig::resolve(&args).map_err(|e| UsageError(format!("{e:#}")))?;
    let running = server::start(&cfg).await?;
    // The first line on stdout, for scripts and tests that asked for port 0.
    emit(&format!("listening on {}\n", running.addr))?;
    if let Some(m) = running.metrics_addr {
        emit(&format!("metrics on {m}\n"))?;
    }
    if let Some(h) = running.http_addr {
        emit(&format!("dashboard on http://{h}/\n"))?;
    }
    running.run_until_signal().await?;
    Ok(ExitCode::SUCCESS)
}
