//! An open store holds none of SQLite's locks while it is idle, even while the runtime that owns
//! it is not being polled: a writer elsewhere (another process, the server beside a test) never
//! waits on it.
//!
//! The pool opens its connections partly in a background task and checks each one with a write
//! rolled back (`records::writable`). Sent statement by statement, that check held SQLite's write
//! lock from `BEGIN IMMEDIATE` until the task was polled again; a test that then ran the CLI on
//! its runtime's thread blocked the server's writes for their whole busy timeout (CI of
//! 2026-12-06: `ansor.rs`, "database is locked"). It happened on about one open in ten with a
//! server polling the same file, so a few dozen opens find it.

use sqlx::{Connection, Executor, SqliteConnection};
use tunehub_server::records::SqlStore;
use tunehub_tests::{Server, sqlite_path};

/// Takes and releases the write lock from another thread with its own runtime and connection,
/// while the caller's runtime waits: `Err` with SQLite's message if the lock stayed held for the
/// whole busy timeout.
fn write_lock_free(db: &str) -> Result<(), String> {
    let db = db.to_string();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut conn = SqliteConnection::connect(&format!("sqlite://{db}"))
                .await
                .map_err(|e| e.to_string())?;
            // Long beside the server's own writes (milliseconds), short beside a held lock.
            conn.execute("PRAGMA busy_timeout = 5000")
                .await
                .map_err(|e| e.to_string())?;
            let taken = conn.execute("BEGIN IMMEDIATE; ROLLBACK").await;
            let _ = conn.close().await;
            taken.map(|_| ()).map_err(|e| e.to_string())
        })
    })
    .join()
    .unwrap()
}

#[tokio::test]
async fn an_open_store_holds_no_lock_while_its_runtime_waits() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_path(dir.path(), "locks.db");
    // Its job claims write the file every 100 ms: the store's checks wait on them at times,
    // which is when a check's lock outlived the open.
    let _server = Server::start(&db, "s1", &[]);
    for i in 0..40 {
        let store = SqlStore::open(&db).await.unwrap();
        // Blocks this runtime: nothing of the store's moves until it returns.
        let just_opened = write_lock_free(&db);
        store.export_records(None, None).await.unwrap();
        store.close().await;
        drop(store);
        let closed = write_lock_free(&db);
        assert_eq!(
            (just_opened, closed),
            (Ok(()), Ok(())),
            "open {i}: a writer waited on an idle store"
        );
    }
}
