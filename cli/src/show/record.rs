//! Records and kernels as text and JSON: the proto's fields by their names.

use super::time::time_text;
use super::workload::short;
use serde_json::json;
use tunehub_proto::v1 as pb;

/// `(a, b)` of the parts that are there; nothing when none is.
fn parenthesised(parts: &[Option<String>]) -> String {
    let there: Vec<&str> = parts.iter().flatten().map(String::as_str).collect();
    if there.is_empty() {
        String::new()
    } else {
        format!("  ({})", there.join(", "))
    }
}

/// A text when it is not empty.
fn given(text: &str, as_shown: impl FnOnce(&str) -> String) -> Option<String> {
    (!text.is_empty()).then(|| as_shown(text))
}

/// A record's time, speed and origin, and its steps. A transferred answer not measured yet has
/// neither a record id nor a worker: only what is there is printed.
pub fn record_text(r: &pb::ScheduleRecord) -> String {
    format!(
        "best      {}  {:.2} GFLOP/s{}\nsteps     {}\n",
        time_text(r.seconds),
        r.gflops,
        parenthesised(&[
            given(&r.record_id, |id| format!("record {id}")),
            given(&r.worker, |w| format!("by {w}")),
            r.noisy.then(|| {
                "noisy: every success was timed on a slowed machine; this time is an upper \
                 bound (tune again on a quieter machine)"
                    .to_string()
            }),
        ]),
        r.steps_json
    )
}

/// Where a transferred answer comes from, and its predicted time: only what is there.
pub fn transfer_text(t: &pb::Transfer) -> String {
    let source = match (t.source_workload_key.as_str(), short(&t.source_description)) {
        ("", "") => None,
        (k, "") | ("", k) => Some(format!("from {k}")),
        (k, d) => Some(format!("from {k} ({d})")),
    };
    let parts: Vec<String> = [
        source,
        given(&t.source_record_id, |id| format!("record {id}")),
        Some(format!("distance {:.2}", t.distance)),
    ]
    .into_iter()
    .flatten()
    .collect();
    format!(
        "{}: predicted {}, not measured",
        parts.join(", "),
        time_text(t.predicted_seconds)
    )
}

pub fn record_json(r: &pb::ScheduleRecord) -> serde_json::Value {
    json!({
        "record_id": r.record_id,
        "mean_ms": r.seconds * 1e3,
        "gflops": r.gflops,
        "costs": r.costs,
        "worker": r.worker,
        "created_at_ms": r.created_at_ms,
        "noisy": r.noisy,
        "steps": serde_json::from_str::<serde_json::Value>(&r.steps_json).unwrap_or(serde_json::Value::Null),
    })
}

/// A Kernel as JSON: the proto's fields by their names.
pub fn kernel_json(k: &pb::Kernel) -> serde_json::Value {
    json!({
        "symbol": k.symbol,
        "source": k.source,
        "header": k.header,
        "args": k.args.iter().map(|a| json!({
            "name": a.name, "role": a.role, "dtype": a.dtype, "shape": a.shape,
            "strides": a.strides, "alignment": a.alignment, "layout": a.layout,
            "pack_function": a.pack_function, "packed_elements": a.packed_elements,
        })).collect::<Vec<_>>(),
        "cflags": k.cflags,
        "ldflags": k.ldflags,
        "compiler": k.compiler,
        "compiler_version": k.compiler_version,
        "threads": k.threads,
        "set_num_threads": k.set_num_threads,
        "record_id": k.record_id,
        "workload_key": k.workload_key,
        "target_key": k.target_key,
        "description": k.description,
        "gflops": k.gflops,
    })
}

pub fn transfer_json(t: &pb::Transfer) -> serde_json::Value {
    json!({
        "source_record_id": t.source_record_id,
        "source_workload_key": t.source_workload_key,
        "source_description": t.source_description,
        "distance": t.distance,
        "predicted_ms": t.predicted_seconds * 1e3,
        "dropped": t.dropped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_shows_only_the_fields_it_has() {
        let mut r = pb::ScheduleRecord {
            record_id: "r-1".into(),
            worker: "board-1".into(),
            seconds: 29e-9,
            gflops: 1.5,
            steps_json: "[]".into(),
            ..Default::default()
        };
        let full = record_text(&r);
        assert!(
            full.starts_with("best      29.00 ns  1.50 GFLOP/s  (record r-1, by board-1)\n"),
            "{full}"
        );
        r.worker.clear();
        assert!(
            record_text(&r).contains("(record r-1)\n"),
            "{}",
            record_text(&r)
        );
        r.record_id.clear();
        let bare = record_text(&r);
        assert!(
            bare.starts_with("best      29.00 ns  1.50 GFLOP/s\n"),
            "{bare}"
        );
        assert!(!bare.contains("record") && !bare.contains("by"), "{bare}");
        r.noisy = true;
        assert!(record_text(&r).contains("(noisy: "), "{}", record_text(&r));
    }

    #[test]
    fn a_transfer_shows_only_the_fields_it_has() {
        let mut t = pb::Transfer {
            source_record_id: "r-9".into(),
            source_workload_key: "abc".into(),
            source_description: "matmul(m=512,n=512,k=512,layout_free=B)".into(),
            distance: 0.25,
            predicted_seconds: 1.5e-4,
            ..Default::default()
        };
        assert_eq!(
            transfer_text(&t),
            "from abc (matmul(m=512,n=512,k=512,layout_free=B)), record r-9, distance 0.25: \
             predicted 150.0 µs, not measured"
        );
        t.source_description.clear();
        t.source_record_id.clear();
        assert_eq!(
            transfer_text(&t),
            "from abc, distance 0.25: predicted 150.0 µs, not measured"
        );
        t.source_workload_key.clear();
        assert_eq!(
            transfer_text(&t),
            "distance 0.25: predicted 150.0 µs, not measured"
        );
    }
}
