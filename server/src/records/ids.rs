//! Ids computed here, never by the database (see `migrations/0001`'s header): canonical steps,
//! schedule hashes, record ids, and the clock.

use super::StoreError;
use sha2::{Digest, Sha256};
use std::time::{SystemTime, UNIX_EPOCH};

/// The steps JSON in canonical form: parsed and written back compactly, so that spacing (or
/// object key order) in a report does not make one schedule look like two.
pub fn canonical_steps(steps_json: &str) -> Result<String, StoreError> {
    let v: serde_json::Value = serde_json::from_str(steps_json).map_err(StoreError::BadSteps)?;
    Ok(v.to_string())
}

/// 16 bytes of a SHA-256, as 32 hex digits.
fn hex16(bytes: &[u8]) -> String {
    Sha256::digest(bytes)[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The schedule hash of canonical steps JSON.
pub fn schedule_hash(canonical_steps_json: &str) -> String {
    hex16(canonical_steps_json.as_bytes())
}

/// A record's id: a content address of what makes it unique (see the migration's header).
pub fn record_id(workload_key: &str, target_key: &str, schedule_hash: &str) -> String {
    hex16(format!("{workload_key}\0{target_key}\0{schedule_hash}").as_bytes())
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
