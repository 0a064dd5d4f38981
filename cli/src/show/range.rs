//! A shape range's dispatch table as text and JSON.

use super::workload::{label, layout_free};
use serde_json::json;
use std::fmt::Write as _;
use tunehub_proto::v1 as pb;

/// A range's dispatch table as JSON: the proto's fields by their names.
pub fn range_json(r: &pb::RangeResponse) -> serde_json::Value {
    let range = r.range.clone().unwrap_or_default();
    json!({
        "id": range.id,
        "spec": range.spec,
        "layout_free": layout_free(r.options.as_ref()),
        "target_key": r.target_key,
        "job_ids": r.job_ids,
        "entries": r.entries.iter().map(|e| json!({
            "intervals": e.intervals.iter().map(|i| json!({"extent": i.extent, "lo": i.lo, "hi": i.hi})).collect::<Vec<_>>(),
            "values": e.values,
            "workload_key": e.workload_key,
            "description": e.description,
            "record_id": e.record_id,
            "mean_ms": e.seconds * 1e3,
            "gflops": e.gflops,
            "records_total": e.records_total,
        })).collect::<Vec<_>>(),
    })
}

/// A range's dispatch table for people: a row per representative, the interval of each ranged
/// extent it serves.
pub fn range_text(r: &pb::RangeResponse) -> String {
    let range = r.range.clone().unwrap_or_default();
    let mut t = String::new();
    let _ = writeln!(
        t,
        "range     {}  ({})",
        label(&range.spec, r.options.as_ref()),
        range.id
    );
    let _ = writeln!(t, "target    {}", r.target_key);
    if !r.job_ids.is_empty() {
        let _ = writeln!(t, "jobs      {}", r.job_ids.join(", "));
    }
    let extents: Vec<String> = r
        .entries
        .first()
        .map(|e| {
            e.intervals
                .iter()
                .map(|i| i.extent.to_uppercase())
                .collect()
        })
        .unwrap_or_default();
    for x in &extents {
        let _ = write!(t, "{x:<14}");
    }
    let _ = writeln!(t, "{:<40} {:<32} {:>10}", "SERVED BY", "RECORD", "GFLOP/s");
    for e in &r.entries {
        for i in &e.intervals {
            let _ = write!(t, "{:<14}", format!("{}..{}", i.lo, i.hi));
        }
        let (record, gflops) = if e.record_id.is_empty() {
            ("(not tuned yet)".to_string(), "-".to_string())
        } else {
            (e.record_id.clone(), format!("{:.2}", e.gflops))
        };
        let _ = writeln!(t, "{:<40} {record:<32} {gflops:>10}", e.description);
    }
    t
}
