//! The metrics endpoint: `GET /metrics` over HTTP/1.1 on its own listener (hyper, already in
//! the tree through tonic), so that it can stay on a private port while gRPC is public.

use super::{Metrics, StateSource};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// OpenMetrics text, which Prometheus reads (and asks for) natively.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What a scrape reads.
#[derive(Clone)]
pub struct Scrape {
    pub metrics: Arc<Metrics>,
    pub source: Arc<dyn StateSource>,
}

fn reply(status: u16, content_type: &str, body: String) -> http::Response<Full<Bytes>> {
    http::Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("a valid response")
}

async fn respond<B>(scrape: &Scrape, req: &http::Request<B>) -> http::Response<Full<Bytes>> {
    if req.uri().path() != "/metrics" {
        return reply(
            404,
            "text/plain",
            "not found: metrics are at /metrics\n".into(),
        );
    }
    if req.method() != http::Method::GET && req.method() != http::Method::HEAD {
        return reply(405, "text/plain", "GET /metrics\n".into());
    }
    match scrape.metrics.render(scrape.source.as_ref()).await {
        Ok(text) => reply(200, CONTENT_TYPE, text),
        Err(e) => {
            tracing::warn!("metrics scrape: {e}");
            reply(500, "text/plain", format!("reading the database: {e}\n"))
        }
    }
}

/// Serves scrapes until `stop` turns true.
pub fn spawn(
    listener: TcpListener,
    scrape: Scrape,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                r = listener.accept() => r,
                _ = stop.wait_for(|s| *s) => return,
            };
            let stream = match accepted {
                Ok((s, _)) => s,
                Err(e) => {
                    // Out of file descriptors, say: wait rather than spin.
                    tracing::warn!("metrics endpoint: accept: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            let scrape = scrape.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let scrape = scrape.clone();
                    async move { Ok::<_, Infallible>(respond(&scrape, &req).await) }
                });
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    tracing::debug!("metrics endpoint: connection: {e}");
                }
            });
        }
    })
}
