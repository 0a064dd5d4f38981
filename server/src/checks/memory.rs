//! The memory a workload's measurement needs, checked at the door. A measurement allocates
//! every tensor of the DAG (inputs, outputs, and each stage's intermediate unless a schedule
//! inlines it: counted, as the search may not) and a packed copy of each layout-free weight,
//! made beside the original. A workload past [`MAX_WORKLOAD_BYTES`] would fail every
//! candidate's run, or take its device's memory down with it; refused with its size, it never
//! becomes a job that ends "done" at 0 trials (issue 64).
//!
//! Checked where a workload is to be measured: `Submit` (ranges' representatives too),
//! `SubmitModel` per task, and Best's `measure_transfer`. Answers from records are not
//! measurements: a workload measured elsewhere (imported) is still answered.

use super::limits::MAX_WORKLOAD_BYTES;
use tunehub_engine::ir::Stage;
use tunehub_engine::task::Task;

/// Bytes a measurement of `task` allocates (saturating: the DAG's own limit keeps each tensor
/// within 2^40 elements, not their sum).
pub fn workload_bytes(task: &Task) -> u64 {
    let stages = &task.dag.stages;
    let tensor = |s: &Stage| (s.num_elements() as u64).saturating_mul(s.dtype.bytes() as u64);
    let all = stages.iter().map(tensor).fold(0, u64::saturating_add);
    let inputs = task.dag.placeholders();
    let packed = task
        .layout_free
        .iter()
        .map(|&o| tensor(&stages[inputs[o]]))
        .fold(0, u64::saturating_add);
    all.saturating_add(packed)
}

/// `Err`: how much the workload needs and the limit, for the caller to name the task and say
/// what to do (smaller sizes; for a model, a smaller batch or input shapes).
pub fn check_workload_bytes(task: &Task) -> Result<(), String> {
    let bytes = workload_bytes(task);
    if bytes <= MAX_WORKLOAD_BYTES {
        return Ok(());
    }
    Err(format!(
        "its tensors (inputs, outputs and intermediates) take {} ({bytes} bytes), more than \
         the {} a workload may take to be measured",
        human(bytes),
        human(MAX_WORKLOAD_BYTES)
    ))
}

/// `4.0 TiB`, `512.0 MiB`: binary units, one decimal.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;
    use tunehub_proto::v1 as pb;

    /// As the API makes it: the operator's weight layout-free unless the spec says otherwise.
    fn task(spec: &str) -> Task {
        let w = pb::Workload {
            kind: Some(pb::workload::Kind::OpSpec(spec.into())),
            options: None,
        };
        crate::workload::task_of(&w).unwrap().unwrap()
    }

    #[test]
    fn every_tensor_and_packed_weight_is_counted() {
        // A 64x32 times 32x16 product: A, B (and B packed, layout-free by default), C.
        let packed = task("matmul(64,16,32)");
        assert_eq!(
            workload_bytes(&packed),
            4 * (64 * 32 + 2 * 32 * 16 + 64 * 16)
        );
        let plain = task("matmul(64,16,32,layout_free=none)");
        assert_eq!(workload_bytes(&plain), 4 * (64 * 32 + 32 * 16 + 64 * 16));
        assert!(check_workload_bytes(&plain).is_ok());
    }

    #[test]
    fn a_workload_too_large_to_measure_says_its_size_and_the_limit() {
        // Inside the DAG's 2^40 points, but its output alone is 4 TiB.
        let e = check_workload_bytes(&task("matmul(1048576,1048576,1)")).unwrap_err();
        assert!(e.contains("4.0 TiB") && e.contains("4.0 GiB"), "{e}");
        assert_eq!(human(1023), "1023 B");
        assert_eq!(human(3 << 19), "1.5 MiB");
    }
}
