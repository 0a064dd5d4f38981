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
            kind: Some(pb::workload::Kind::OpSpec("matmul(8,8,8)".into())),
        };
        assert!(task_of(&bad).unwrap().unwrap_err().contains("`Z`"));
        let key = pb::Workload {
            kind: Some(pb::workload::Kind::WorkloadKey("k".into())),
            options: None,
        };
        assert!(task_of(&key).is_none());
    }
}
