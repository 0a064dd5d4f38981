//! Workloads stored before `migrations/0004` named their layout-free inputs only inside their
//! description (`matmul(512,512,512,layout_free=B)`). On open, such a workload's names move
//! into `layout_free_json` and its description keeps the op spec alone, once its DAG and the
//! names are checked to make its stored key (so its records keep matching). Done here, not in
//! the migration: reading the text needs string functions SQLite and PostgreSQL do not share.

use super::workload::layout_free_json;
use super::{SqlStore, StoreError, Workload};
use sqlx::Row;
use tunehub_engine::task::WorkloadOptions;

impl SqlStore {
    /// Moves the layout-free names of workloads stored before version 4 into their column.
    /// Idempotent, and cheap once done: only rows still without names whose description
    /// mentions them are read.
    pub(super) async fn move_legacy_layout_free(&self) -> Result<(), StoreError> {
        let rows = sqlx::query(
            "SELECT key, description, dag_json FROM workloads \
             WHERE layout_free_json = '[]' AND description LIKE '%layout!_free%' ESCAPE '!'",
        )
        .fetch_all(&self.pool)
        .await?;
        for row in &rows {
            let key: String = row.try_get(0)?;
            let Some(description) = row.try_get::<Option<String>, _>(1)? else {
                continue;
            };
            let (clean, options) = WorkloadOptions::split_op_spec(&description);
            if options.is_empty() {
                continue;
            }
            let w = Workload {
                key,
                description: Some(clean),
                dag_json: row.try_get(2)?,
                options,
                flops: 0,
                created_at: 0,
            };
            if let Err(e) = w.to_task() {
                // Not a layout-free workload after all (or not one this build reads): its
                // records match under its stored key either way, so it is left as it is.
                tracing::warn!(workload = %w.key, "description names layout_free, kept as text: {e}");
                continue;
            }
            sqlx::query(
                "UPDATE workloads SET layout_free_json = $1, description = $2 \
                 WHERE key = $3 AND layout_free_json = '[]'",
            )
            .bind(layout_free_json(&w.options))
            .bind(w.description.as_deref())
            .bind(&w.key)
            .execute(&self.pool)
            .await?;
            tracing::info!(workload = %w.key, "layout_free moved out of the description");
        }
        Ok(())
    }
}
