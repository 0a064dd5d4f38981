//! `RecordStore` over SQL: each method one statement or one transaction.

use super::commit::commit_on;
use super::counts::CountDeltas;
use super::rows::{RECORD_COLUMNS, WORKLOAD_COLUMNS, record_from_row, workload_from_row};
use super::structure::structure_columns;
use super::workload::layout_free_json;
use super::{
    CommitOutcome, NewRecord, Record, RecordCounts, RecordStore, SqlStore, StoreError, Workload,
    now_ms,
};
use sqlx::Row;
use tunehub_engine::task::WorkloadOptions;

impl RecordStore for SqlStore {
    async fn put_workload(
        &self,
        key: &str,
        description: &str,
        dag_json: &str,
        flops: u64,
        options: &WorkloadOptions,
    ) -> Result<(), StoreError> {
        let flops = i64::try_from(flops)
            .map_err(|_| StoreError::Invalid(format!("flops {flops} exceed BIGINT")))?;
        // A DAG that does not parse gets no structure (and is never anyone's neighbour); the
        // callers have checked it already.
        let (structure, extents) =
            structure_columns(dag_json, options).unwrap_or_else(|| (String::new(), "[]".into()));
        sqlx::query(
            "INSERT INTO workloads \
             (key, description, dag_json, flops, created_at, layout_free_json, structure_key, extents_json) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (key) DO NOTHING",
        )
        .bind(key)
        .bind(description)
        .bind(dag_json)
        .bind(flops)
        .bind(now_ms())
        .bind(layout_free_json(options))
        .bind(structure)
        .bind(extents)
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
            if outcome == (CommitOutcome::Inserted { is_new_best: true }) {
                self.bests_stored([(rec.target_key.as_str(), rec.workload_key.as_str())]);
            }
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
        self.one_record(&sql, workload_key, target_key).await
    }

    async fn quietest_noisy(
        &self,
        workload_key: &str,
        target_key: &str,
    ) -> Result<Option<Record>, StoreError> {
        let sql = format!(
            "SELECT {RECORD_COLUMNS} FROM records r \
             WHERE r.workload_key = $1 AND r.target_key = $2 AND r.mean_cost IS NOT NULL AND r.noisy = 1 \
               AND r.error_msg = '' \
             ORDER BY r.mean_cost ASC, r.created_at ASC, r.id ASC LIMIT 1"
        );
        self.one_record(&sql, workload_key, target_key).await
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
        let sql = format!("SELECT {WORKLOAD_COLUMNS} FROM workloads WHERE key = $1");
        let row = sqlx::query(&sql)
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(workload_from_row).transpose()
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

impl SqlStore {
    /// The record `sql` selects (`RECORD_COLUMNS`, `$1` the workload, `$2` the target), if any.
    async fn one_record(
        &self,
        sql: &str,
        workload_key: &str,
        target_key: &str,
    ) -> Result<Option<Record>, StoreError> {
        let row = sqlx::query(sql)
            .bind(workload_key)
            .bind(target_key)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(record_from_row).transpose()
    }

    /// `best` and `count` of one (workload, target) in one statement: what the best-record
    /// cache reads on a miss (every first question about a pair, and every zero-shot answer).
    pub async fn best_with_counts(
        &self,
        workload_key: &str,
        target_key: &str,
    ) -> Result<(Option<Record>, RecordCounts), StoreError> {
        // No counts row, no record at all (`commit_on` writes both).
        let sql = format!(
            "SELECT {RECORD_COLUMNS}, c.total, c.ok FROM record_counts c \
             LEFT JOIN best_records b ON b.workload_key = c.workload_key AND b.target_key = c.target_key \
             LEFT JOIN records r ON r.id = b.record_id \
             WHERE c.workload_key = $1 AND c.target_key = $2"
        );
        let Some(row) = sqlx::query(&sql)
            .bind(workload_key)
            .bind(target_key)
            .fetch_optional(&self.pool)
            .await?
        else {
            return Ok((None, RecordCounts::default()));
        };
        // By name: the record's columns come first, however many they are.
        let (total, ok): (i64, i64) = (row.try_get("total")?, row.try_get("ok")?);
        let counts = RecordCounts {
            total: total as u64,
            ok: ok as u64,
        };
        let best = match row.try_get::<Option<String>, _>(0)? {
            Some(_) => Some(record_from_row(&row)?),
            None => None,
        };
        Ok((best, counts))
    }
}
