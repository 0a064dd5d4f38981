//! Storing one record inside a transaction: the insert, the best-record update, the count.

use super::counts::CountDeltas;
use super::{
    CommitOutcome, NewRecord, StoreError, canonical_steps, now_ms, record_id, schedule_hash,
};
use sqlx::AnyConnection;

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
