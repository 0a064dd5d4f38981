//! Workloads at the API's edge: the typed options between the proto and the engine, and the
//! task an op spec or a text form makes.
//!
//! The default of a library operator's layout is the API's, the same for every client: its
//! constant weight (a layer's) is layout-free, packed once in the order its loops read it, unless
//! the op spec (`layout_free=none`, `layout_free=A+B`) or the typed `options.layout_free` say
//! otherwise (`OpSpec::with_options`). A text form packs only what its options name. The
//! server, the database and the workers carry the resolved options typed
//! (`Workload.options`, `workloads.layout_free_json`, `WorkPiece.options`), and an op spec's
//! description is its canonical form, which says them.

use tunehub_engine::ops::OpSpec;
use tunehub_engine::task::{Task, WorkloadOptions};
use tunehub_engine::text;
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
    match w.kind.as_ref()? {
        Kind::OpSpec(spec) => Some(
            OpSpec::parse(spec)
                .and_then(|s| s.with_options(&options))
                .and_then(|s| s.task())
                .map_err(|e| format!("op_spec '{}': {e}", spec.trim())),
        ),
        Kind::Expr(src) => Some(match text::parse(src) {
            Ok(dag) => Task::new(dag, src.trim()).with_options(&options),
            Err(e) => Err(format!("expr: {e}")),
        }),
        Kind::WorkloadKey(_) => None,
    }
}

/// A network's task (`tunehub-onnx`) as the API's workload: its op spec when it is a library
/// operator (its layout written in it, canonically), else its text form with its layout-free
/// weights. The command line and `Jobs.SubmitModel` convert a model's tasks with it alike.
pub fn of_net_task(t: &tunehub_onnx::NetTask) -> pb::Workload {
    match &t.op_spec {
        Some(spec) => pb::Workload {
            kind: Some(pb::workload::Kind::OpSpec(spec.to_string())),
            options: None,
        },
        None => pb::Workload {
            kind: Some(pb::workload::Kind::Expr(t.expr.clone())),
            options: options_to_pb(&t.options()),
        },
    }
}

/// A description with its options, for people: `C[i] = ... [layout_free=B]`; an op spec's
/// canonical description says them already.
pub fn label(description: &str, options: Option<&pb::WorkloadOptions>) -> String {
    match options.filter(|o| !o.layout_free.is_empty() && !description.contains("layout_free=")) {
        Some(o) => format!("{description} [layout_free={}]", o.layout_free.join("+")),
        None => description.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(spec: &str, layout_free: &[&str]) -> pb::Workload {
        pb::Workload {
            kind: Some(pb::workload::Kind::OpSpec(spec.into())),
            options: options_to_pb(&WorkloadOptions {
                layout_free: layout_free.iter().map(|s| s.to_string()).collect(),
            }),
        }
    }

    fn key_of(w: &pb::Workload) -> String {
        task_of(w).unwrap().unwrap().key
    }

    /// One default for every client: the constant weight packed unless the spec or the typed
    /// options say otherwise, whichever way a client writes it.
    #[test]
    fn the_api_owns_the_default_layout() {
        let packed = Task::new(tunehub_engine::ops::matmul(8, 8, 8).unwrap(), "x")
            .with_layout_free(&["B"])
            .unwrap()
            .key;
        let plain = Task::new(tunehub_engine::ops::matmul(8, 8, 8).unwrap(), "x").key;
        assert_eq!(key_of(&op("matmul(8,8,8)", &[])), packed);
        assert_eq!(key_of(&op("matmul(8,8,8)", &["B"])), packed);
        assert_eq!(
            key_of(&op("matmul(m=8,n=8,k=8,layout_free=B)", &[])),
            packed
        );
        assert_eq!(key_of(&op("matmul(8,8,8,layout_free=none)", &[])), plain);
        let t = task_of(&op(" matmul(8,8,8) ", &[])).unwrap().unwrap();
        assert_eq!(
            t.desc, "matmul(m=8,n=8,k=8,layout_free=B)",
            "canonical, pasteable"
        );
        // What the spec says and the typed options contradict is refused, naming both.
        let e = task_of(&op("matmul(8,8,8,layout_free=none)", &["B"]))
            .unwrap()
            .unwrap_err();
        assert!(e.contains("layout_free"), "{e}");
        let e = task_of(&op("matmul(8,8,8)", &["Z"])).unwrap().unwrap_err();
        assert!(e.contains("Z"), "{e}");
        let key = pb::Workload {
            kind: Some(pb::workload::Kind::WorkloadKey("k".into())),
            options: None,
        };
        assert!(task_of(&key).is_none());
    }

    #[test]
    fn a_canonical_description_is_not_labelled_twice() {
        let o = options_to_pb(&WorkloadOptions {
            layout_free: vec!["B".into()],
        });
        assert_eq!(
            label("matmul(m=8,n=8,k=8,layout_free=B)", o.as_ref()),
            "matmul(m=8,n=8,k=8,layout_free=B)"
        );
        assert_eq!(
            label("C[i] = A[i]", o.as_ref()),
            "C[i] = A[i] [layout_free=B]"
        );
    }
}
