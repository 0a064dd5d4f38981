//! A tower layer that logs a worker's report gRPC's decoder refused for its size, before any
//! handler saw it. Reports up to `REPORT_DECODE_FACTOR` times the message limit reach
//! `service::report`, which refuses them itself (logged, counted, the piece moved on); past
//! that only this line tells the operator why a worker's reports vanish. The worker's lease
//! then lapses when it pulls or registers again (`lapses`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tonic::Code;
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};

const REPORT: &str = "/tunehub.v1.Workers/Report";

#[derive(Clone, Default)]
pub struct OversizedReportLog;

impl<S> tower_layer::Layer<S> for OversizedReportLog {
    type Service = OversizedReports<S>;

    fn layer(&self, inner: S) -> OversizedReports<S> {
        OversizedReports { inner }
    }
}

#[derive(Clone)]
pub struct OversizedReports<S> {
    inner: S,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B> tower_service::Service<http::Request<B>> for OversizedReports<S>
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
        let watched = req.uri().path() == REPORT;
        let ext = req.extensions();
        let peer = ext
            .get::<TcpConnectInfo>()
            .and_then(TcpConnectInfo::remote_addr)
            .or_else(|| {
                ext.get::<TlsConnectInfo<TcpConnectInfo>>()
                    .and_then(|t| t.get_ref().remote_addr())
            })
            .map_or_else(|| "unknown".to_string(), |a| a.to_string());
        let fut = self.inner.call(req);
        Box::pin(async move {
            let resp = fut.await?;
            if watched {
                // The decoder's refusal is a trailers-only answer: its status is in the headers.
                let header = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok());
                let code = header("grpc-status")
                    .and_then(|c| c.parse::<i32>().ok())
                    .map(Code::from_i32);
                if code == Some(Code::OutOfRange) {
                    // tonic's message names the size: "found N bytes, the limit is: M bytes".
                    let why = header("grpc-message").unwrap_or("");
                    tracing::warn!(%peer, reason = %why,
                        "report refused by gRPC's decoder for its size: its lease lapses when the worker pulls again");
                }
            }
            Ok(resp)
        })
    }
}
