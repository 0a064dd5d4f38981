//! The tower layer in front of every gRPC service: the token names the caller, the caller's role
//! must permit the method (`role::permits`), and the handler finds the `Principal` in the
//! request's extensions. The health check passes untouched (probes carry no token).
//!
//! A layer rather than tonic's interceptor because the role depends on the method, and an
//! interceptor does not see the request's path.

use super::{Auth, Principal, permits};
use crate::metrics::{Metrics, TokenLabels};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::Status;
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
use tracing::Instrument;

const HEALTH: &str = "/grpc.health.v1.Health/";

/// The calls of a measurement device: under mutual TLS they need a client certificate.
const WORKER_CALLS: &[&str] = &[
    "/tunehub.v1.Workers/Register",
    "/tunehub.v1.Workers/Heartbeat",
    "/tunehub.v1.Workers/Pull",
    "/tunehub.v1.Workers/Report",
];

#[derive(Clone)]
pub struct AuthLayer {
    auth: Auth,
    metrics: Option<Arc<Metrics>>,
    /// Mutual TLS for workers: a worker call must come over a connection whose client
    /// certificate the TLS handshake verified against the configured CA.
    worker_certificates: bool,
}

impl AuthLayer {
    pub fn new(auth: Auth, metrics: Option<Arc<Metrics>>) -> Self {
        AuthLayer {
            auth,
            metrics,
            worker_certificates: false,
        }
    }

    /// Requires a verified client certificate for the worker calls.
    pub fn with_worker_certificates(mut self, on: bool) -> Self {
        self.worker_certificates = on;
        self
    }
}

impl<S> tower_layer::Layer<S> for AuthLayer {
    type Service = Authorized<S>;

    fn layer(&self, inner: S) -> Authorized<S> {
        Authorized {
            inner,
            layer: self.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Authorized<S> {
    inner: S,
    layer: AuthLayer,
}

impl AuthLayer {
    fn count(&self, p: &Principal, allowed: bool) {
        if let Some(m) = &self.metrics {
            m.calls_by_token
                .get_or_create(&TokenLabels {
                    token: p.name.clone(),
                    role: p.role.to_string(),
                    outcome: if allowed { "allowed" } else { "denied" }.into(),
                })
                .inc();
        }
    }

    /// The caller, if its token is valid and its role permits `path` (and, for a worker call
    /// under mutual TLS, the connection carries a verified client certificate).
    fn admit(
        &self,
        path: &str,
        header: Option<&[u8]>,
        client_certificate: bool,
    ) -> Result<Principal, Status> {
        if self.worker_certificates && !client_certificate && WORKER_CALLS.contains(&path) {
            return Err(Status::unauthenticated(format!(
                "{path} needs a client certificate: this server requires mutual TLS of workers \
                 (give the worker --tls-cert and --tls-key signed by the server's worker CA)"
            )));
        }
        let p = self.auth.principal(header)?;
        let allowed = permits(p.role, path);
        self.count(&p, allowed);
        if allowed {
            Ok(p)
        } else {
            tracing::info!(token = %p.name, role = %p.role, path, "call outside the token's role");
            Err(p.refused(path))
        }
    }
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B> tower_service::Service<http::Request<B>> for Authorized<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        let path = req.uri().path().to_string();
        if path.starts_with(HEALTH) {
            return Box::pin(self.inner.call(req));
        }
        let header = req.headers().get("authorization").map(|v| v.as_bytes());
        // Present only when the handshake verified it (an unverifiable one fails the handshake).
        let certificate = req
            .extensions()
            .get::<TlsConnectInfo<TcpConnectInfo>>()
            .and_then(TlsConnectInfo::peer_certs)
            .is_some_and(|c| !c.is_empty());
        match self.layer.admit(&path, header, certificate) {
            Err(status) => Box::pin(std::future::ready(Ok(status.into_http()))),
            Ok(p) => {
                // The token's name, never its secret, in every log line of the call.
                let span = tracing::info_span!("call", token = %p.name);
                req.extensions_mut().insert(p);
                Box::pin(self.inner.call(req).instrument(span))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{ApiToken, Role};
    use tonic::Code;

    #[test]
    fn admission_checks_token_then_role() {
        let layer = AuthLayer::new(
            Auth::new(vec![
                ApiToken::admin(0, "root"),
                ApiToken {
                    name: "board".into(),
                    role: Role::Worker,
                    secret: "w".into(),
                },
            ]),
            None,
        );
        let submit = "/tunehub.v1.Jobs/Submit";
        assert_eq!(
            layer
                .admit(submit, Some(b"Bearer root"), false)
                .unwrap()
                .name,
            "token-1"
        );
        let e = layer.admit(submit, Some(b"Bearer w"), false).unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied);
        assert!(
            e.message().contains("'board'") && !e.message().contains("Bearer w"),
            "{}",
            e.message()
        );
        let e = layer
            .admit(submit, Some(b"Bearer nope"), false)
            .unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated);
        let pull = "/tunehub.v1.Workers/Pull";
        assert_eq!(
            layer.admit(pull, Some(b"Bearer w"), false).unwrap().role,
            Role::Worker
        );
    }
}
