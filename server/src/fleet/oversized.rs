//! Logs a worker's report gRPC's decoder refused for its size, before any handler saw it (a
//! hook of `status_hook`). Reports up to `REPORT_DECODE_FACTOR` times the message limit reach
//! `service::report`, which refuses them itself (logged, counted, the piece moved on); past
//! that only this line tells the operator why a worker's reports vanish. The worker's lease
//! then lapses when it pulls or registers again (`lapses`).

use crate::status_hook::CallInfo;
use tonic::Code;

const REPORT: &str = "/tunehub.v1.Workers/Report";

pub(crate) fn log_refused_report(call: &CallInfo, headers: &mut http::HeaderMap) {
    if call.path != REPORT {
        return;
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let code = header("grpc-status")
        .and_then(|c| c.parse::<i32>().ok())
        .map(Code::from_i32);
    if code == Some(Code::OutOfRange) {
        // tonic's message names the size: "found N bytes, the limit is: M bytes".
        let why = header("grpc-message").unwrap_or("");
        let peer = call
            .peer
            .map_or_else(|| "unknown".to_string(), |a| a.to_string());
        tracing::warn!(%peer, reason = %why,
            "report refused by gRPC's decoder for its size: its lease lapses when the worker pulls again");
    }
}
