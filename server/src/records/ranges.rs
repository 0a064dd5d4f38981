//! Shape ranges in the database (`migrations/0010`): a range's row with its representative
//! shapes, the jobs that tuned it, and the lookups that Best (which ranges a workload may
//! belong to), Query.Range and the export need. The dispatch table itself is not stored: it is
//! the engine's function of the spec and the representatives, and each representative's
//! record is its current best.

use super::workload::{layout_free_json, options_from_columns};
use super::{SqlStore, StoreError, now_ms};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};
use tunehub_engine::task::WorkloadOptions;

/// One representative shape of a range: the values of its ranged extents, and its workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Representative {
    pub values: Vec<i64>,
    pub workload_key: String,
}

/// A stored range.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeRow {
    pub id: String,
    /// The canonical spec (`ShapeRange::spec`).
    pub spec: String,
    pub options: WorkloadOptions,
    pub target_key: String,
    pub structure_key: String,
    pub representatives: Vec<Representative>,
    pub created_at: i64,
}

/// A range's id: a content address of its canonical spec, its options and its target.
pub fn range_id(spec: &str, options: &WorkloadOptions, target_key: &str) -> String {
    let mut names = options.layout_free.clone();
    names.sort();
    let text = format!("{spec}\0{}\0{target_key}", names.join("+"));
    let hex: String = Sha256::digest(text.as_bytes())[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("rg-{hex}")
}

const RANGE_COLUMNS: &str = "id, spec, layout_free_json, target_key, structure_key, \
     representatives_json, created_at";

fn range_from_row(row: &AnyRow) -> Result<RangeRow, StoreError> {
    let id: String = row.try_get(0)?;
    let corrupt = |msg: String| StoreError::Corrupt {
        id: id.clone(),
        msg,
    };
    let options = options_from_columns(&id, &row.try_get::<String, _>(2)?).map_err(corrupt)?;
    let representatives = serde_json::from_str(&row.try_get::<String, _>(5)?)
        .map_err(|e| corrupt(format!("representatives_json: {e}")))?;
    Ok(RangeRow {
        spec: row.try_get(1)?,
        options,
        target_key: row.try_get(3)?,
        structure_key: row.try_get(4)?,
        representatives,
        created_at: row.try_get(6)?,
        id,
    })
}

/// Stores a range inside the caller's transaction. `replace`: a range submitted again takes
/// the new representatives; otherwise (an import) a known range is kept as it is.
pub(crate) async fn put_range_on(
    conn: &mut AnyConnection,
    r: &RangeRow,
    replace: bool,
) -> Result<(), StoreError> {
    let reps = serde_json::to_string(&r.representatives).expect("representatives serialize");
    let conflict = if replace {
        "ON CONFLICT (id) DO UPDATE SET representatives_json = excluded.representatives_json"
    } else {
        "ON CONFLICT (id) DO NOTHING"
    };
    sqlx::query(&format!(
        "INSERT INTO shape_ranges ({RANGE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7) {conflict}"
    ))
    .bind(&r.id)
    .bind(&r.spec)
    .bind(layout_free_json(&r.options))
    .bind(&r.target_key)
    .bind(&r.structure_key)
    .bind(reps)
    .bind(now_ms())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

impl SqlStore {
    pub async fn range(&self, id: &str) -> Result<Option<RangeRow>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {RANGE_COLUMNS} FROM shape_ranges WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(range_from_row).transpose()
    }

    /// The ranges of one structure on one target: those a workload of that structure with no
    /// record may belong to.
    pub async fn ranges_of_structure(
        &self,
        structure_key: &str,
        target_key: &str,
    ) -> Result<Vec<RangeRow>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {RANGE_COLUMNS} FROM shape_ranges WHERE structure_key = $1 AND target_key = $2 \
             ORDER BY created_at, id"
        ))
        .bind(structure_key)
        .bind(target_key)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(range_from_row).collect()
    }

    /// The range a job tunes, if it is a range job.
    pub async fn range_of_job(&self, job_id: &str) -> Result<Option<RangeRow>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {} FROM shape_ranges r JOIN shape_range_jobs j ON j.range_id = r.id \
             WHERE j.job_id = $1",
            RANGE_COLUMNS
                .split(", ")
                .map(|c| format!("r.{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .bind(job_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(range_from_row).transpose()
    }

    /// The jobs that tuned a range, oldest first.
    pub async fn range_jobs(&self, range_id: &str) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT j.job_id FROM shape_range_jobs j JOIN jobs b ON b.id = j.job_id \
             WHERE j.range_id = $1 ORDER BY b.created_at, b.id",
        )
        .bind(range_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Every range, optionally of one target, oldest first (the export's).
    pub async fn export_ranges(
        &self,
        target_key: Option<&str>,
    ) -> Result<Vec<RangeRow>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {RANGE_COLUMNS} FROM shape_ranges WHERE ($1 = '' OR target_key = $1) \
             ORDER BY created_at, id"
        ))
        .bind(target_key.unwrap_or(""))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(range_from_row).collect()
    }
}
