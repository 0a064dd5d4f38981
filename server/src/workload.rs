//! Workloads at the API's edge: the typed options between the proto and the engine, the task
//! an op spec or text form makes, and the command line's op-spec sugar converted at the door.
//!
//! The server, the database and the workers carry a workload's options typed
//! (`Workload.options`, `workloads.layout_free_json`, `WorkPiece.options`); only the command
//! line still reads `layout_free=B` inside an op spec, as a shorthand for
//! `options.layout_free = ["B"]`. On the command line a library operator's constant weight is
//! layout-free unless the spec says otherwise (`layout_free=none`); the API takes the options
//! as given.

use tunehub_engine::task::{Task, WorkloadOptions};
use tunehub_engine::{ops, text};
use tunehub_proto::v1 as pb;

/// The engine's options of a request (unset: none).
pub fn options_from_pb(o: Option<&pb::WorkloadOptions>) -> WorkloadOptions {
    o.map_or_else(WorkloadOptions::default, |o| WorkloadOptions {
        layout_free: o.layout_free.clone(),
    })
}

/// The options as the API shows them: unset when there are none.
pub fn options_to_pb(o: &WorkloadOptions) -> Option<pb::WorkloadOptions> {
    (!o.is_empty()).then(|| pb::WorkloadOptions {
        layout_free: o.layout_free.clone(),
    })
}

/// The task of an op spec or a text form with its options; `None` for a workload key (the
/// database knows it). Bad input is a message naming what was wrong.
pub fn task_of(w: &pb::Workload) -> Option<Result<Task, String>> {
    use pb::workload::Kind;
    let options = options_from_pb(w.options.as_ref());
    let (dag, desc) = match w.kind.as_ref()? {
        Kind::OpSpec(spec) => match ops::build_op(spec) {
            Ok(dag) => (dag, spec.trim()),
            Err(e) if spec.contains("layout_free") => {
                return Some(Err(format!(
                    "op_spec '{spec}': {e} (layout-free inputs go in the workload's \
                     options.layout_free)"
                )));
            }
            Err(e) => return Some(Err(format!("op_spec '{spec}': {e}"))),
        },
        Kind::Expr(src) => match text::parse(src) {
            Ok(dag) => (dag, src.trim()),
            Err(e) => return Some(Err(format!("expr: {e}"))),
        },
        Kind::WorkloadKey(_) => return None,
    };
    Some(Task::new(dag, desc).with_options(&options))
}

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

/// A description with its options, for people: `matmul(8,8,8) [layout_free=B]`.
pub fn label(description: &str, options: Option<&pb::WorkloadOptions>) -> String {
    match options.filter(|o| !o.layout_free.is_empty()) {
        Some(o) => format!("{description} [layout_free={}]", o.layout_free.join("+")),
        None => description.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn the_api_does_not_read_the_sugar() {
        let w = pb::Workload {
            kind: Some(pb::workload::Kind::OpSpec(
                "matmul(8,8,8,layout_free=B)".into(),
            )),
            options: None,
        };
        let e = task_of(&w).unwrap().unwrap_err();
        assert!(e.contains("options.layout_free"), "{e}");
        let bad = pb::Workload {
            options: options_to_pb(&WorkloadOptions {
                layout_free: vec!["Z".into()],
            }),
            ..from_op_spec("matmul(8,8,8)")
        };
        assert!(task_of(&bad).unwrap().unwrap_err().contains("`Z`"));
        assert!(task_of(&from_key("k")).is_none());
    }
}
