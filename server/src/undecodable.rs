//! A tower layer that answers a request message that does not decode as the caller's error,
//! INVALID_ARGUMENT, instead of tonic's INTERNAL (the gRPC spec's choice for a parse error,
//! which says "the server is broken" to clients, retry policies and alerts on INTERNAL).
//!
//! tonic's codec reports prost's decode error as INTERNAL whose message starts with prost's
//! fixed prefix; that status is rewritten, in the response headers (a unary call fails
//! before any message: "trailers-only") or in the trailers (a streamed request).

use http_body_util::BodyExt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tonic::{Code, Status};

/// The start of every message prost's `DecodeError` displays.
const DECODE_ERROR: &str = "failed to decode Protobuf message";

#[derive(Clone, Copy, Default)]
pub struct UndecodableLayer;

impl<S> tower_layer::Layer<S> for UndecodableLayer {
    type Service = Undecodable<S>;

    fn layer(&self, inner: S) -> Undecodable<S> {
        Undecodable { inner }
    }
}

#[derive(Clone)]
pub struct Undecodable<S> {
    inner: S,
}

/// Rewrites a decode failure's status in `headers` (headers or trailers); others untouched.
fn rewrite(headers: &mut http::HeaderMap) {
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

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B> tower_service::Service<http::Request<B>> for Undecodable<S>
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
        let fut = self.inner.call(req);
        Box::pin(async move {
            let mut resp = fut.await?;
            if resp.headers().contains_key("grpc-status") {
                rewrite(resp.headers_mut());
                return Ok(resp);
            }
            let (parts, body) = resp.into_parts();
            let body = body.map_frame(|frame| match frame.into_trailers() {
                Ok(mut trailers) => {
                    rewrite(&mut trailers);
                    http_body::Frame::trailers(trailers)
                }
                Err(frame) => frame,
            });
            Ok(http::Response::from_parts(
                parts,
                tonic::body::Body::new(body),
            ))
        })
    }
}
