//! A tower layer that hands each call's gRPC status to a hook, where the status is: in the
//! response headers when the call failed before any message (tonic's "trailers-only" answer,
//! as a request the decoder refused), else in the trailers. The hook may read the status (to
//! log it) or rewrite it. `undecodable`, `fleet::oversized` and `metrics::grpc` are such hooks.

use http_body_util::BodyExt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};

/// What a hook knows of the call.
pub struct CallInfo {
    /// The request's path: `/package.Service/Method`.
    pub path: String,
    /// The client's address, when the transport knows it.
    pub peer: Option<SocketAddr>,
    /// How long the service took to answer: until the response's head (a unary call's whole
    /// handler; a stream's start).
    pub answered: Duration,
}

/// Called with the headers or trailers that hold the call's status (`grpc-status`).
pub type Hook = Arc<dyn Fn(&CallInfo, &mut http::HeaderMap) + Send + Sync>;

#[derive(Clone)]
pub struct StatusHookLayer(pub Hook);

impl<S> tower_layer::Layer<S> for StatusHookLayer {
    type Service = StatusHook<S>;

    fn layer(&self, inner: S) -> StatusHook<S> {
        StatusHook {
            inner,
            hook: Arc::clone(&self.0),
        }
    }
}

#[derive(Clone)]
pub struct StatusHook<S> {
    inner: S,
    hook: Hook,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B> tower_service::Service<http::Request<B>> for StatusHook<S>
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
        let started = Instant::now();
        let ext = req.extensions();
        let mut info = CallInfo {
            path: req.uri().path().to_string(),
            peer: ext
                .get::<TcpConnectInfo>()
                .and_then(TcpConnectInfo::remote_addr)
                .or_else(|| {
                    ext.get::<TlsConnectInfo<TcpConnectInfo>>()
                        .and_then(|t| t.get_ref().remote_addr())
                }),
            answered: Duration::ZERO,
        };
        let hook = Arc::clone(&self.hook);
        let fut = self.inner.call(req);
        Box::pin(async move {
            let mut resp = fut.await?;
            info.answered = started.elapsed();
            if resp.headers().contains_key("grpc-status") {
                hook(&info, resp.headers_mut());
                return Ok(resp);
            }
            let (parts, body) = resp.into_parts();
            let body = body.map_frame(move |frame| match frame.into_trailers() {
                Ok(mut trailers) => {
                    hook(&info, &mut trailers);
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
