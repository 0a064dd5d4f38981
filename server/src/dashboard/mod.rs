//! The web dashboard (`tunehub server --http ADDR`): one page that shows the jobs with their
//! live tuning curves, a model job's tasks and their shares of the latency, the worker fleet,
//! the records with each best kernel's C and contract, and the server's health.
//!
//! It is a window onto the gRPC API, not a second API: each JSON endpoint calls one method of
//! the services in-process, as the caller (the token of the browser's request, checked by the
//! same `auth::Auth`, the role by the same `auth::permits` table as gRPC), and answers the
//! method's own message as JSON. What a token may not call over gRPC it may not see or do
//! here; a `viewer` token looks only.
//!
//! Layout: `assets` (the page: HTML, script, style, compiled into the binary: no CDN, no
//! front-end build chain), `caller` (a request's token to a principal, and a gRPC status to an
//! HTTP answer), `routes` (the endpoints). On a listener of its own, like the metrics
//! endpoint, so that it can stay on a private address while gRPC is public.

mod assets;
mod caller;
mod routes;

pub use routes::Dashboard;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Serves the dashboard on `listener` until `stop` turns true.
pub fn spawn(
    listener: TcpListener,
    dashboard: Dashboard,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let app = routes::router(dashboard);
    tokio::spawn(async move {
        let stopped = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(stopped)
            .await
        {
            tracing::error!("dashboard: {e}");
        }
    })
}
