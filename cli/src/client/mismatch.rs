//! Why a server cannot be talked to, when the reason is a mistake in the client's settings: TLS
//! on one side only, or a server certificate signed by a CA the client does not trust. The
//! messages tonic passes up ("received corrupt message of type InvalidContentType", "operation
//! was canceled") name the symptom; these name the fix.
//!
//! Told from the error's source chain (rustls' typed errors, under tonic's and hyper's), except
//! for plain HTTP/2 to a TLS server: there the client's HTTP/2 connection only closes, and no
//! error in the chain says why, so a probe asks the server what it speaks.

use std::error::Error;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A mistake in how the client reaches a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mismatch {
    /// An https:// URL for a server of plain HTTP/2.
    TlsToPlain,
    /// An http:// URL for a server that speaks TLS.
    PlainToTls,
    /// The server's certificate is signed by a CA the client does not trust (no --ca-cert, or
    /// another CA's).
    UnknownCa,
}

/// The rustls error in `e`'s source chain, if any. tokio-rustls hands it up inside an
/// `io::Error`, whose `source()` skips it (it is the io::Error's own message): `get_ref` finds it.
pub fn rustls_error<'a>(e: &'a (dyn Error + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(r) = e.downcast_ref::<rustls::Error>() {
            return Some(r);
        }
        let inner = e
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
            .and_then(|inner| inner.downcast_ref::<rustls::Error>());
        if inner.is_some() {
            return inner;
        }
        next = e.source();
    }
    None
}

/// The mistake a failed TLS handshake shows, if it shows one.
pub fn tls_mismatch(e: &(dyn Error + 'static)) -> Option<Mismatch> {
    match rustls_error(e)? {
        // The server's first bytes were not a TLS record: an HTTP/2 frame (a server of plain
        // HTTP/2 sends its SETTINGS first) or an HTTP/1 answer.
        rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType) => {
            Some(Mismatch::TlsToPlain)
        }
        rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer) => {
            Some(Mismatch::UnknownCa)
        }
        _ => None,
    }
}

/// How long the probe waits for the server's answer (a TLS server answers at once).
const PROBE_WAIT: Duration = Duration::from_secs(3);

/// Whether the server at `host_port` speaks TLS: sent the HTTP/2 client preface, a TLS server
/// answers with a TLS record (an alert, content type 21, or a handshake, 22, of version 3.x)
/// where an HTTP/2 server sends a SETTINGS frame (its first byte is a length's, 0). Asked only
/// after a plain connection failed, to say why; false when it cannot tell.
pub async fn speaks_tls(host_port: &str) -> bool {
    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let probe = async {
        let mut s = TcpStream::connect(host_port).await.ok()?;
        s.write_all(PREFACE).await.ok()?;
        let mut head = [0u8; 2];
        s.read_exact(&mut head).await.ok()?;
        Some(matches!(head, [21 | 22, 3]))
    };
    tokio::time::timeout(PROBE_WAIT, probe)
        .await
        .ok()
        .flatten()
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(e: rustls::Error) -> std::io::Error {
        // As tokio-rustls hands a handshake's failure up.
        std::io::Error::new(std::io::ErrorKind::InvalidData, e)
    }

    /// An error whose source is another: tonic's transport error over its connector's.
    #[derive(Debug)]
    struct Wrapped(Box<dyn Error + Send + Sync>);
    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("transport error")
        }
    }
    impl Error for Wrapped {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(self.0.as_ref())
        }
    }

    #[test]
    fn the_mistakes_are_found_deep_in_the_chain() {
        let plain = Wrapped(Box::new(Wrapped(Box::new(io(
            rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType),
        )))));
        assert_eq!(tls_mismatch(&plain), Some(Mismatch::TlsToPlain));
        let ca = Wrapped(Box::new(io(rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer,
        ))));
        assert_eq!(tls_mismatch(&ca), Some(Mismatch::UnknownCa));
        let other = Wrapped(Box::new(io(rustls::Error::InvalidCertificate(
            rustls::CertificateError::Expired,
        ))));
        assert_eq!(tls_mismatch(&other), None);
        let refused = Wrapped(Box::new(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        )));
        assert_eq!(tls_mismatch(&refused), None);
    }
}
