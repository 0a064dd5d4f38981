//! Decoding rows: the record columns every query selects, in the order they are read.

use super::workload::options_from_columns;
use super::{Record, StoreError, Workload};
use sqlx::Row;
use sqlx::any::AnyRow;

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

/// The workload columns, in the order `workload_from_row` reads them.
pub(crate) const WORKLOAD_COLUMNS: &str =
    "key, description, dag_json, flops, created_at, layout_free_json";

pub(crate) fn workload_from_row(row: &AnyRow) -> Result<Workload, StoreError> {
    let key: String = row.try_get(0)?;
    let options = options_from_columns(&key, &row.try_get::<String, _>(5)?).map_err(|msg| {
        StoreError::Corrupt {
            id: key.clone(),
            msg,
        }
    })?;
    Ok(Workload {
        description: row.try_get(1)?,
        dag_json: row.try_get(2)?,
        flops: row.try_get::<i64, _>(3)? as u64,
        created_at: row.try_get(4)?,
        options,
        key,
    })
}
