//! A SQLite connection the store keeps can write.
//!
//! SQLite opens a file it cannot open for writing (a read-only file, one made immutable, a
//! read-only mount) read-only, silently, and such a connection stays read-only after the file is
//! writable again: every write through it fails "attempt to write a readonly database" for the
//! life of the process. A pool that opened one during an outage kept it, and a lease renewal
//! failed after the outage had ended (CI of 2026-12-06, `store_faults.rs`). So the store opens
//! all its SQLite connections at once, before any outage (`sql.rs`), and refuses one that cannot
//! write: at open a clear error, in the pool a connection not made (the pool tries again until
//! its acquire timeout, by which time the file may be writable).

use sqlx::{AnyConnection, Executor};

/// `Ok` if SQLite opened `conn` read-write; otherwise the error SQLite gave (READONLY, 8).
///
/// A write is the only test SQL offers (in WAL mode even `BEGIN IMMEDIATE` succeeds on a
/// read-only connection): `user_version` set to the value it has, inside a transaction rolled
/// back, so nothing reaches the file. Waits for another writer as any write does (the
/// connection's busy timeout).
///
/// The three statements go to the connection's worker thread as one string, which it runs to
/// the end without waiting for the caller: SQLite's write lock is never held across an await.
/// The pool runs this check in a background task while it opens connections; sent one by one,
/// a lock taken by `BEGIN IMMEDIATE` waited for that task to be polled again, and a runtime
/// blocked meanwhile (a test running the CLI on its thread) held every other writer out until
/// their busy timeout (CI of 2026-12-06, `ansor.rs`: "database is locked").
pub(super) async fn check(conn: &mut AnyConnection) -> Result<(), sqlx::Error> {
    let version: i64 = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(&mut *conn)
        .await?;
    let written = conn
        .execute(format!("BEGIN IMMEDIATE; PRAGMA user_version = {version}; ROLLBACK").as_str())
        .await;
    if written.is_err() {
        // The worker stops at the failed statement: end the transaction it may have begun
        // ("no transaction is active" if it had not).
        let _ = conn.execute("ROLLBACK").await;
    }
    written.map(|_| ())
}
