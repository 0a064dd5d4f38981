//! A request message that does not decode is the caller's error, INVALID_ARGUMENT, not
//! tonic's INTERNAL (the gRPC spec's choice for a parse error, which says "the server is
//! broken" to clients, retry policies and alerts on INTERNAL). tonic's codec reports prost's
//! decode error as INTERNAL whose message starts with prost's fixed prefix; this hook of
//! `status_hook` rewrites that status.

use crate::status_hook::CallInfo;
use tonic::{Code, Status};

/// The start of every message prost's `DecodeError` displays.
const DECODE_ERROR: &str = "failed to decode Protobuf message";

/// Rewrites a decode failure's status in `headers` (headers or trailers); others untouched.
pub(crate) fn rewrite(_call: &CallInfo, headers: &mut http::HeaderMap) {
    let Some(status) = Status::from_header_map(headers) else {
        return;
    };
    if status.code() != Code::Internal || !status.message().starts_with(DECODE_ERROR) {
        return;
    }
    let caller = Status::invalid_argument(format!(
        "the request message does not decode: {}",
        status.message()
    ));
    if caller.add_header(headers).is_err() {
        tracing::warn!("could not rewrite a decode error's status");
    }
}
