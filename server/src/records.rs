//! The record store: workloads, targets and measured candidates, and the best record per
//! (workload, target).
//!
//! `RecordStore` is the seam; `SqlStore` implements it over sqlx's `Any` driver, so that one code
//! path serves a SQLite file and a PostgreSQL database. The schema lives in `migrations/`
//! (applied on open) and every statement here is written in the SQL that SQLite and PostgreSQL
//! share (`$n` placeholders, `ON CONFLICT` upserts, `COUNT(CASE ...)`); the few that differ
//! (row locks) ask `SqlStore::backend`.
//!
//! Ids are computed here, never by the database: see `record_id` and the migration's header.

use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyConnection, AnyPool};
use sqlx::{Executor, Row};
use std::collections::BTreeMap;
use std::future::Future;
use std::time::{SystemTime, UNIX_EPOCH};
use tunehub_engine::measure::{ErrorCode, MeasureResult};

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

/// A candidate's measurement, as reported: what `commit` takes. The store derives the schedule
/// hash, the id, the mean cost and the time.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRecord {
    pub workload_key: String,
    pub target_key: String,
    /// The schedule's steps as JSON (the engine's `Schedule::to_json`); stored canonicalised.
    pub steps_json: String,
    /// Seconds per run, one per repeat; empty on error.
    pub costs: Vec<f64>,
    /// The engine's `ErrorCode::code()`; 0 = ok.
    pub error_code: i32,
    pub error_msg: String,
    pub noisy: bool,
    pub build_s: f64,
    pub run_s: f64,
    pub worker: Option<String>,
    /// When it was measured (Unix ms); `None`: now. Set by imports, which keep the original time.
    pub created_at: Option<i64>,
}

impl NewRecord {
    /// The record of one engine measurement.
    pub fn from_measure(
        workload_key: &str,
        target_key: &str,
        steps_json: String,
        result: &MeasureResult,
        worker: Option<&str>,
    ) -> Self {
        NewRecord {
            workload_key: workload_key.into(),
            target_key: target_key.into(),
            steps_json,
            costs: result.costs.clone(),
            error_code: result.error.code(),
            error_msg: result.error_msg.clone(),
            noisy: result.noisy,
            build_s: result.build_s,
            run_s: result.run_s,
            worker: worker.map(Into::into),
            created_at: None,
        }
    }

    /// The mean cost, when the candidate succeeded and has timings.
    pub fn mean_cost(&self) -> Option<f64> {
        (self.error_code == ErrorCode::NoError.code() && !self.costs.is_empty())
            .then(|| self.costs.iter().sum::<f64>() / self.costs.len() as f64)
    }

    /// Whether this record may become the best: a success whose time can be trusted.
    pub fn qualifies_for_best(&self) -> bool {
        self.mean_cost().is_some() && !self.noisy
    }
}

/// A stored record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Record {
    pub id: String,
    pub workload_key: String,
    pub target_key: String,
    pub schedule_hash: String,
    pub steps_json: String,
    pub costs: Vec<f64>,
    pub mean_cost: Option<f64>,
    pub error_code: i32,
    pub error_msg: String,
    pub noisy: bool,
    pub build_s: f64,
    pub run_s: f64,
    pub worker: Option<String>,
    /// Unix milliseconds.
    pub created_at: i64,
}

impl Record {
    /// The record as reported, to store it elsewhere (an import) with its original time.
    pub fn to_new(&self) -> NewRecord {
        NewRecord {
            workload_key: self.workload_key.clone(),
            target_key: self.target_key.clone(),
            steps_json: self.steps_json.clone(),
            costs: self.costs.clone(),
            error_code: self.error_code,
            error_msg: self.error_msg.clone(),
            noisy: self.noisy,
            build_s: self.build_s,
            run_s: self.run_s,
            worker: self.worker.clone(),
            created_at: Some(self.created_at),
        }
    }

    pub fn is_ok(&self) -> bool {
        self.error_code == ErrorCode::NoError.code() && self.mean_cost.is_some()
    }

    /// The engine's error code, if this build knows it.
    pub fn error(&self) -> Option<ErrorCode> {
        ErrorCode::from_code(self.error_code)
    }
}

/// A stored workload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workload {
    pub key: String,
    pub description: Option<String>,
    pub dag_json: String,
    pub flops: u64,
    pub created_at: i64,
}

/// What `commit` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitOutcome {
    /// A new record; `is_new_best` when it became the best of its (workload, target).
    Inserted { is_new_best: bool },
    /// The candidate was already recorded: nothing changed.
    Duplicate,
}

/// Record counts of one (workload, target).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct RecordCounts {
    pub total: u64,
    /// Records with error code 0 (noisy ones included).
    pub ok: u64,
}

/// Where tuning results are kept. Every method is one transaction at most; `commit` is
/// idempotent per candidate, so a repeated or late report is harmless.
///
/// Futures are `Send` so that generic callers can run them on any tokio worker.
pub trait RecordStore: Send + Sync {
    /// Stores a workload unless its key is already there (the first description stays).
    fn put_workload(
        &self,
        key: &str,
        description: &str,
        dag_json: &str,
        flops: u64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Stores a target unless its key is already there.
    fn put_target(
        &self,
        key: &str,
        target_json: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Stores one measured candidate and, in the same transaction, moves the best record of its
    /// (workload, target) when it is a better trusted success. The workload and target must
    /// have been put first.
    fn commit(
        &self,
        record: &NewRecord,
    ) -> impl Future<Output = Result<CommitOutcome, StoreError>> + Send;

    /// The best trusted success (lowest mean cost, not noisy).
    fn best(
        &self,
        workload_key: &str,
        target_key: &str,
    ) -> impl Future<Output = Result<Option<Record>, StoreError>> + Send;

    /// The `k` best trusted successes, cheapest first.
    fn top_k(
        &self,
        workload_key: &str,
        target_key: &str,
        k: usize,
    ) -> impl Future<Output = Result<Vec<Record>, StoreError>> + Send;

    fn count(
        &self,
        workload_key: &str,
        target_key: &str,
    ) -> impl Future<Output = Result<RecordCounts, StoreError>> + Send;

    /// Every record of a (workload, target), failures included, oldest first: what a resumed
    /// search rebuilds its state from.
    fn records(
        &self,
        workload_key: &str,
        target_key: &str,
    ) -> impl Future<Output = Result<Vec<Record>, StoreError>> + Send;

    fn workload(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<Workload>, StoreError>> + Send;

    /// The target's JSON, as put.
    fn target_json(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<String>, StoreError>> + Send;

    /// Targets that have records of this workload, with their record counts: what to suggest
    /// when the asked-for target has none.
    fn targets_of(
        &self,
        workload_key: &str,
    ) -> impl Future<Output = Result<Vec<(String, u64)>, StoreError>> + Send;
}

/// The steps JSON in canonical form: parsed and written back compactly, so that spacing (or
/// object key order) in a report does not make one schedule look like two.
pub fn canonical_steps(steps_json: &str) -> Result<String, StoreError> {
    let v: serde_json::Value = serde_json::from_str(steps_json).map_err(StoreError::BadSteps)?;
    Ok(v.to_string())
}

/// 16 bytes of a SHA-256, as 32 hex digits.
fn hex16(bytes: &[u8]) -> String {
    Sha256::digest(bytes)[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The schedule hash of canonical steps JSON.
pub fn schedule_hash(canonical_steps_json: &str) -> String {
    hex16(canonical_steps_json.as_bytes())
}

/// A record's id: a content address of what makes it unique (see the migration's header).
pub fn record_id(workload_key: &str, target_key: &str, schedule_hash: &str) -> String {
    hex16(format!("{workload_key}\0{target_key}\0{schedule_hash}").as_bytes())
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The record columns, in the order `record_from_row` reads them.
pub(crate) const RECORD_COLUMNS: &str = "r.id, r.workload_key, r.target_key, r.schedule_hash, r.steps_json, r.costs_json, \
     r.mean_cost, r.error_code, r.error_msg, r.noisy, r.build_s, r.run_s, r.worker, r.created_at";

pub(crate) fn record_from_row(row: &AnyRow) -> Result<Record, StoreError> {
    let id: String = row.try_get(0)?;
    let costs_json: String = row.try_get(5)?;
    let costs = serde_json::from_str(&costs_json).map_err(|e| StoreError::Corrupt {
        id: id.clone(),
        msg: format!("costs_json: {e}"),
    })?;
    Ok(Record {
        workload_key: row.try_get(1)?,
        target_key: row.try_get(2)?,
        schedule_hash: row.try_get(3)?,
        steps_json: row.try_get(4)?,
        costs,
        mean_cost: row.try_get(6)?,
        error_code: row.try_get(7)?,
        error_msg: row.try_get(8)?,
        noisy: row.try_get::<i32, _>(9)? != 0,
        build_s: row.try_get(10)?,
        run_s: row.try_get(11)?,
        worker: row.try_get(12)?,
        created_at: row.try_get(13)?,
        id,
    })
}

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
    pool: AnyPool,
    backend: Backend,
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
        let pool = AnyPoolOptions::new()
            .max_connections(if backend == Backend::Sqlite { 4 } else { 8 })
            .after_connect(move |conn, _meta| {
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        sqlite_pragmas(conn).await?;
                    }
                    Ok(())
                })
            })
            .connect(&url)
            .await
            .map_err(open_err)?;
        sqlx::migrate!("../migrations")
            .run(&pool)
            .await
            .map_err(|source| StoreError::Migrate {
                url: path_or_url.into(),
                source,
            })?;
        Ok(SqlStore { pool, backend })
    }

    pub fn backend(&self) -> Backend {
        self.backend
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

/// One (workload, target) pair that has records: what `ListTuned` shows.
#[derive(Debug, Clone, PartialEq)]
pub struct TunedPair {
    pub workload_key: String,
    pub description: Option<String>,
    pub target_key: String,
    pub flops: u64,
    pub trials: u64,
    pub ok: u64,
    pub best_cost: Option<f64>,
}

impl SqlStore {
    /// Every (workload, target) pair with records, with counts and best cost.
    pub async fn tuned(&self) -> Result<Vec<TunedPair>, StoreError> {
        let rows = sqlx::query(
            "SELECT c.workload_key, w.description, c.target_key, w.flops, c.total, c.ok, b.mean_cost \
             FROM record_counts c JOIN workloads w ON w.key = c.workload_key \
             LEFT JOIN best_records b ON b.workload_key = c.workload_key AND b.target_key = c.target_key \
             ORDER BY c.target_key, c.workload_key",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(TunedPair {
                    workload_key: r.try_get(0)?,
                    description: r.try_get(1)?,
                    target_key: r.try_get(2)?,
                    flops: r.try_get::<i64, _>(3)? as u64,
                    trials: r.try_get::<i64, _>(4)? as u64,
                    ok: r.try_get::<i64, _>(5)? as u64,
                    best_cost: r.try_get(6)?,
                })
            })
            .collect()
    }

    /// Every target with its JSON and record count.
    pub async fn targets(&self) -> Result<Vec<(String, String, u64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT t.key, t.target_json, CAST(COALESCE(SUM(c.total), 0) AS BIGINT) FROM targets t \
             LEFT JOIN record_counts c ON c.target_key = t.key GROUP BY t.key, t.target_json ORDER BY t.key",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get::<i64, _>(2)? as u64)))
            .collect()
    }

    /// Records in export order (oldest first), optionally of one workload and/or one target.
    pub async fn export_records(
        &self,
        workload_key: Option<&str>,
        target_key: Option<&str>,
    ) -> Result<Vec<Record>, StoreError> {
        let sql = format!(
            "SELECT {RECORD_COLUMNS} FROM records r \
             WHERE ($1 = '' OR r.workload_key = $1) AND ($2 = '' OR r.target_key = $2) \
             ORDER BY r.created_at ASC, r.id ASC"
        );
        let rows = sqlx::query(&sql)
            .bind(workload_key.unwrap_or(""))
            .bind(target_key.unwrap_or(""))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(record_from_row).collect()
    }

    /// Stores imported workloads, targets and records in one transaction: (new, known) records.
    /// The caller has checked every item.
    pub async fn import(
        &self,
        workloads: &[Workload],
        targets: &[(String, String)],
        records: &[NewRecord],
    ) -> Result<(u64, u64), StoreError> {
        let mut tx = self.pool.begin().await?;
        let now = now_ms();
        for w in workloads {
            sqlx::query(
                "INSERT INTO workloads (key, description, dag_json, flops, created_at) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (key) DO NOTHING",
            )
            .bind(&w.key)
            .bind(w.description.as_deref())
            .bind(&w.dag_json)
            .bind(w.flops as i64)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        for (key, json) in targets {
            sqlx::query("INSERT INTO targets (key, target_json, created_at) VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING")
                .bind(key)
                .bind(json)
                .bind(now)
                .execute(&mut *tx)
                .await?;
        }
        let (mut new, mut known) = (0, 0);
        let mut counts = CountDeltas::default();
        for r in records {
            match commit_on(&mut tx, r, &mut counts).await?.1 {
                CommitOutcome::Duplicate => known += 1,
                CommitOutcome::Inserted { .. } => new += 1,
            }
        }
        counts.write(&mut tx).await?;
        tx.commit().await?;
        Ok((new, known))
    }
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
    ] {
        conn.execute(pragma).await?;
    }
    Ok(())
}

/// Record counts a transaction added, per (workload, target): `commit_on` notes each insert and
/// `write` adds them to `record_counts` before the transaction commits, one statement per pair
/// rather than per record (an import stores thousands of records of a few pairs).
#[derive(Debug, Default)]
pub(crate) struct CountDeltas(BTreeMap<(String, String), (i64, i64)>);

impl CountDeltas {
    fn add(&mut self, rec: &NewRecord) {
        let d = self
            .0
            .entry((rec.workload_key.clone(), rec.target_key.clone()))
            .or_default();
        d.0 += 1;
        d.1 += i64::from(rec.error_code == ErrorCode::NoError.code());
    }

    /// Adds the counts in the caller's transaction; in key order, so that two transactions
    /// lock the rows they share in the same order.
    pub(crate) async fn write(self, conn: &mut AnyConnection) -> Result<(), StoreError> {
        for ((workload_key, target_key), (total, ok)) in self.0 {
            sqlx::query(
                "INSERT INTO record_counts (workload_key, target_key, total, ok) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (workload_key, target_key) DO UPDATE \
                 SET total = record_counts.total + excluded.total, ok = record_counts.ok + excluded.ok",
            )
            .bind(workload_key)
            .bind(target_key)
            .bind(total)
            .bind(ok)
            .execute(&mut *conn)
            .await?;
        }
        Ok(())
    }
}

/// Stores one record inside the caller's transaction: the insert, and the best-record update
/// when it qualifies; a new record is noted in `counts`, which the caller writes before it
/// commits. Shared by `commit`, `import` and the job store's batch commit.
pub(crate) async fn commit_on(
    conn: &mut AnyConnection,
    rec: &NewRecord,
    counts: &mut CountDeltas,
) -> Result<(String, CommitOutcome), StoreError> {
    if let Some(c) = rec.costs.iter().find(|c| !c.is_finite() || **c < 0.0) {
        return Err(StoreError::Invalid(format!(
            "cost {c} is not a finite non-negative number of seconds"
        )));
    }
    let steps = canonical_steps(&rec.steps_json)?;
    let hash = schedule_hash(&steps);
    let id = record_id(&rec.workload_key, &rec.target_key, &hash);
    let mean_cost = rec.mean_cost();
    let costs_json =
        serde_json::to_string(&rec.costs).expect("a Vec<f64> of finite numbers serializes");
    // The mean cost is bound as a number always, -1 standing for NULL (costs are checked
    // non-negative above): sqlx 0.8's Any driver sends a NULL DOUBLE PRECISION to PostgreSQL
    // typed float4, the statement cached on the connection keeps that type, and the next record
    // with a mean cost on that connection is refused (22P03, "incorrect binary data format").
    let inserted = sqlx::query(
        "INSERT INTO records (id, workload_key, target_key, schedule_hash, steps_json, costs_json, mean_cost, \
         error_code, error_msg, noisy, build_s, run_s, worker, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, -1.0), $8, $9, $10, $11, $12, $13, $14) \
         ON CONFLICT DO NOTHING",
    )
    .bind(&id)
    .bind(&rec.workload_key)
    .bind(&rec.target_key)
    .bind(&hash)
    .bind(&steps)
    .bind(&costs_json)
    .bind(mean_cost.unwrap_or(-1.0))
    .bind(rec.error_code)
    .bind(&rec.error_msg)
    .bind(i32::from(rec.noisy))
    .bind(rec.build_s)
    .bind(rec.run_s)
    .bind(rec.worker.as_deref())
    .bind(rec.created_at.unwrap_or_else(now_ms))
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if inserted == 0 {
        return Ok((id, CommitOutcome::Duplicate));
    }
    counts.add(rec);
    let mut is_new_best = false;
    if let (Some(cost), true) = (mean_cost, rec.qualifies_for_best()) {
        // Insert the first best or replace a worse one; strictly better only, so that on a
        // tie the earlier record stays. Zero rows affected: the current best is as good.
        is_new_best = sqlx::query(
            "INSERT INTO best_records (workload_key, target_key, record_id, mean_cost) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (workload_key, target_key) DO UPDATE \
             SET record_id = excluded.record_id, mean_cost = excluded.mean_cost \
             WHERE excluded.mean_cost < best_records.mean_cost",
        )
        .bind(&rec.workload_key)
        .bind(&rec.target_key)
        .bind(&id)
        .bind(cost)
        .execute(&mut *conn)
        .await?
        .rows_affected()
            > 0;
    }
    Ok((id, CommitOutcome::Inserted { is_new_best }))
}

impl RecordStore for SqlStore {
    async fn put_workload(
        &self,
        key: &str,
        description: &str,
        dag_json: &str,
        flops: u64,
    ) -> Result<(), StoreError> {
        let flops = i64::try_from(flops)
            .map_err(|_| StoreError::Invalid(format!("flops {flops} exceed BIGINT")))?;
        sqlx::query(
            "INSERT INTO workloads (key, description, dag_json, flops, created_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (key) DO NOTHING",
        )
        .bind(key)
        .bind(description)
        .bind(dag_json)
        .bind(flops)
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn put_target(&self, key: &str, target_json: &str) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO targets (key, target_json, created_at) VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING")
            .bind(key)
            .bind(target_json)
            .bind(now_ms())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn commit(&self, rec: &NewRecord) -> Result<CommitOutcome, StoreError> {
        let mut tx = self.pool.begin().await?;
        // The insert is the transaction's first statement: on SQLite it takes the write lock
        // before any read, so concurrent committers queue on the busy timeout instead of
        // failing to upgrade a read snapshot.
        let mut counts = CountDeltas::default();
        let (_, outcome) = commit_on(&mut tx, rec, &mut counts).await?;
        if outcome == CommitOutcome::Duplicate {
            tx.rollback().await?;
        } else {
            counts.write(&mut tx).await?;
            tx.commit().await?;
        }
        Ok(outcome)
    }

    async fn best(
        &self,
        workload_key: &str,
        target_key: &str,
    ) -> Result<Option<Record>, StoreError> {
        let sql = format!(
            "SELECT {RECORD_COLUMNS} FROM best_records b JOIN records r ON r.id = b.record_id \
             WHERE b.workload_key = $1 AND b.target_key = $2"
        );
        let row = sqlx::query(&sql)
            .bind(workload_key)
            .bind(target_key)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(record_from_row).transpose()
    }

    async fn top_k(
        &self,
        workload_key: &str,
        target_key: &str,
        k: usize,
    ) -> Result<Vec<Record>, StoreError> {
        let sql = format!(
            "SELECT {RECORD_COLUMNS} FROM records r \
             WHERE r.workload_key = $1 AND r.target_key = $2 AND r.mean_cost IS NOT NULL AND r.noisy = 0 \
             ORDER BY r.mean_cost ASC, r.created_at ASC, r.id ASC LIMIT $3"
        );
        let k = i64::try_from(k).unwrap_or(i64::MAX);
        let rows = sqlx::query(&sql)
            .bind(workload_key)
            .bind(target_key)
            .bind(k)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(record_from_row).collect()
    }

    async fn count(
        &self,
        workload_key: &str,
        target_key: &str,
    ) -> Result<RecordCounts, StoreError> {
        // Kept by `commit_on` (migration 0003), so this is a key lookup at any table size.
        let row = sqlx::query(
            "SELECT total, ok FROM record_counts WHERE workload_key = $1 AND target_key = $2",
        )
        .bind(workload_key)
        .bind(target_key)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else {
            return Ok(RecordCounts::default());
        };
        let (total, ok): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
        Ok(RecordCounts {
            total: total as u64,
            ok: ok as u64,
        })
    }

    async fn records(
        &self,
        workload_key: &str,
        target_key: &str,
    ) -> Result<Vec<Record>, StoreError> {
        let sql = format!(
            "SELECT {RECORD_COLUMNS} FROM records r WHERE r.workload_key = $1 AND r.target_key = $2 \
             ORDER BY r.created_at ASC, r.id ASC"
        );
        let rows = sqlx::query(&sql)
            .bind(workload_key)
            .bind(target_key)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(record_from_row).collect()
    }

    async fn workload(&self, key: &str) -> Result<Option<Workload>, StoreError> {
        let row = sqlx::query(
            "SELECT key, description, dag_json, flops, created_at FROM workloads WHERE key = $1",
        )
        .bind(key)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| {
            Ok(Workload {
                key: row.try_get(0)?,
                description: row.try_get(1)?,
                dag_json: row.try_get(2)?,
                flops: row.try_get::<i64, _>(3)? as u64,
                created_at: row.try_get(4)?,
            })
        })
        .transpose()
    }

    async fn target_json(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT target_json FROM targets WHERE key = $1")
                .bind(key)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    async fn targets_of(&self, workload_key: &str) -> Result<Vec<(String, u64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT target_key, total FROM record_counts WHERE workload_key = $1 ORDER BY target_key",
        )
        .bind(workload_key)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get::<i64, _>(1)? as u64)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const W: &str = "w0";
    const T: &str = "t0";

    async fn new_store(dir: &tempfile::TempDir) -> SqlStore {
        let path = dir.path().join("t.db");
        let store = SqlStore::open(path.to_str().unwrap()).await.unwrap();
        for w in ["w0", "w1"] {
            store
                .put_workload(w, &format!("op {w}"), "{}", 1_000_000)
                .await
                .unwrap();
        }
        for t in ["t0", "t1"] {
            store.put_target(t, "{}").await.unwrap();
        }
        store
    }

    /// A record of candidate `sched` (its steps are `[["SP", sched]]`).
    fn rec(
        w: &str,
        t: &str,
        sched: u32,
        costs: &[f64],
        error: ErrorCode,
        noisy: bool,
    ) -> NewRecord {
        NewRecord {
            workload_key: w.into(),
            target_key: t.into(),
            steps_json: format!("[[\"SP\", {sched}]]"),
            costs: costs.to_vec(),
            error_code: error.code(),
            error_msg: if error == ErrorCode::NoError {
                String::new()
            } else {
                format!("failed {sched}")
            },
            noisy,
            build_s: 0.5,
            run_s: 0.25,
            worker: Some("local".into()),
            created_at: None,
        }
    }

    fn ok(sched: u32, cost: f64) -> NewRecord {
        rec(W, T, sched, &[cost, cost], ErrorCode::NoError, false)
    }

    #[tokio::test]
    async fn migrations_apply_to_a_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fresh.db");
        let store = SqlStore::open(path.to_str().unwrap()).await.unwrap();
        assert!(path.exists());
        let tables: Vec<String> =
            sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_%' ESCAPE '\\' ORDER BY name")
                .fetch_all(&store.pool)
                .await
                .unwrap();
        assert_eq!(
            tables,
            [
                "best_records",
                "cost_models",
                "job_records",
                "jobs",
                "record_counts",
                "records",
                "targets",
                "tasks",
                "workloads"
            ]
        );
        let applied: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations WHERE success")
                .fetch_one(&store.pool)
                .await
                .unwrap();
        assert_eq!(applied, 3);
        let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&store.pool)
            .await
            .unwrap();
        assert_eq!(mode, "wal");
        // The sqlite:// URL form opens the same file.
        store.close().await;
        let url = format!("sqlite://{}?mode=rwc", path.display());
        SqlStore::open(&url).await.unwrap().close().await;
        assert!(matches!(
            SqlStore::open("mysql://x/y").await,
            Err(StoreError::UnsupportedUrl(_))
        ));
    }

    #[tokio::test]
    async fn best_is_the_lowest_mean_cost() {
        let dir = tempfile::tempdir().unwrap();
        let s = new_store(&dir).await;
        assert_eq!(s.best(W, T).await.unwrap(), None);
        assert_eq!(
            s.commit(&ok(1, 3e-3)).await.unwrap(),
            CommitOutcome::Inserted { is_new_best: true }
        );
        assert_eq!(
            s.commit(&ok(2, 1e-3)).await.unwrap(),
            CommitOutcome::Inserted { is_new_best: true }
        );
        assert_eq!(
            s.commit(&ok(3, 2e-3)).await.unwrap(),
            CommitOutcome::Inserted { is_new_best: false }
        );
        // A tie keeps the earlier record.
        assert_eq!(
            s.commit(&ok(4, 1e-3)).await.unwrap(),
            CommitOutcome::Inserted { is_new_best: false }
        );
        let best = s.best(W, T).await.unwrap().unwrap();
        assert_eq!(best.steps_json, r#"[["SP",2]]"#, "stored canonical");
        assert_eq!(best.mean_cost, Some(1e-3));
        assert_eq!(best.costs, [1e-3, 1e-3]);
        assert_eq!(best.worker.as_deref(), Some("local"));
        assert!(best.is_ok());
        let top: Vec<f64> = s
            .top_k(W, T, 3)
            .await
            .unwrap()
            .iter()
            .map(|r| r.mean_cost.unwrap())
            .collect();
        assert_eq!(top, [1e-3, 1e-3, 2e-3]);
        assert!(s.top_k(W, T, 0).await.unwrap().is_empty());
        // Other (workload, target) pairs are untouched.
        assert_eq!(s.best("w1", T).await.unwrap(), None);
        assert_eq!(s.best(W, "t1").await.unwrap(), None);
        assert_eq!(s.targets_of(W).await.unwrap(), [("t0".to_string(), 4)]);
    }

    #[tokio::test]
    async fn errors_and_noisy_records_never_become_best() {
        let dir = tempfile::tempdir().unwrap();
        let s = new_store(&dir).await;
        let err = rec(W, T, 1, &[], ErrorCode::CompileError, false);
        assert_eq!(
            s.commit(&err).await.unwrap(),
            CommitOutcome::Inserted { is_new_best: false }
        );
        // An error code with costs attached still has no mean cost and does not qualify.
        let wrong = rec(W, T, 2, &[1e-6], ErrorCode::WrongAnswer, false);
        assert_eq!(
            s.commit(&wrong).await.unwrap(),
            CommitOutcome::Inserted { is_new_best: false }
        );
        let noisy = rec(W, T, 3, &[1e-6], ErrorCode::NoError, true);
        assert_eq!(
            s.commit(&noisy).await.unwrap(),
            CommitOutcome::Inserted { is_new_best: false }
        );
        assert_eq!(s.best(W, T).await.unwrap(), None);
        assert!(s.top_k(W, T, 10).await.unwrap().is_empty());
        assert_eq!(
            s.commit(&ok(4, 1e-3)).await.unwrap(),
            CommitOutcome::Inserted { is_new_best: true }
        );
        assert_eq!(s.best(W, T).await.unwrap().unwrap().mean_cost, Some(1e-3));
        assert_eq!(
            s.count(W, T).await.unwrap(),
            RecordCounts { total: 4, ok: 2 }
        );
        let all = s.records(W, T).await.unwrap();
        assert_eq!(all.len(), 4);
        let stored_err = all
            .iter()
            .find(|r| r.error_code == ErrorCode::CompileError.code())
            .unwrap();
        assert_eq!(
            (stored_err.error_msg.as_str(), stored_err.mean_cost),
            ("failed 1", None)
        );
        assert_eq!(stored_err.error(), Some(ErrorCode::CompileError));
        assert!(all.iter().any(|r| r.noisy));
    }

    #[tokio::test]
    async fn a_duplicate_commit_is_a_no_op() {
        let dir = tempfile::tempdir().unwrap();
        let s = new_store(&dir).await;
        assert_eq!(
            s.commit(&ok(1, 2e-3)).await.unwrap(),
            CommitOutcome::Inserted { is_new_best: true }
        );
        let before = (s.count(W, T).await.unwrap(), s.best(W, T).await.unwrap());
        // The same schedule, differently spaced and with a better time: still the same candidate.
        let mut again = ok(1, 1e-3);
        again.steps_json = "[ [ \"SP\" ,1 ] ]".into();
        assert_eq!(s.commit(&again).await.unwrap(), CommitOutcome::Duplicate);
        assert_eq!(
            s.commit(&rec(W, T, 1, &[], ErrorCode::RunTimeout, false))
                .await
                .unwrap(),
            CommitOutcome::Duplicate
        );
        assert_eq!(
            (s.count(W, T).await.unwrap(), s.best(W, T).await.unwrap()),
            before
        );
        // The same schedule on another target is another candidate.
        let other = rec(W, "t1", 1, &[1e-3], ErrorCode::NoError, false);
        assert_eq!(
            s.commit(&other).await.unwrap(),
            CommitOutcome::Inserted { is_new_best: true }
        );
    }

    #[tokio::test]
    async fn bad_input_is_rejected_and_nothing_stored() {
        let dir = tempfile::tempdir().unwrap();
        let s = new_store(&dir).await;
        let mut bad = ok(1, 1e-3);
        bad.steps_json = "[[\"SP\", ".into();
        assert!(matches!(s.commit(&bad).await, Err(StoreError::BadSteps(_))));
        let nan = ok(2, f64::NAN);
        assert!(matches!(s.commit(&nan).await, Err(StoreError::Invalid(_))));
        // Unknown workload: the foreign key refuses it.
        let orphan = rec("nope", T, 3, &[1e-3], ErrorCode::NoError, false);
        assert!(matches!(s.commit(&orphan).await, Err(StoreError::Db(_))));
        assert_eq!(s.count(W, T).await.unwrap(), RecordCounts::default());
        assert_eq!(s.count("nope", T).await.unwrap(), RecordCounts::default());
    }

    /// A small deterministic generator (xorshift64*), so that a failure replays.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    #[tokio::test]
    async fn best_records_match_a_brute_force_min_after_random_commits() {
        let dir = tempfile::tempdir().unwrap();
        let s = new_store(&dir).await;
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let pairs = [("w0", "t0"), ("w0", "t1"), ("w1", "t0"), ("w1", "t1")];
        for step in 0..400 {
            let (w, t) = pairs[rng.below(4) as usize];
            // Few schedules per pair, so that duplicates are common.
            let sched = rng.below(60) as u32;
            let error = match rng.below(10) {
                0 => ErrorCode::CompileError,
                1 => ErrorCode::WrongAnswer,
                2 => ErrorCode::RunTimeout,
                _ => ErrorCode::NoError,
            };
            let costs: Vec<f64> = (0..1 + rng.below(3))
                .map(|_| (1 + rng.below(1000)) as f64 * 1e-6)
                .collect();
            let costs = if error == ErrorCode::NoError || rng.below(2) == 0 {
                costs
            } else {
                vec![]
            };
            let r = rec(w, t, sched, &costs, error, rng.below(8) == 0);

            let before = s.records(w, t).await.unwrap();
            let best_before = s.best(w, t).await.unwrap();
            let outcome = s.commit(&r).await.unwrap();
            let after = s.records(w, t).await.unwrap();

            let hash = schedule_hash(&canonical_steps(&r.steps_json).unwrap());
            let was_there = before.iter().any(|x| x.schedule_hash == hash);
            assert_eq!(
                outcome == CommitOutcome::Duplicate,
                was_there,
                "step {step}"
            );
            assert_eq!(
                after.len(),
                before.len() + usize::from(!was_there),
                "step {step}"
            );

            // The brute-force best: min mean cost over trusted successes.
            let brute = after
                .iter()
                .filter(|x| x.is_ok() && !x.noisy)
                .map(|x| x.mean_cost.unwrap())
                .fold(None, |m: Option<f64>, c| Some(m.map_or(c, |m| m.min(c))));
            let best = s.best(w, t).await.unwrap();
            assert_eq!(
                best.as_ref().and_then(|b| b.mean_cost),
                brute,
                "step {step}"
            );
            if let Some(b) = &best {
                assert!(b.is_ok() && !b.noisy, "step {step}");
            }
            let moved = best.as_ref().map(|b| &b.id) != best_before.as_ref().map(|b| &b.id);
            assert_eq!(
                outcome == CommitOutcome::Inserted { is_new_best: true },
                moved,
                "step {step}"
            );
            let counts = s.count(w, t).await.unwrap();
            assert_eq!(counts.total as usize, after.len());
            assert_eq!(
                counts.ok as usize,
                after.iter().filter(|x| x.error_code == 0).count()
            );
            let top = s.top_k(w, t, 5).await.unwrap();
            assert_eq!(top.first().and_then(|r| r.mean_cost), brute);
            assert!(top.windows(2).all(|p| p[0].mean_cost <= p[1].mean_cost));
        }
    }

    #[tokio::test]
    async fn counts_of_records_stored_before_migration_3_are_backfilled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        {
            // A database at schema version 2, with records written as version 2 wrote them.
            let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}?mode=rwc", path.display()))
                .await
                .unwrap();
            let all = sqlx::migrate!("../migrations");
            let v2 = sqlx::migrate::Migrator {
                migrations: all.migrations[..2].to_vec().into(),
                ..sqlx::migrate::Migrator::DEFAULT
            };
            v2.run(&pool).await.unwrap();
            sqlx::query(
                "INSERT INTO workloads VALUES ('w0', 'w', '{}', 1, 0), ('w1', 'w', '{}', 1, 0)",
            )
            .execute(&pool)
            .await
            .unwrap();
            sqlx::query("INSERT INTO targets VALUES ('t0', '{}', 0)")
                .execute(&pool)
                .await
                .unwrap();
            for (id, w, code) in [
                ("a", "w0", 0),
                ("b", "w0", 2),
                ("c", "w0", 0),
                ("d", "w1", 5),
            ] {
                let mean = (code == 0).then_some(1e-3);
                sqlx::query(
                    "INSERT INTO records VALUES ($1, $2, 't0', $1, '[]', '[]', $3, $4, '', 0, 0, 0, NULL, 0)",
                )
                .bind(id)
                .bind(w)
                .bind(mean)
                .bind(code)
                .execute(&pool)
                .await
                .unwrap();
            }
            pool.close().await;
        }
        let s = SqlStore::open(path.to_str().unwrap()).await.unwrap();
        assert_eq!(
            s.count("w0", "t0").await.unwrap(),
            RecordCounts { total: 3, ok: 2 }
        );
        assert_eq!(
            s.count("w1", "t0").await.unwrap(),
            RecordCounts { total: 1, ok: 0 }
        );
        // And kept from there on.
        s.commit(&rec("w1", "t0", 9, &[2e-3], ErrorCode::NoError, false))
            .await
            .unwrap();
        assert_eq!(
            s.count("w1", "t0").await.unwrap(),
            RecordCounts { total: 2, ok: 1 }
        );
        assert_eq!(s.targets_of("w0").await.unwrap(), [("t0".to_string(), 3)]);
        let targets = s.targets().await.unwrap();
        assert_eq!((targets[0].0.as_str(), targets[0].2), ("t0", 5));
    }

    #[tokio::test]
    async fn reopening_the_file_keeps_everything() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let (records, best, workload) = {
            let s = new_store(&dir).await;
            s.commit(&ok(1, 2e-3)).await.unwrap();
            s.commit(&ok(2, 1e-3)).await.unwrap();
            s.commit(&rec(W, T, 3, &[], ErrorCode::CompileError, false))
                .await
                .unwrap();
            let out = (
                s.records(W, T).await.unwrap(),
                s.best(W, T).await.unwrap(),
                s.workload(W).await.unwrap(),
            );
            s.close().await;
            out
        };
        let s = SqlStore::open(path.to_str().unwrap()).await.unwrap();
        assert_eq!(s.records(W, T).await.unwrap(), records);
        assert_eq!(s.best(W, T).await.unwrap(), best);
        let w = s.workload(W).await.unwrap().unwrap();
        assert_eq!(Some(&w), workload.as_ref());
        assert_eq!(
            (w.description.as_deref(), w.flops),
            (Some("op w0"), 1_000_000)
        );
        assert_eq!(s.target_json(T).await.unwrap().as_deref(), Some("{}"));
        assert_eq!(s.target_json("zz").await.unwrap(), None);
        assert_eq!(
            s.count(W, T).await.unwrap(),
            RecordCounts { total: 3, ok: 2 }
        );
        // Putting a known workload again keeps the first description.
        s.put_workload(W, "renamed", "{}", 1).await.unwrap();
        assert_eq!(
            s.workload(W).await.unwrap().unwrap().description.as_deref(),
            Some("op w0")
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_commits_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let s = Arc::new(new_store(&dir).await);
        let tasks: Vec<_> = (0..8u32)
            .map(|t| {
                let s = Arc::clone(&s);
                tokio::spawn(async move {
                    for i in 0..25u32 {
                        // Every task also re-reports a shared candidate, to race on duplicates.
                        let sched = if i == 0 { 0 } else { t * 1000 + i };
                        let cost = f64::from(1 + (sched * 7919) % 997) * 1e-6;
                        s.commit(&ok(sched, cost)).await.unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let all = s.records(W, T).await.unwrap();
        assert_eq!(all.len(), 8 * 24 + 1);
        assert_eq!(
            s.count(W, T).await.unwrap(),
            RecordCounts {
                total: 193,
                ok: 193
            }
        );
        let min = all
            .iter()
            .map(|r| r.mean_cost.unwrap())
            .fold(f64::INFINITY, f64::min);
        assert_eq!(s.best(W, T).await.unwrap().unwrap().mean_cost, Some(min));
    }

    #[test]
    fn ids_and_hashes_are_stable() {
        let steps = canonical_steps("[ [\"SP\", 0, 1, 512, [16, 4], 1] ]").unwrap();
        assert_eq!(steps, r#"[["SP",0,1,512,[16,4],1]]"#);
        let h = schedule_hash(&steps);
        assert_eq!(h.len(), 32);
        assert_eq!(
            h,
            schedule_hash(&canonical_steps(r#"[["SP",0,1,512,[16,4],1]]"#).unwrap())
        );
        assert_ne!(record_id("a", "b", &h), record_id("a", "c", &h));
        // The separator keeps ("ab", "c") and ("a", "bc") apart.
        assert_ne!(record_id("ab", "c", &h), record_id("a", "bc", &h));
    }

    #[test]
    fn new_record_from_a_measurement() {
        let m = MeasureResult {
            costs: vec![1.0, 3.0],
            error: ErrorCode::NoError,
            error_msg: String::new(),
            build_s: 1.0,
            run_s: 2.0,
            noisy: false,
        };
        let r = NewRecord::from_measure("w", "t", "[]".into(), &m, Some("local"));
        assert_eq!(r.mean_cost(), Some(2.0));
        assert!(r.qualifies_for_best());
        let e = NewRecord::from_measure(
            "w",
            "t",
            "[]".into(),
            &MeasureResult::error(ErrorCode::CompileError, "x"),
            None,
        );
        assert_eq!((e.mean_cost(), e.error_code, e.worker), (None, 2, None));
    }
}
