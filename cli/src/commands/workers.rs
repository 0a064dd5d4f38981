//! `tunehub workers`: the fleet as the server sees it.

use crate::client::{ClientArgs, connect_with};
use crate::escaped::escaped;
use crate::usage::{emit, status_error};
use anyhow::Result;
use clap::Args;
use serde_json::json;
use std::fmt::Write as _;
use std::process::ExitCode;
use tunehub_proto::v1 as pb;

#[derive(Debug, Clone, Args)]
pub struct WorkersArgs {
    /// One JSON object per worker.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub client: ClientArgs,
}

/// `tunehub workers`: the fleet as the server sees it.
pub async fn run(args: WorkersArgs) -> Result<ExitCode> {
    let mut c = connect_with(&args.client).await?;
    let list = c
        .workers
        .list(pb::ListWorkersRequest {})
        .await
        .map_err(status_error)?
        .into_inner();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let mut out = String::new();
    if args.json {
        for w in &list.workers {
            let j = json!({
                "id": w.id, "device": w.device_id, "target": w.target_key, "status": w.status,
                "last_heartbeat_ms": w.last_heartbeat_ms, "measured": w.measured,
                "errors": w.errors, "quarantine_reason": w.quarantine_reason,
            });
            let _ = writeln!(out, "{j}");
        }
    } else {
        let _ = writeln!(
            out,
            "{:<14} {:<34} {:<12} {:>9} {:>9} {:>7}  DEVICE",
            "WORKER", "TARGET", "STATUS", "HEARTBEAT", "MEASURED", "ERRORS"
        );
        for w in &list.workers {
            let ago = format!(
                "{:.1}s ago",
                (now - w.last_heartbeat_ms).max(0) as f64 / 1e3
            );
            // Every string the server sends is shown escaped: the device id and a quarantine
            // reason (a report's error message) are a worker's own words.
            let _ = writeln!(
                out,
                "{:<14} {:<34} {:<12} {:>9} {:>9} {:>7}  {}",
                escaped(&w.id),
                escaped(&w.target_key),
                escaped(&w.status),
                ago,
                w.measured,
                w.errors,
                escaped(&w.device_id)
            );
            if !w.quarantine_reason.is_empty() {
                let _ = writeln!(out, "  quarantined: {}", escaped(&w.quarantine_reason));
            }
        }
        for (key, n) in &list.queued {
            let _ = writeln!(out, "{n} piece(s) waiting for a worker of {}", escaped(key));
        }
    }
    emit(&out)?;
    Ok(ExitCode::SUCCESS)
}
