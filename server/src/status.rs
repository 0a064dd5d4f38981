//! Store failures as gRPC statuses, shared by every service. A database out of reach, busy,
//! full or failing its I/O (`StoreError::is_unavailable`) is UNAVAILABLE: the client may try
//! again once it is back, and a balancer may send it elsewhere. Anything else is the server's
//! problem, INTERNAL. Both carry the whole cause chain.

use crate::records::StoreError;
use tonic::Status;

pub(crate) fn store_status(e: StoreError) -> Status {
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    if e.is_unavailable() {
        tracing::warn!("database unavailable: {msg}");
        Status::unavailable(format!("the database is unavailable, try again: {msg}"))
    } else {
        tracing::error!("database: {msg}");
        Status::internal(msg)
    }
}
