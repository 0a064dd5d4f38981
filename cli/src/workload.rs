//! Workloads as the command line gives them, as the API's: an op spec, a text form, a key, a
//! network's task; a `layout_free=` argument inside an op spec becomes the typed option.

use crate::usage::UsageError;
use tunehub_engine::ops;
use tunehub_engine::task::WorkloadOptions;
use tunehub_proto::v1 as pb;
use tunehub_server::workload::options_to_pb;

/// An op spec as the command line takes it, as the API's workload: a `layout_free=X+Y`
/// argument inside it (`matmul(512,512,512,layout_free=B)`) becomes the typed option.
pub fn from_op_spec(spec: &str) -> pb::Workload {
    let (clean, mut options) = WorkloadOptions::split_op_spec(spec.trim());
    if options.layout_free == ["none"] {
        options.layout_free.clear();
    } else if options.layout_free.is_empty() {
        // The library operator's constant weight, packed as at inference: the figures a user
        // gets by default are the packed kernels' (docs/experiments/2026-11-25-memory-bound.md).
        if let Ok((op, _)) = ops::parse_op_spec(&clean) {
            options.layout_free = ops::constant_weight(op.name)
                .map(|w| vec![w.to_string()])
                .unwrap_or_default();
        }
    }
    pb::Workload {
        kind: Some(pb::workload::Kind::OpSpec(clean)),
        options: options_to_pb(&options),
    }
}

/// Checks an op spec or a text form here, as the service would, so that bad input is refused
/// before a database is opened (nothing created, nothing stored).
pub fn check(w: &pb::Workload) -> Result<(), UsageError> {
    match tunehub_server::workload::task_of(w) {
        Some(Err(e)) => Err(UsageError(e)),
        _ => Ok(()),
    }
}

/// Whether an op spec on the command line is a shape range: a parameter given as `lo..hi`.
pub fn is_range(spec: &str) -> bool {
    spec.contains("..")
}

/// A shape range as the command line takes it, as the API's range with `trials` per
/// representative shape: `layout_free=` inside it and the operator's packed weight by default,
/// as `from_op_spec` (a spec that is no range is left for the server to refuse).
pub fn range_from_spec(spec: &str, trials: u32) -> pb::ShapeRange {
    let (clean, mut options) = WorkloadOptions::split_op_spec(spec.trim());
    if options.layout_free == ["none"] {
        options.layout_free.clear();
    } else if options.layout_free.is_empty()
        && let Ok(r) = tunehub_engine::transfer::range::parse(&clean)
    {
        options.layout_free = ops::constant_weight(r.op_name())
            .map(|w| vec![w.to_string()])
            .unwrap_or_default();
    }
    pb::ShapeRange {
        spec: clean,
        options: options_to_pb(&options),
        trials,
    }
}

/// A text form as the API's workload.
pub fn from_expr(src: &str) -> pb::Workload {
    pb::Workload {
        kind: Some(pb::workload::Kind::Expr(src.to_string())),
        options: None,
    }
}

/// A network's task (`tunehub-onnx`) as the API's workload: its op spec when it is a library
/// operator, else its text form; its layout-free weights as options.
pub fn of_net_task(t: &tunehub_onnx::NetTask) -> pb::Workload {
    let w = match &t.op_spec {
        Some(spec) => from_op_spec(spec),
        None => from_expr(&t.expr),
    };
    pb::Workload {
        options: options_to_pb(&t.options()),
        ..w
    }
}

/// A stored workload's key as the API's workload.
pub fn from_key(key: &str) -> pb::Workload {
    pb::Workload {
        kind: Some(pb::workload::Kind::WorkloadKey(key.to_string())),
        options: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::show::workload::label;
    use tunehub_engine::task::Task;
    use tunehub_server::workload::task_of;

    #[test]
    fn the_op_spec_sugar_becomes_typed_options() {
        let w = from_op_spec(" matmul(8,8,8,layout_free=B) ");
        assert_eq!(
            w.kind,
            Some(pb::workload::Kind::OpSpec("matmul(8,8,8)".into()))
        );
        assert_eq!(w.options.as_ref().unwrap().layout_free, ["B"]);
        let t = task_of(&w).unwrap().unwrap();
        let want = Task::new(ops::matmul(8, 8, 8).unwrap(), "x")
            .with_layout_free(&["B"])
            .unwrap();
        assert_eq!((t.key, t.desc.as_str()), (want.key, "matmul(8,8,8)"));
        // The weight is packed by default on the command line; `none` opts out.
        assert_eq!(
            from_op_spec("matmul(8,8,8)").options.unwrap().layout_free,
            ["B"]
        );
        assert_eq!(from_op_spec("matmul(8,8,8,layout_free=none)").options, None);
        assert_eq!(from_op_spec("softmax(8,8)").options, None);
        assert_eq!(
            from_op_spec("conv2d_nchw(n=1,c=2,h=5,w=5,f=2)")
                .options
                .unwrap()
                .layout_free,
            ["kernel"]
        );
        assert_eq!(
            label("matmul(8,8,8)", w.options.as_ref()),
            "matmul(8,8,8) [layout_free=B]"
        );
    }
}
