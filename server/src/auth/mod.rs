//! API tokens and roles: every call but the health check carries `authorization: Bearer
//! <token>`; the token names a principal (a name and a role) and the role decides which methods
//! it may call.
//!
//! Layout: `role` (the roles and the one table of what each may call), `tokens` (the configured
//! tokens, checked), `layer` (the tower layer in front of every service: token, role, the
//! principal into the request, a log span and a metric by the token's name),. The client side
//! (adding the token to each call) is the clients'.
//!
//! A token's secret never leaves this module: logs, metrics and the jobs a principal submits
//! carry its name.

mod layer;
mod role;
mod tokens;

pub use layer::AuthLayer;
pub use role::{Role, permits};
pub use tokens::{TokenEntry, resolve as resolve_tokens};

use std::sync::Arc;
use tonic::{Request, Status};

/// A configured token: its name (shown in logs, metrics and job listings), role and secret.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiToken {
    pub name: String,
    pub role: Role,
    pub secret: String,
}

impl std::fmt::Debug for ApiToken {
    // The secret stays out of debug output (configs are logged).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiToken")
            .field("name", &self.name)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl ApiToken {
    /// An admin token named by its position, as `--token SECRET` gives them.
    pub fn admin(index: usize, secret: impl Into<String>) -> ApiToken {
        ApiToken {
            name: format!("token-{}", index + 1),
            role: Role::Admin,
            secret: secret.into(),
        }
    }
}

/// Who is calling: the name and role of the token presented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub name: String,
    pub role: Role,
}

impl Principal {
    /// The caller of a server without tokens (`--allow-unauthenticated`, loopback only for
    /// `tunehub tune`): admitted to everything.
    pub fn anonymous() -> Principal {
        Principal {
            name: "anonymous".into(),
            role: Role::Admin,
        }
    }

    /// The principal the auth layer put into a request; `anonymous` when none did (a service
    /// called in-process, outside the layer).
    pub fn of<T>(req: &Request<T>) -> Principal {
        req.extensions()
            .get::<Principal>()
            .cloned()
            .unwrap_or_else(Principal::anonymous)
    }

    /// PERMISSION_DENIED for a call to `path` outside this principal's role.
    pub fn refused(&self, path: &str) -> Status {
        Status::permission_denied(format!(
            "token '{}' has the {} role, which may not call {path}",
            self.name, self.role
        ))
    }

    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }
}

/// The server side: the tokens it accepts. No tokens (an explicit `--allow-unauthenticated`
/// server, or the embedded one of `tunehub tune`, which listens on loopback only) admits every
/// call as `anonymous`.
#[derive(Clone, Debug)]
pub struct Auth {
    tokens: Arc<Vec<ApiToken>>,
}

impl Auth {
    pub fn new(tokens: Vec<ApiToken>) -> Self {
        Auth {
            tokens: Arc::new(tokens),
        }
    }

    /// The principal of the `authorization` header's value, or UNAUTHENTICATED.
    pub fn principal(&self, header: Option<&[u8]>) -> Result<Principal, Status> {
        if self.tokens.is_empty() {
            return Ok(Principal::anonymous());
        }
        let header = header.ok_or_else(|| {
            Status::unauthenticated("missing `authorization: Bearer <token>` metadata")
        })?;
        let given = header.strip_prefix(b"Bearer ").ok_or_else(|| {
            Status::unauthenticated("the authorization metadata is not `Bearer <token>`")
        })?;
        // Every token is compared, in constant time each: which one matched, or whether any
        // did, does not show in the time taken.
        let mut found = None;
        for t in self.tokens.iter() {
            if constant_time_eq(t.secret.as_bytes(), given) && found.is_none() {
                found = Some(t);
            }
        }
        found
            .map(|t| Principal {
                name: t.name.clone(),
                role: t.role,
            })
            .ok_or_else(|| Status::unauthenticated("invalid API token"))
    }
}

/// Comparison whose time does not depend on where the inputs differ (tokens are secrets).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(name: &str, role: Role, secret: &str) -> ApiToken {
        ApiToken {
            name: name.into(),
            role,
            secret: secret.into(),
        }
    }

    #[test]
    fn tokens_name_their_principal() {
        let a = Auth::new(vec![
            ApiToken::admin(0, "s3cret"),
            token("board-7", Role::Worker, "other"),
        ]);
        let p = a.principal(Some(b"Bearer s3cret")).unwrap();
        assert_eq!((p.name.as_str(), p.role), ("token-1", Role::Admin));
        let p = a.principal(Some(b"Bearer other")).unwrap();
        assert_eq!((p.name.as_str(), p.role), ("board-7", Role::Worker));
        for bad in [
            None,
            Some(&b"Bearer s3cre"[..]),
            Some(b"s3cret"),
            Some(b"Bearer "),
        ] {
            let e = a.principal(bad).unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated, "{bad:?}");
        }
        assert_eq!(
            Auth::new(vec![]).principal(None).unwrap(),
            Principal::anonymous()
        );
        assert!(constant_time_eq(b"ab", b"ab") && !constant_time_eq(b"ab", b"ac"));
    }

    #[test]
    fn debug_output_hides_the_secret() {
        let t = token("ci", Role::Client, "hunter2");
        let shown = format!("{t:?}");
        assert!(
            shown.contains("ci") && !shown.contains("hunter2"),
            "{shown}"
        );
    }
}
