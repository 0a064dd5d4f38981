//! A tower layer in front of every gRPC service: counts calls by service, method and status
//! code, and times the Query service's calls.
//!
//! A call's status is in the response headers when it failed before any message (tonic's
//! "trailers-only" answer) and in the trailers otherwise, so the body is watched for them.

use super::{GrpcLabels, MethodLabel, Metrics};
use http_body_util::BodyExt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
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

#[derive(Clone)]
pub struct GrpcMetricsLayer(pub Arc<Metrics>);

impl<S> tower_layer::Layer<S> for GrpcMetricsLayer {
    type Service = GrpcMetrics<S>;

    fn layer(&self, inner: S) -> GrpcMetrics<S> {
        GrpcMetrics {
            inner,
            metrics: Arc::clone(&self.0),
        }
    }
}

#[derive(Clone)]
pub struct GrpcMetrics<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

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

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B> tower_service::Service<http::Request<B>> for GrpcMetrics<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let call = Call::of(req.uri().path());
        let started = Instant::now();
        let metrics = Arc::clone(&self.metrics);
        let fut = self.inner.call(req);
        Box::pin(async move {
            let resp = fut.await?;
            // For unary calls (all of Query's), the handler's time: the answer is ready.
            let took = started.elapsed().as_secs_f64();
            if let Some(code) = status_of(resp.headers()) {
                // Trailers-only: the call failed before any message.
                call.finish(&metrics, code, took);
                return Ok(resp);
            }
            let (parts, body) = resp.into_parts();
            let mut call = Some(call);
            let body = body.map_frame(move |frame| {
                if let Some(code) = frame.trailers_ref().and_then(status_of)
                    && let Some(c) = call.take()
                {
                    c.finish(&metrics, code, took);
                }
                frame
            });
            Ok(http::Response::from_parts(
                parts,
                tonic::body::Body::new(body),
            ))
        })
    }
}
