//! Keeping the neighbour index (`neighbours`) read, for a server: every (structure, target)
//! set is read at start, and a target's sets again in the background after a forget. A
//! zero-shot answer then walks a vector in memory instead of waiting on the scan of thousands
//! of workloads (at 10,000 workloads the scan took 10-15 ms, most of an answer's budget).

use super::{SqlStore, StoreError};
use sqlx::Row;

impl SqlStore {
    /// Reads every set now, in the background, and again after each forget from here on.
    pub fn keep_neighbours_warm(&self) {
        self.neighbours.set_keep_warm();
        let store = self.clone();
        tokio::spawn(async move {
            let targets = match store.targets_with_bests().await {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!("listing the targets to read the neighbour index of: {e}");
                    return;
                }
            };
            for target in targets {
                store.refill_in_background(&target);
            }
        });
    }

    /// Reads `target`'s sets again in the background when the index is kept warm; a read under
    /// way reads once more when it ends instead.
    pub(super) fn refill_in_background(&self, target: &str) {
        if !self.neighbours.keeps_warm() || !self.neighbours.start_refill(target) {
            return;
        }
        let (store, target) = (self.clone(), target.to_string());
        tokio::spawn(async move {
            loop {
                if let Err(e) = store.refill(&target).await {
                    // The sets stay unread: an answer reads its own on a miss. A store closed
                    // meanwhile (the service stopping) is no fault.
                    if store.pool.is_closed() {
                        tracing::debug!(target_key = %target, "neighbour index not read: the store closed");
                    } else {
                        tracing::warn!(target_key = %target, "reading the neighbour index: {e}");
                    }
                }
                if !store.neighbours.refill_done(&target) {
                    break;
                }
            }
        });
    }

    /// Reads the set of every structure with a tuned workload on `target`.
    pub(crate) async fn refill(&self, target: &str) -> Result<(), StoreError> {
        let rows = sqlx::query(
            "SELECT DISTINCT w.structure_key FROM best_records b \
             JOIN workloads w ON w.key = b.workload_key \
             WHERE b.target_key = $1 AND w.structure_key <> ''",
        )
        .bind(target)
        .fetch_all(&self.pool)
        .await?;
        for row in &rows {
            let structure: String = row.try_get(0)?;
            self.read_tuned(&structure, target).await?;
        }
        Ok(())
    }

    async fn targets_with_bests(&self) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query("SELECT DISTINCT target_key FROM best_records")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| r.try_get(0).map_err(StoreError::from))
            .collect()
    }
}
