//! Workloads as people read them: a description's first line, with its options.

use tunehub_proto::v1 as pb;

/// A description's first line (a model's task: its label, the text form's first comment).
pub fn short(desc: &str) -> &str {
    let first = desc.lines().next().unwrap_or("").trim_end();
    first.strip_prefix("# ").unwrap_or(first)
}

/// A workload's layout-free inputs, for JSON outputs (`[]` for none).
pub fn layout_free(o: Option<&pb::WorkloadOptions>) -> Vec<String> {
    o.map(|o| o.layout_free.clone()).unwrap_or_default()
}

/// A description with its options, as it can be pasted back (the service's own rule).
pub use tunehub_server::workload::label;
