//! What has been tuned: the (workload, target) pairs with records, and the targets, for
//! `ListTuned`.

use super::workload::options_from_columns;
use super::{SqlStore, StoreError};
use sqlx::Row;
use tunehub_engine::task::WorkloadOptions;

/// One (workload, target) pair that has records: what `ListTuned` shows.
#[derive(Debug, Clone, PartialEq)]
pub struct TunedPair {
    pub workload_key: String,
    pub description: Option<String>,
    pub options: WorkloadOptions,
    pub target_key: String,
    pub flops: u64,
    pub trials: u64,
    pub ok: u64,
    /// Of the `ok` ones, those flagged noisy (never a best).
    pub noisy: u64,
    pub best_cost: Option<f64>,
}

impl SqlStore {
    /// Every (workload, target) pair with records, with counts and best cost.
    pub async fn tuned(&self) -> Result<Vec<TunedPair>, StoreError> {
        let rows = sqlx::query(
            "SELECT c.workload_key, w.description, c.target_key, w.flops, c.total, c.ok, b.mean_cost, \
             w.layout_free_json, c.noisy \
             FROM record_counts c JOIN workloads w ON w.key = c.workload_key \
             LEFT JOIN best_records b ON b.workload_key = c.workload_key AND b.target_key = c.target_key \
             ORDER BY c.target_key, c.workload_key",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let workload_key: String = r.try_get(0)?;
                let options = options_from_columns(&workload_key, &r.try_get::<String, _>(7)?)
                    .map_err(|msg| StoreError::Corrupt {
                        id: workload_key.clone(),
                        msg,
                    })?;
                Ok(TunedPair {
                    workload_key,
                    options,
                    description: r.try_get(1)?,
                    target_key: r.try_get(2)?,
                    flops: r.try_get::<i64, _>(3)? as u64,
                    trials: r.try_get::<i64, _>(4)? as u64,
                    ok: r.try_get::<i64, _>(5)? as u64,
                    noisy: r.try_get::<i64, _>(8)? as u64,
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
}
