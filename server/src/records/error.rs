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
    #[error(
        "the database {url} is damaged (SQLite's quick_check: {report}); restore it from a \
         backup or a records export"
    )]
    Damaged { url: String, report: String },
    #[error(
        "cannot write the database {url}: SQLite could open it only read-only (the file, its \
         -wal or its directory is not writable)"
    )]
    Unwritable {
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
    /// Whether the database is out of reach or cannot do its work for now: worth retrying once
    /// it is back, never a reason to fail a job, and UNAVAILABLE to a client (`status`).
    /// PostgreSQL: SQLSTATE class 08 (connection exception), 57P (admin shutdown, crash
    /// shutdown, cannot connect now), 53 (disk full, out of memory, too many connections) and
    /// 58 (I/O error). SQLite (`sqlite_transient`): busy or locked (another process holds the
    /// write lock past the busy timeout: an operator's `sqlite3`, a backup), read-only, I/O
    /// error, disk full, cannot open.
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Db(e) => match e {
                sqlx::Error::Io(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::WorkerCrashed => true,
                sqlx::Error::Database(d) => {
                    if let Some(lite) = d.try_downcast_ref::<sqlx::sqlite::SqliteError>() {
                        return sqlite_transient(lite);
                    }
                    d.code().is_some_and(|c| {
                        ["08", "57P", "53", "58"]
                            .iter()
                            .any(|class| c.starts_with(class))
                    })
                }
                _ => false,
            },
            _ => false,
        }
    }
}

/// SQLite's primary result codes (the low byte of an extended code) that pass with time or an
/// operator's fix: BUSY 5, LOCKED 6, READONLY 8, IOERR 10, FULL 13, CANTOPEN 14.
fn sqlite_transient(e: &sqlx::sqlite::SqliteError) -> bool {
    use sqlx::error::DatabaseError;
    let primary = e
        .code()
        .and_then(|c| c.parse::<i32>().ok())
        .map(|c| c & 0xff);
    matches!(primary, Some(5 | 6 | 8 | 10 | 13 | 14))
}
