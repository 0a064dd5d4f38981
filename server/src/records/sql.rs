//! `SqlStore`: the record store over sqlx's `Any` driver, a SQLite file or a PostgreSQL database
//! with one code path; opening it applies the migrations.

use super::StoreError;
use super::neighbours::NeighbourIndex;
use sqlx::Executor;
use sqlx::any::AnyPoolOptions;
use sqlx::{AnyConnection, AnyPool};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// Which database a store talks to: the SQL is shared, except for row locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The record store over sqlx's `Any` driver: a SQLite file or a PostgreSQL database, one code
/// path. Cloning shares the pool.
#[derive(Debug, Clone)]
pub struct SqlStore {
    pub(super) pool: AnyPool,
    backend: Backend,
    /// Tuned workloads per (structure, target), shared by clones (`neighbours`).
    pub(super) neighbours: Arc<NeighbourIndex>,
}

/// The sqlx URL of a `--db` value: a file path becomes a `sqlite://` URL (created if missing).
pub fn database_url(path_or_url: &str) -> Result<(String, Backend), StoreError> {
    if path_or_url.starts_with("postgres://") || path_or_url.starts_with("postgresql://") {
        Ok((path_or_url.to_string(), Backend::Postgres))
    } else if path_or_url.starts_with("sqlite:") {
        Ok((path_or_url.to_string(), Backend::Sqlite))
    } else if path_or_url.contains("://") {
        Err(StoreError::UnsupportedUrl(path_or_url.into()))
    } else {
        Ok((format!("sqlite://{path_or_url}?mode=rwc"), Backend::Sqlite))
    }
}

impl SqlStore {
    /// Opens (creating it if missing) the database at a file path, a `sqlite://` URL or a
    /// `postgres://` URL, and applies pending migrations.
    pub async fn open(path_or_url: &str) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let (url, backend) = database_url(path_or_url)?;
        let open_err = |source| StoreError::Open {
            url: path_or_url.into(),
            source,
        };
        if backend == Backend::Sqlite {
            check_sqlite_file(&url, path_or_url).await?;
        }
        let sqlite = backend == Backend::Sqlite;
        let mut options = AnyPoolOptions::new().max_connections(if sqlite { 4 } else { 8 });
        if sqlite {
            // SQLite's connections are all opened now, while the file is writable, and kept,
            // never closed for age or idleness and opened again: one opened while the file is
            // unwritable can kill the server (SIGBUS, SQLite mapping a `-shm` it cannot extend;
            // docs/experiments/2026-12-03-sqlite-unwritable.md) or stay read-only (`writable`).
            // And a failed transaction must not leave SQLite's write lock on one of them.
            options = options
                .min_connections(4)
                .idle_timeout(None)
                .max_lifetime(None)
                .after_release(|conn, _meta| Box::pin(super::release::end_stray_transaction(conn)));
        }
        let pool = options
            .after_connect(move |conn, _meta| {
                Box::pin(async move {
                    if sqlite {
                        sqlite_pragmas(conn).await?;
                        super::writable::check(conn).await?;
                    }
                    Ok(())
                })
            })
            .connect(&url)
            .await
            .map_err(open_err)?;
        super::migrations::migrator()
            .run(&pool)
            .await
            .map_err(|source| StoreError::Migrate {
                url: path_or_url.into(),
                source,
            })?;
        let store = SqlStore {
            pool,
            backend,
            neighbours: Arc::default(),
        };
        store.move_legacy_layout_free().await?;
        store.fill_structure_keys().await?;
        Ok(store)
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Call after a transaction that stored new best records, as (target, workload) pairs,
    /// committed: a target whose sets may have gained a workload (one the index does not hold)
    /// has them read again (`neighbours`), in the background when the index is kept warm.
    pub(crate) fn bests_stored<'a>(&self, stored: impl IntoIterator<Item = (&'a str, &'a str)>) {
        let mut by_target: BTreeMap<&str, HashSet<&str>> = BTreeMap::new();
        for (target, workload) in stored {
            by_target.entry(target).or_default().insert(workload);
        }
        for (target, workloads) in by_target {
            if !self.neighbours.holds_all(target, &workloads) {
                self.neighbours.forget_target(target);
                self.refill_in_background(target);
            }
        }
    }

    /// One round trip to the database (the health probe's): an error if it cannot be reached.
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// The pool: the job store shares it, and tests read tables directly.
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Waits for open connections to finish and closes them (checkpointing SQLite's WAL).
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// One connection first, checked: a file that is not a database fails here at once with
/// SQLite's own reason (through the pool it was 30 s of retried connects, then "pool timed
/// out"), and damage inside the file is found now, by SQLite's quick_check (every page's
/// structure, no index contents: linear in the file, seconds for a large one), not when a
/// query first reads the damaged page. And a file SQLite can open only read-only fails here
/// (`writable`), not at the first write after a start that seemed fine.
async fn check_sqlite_file(url: &str, shown: &str) -> Result<(), StoreError> {
    use sqlx::{Connection, Row};
    let open_err = |source| StoreError::Open {
        url: shown.into(),
        source,
    };
    let mut conn = AnyConnection::connect(url).await.map_err(open_err)?;
    let rows = sqlx::query("PRAGMA quick_check")
        .fetch_all(&mut conn)
        .await
        .map_err(open_err)?;
    let report: Vec<String> = rows
        .iter()
        .filter_map(|r| r.try_get::<String, _>(0).ok())
        .collect();
    if report.len() == 1 && report[0] == "ok" {
        let writable = super::writable::check(&mut conn).await;
        let _ = conn.close().await;
        return writable.map_err(|source| StoreError::Unwritable {
            url: shown.into(),
            source,
        });
    }
    let _ = conn.close().await;
    Err(StoreError::Damaged {
        url: shown.into(),
        report: report.into_iter().take(3).collect::<Vec<_>>().join("; "),
    })
}

/// Per-connection SQLite settings (the `Any` driver takes only a URL).
async fn sqlite_pragmas(conn: &mut AnyConnection) -> Result<(), sqlx::Error> {
    for pragma in [
        // WAL: readers (queries, a watcher) do not block the writer, nor it them.
        "PRAGMA journal_mode = WAL",
        // In WAL mode NORMAL loses at most the last commits on power loss, never consistency.
        "PRAGMA synchronous = NORMAL",
        // Writers queue on SQLite's file lock; wait rather than fail under contention.
        "PRAGMA busy_timeout = 30000",
        "PRAGMA foreign_keys = ON",
        // Reads through a shared memory map instead of a read() into each connection's own
        // page cache: a zero-shot answer touches a few pages of many workloads, and at 10,000
        // workloads SQLite's page reads (a system call and a copy each) were 5% of a server's
        // time. Address space, not memory: the pages are the OS's file cache.
        "PRAGMA mmap_size = 1073741824",
    ] {
        conn.execute(pragma).await?;
    }
    Ok(())
}
