//! Every gRPC call counted by service, method and status code, and the Query service's calls
//! timed: a hook of the status-hook layer (`crate::status_hook`), which finds the status in the
//! headers or the trailers.

use super::{GrpcLabels, MethodLabel, Metrics};
use crate::status_hook::CallInfo;
use std::sync::Arc;
use tonic::Code;

/// Services whose calls get their own label; anything else is `other` (label values come from
/// request paths, which a client chooses).
const SERVICES: [&str; 7] = [
    "tunehub.v1.Jobs",
    "tunehub.v1.Query",
    "tunehub.v1.Records",
    "tunehub.v1.Workers",
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
];

/// The gRPC spec's name of a status code.
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

fn status_of(headers: &http::HeaderMap) -> Option<Code> {
    let v = headers
        .get("grpc-status")?
        .to_str()
        .ok()?
        .parse::<i32>()
        .ok()?;
    Some(Code::from_i32(v))
}

/// What one call is counted under.
#[derive(Clone)]
struct Call {
    service: &'static str,
    method: String,
}

impl Call {
    fn of(path: &str) -> Call {
        let mut parts = path.trim_start_matches('/').splitn(2, '/');
        let (service, method) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        match SERVICES.iter().find(|s| **s == service) {
            Some(s) => Call {
                service: s,
                method: method.to_string(),
            },
            None => Call {
                service: "other",
                method: "other".to_string(),
            },
        }
    }

    /// Counts the call once its status is known. A method name is kept only for calls that
    /// reached a real method (an unknown one, or any refused for its token, is `unknown`).
    fn finish(&self, metrics: &Metrics, code: Code, seconds: f64) {
        let reached = !matches!(code, Code::Unimplemented | Code::Unauthenticated);
        let method = if reached && !self.method.is_empty() && self.method.len() <= 64 {
            self.method.clone()
        } else {
            "unknown".to_string()
        };
        metrics
            .grpc_requests
            .get_or_create(&GrpcLabels {
                service: self.service.to_string(),
                method: method.clone(),
                code: code_name(code).to_string(),
            })
            .inc();
        if self.service == "tunehub.v1.Query" && reached {
            metrics
                .query_duration
                .get_or_create(&MethodLabel { method })
                .observe(seconds);
        }
    }
}

/// The hook (`status_hook`) that counts every call by service, method and the code its caller
/// got, and times the Query service's calls (the handler's time: the answer is ready when the
/// response's head is).
pub fn hook(metrics: Arc<Metrics>) -> impl Fn(&CallInfo, &mut http::HeaderMap) + Send + Sync {
    move |call, headers| {
        if let Some(code) = status_of(headers) {
            Call::of(&call.path).finish(&metrics, code, call.answered.as_secs_f64());
        }
    }
}
