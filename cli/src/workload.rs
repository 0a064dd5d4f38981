//! Workloads as the command line gives them, as the API's: an op spec, a shape range, a text
//! form, a key, a network's task. An op spec or a range is parsed here, once, by the engine's
//! `OpSpec` (so bad input is refused before anything is opened) and sent in its canonical form,
//! which says its layout (`layout_free=`): the service resolves the same text the same way.

use crate::usage::UsageError;
use tunehub_engine::ops::OpSpec;
use tunehub_engine::transfer::ShapeRange;
use tunehub_proto::v1 as pb;

/// An op spec as the API's workload, in its canonical form.
pub fn from_op_spec(spec: &str) -> Result<pb::Workload, UsageError> {
    let spec = OpSpec::parse(spec).map_err(|e| UsageError(e.to_string()))?;
    Ok(of_spec(&spec))
}

/// A parsed op spec as the API's workload.
pub fn of_spec(spec: &OpSpec) -> pb::Workload {
    pb::Workload {
        kind: Some(pb::workload::Kind::OpSpec(spec.to_string())),
        options: None,
    }
}

/// Checks a text form here, as the service would, so that bad input is refused before a
/// database is opened (nothing created, nothing stored).
pub fn check(w: &pb::Workload) -> Result<(), UsageError> {
    match &w.kind {
        Some(pb::workload::Kind::Expr(src)) => tunehub_engine::text::parse(src)
            .map(|_| ())
            .map_err(|e| UsageError(format!("expr: {e}"))),
        _ => Ok(()),
    }
}

/// Whether an op spec on the command line is a shape range: a parameter given as `lo..hi`.
pub fn is_range(spec: &str) -> bool {
    spec.contains("..")
}

/// A shape range as the API's range with `trials` per representative shape, in its canonical
/// form (its layout written in it, as an op spec's).
pub fn range_from_spec(spec: &str, trials: u32) -> Result<pb::ShapeRange, UsageError> {
    let range = ShapeRange::parse(spec).map_err(|e| UsageError(e.to_string()))?;
    Ok(pb::ShapeRange {
        spec: range.to_string(),
        options: None,
        trials,
    })
}

/// A text form as the API's workload.
pub fn from_expr(src: &str) -> pb::Workload {
    pb::Workload {
        kind: Some(pb::workload::Kind::Expr(src.to_string())),
        options: None,
    }
}

/// A network's task (`tunehub-onnx`) as the API's workload: the service's own conversion.
pub use tunehub_server::workload::of_net_task;

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
    use tunehub_server::workload::task_of;

    fn key(w: &pb::Workload) -> String {
        task_of(w).unwrap().unwrap().key
    }

    /// What the command line sends is what the service makes of the same text: one parse, one
    /// default, whichever client wrote it.
    #[test]
    fn the_command_line_sends_what_the_api_resolves() {
        for text in [
            "matmul(64,64,64)",
            "matmul(64,64,64,layout_free=none)",
            " conv2d_nchw(n=1,c=2,h=5,w=5,f=2) ",
            "softmax(8,8)",
        ] {
            let sent = from_op_spec(text).unwrap();
            let raw = pb::Workload {
                kind: Some(pb::workload::Kind::OpSpec(text.into())),
                options: None,
            };
            assert_eq!(key(&sent), key(&raw), "{text}");
            let Some(pb::workload::Kind::OpSpec(canonical)) = &sent.kind else {
                panic!("an op spec")
            };
            // Pasted back, the printed form is the same workload.
            assert_eq!(&from_op_spec(canonical).unwrap(), &sent, "{text}");
        }
        let Some(pb::workload::Kind::OpSpec(s)) = from_op_spec("matmul(64,64,64)").unwrap().kind
        else {
            panic!()
        };
        assert_eq!(s, "matmul(m=64,n=64,k=64,layout_free=B)");
        assert!(from_op_spec("matmul(64,64)").is_err());
        assert!(
            range_from_spec("matmul(m=1..64,n=8,k=8)", 4)
                .unwrap()
                .spec
                .contains("layout_free=B")
        );
    }
}
