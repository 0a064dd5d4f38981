//! A workload's structure (`migrations/0006`): its extent-free key and its extents, written
//! with the workload and filled in on open for workloads stored before; and the lookup of the
//! nearest tuned workloads of one structure on a target, what warm starts and answers for
//! shapes never tuned start from.

use super::neighbours::{Lookup, Tuned};
use super::rows::{RECORD_COLUMNS, WORKLOAD_COLUMNS, record_from_row, workload_from_row};
use super::{Record, SqlStore, StoreError, Workload};
use sqlx::Row;
use std::collections::HashMap;
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
        let mut one = self.records_adapted_to(std::slice::from_ref(&self.best), task);
        one.pop().map(|(_, a)| a)
    }

    /// Those of `records` (of this workload) that adapt to `task`, in order, each with its
    /// adapted schedule. The workload's DAG is read once for all of them (a zero-shot answer
    /// adapts several records of each neighbour).
    pub fn records_adapted_to(
        &self,
        records: &[Record],
        task: &Task,
    ) -> Vec<(Record, transfer::Adapted)> {
        let Ok(source) = self.workload.to_task() else {
            return vec![];
        };
        let opts = task.lower_options();
        records
            .iter()
            .filter_map(|record| {
                let steps = Schedule::from_json(&record.steps_json).ok()?;
                match transfer::adapt_with(&steps, &source.dag, &task.dag, &opts) {
                    Ok(a) => Some((record.clone(), a)),
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
        let near = self.nearest_with_records(task, target_key, k, 1).await?;
        Ok(near.into_iter().map(|(n, _)| n).collect())
    }

    /// `nearest`, each neighbour with its `per` fastest records on the target (fastest first,
    /// the first its best): what a zero-shot answer adapts. Two queries for all the neighbours,
    /// not two per neighbour: each query is a round trip through the pool, and the answer is
    /// waited on. A workload whose records went meanwhile is not a neighbour.
    pub async fn nearest_with_records(
        &self,
        task: &Task,
        target_key: &str,
        k: usize,
        per: usize,
    ) -> Result<Vec<(Neighbor, Vec<Record>)>, StoreError> {
        if k == 0 || per == 0 {
            return Ok(vec![]);
        }
        let structure = transfer::structure_key(&task.dag, &task.layout_free);
        let mine = transfer::log_extents(&transfer::extents(&task.dag));
        let workload_key = task.key.as_str();
        let tuned = self.tuned_of(&structure, target_key).await?;
        let mut near: Vec<(f64, &str)> = tuned
            .iter()
            .filter_map(|(key, theirs)| {
                Some((transfer::log_distance(&mine, theirs)?, key.as_str()))
            })
            .collect();
        let order =
            |a: &(f64, &str), b: &(f64, &str)| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(b.1));
        // The k nearest of thousands, and one more in case the task's own workload is among
        // them: selected, then only they are sorted and searched for it (comparing every key
        // with the task's cost more than the distances).
        if near.len() > k + 1 {
            near.select_nth_unstable_by(k, order);
            near.truncate(k + 1);
        }
        near.sort_by(order);
        near.retain(|(_, key)| *key != workload_key);
        near.truncate(k);
        if near.is_empty() {
            return Ok(vec![]);
        }
        let keys: Vec<&str> = near.iter().map(|(_, key)| *key).collect();
        let mut workloads = self.workloads_of(&keys).await?;
        let mut fastest = self.fastest_of(&keys, target_key, per).await?;
        let mut out = Vec::with_capacity(near.len());
        for (distance, key) in near {
            let (Some(workload), Some(records)) = (workloads.remove(key), fastest.remove(key))
            else {
                continue;
            };
            let best = records[0].clone();
            out.push((
                Neighbor {
                    workload,
                    distance,
                    best,
                },
                records,
            ));
        }
        Ok(out)
    }

    /// The stored workloads among `keys`, by key.
    async fn workloads_of(&self, keys: &[&str]) -> Result<HashMap<String, Workload>, StoreError> {
        let sql = format!(
            "SELECT {WORKLOAD_COLUMNS} FROM workloads WHERE key IN ({})",
            placeholders(1, keys.len())
        );
        let mut q = sqlx::query(&sql);
        for key in keys {
            q = q.bind(*key);
        }
        let rows = q.fetch_all(&self.pool).await?;
        rows.iter()
            .map(|row| workload_from_row(row).map(|w| (w.key.clone(), w)))
            .collect()
    }

    /// The `per` fastest measured records on `target_key` of each workload of `keys` (as
    /// `top_k` orders them: fastest, then oldest), by workload; a workload with none is absent.
    async fn fastest_of(
        &self,
        keys: &[&str],
        target_key: &str,
        per: usize,
    ) -> Result<HashMap<String, Vec<Record>>, StoreError> {
        let sql = format!(
            "SELECT {RECORD_COLUMNS} FROM (SELECT r.*, ROW_NUMBER() OVER (PARTITION BY r.workload_key \
             ORDER BY r.mean_cost ASC, r.created_at ASC, r.id ASC) AS place FROM records r \
             WHERE r.target_key = $1 AND r.mean_cost IS NOT NULL AND r.noisy = 0 \
             AND r.workload_key IN ({})) r WHERE r.place <= ${} ORDER BY r.workload_key, r.place",
            placeholders(2, keys.len()),
            keys.len() + 2
        );
        let mut q = sqlx::query(&sql).bind(target_key);
        for key in keys {
            q = q.bind(*key);
        }
        let rows = q
            .bind(i64::try_from(per).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await?;
        let mut out: HashMap<String, Vec<Record>> = HashMap::new();
        for row in &rows {
            let r = record_from_row(row)?;
            out.entry(r.workload_key.clone()).or_default().push(r);
        }
        Ok(out)
    }
}

/// `$from, $from+1, ...`: `n` positional parameters.
fn placeholders(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl SqlStore {
    /// Every workload of `structure` with a best record on `target_key`, with its extents: from
    /// memory (`neighbours`; renewed in the background once old), else one indexed query.
    async fn tuned_of(&self, structure: &str, target_key: &str) -> Result<Tuned, StoreError> {
        match self.neighbours.get(structure, target_key) {
            Lookup::Fresh(tuned) => Ok(tuned),
            Lookup::Stale(tuned) => {
                // Answered from the old entry; renewed in the background.
                let (store, structure, target) =
                    (self.clone(), structure.to_string(), target_key.to_string());
                tokio::spawn(async move {
                    if let Err(e) = store.read_tuned(&structure, &target).await {
                        tracing::warn!("renewing the tuned workloads of a structure: {e}");
                        store.neighbours.renew_failed(&structure, &target);
                    }
                });
                Ok(tuned)
            }
            Lookup::Missing => self.read_tuned(structure, target_key).await,
        }
    }

    /// Reads the tuned workloads of (structure, target) from the database into `neighbours`.
    pub(super) async fn read_tuned(
        &self,
        structure: &str,
        target_key: &str,
    ) -> Result<Tuned, StoreError> {
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
            tuned.push((key, transfer::log_extents(&extents)));
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
