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
pub(super) async fn check(conn: &mut AnyConnection) -> Result<(), sqlx::Error> {
    let version: i64 = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(&mut *conn)
        .await?;
    conn.execute("BEGIN IMMEDIATE").await?;
    let written = conn
        .execute(format!("PRAGMA user_version = {version}").as_str())
        .await;
    let ended = conn.execute("ROLLBACK").await;
    written?;
    ended?;
    Ok(())
}
