//! The store's error type.

/// Everything that can go wrong in the store. Messages name the operation; the cause is the
/// `source` (print with `{:#}` or walk the chain).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the database {url}")]
    Open {
        url: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot bring the database {url} to the current schema")]
    Migrate {
        url: String,
        #[source]
        source: sqlx::migrate::MigrateError,
    },
    #[error("unsupported database URL '{0}' (give a file path, a sqlite:// or a postgres:// URL)")]
    UnsupportedUrl(String),
    #[error("database error")]
    Db(#[from] sqlx::Error),
    #[error("the schedule steps are not valid JSON")]
    BadSteps(#[source] serde_json::Error),
    #[error("invalid record: {0}")]
    Invalid(String),
    #[error("record {id} is corrupt: {msg}")]
    Corrupt { id: String, msg: String },
}

impl StoreError {
    /// Whether the database could not be reached or dropped the connection (PostgreSQL
    /// restarting, a network cut): worth retrying once it is back, never a reason to fail a
    /// job. SQLSTATE class 08 is a connection exception, class 57P an operator intervention
    /// (admin shutdown, crash shutdown, cannot connect now).
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Db(e) => match e {
                sqlx::Error::Io(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::WorkerCrashed => true,
                sqlx::Error::Database(d) => d
                    .code()
                    .is_some_and(|c| c.starts_with("08") || c.starts_with("57P")),
                _ => false,
            },
            _ => false,
        }
    }
}
