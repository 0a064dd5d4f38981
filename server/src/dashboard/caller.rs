//! Who is asking, and how a refusal reads. The browser sends its token as gRPC clients do
//! (`authorization: Bearer TOKEN`, a header the page sets, never a cookie: another site's page
//! cannot make the browser send it); it is checked by the server's `Auth`, and the method an
//! endpoint stands for by the role table, so that the dashboard admits exactly what gRPC does.

use crate::auth::{Auth, Principal, permits};
use axum::Json;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tonic::{Code, Status};

/// A gRPC status answered to a browser: the HTTP status that means the same, and the message.
#[derive(Debug)]
pub struct Refusal(pub Status);

impl From<Status> for Refusal {
    fn from(s: Status) -> Self {
        Refusal(s)
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let http = match self.0.code() {
            Code::Unauthenticated => StatusCode::UNAUTHORIZED,
            Code::PermissionDenied => StatusCode::FORBIDDEN,
            Code::NotFound => StatusCode::NOT_FOUND,
            Code::InvalidArgument | Code::OutOfRange => StatusCode::BAD_REQUEST,
            Code::FailedPrecondition | Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
            Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
            Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
            Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let body = serde_json::json!({
            "error": self.0.message(),
            "code": format!("{:?}", self.0.code()),
        });
        (http, Json(body)).into_response()
    }
}

/// The caller of the gRPC method at `path` (`/tunehub.v1.Jobs/List`): the principal of the
/// request's token, when its role may call that method.
pub fn admit(auth: &Auth, headers: &HeaderMap, path: &str) -> Result<Principal, Refusal> {
    let token = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes());
    let p = auth.principal(token)?;
    if permits(p.role, path) {
        Ok(p)
    } else {
        Err(p.refused(path).into())
    }
}

/// `msg` as the gRPC layer hands a call to a service: with its caller in the extensions (the
/// handlers' finer rules, a client cancelling only its own jobs, read it there).
pub fn request<T>(caller: Principal, msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.extensions_mut().insert(caller);
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{ApiToken, Role};

    fn headers(token: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(t) = token {
            h.insert(
                header::AUTHORIZATION,
                format!("Bearer {t}").parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn a_token_is_admitted_to_what_its_role_may_call_and_nothing_else() {
        let auth = Auth::new(vec![
            ApiToken::admin(0, "adm"),
            ApiToken {
                name: "wall".into(),
                role: Role::Viewer,
                secret: "look".into(),
            },
        ]);
        let list = "/tunehub.v1.Jobs/List";
        let cancel = "/tunehub.v1.Jobs/Cancel";
        assert_eq!(
            admit(&auth, &headers(Some("look")), list).unwrap().name,
            "wall"
        );
        assert_eq!(
            admit(&auth, &headers(Some("adm")), cancel).unwrap().name,
            "token-1"
        );
        let refused = |h: &HeaderMap, path| admit(&auth, h, path).unwrap_err().into_response();
        assert_eq!(
            refused(&headers(Some("look")), cancel).status(),
            StatusCode::FORBIDDEN
        );
        assert_eq!(
            refused(&headers(None), list).status(),
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            refused(&headers(Some("nope")), list).status(),
            StatusCode::UNAUTHORIZED
        );
    }
}
