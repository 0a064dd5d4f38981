//! Store failures as gRPC statuses: the server's problem, not the caller's (INTERNAL, with the
//! whole cause chain), shared by every service.

use crate::records::StoreError;
use tonic::Status;

pub(crate) fn internal(e: StoreError) -> Status {
    tracing::error!("database: {e:#}");
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    Status::internal(msg)
}
