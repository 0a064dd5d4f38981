//! Record counts a transaction adds, written once per (workload, target) before it commits.

use super::{NewRecord, StoreError};
use sqlx::AnyConnection;
use std::collections::BTreeMap;
use tunehub_engine::measure::ErrorCode;

/// Record counts a transaction added, per (workload, target): `commit_on` notes each insert and
/// `write` adds them to `record_counts` before the transaction commits, one statement per pair
/// rather than per record (an import stores thousands of records of a few pairs).
#[derive(Debug, Default)]
pub(crate) struct CountDeltas(BTreeMap<(String, String), (i64, i64, i64)>);

impl CountDeltas {
    pub(super) fn add(&mut self, rec: &NewRecord) {
        let d = self
            .0
            .entry((rec.workload_key.clone(), rec.target_key.clone()))
            .or_default();
        d.0 += 1;
        let ok = rec.error_code == ErrorCode::NoError.code();
        d.1 += i64::from(ok);
        d.2 += i64::from(ok && rec.noisy);
    }

    /// Adds the counts in the caller's transaction; in key order, so that two transactions
    /// lock the rows they share in the same order.
    pub(crate) async fn write(self, conn: &mut AnyConnection) -> Result<(), StoreError> {
        for ((workload_key, target_key), (total, ok, noisy)) in self.0 {
            sqlx::query(
                "INSERT INTO record_counts (workload_key, target_key, total, ok, noisy) \
                 VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (workload_key, target_key) DO UPDATE \
                 SET total = record_counts.total + excluded.total, ok = record_counts.ok + excluded.ok, \
                 noisy = record_counts.noisy + excluded.noisy",
            )
            .bind(workload_key)
            .bind(target_key)
            .bind(total)
            .bind(ok)
            .bind(noisy)
            .execute(&mut *conn)
            .await?;
        }
        Ok(())
    }
}
