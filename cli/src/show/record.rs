//! Records and kernels as text and JSON: the proto's fields by their names.

use serde_json::json;
use tunehub_proto::v1 as pb;

pub fn record_text(r: &pb::ScheduleRecord) -> String {
    format!(
        "best      {:.4} ms  {:.2} GFLOP/s  (record {}, by {})\nsteps     {}\n",
        r.seconds * 1e3,
        r.gflops,
        r.record_id,
        r.worker,
        r.steps_json
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
