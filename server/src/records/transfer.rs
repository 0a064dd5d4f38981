//! Records out and in: the export's selection, and an import stored in one transaction.

use super::commit::commit_on;
use super::counts::CountDeltas;
use super::ranges::put_range_on;
use super::rows::{RECORD_COLUMNS, record_from_row};
use super::structure::structure_columns;
use super::workload::layout_free_json;
use super::{
    Backend, CommitOutcome, NewRecord, RangeRow, Record, SqlStore, StoreError, Workload, now_ms,
};

impl SqlStore {
    /// Records in export order (oldest first), optionally of one workload and/or one target.
    /// Records of one millisecond (a job's batch is stored in a few) come in the order they
    /// were stored on SQLite (its rowid), so a job's records read back in the order its
    /// batches proposed them (the benchmark's per-trial curve); PostgreSQL keeps no insertion
    /// order, so there they come by id.
    pub async fn export_records(
        &self,
        workload_key: Option<&str>,
        target_key: Option<&str>,
    ) -> Result<Vec<Record>, StoreError> {
        let then = match self.backend() {
            Backend::Sqlite => "r.rowid",
            Backend::Postgres => "r.id",
        };
        let sql = format!(
            "SELECT {RECORD_COLUMNS} FROM records r \
             WHERE ($1 = '' OR r.workload_key = $1) AND ($2 = '' OR r.target_key = $2) \
             ORDER BY r.created_at ASC, {then} ASC"
        );
        let rows = sqlx::query(&sql)
            .bind(workload_key.unwrap_or(""))
            .bind(target_key.unwrap_or(""))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(record_from_row).collect()
    }

    /// Stores imported workloads, targets, shape ranges and records in one transaction: (new,
    /// known) records. The caller has checked every item; a known range is kept as it is.
    pub async fn import(
        &self,
        workloads: &[Workload],
        targets: &[(String, String)],
        ranges: &[RangeRow],
        records: &[NewRecord],
    ) -> Result<(u64, u64), StoreError> {
        let mut tx = self.pool.begin().await?;
        let now = now_ms();
        for w in workloads {
            // With its structure, as `put_workload` stores it: an imported workload is a
            // neighbour for transfers at once, not after the next start.
            let (structure, extents) = structure_columns(&w.dag_json, &w.options)
                .unwrap_or_else(|| (String::new(), "[]".into()));
            sqlx::query(
                "INSERT INTO workloads \
                 (key, description, dag_json, flops, created_at, layout_free_json, structure_key, extents_json) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (key) DO NOTHING",
            )
            .bind(&w.key)
            .bind(w.description.as_deref())
            .bind(&w.dag_json)
            .bind(w.flops as i64)
            .bind(now)
            .bind(layout_free_json(&w.options))
            .bind(structure)
            .bind(extents)
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
        for r in ranges {
            put_range_on(&mut tx, r, false).await?;
        }
        let (mut new, mut known) = (0, 0);
        let mut counts = CountDeltas::default();
        let mut bests = vec![];
        for r in records {
            match commit_on(&mut tx, r, &mut counts).await?.1 {
                CommitOutcome::Duplicate => known += 1,
                CommitOutcome::Inserted { is_new_best } => {
                    new += 1;
                    if is_new_best {
                        bests.push((r.target_key.as_str(), r.workload_key.as_str()));
                    }
                }
            }
        }
        counts.write(&mut tx).await?;
        tx.commit().await?;
        self.bests_stored(bests);
        Ok((new, known))
    }
}
