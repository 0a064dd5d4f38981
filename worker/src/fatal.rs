//! What no retry mends: the server refused the worker's token, or the server's certificate is
//! signed by a CA the worker does not trust. The worker stops with one line on stderr
//! ("error: ...") and a failed status; a network fault or a restarting server is retried
//! instead, with backoff.
//!
//! Why stop rather than retry with the cause logged: a fleet's workers run under a supervisor
//! (systemd's `Restart=on-failure`, a Kubernetes DaemonSet). A worker that stops shows as a
//! failing unit or a crash-looping pod, the one line naming the fix, and the supervisor starts
//! it again after its own delay, reading the token and the CA file anew once the operator has
//! fixed them. A worker retrying inside would look healthy while measuring nothing, its log
//! filling with the same warning.

use tonic::{Code, Status};

/// Why the worker stops.
#[derive(Debug, PartialEq)]
pub enum Fatal {
    /// The server refused the token (UNAUTHENTICATED).
    Refused { server: String, message: String },
    /// The server's certificate is signed by a CA the worker does not trust.
    UnknownCa { server: String },
}

impl Fatal {
    /// The exit status: 1 for a refused token (as documented since workers had tokens), 2 for
    /// a CA the worker does not trust (its own configuration: --ca-cert).
    pub fn exit_status(&self) -> u8 {
        match self {
            Fatal::Refused { .. } => 1,
            Fatal::UnknownCa { .. } => 2,
        }
    }
}

impl std::fmt::Display for Fatal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fatal::Refused { server, message } => write!(
                f,
                "the server {server} refused the token (UNAUTHENTICATED: {}); give the right one \
                 with --token or TUNEHUB_TOKEN",
                message.trim()
            ),
            Fatal::UnknownCa { server } => write!(
                f,
                "the certificate of the server {server} is signed by a CA this worker does not \
                 trust: name that CA's certificate with --ca-cert FILE (or TUNEHUB_CA_CERT)"
            ),
        }
    }
}

impl std::error::Error for Fatal {}

/// `Some` when the server refused the token.
pub fn refused_status(server: &str, s: &Status) -> Option<Fatal> {
    (s.code() == Code::Unauthenticated).then(|| Fatal::Refused {
        server: server.to_string(),
        message: s.message().to_string(),
    })
}

/// `Some` when a failed registration is final: a refused token (a gRPC status), or a TLS
/// handshake that failed on the server's certificate's unknown CA. tokio-rustls hands rustls'
/// error up inside an `io::Error`, whose `source()` skips it: `get_ref` finds it.
pub fn of_error(server: &str, e: &anyhow::Error) -> Option<Fatal> {
    if let Some(r) = e
        .downcast_ref::<Status>()
        .and_then(|s| refused_status(server, s))
    {
        return Some(r);
    }
    let unknown_ca = e.chain().any(|c| {
        let tls = c.downcast_ref::<rustls::Error>().or_else(|| {
            c.downcast_ref::<std::io::Error>()
                .and_then(std::io::Error::get_ref)
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        });
        matches!(
            tls,
            Some(rustls::Error::InvalidCertificate(
                rustls::CertificateError::UnknownIssuer
            ))
        )
    });
    unknown_ca.then(|| Fatal::UnknownCa {
        server: server.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_refused_token_and_an_unknown_ca_are_final() {
        let url = "http://127.0.0.1:1";
        let e: anyhow::Error = Status::unauthenticated("bad token").into();
        let r = of_error(url, &e).expect("final");
        let line = r.to_string();
        assert!(
            !line.contains('\n') && line.contains("UNAUTHENTICATED: bad token"),
            "{line}"
        );
        assert!(line.contains("--token"), "says what to do: {line}");
        assert_eq!(r.exit_status(), 1);
        // What a restart or a network fault gives is retried with backoff.
        for s in [
            Status::unavailable("connection refused"),
            Status::not_found("unknown worker"),
            Status::internal("database"),
        ] {
            assert_eq!(of_error(url, &s.into()), None);
        }
        let io = anyhow::anyhow!("transport error").context("connecting");
        assert_eq!(of_error(url, &io), None);

        // A handshake refused for the server's certificate's CA, as tonic hands it up.
        let handshake = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        let e = anyhow::Error::new(handshake).context("transport error");
        let f = of_error("https://h:1", &e).expect("final");
        assert_eq!(f.exit_status(), 2);
        let line = f.to_string();
        assert!(
            line.contains("--ca-cert") && line.contains("https://h:1"),
            "{line}"
        );
        // Another certificate fault (expired: renewed on the server) is retried.
        let expired = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::Expired),
        );
        assert_eq!(of_error(url, &anyhow::Error::new(expired)), None);
    }
}
