//! API tokens: every call but the health check carries `authorization: Bearer <token>`, checked
//! here by a tonic interceptor against the configured tokens.

use std::sync::Arc;
use tonic::metadata::MetadataValue;
use tonic::{Request, Status};

/// The server side: the tokens it accepts. No tokens (an explicit `--allow-unauthenticated`
/// server, or the embedded one of `tunehub tune`, which listens on loopback only) admits every
/// call.
#[derive(Clone, Debug)]
pub struct Auth {
    tokens: Arc<Vec<String>>,
}

impl Auth {
    pub fn new(tokens: Vec<String>) -> Self {
        Auth {
            tokens: Arc::new(tokens),
        }
    }

    pub fn check<T>(&self, req: &Request<T>) -> Result<(), Status> {
        if self.tokens.is_empty() {
            return Ok(());
        }
        let header = req.metadata().get("authorization").ok_or_else(|| {
            Status::unauthenticated("missing `authorization: Bearer <token>` metadata")
        })?;
        let given = header
            .to_str()
            .ok()
            .and_then(|h| h.strip_prefix("Bearer "))
            .ok_or_else(|| {
                Status::unauthenticated("the authorization metadata is not `Bearer <token>`")
            })?;
        if self
            .tokens
            .iter()
            .any(|t| constant_time_eq(t.as_bytes(), given.as_bytes()))
        {
            Ok(())
        } else {
            Err(Status::unauthenticated("invalid API token"))
        }
    }
}

impl tonic::service::Interceptor for Auth {
    fn call(&mut self, req: Request<()>) -> Result<Request<()>, Status> {
        self.check(&req)?;
        Ok(req)
    }
}

/// Comparison whose time does not depend on where the inputs differ (tokens are secrets).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The client side: adds the token to every call.
#[derive(Clone, Debug)]
pub struct BearerToken(Option<MetadataValue<tonic::metadata::Ascii>>);

impl BearerToken {
    pub fn new(token: Option<&str>) -> Result<Self, String> {
        token
            .map(|t| {
                format!("Bearer {t}")
                    .parse()
                    .map_err(|_| "the API token has characters not allowed in metadata".to_string())
            })
            .transpose()
            .map(BearerToken)
    }
}

impl tonic::service::Interceptor for BearerToken {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(v) = &self.0 {
            req.metadata_mut().insert("authorization", v.clone());
        }
        Ok(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(h: Option<&str>) -> Request<()> {
        let mut r = Request::new(());
        if let Some(h) = h {
            r.metadata_mut().insert("authorization", h.parse().unwrap());
        }
        r
    }

    #[test]
    fn tokens_are_checked() {
        let a = Auth::new(vec!["s3cret".into(), "other".into()]);
        assert!(a.check(&req(Some("Bearer s3cret"))).is_ok());
        assert!(a.check(&req(Some("Bearer other"))).is_ok());
        for bad in [None, Some("Bearer s3cre"), Some("s3cret"), Some("Bearer ")] {
            let e = a.check(&req(bad)).unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated, "{bad:?}");
        }
        assert!(Auth::new(vec![]).check(&req(None)).is_ok());
        assert!(constant_time_eq(b"ab", b"ab") && !constant_time_eq(b"ab", b"ac"));
    }
}
