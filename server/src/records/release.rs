//! A SQLite connection goes back to the pool with no transaction open on it, in SQLite or in
//! sqlx's count (issue 64: a server stuck on "database is locked" after a short write failure).
//!
//! sqlx counts a connection's transactions itself: `begin` is `BEGIN` at count 0 and a
//! `SAVEPOINT` above it, a rollback `ROLLBACK` at count 1 and `ROLLBACK TO SAVEPOINT` above it,
//! and a count moves only when its statement succeeds. On an I/O error or a full disk (the
//! file made unwritable, its COMMIT failing with SQLITE_IOERR_WRITE) SQLite rolls the
//! transaction back by itself; sqlx's ROLLBACK then fails ("no transaction is active") and
//! its count stays at 1 while SQLite is in autocommit. On that connection the next transaction
//! is a `SAVEPOINT` and its rollback a `ROLLBACK TO`, which does not end SQLite's transaction:
//! the connection went back to the pool holding SQLite's write lock, for good, and every other
//! writer, in this process or another, waited out its busy timeout and failed.
//!
//! So a connection released with a count above 0 has both brought back to zero here, on the same
//! connection. Closing it instead (a first mend) made the pool open new ones while the file was
//! still unwritable, and SQLite, mapping a `-shm` it could not extend, killed the server with
//! SIGBUS.

use sqlx::{Any, AnyConnection, Connection, Database, Executor, TransactionManager};

type Manager = <Any as Database>::TransactionManager;

/// The pool's `after_release` hook for SQLite: `true` keeps the connection, `false` closes it
/// (a count this cannot explain). Costs nothing on a connection whose transactions ended.
pub(super) async fn end_stray_transaction(conn: &mut AnyConnection) -> Result<bool, sqlx::Error> {
    if Manager::get_transaction_depth(conn) == 0 {
        return Ok(true);
    }
    // A `Transaction` dropped unfinished queued its ROLLBACK on the connection's worker; a
    // round trip to it lets that run first, and the count is what it left.
    conn.ping().await?;
    let depth = Manager::get_transaction_depth(conn);
    if depth == 0 {
        return Ok(true);
    }
    if depth > 1 {
        // The store never nests transactions, and this hook mends a count of 1 on every release.
        tracing::warn!(
            depth,
            "a SQLite connection came back with nested transactions open: closed"
        );
        return Ok(false);
    }
    tracing::warn!(
        "a SQLite connection came back with a failed transaction: ending it before reuse"
    );
    // SQLite's transaction, if one is still open, ends here; "no transaction is active" is the
    // usual answer (SQLite rolled it back itself) and is no error.
    let _ = conn.execute("ROLLBACK").await;
    // SQLite is in autocommit now: a deferred BEGIN (no lock, no I/O, so it works while the file
    // is unwritable) gives sqlx's own ROLLBACK a transaction to end, which takes its count to 0.
    if let Err(e) = conn.execute("BEGIN").await {
        tracing::warn!("cannot end a SQLite connection's transaction ({e}): closed");
        return Ok(false);
    }
    if let Err(e) = Manager::rollback(conn).await {
        tracing::warn!("cannot end a SQLite connection's transaction ({e}): closed");
        return Ok(false);
    }
    Ok(Manager::get_transaction_depth(conn) == 0)
}
