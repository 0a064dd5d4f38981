//! A workload's structure (`migrations/0006`): its extent-free key and its extents, written
//! with the workload and filled in on open for workloads stored before; and the lookup of the
//! nearest tuned workloads of one structure on a target, what warm starts and answers for
//! shapes never tuned start from.

use super::neighbours::Tuned;
use super::{Record, RecordStore, SqlStore, StoreError, Workload};
use sqlx::Row;
use std::sync::Arc;
use std::time::Instant;
use tunehub_engine::ir::ComputeDag;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::task::{Task, WorkloadOptions};
use tunehub_engine::transfer;

/// A tuned workload of the same structure as the one asked about.
#[derive(Debug, Clone, PartialEq)]
pub struct Neighbor {
    pub workload: Workload,
    /// `transfer::distance` from the workload asked about (0: same extents).
    pub distance: f64,
    /// Its best record on the target.
    pub best: Record,
}

impl Neighbor {
    /// Its best schedule adapted to `task` (same structure); `None` when its DAG or steps do
    /// not read back or the schedule does not adapt.
    pub fn adapted_to(&self, task: &Task) -> Option<transfer::Adapted> {
        let mut one = self.records_adapted_to(vec![self.best.clone()], task);
        one.pop().map(|(_, a)| a)
    }

    /// Those of `records` (of this workload) that adapt to `task`, in order, each with its
    /// adapted schedule. The workload's DAG is read once for all of them (a zero-shot answer
    /// adapts several records of each neighbour).
    pub fn records_adapted_to(
        &self,
        records: Vec<Record>,
        task: &Task,
    ) -> Vec<(Record, transfer::Adapted)> {
        let Ok(source) = self.workload.to_task() else {
            return vec![];
        };
        records
            .into_iter()
            .filter_map(|record| {
                let steps = Schedule::from_json(&record.steps_json).ok()?;
                match transfer::adapt(&steps, &source.dag, &task.dag) {
                    Ok(a) => Some((record, a)),
                    Err(e) => {
                        tracing::debug!(source = %record.id, "not adapted: {e}");
                        None
                    }
                }
            })
            .collect()
    }
}

/// The structure key and the extents (as JSON) of a stored DAG with its options; `None` when
/// the DAG does not parse or the options do not fit it (such a workload is never a neighbour).
pub(crate) fn structure_columns(
    dag_json: &str,
    options: &WorkloadOptions,
) -> Option<(String, String)> {
    let dag: ComputeDag = serde_json::from_str(dag_json).ok()?;
    let task = Task::new(dag, "").with_options(options).ok()?;
    let key = transfer::structure_key(&task.dag, &task.layout_free);
    let extents = serde_json::to_string(&transfer::extents(&task.dag)).ok()?;
    Some((key, extents))
}

impl SqlStore {
    /// Computes the structure of workloads stored before version 6. Idempotent; reads only the
    /// rows still without one.
    pub(super) async fn fill_structure_keys(&self) -> Result<(), StoreError> {
        let rows = sqlx::query(
            "SELECT key, dag_json, layout_free_json FROM workloads WHERE structure_key = ''",
        )
        .fetch_all(&self.pool)
        .await?;
        for row in &rows {
            let key: String = row.try_get(0)?;
            let options =
                super::workload::options_from_columns(&key, &row.try_get::<String, _>(2)?)
                    .map_err(|msg| StoreError::Corrupt {
                        id: key.clone(),
                        msg,
                    })?;
            let Some((structure, extents)) =
                structure_columns(&row.try_get::<String, _>(1)?, &options)
            else {
                tracing::warn!(workload = %key, "stored DAG unreadable: no structure key");
                continue;
            };
            sqlx::query(
                "UPDATE workloads SET structure_key = $1, extents_json = $2 WHERE key = $3",
            )
            .bind(structure)
            .bind(extents)
            .bind(&key)
            .execute(&self.pool)
            .await?;
        }
        if !rows.is_empty() {
            tracing::info!(workloads = rows.len(), "structure keys computed");
        }
        Ok(())
    }

    /// Up to `k` workloads of the structure of `task` (stored or not) that have a best record
    /// on `target_key`, nearest first (ties by key), the task's own workload excluded.
    pub async fn nearest(
        &self,
        task: &Task,
        target_key: &str,
        k: usize,
    ) -> Result<Vec<Neighbor>, StoreError> {
        if k == 0 {
            return Ok(vec![]);
        }
        let structure = transfer::structure_key(&task.dag, &task.layout_free);
        let mine = transfer::extents(&task.dag);
        let workload_key = task.key.as_str();
        let tuned = self.tuned_of(&structure, target_key).await?;
        let mut near: Vec<(f64, &str)> = tuned
            .iter()
            .filter(|(key, _)| key != workload_key)
            .filter_map(|(key, theirs)| Some((transfer::distance(&mine, theirs)?, key.as_str())))
            .collect();
        near.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(b.1)));
        near.truncate(k);
        let mut out = Vec::with_capacity(near.len());
        for (distance, key) in near {
            let best = RecordStore::best(self, key, target_key).await?;
            let workload = RecordStore::workload(self, key).await?;
            // A best record gone meanwhile: not a neighbour.
            if let (Some(best), Some(workload)) = (best, workload) {
                out.push(Neighbor {
                    workload,
                    distance,
                    best,
                });
            }
        }
        Ok(out)
    }
}

impl SqlStore {
    /// Every workload of `structure` with a best record on `target_key`, with its extents: from
    /// memory while fresh (`neighbours`), else one indexed query.
    async fn tuned_of(&self, structure: &str, target_key: &str) -> Result<Tuned, StoreError> {
        if let Some(tuned) = self.neighbours.get(structure, target_key) {
            return Ok(tuned);
        }
        let at = Instant::now();
        let rows = sqlx::query(
            "SELECT w.key, w.extents_json FROM workloads w \
             JOIN best_records b ON b.workload_key = w.key AND b.target_key = $2 \
             WHERE w.structure_key = $1",
        )
        .bind(structure)
        .bind(target_key)
        .fetch_all(&self.pool)
        .await?;
        let mut tuned = Vec::with_capacity(rows.len());
        for row in &rows {
            let key: String = row.try_get(0)?;
            let extents = extents_of(&key, &row.try_get::<String, _>(1)?)?;
            tuned.push((key, extents));
        }
        let tuned: Tuned = Arc::new(tuned);
        self.neighbours
            .put(structure, target_key, at, Arc::clone(&tuned));
        Ok(tuned)
    }
}

fn extents_of(key: &str, json: &str) -> Result<Vec<i64>, StoreError> {
    serde_json::from_str(json).map_err(|e| StoreError::Corrupt {
        id: key.to_string(),
        msg: format!("extents_json: {e}"),
    })
}
