//! Descriptions as they were stored before `OpSpec` (records, exported files, datasets): an op
//! spec with the `layout_free=` sugar and no default, no `layout_free=` meaning none packed.
//! Read with the op specs' own tokenizer; what is written now is `OpSpec`'s canonical form.

use super::spec::LAYOUT_FREE;
use super::syntax;
use crate::ir::ComputeDag;
use crate::task::{Task, WorkloadOptions};

impl WorkloadOptions {
    /// A stored description's sugar split off: `matmul(512,512,512,layout_free=B)` ->
    /// (`matmul(512,512,512)`, layout_free `["B"]`); the names as written (`none` too), no
    /// default applied (see [`split_layout_free`]).
    pub fn split_op_spec(spec: &str) -> (String, WorkloadOptions) {
        let (clean, layout_free) = split_layout_free(spec);
        (clean, WorkloadOptions { layout_free })
    }
}

impl Task {
    /// A task described by a stored `desc`, with the layout-free inputs it names (none when it
    /// names none: descriptions written before the default); `dag` is built from the spec
    /// without them.
    pub fn from_desc(dag: ComputeDag, desc: impl Into<String>) -> Result<Task, String> {
        let desc = desc.into();
        let names = split_layout_free(&desc).1;
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        Task::new(dag, desc).with_layout_free(&refs)
    }
}

/// Splits a `layout_free=X+Y` (or `layout_free=X`) argument off an op spec: the spec without
/// it, and the named inputs as written. `matmul(512,512,512,layout_free=B)` ->
/// (`matmul(512,512,512)`, `["B"]`). Anything that is not a well-formed call (a text form, a
/// malformed spec) goes on as it was written, for its parser to refuse, rather than be
/// repaired here. The call is split by the op specs' own tokenizer (`ops::syntax`).
pub fn split_layout_free(spec: &str) -> (String, Vec<String>) {
    let unchanged = || (spec.to_string(), vec![]);
    let Ok(call) = syntax::split_call(spec) else {
        return unchanged();
    };
    let Some((open, close)) = call.parens else {
        return unchanged();
    };
    let mut names = vec![];
    let mut kept = vec![];
    for a in &call.args {
        if a.key == Some(LAYOUT_FREE) {
            names.extend(a.value.split('+').map(|n| n.trim().to_string()));
        } else {
            kept.push(a.raw);
        }
    }
    if names.is_empty() {
        return unchanged();
    }
    (
        format!(
            "{}({}){}",
            &spec[..open],
            kept.join(","),
            &spec[close + 1..]
        ),
        names,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_free_is_split_off_an_op_spec() {
        assert_eq!(
            split_layout_free("matmul(512, 512, 512, layout_free=B)"),
            ("matmul(512, 512, 512)".to_string(), vec!["B".to_string()])
        );
        assert_eq!(
            split_layout_free("dense(n=1,layout_free=W+bias,k=4)"),
            (
                "dense(n=1,k=4)".to_string(),
                vec!["W".to_string(), "bias".to_string()]
            )
        );
        assert_eq!(split_layout_free("relu"), ("relu".to_string(), vec![]));
        // A malformed call is not repaired: the parser refuses it as written.
        for bad in [
            "matmul(64,64,64",
            "matmul(64,64,64,)",
            "matmul(8,8,8,layout_free=B",
            "matmul(8,8,8,layout_free=B,)",
        ] {
            assert_eq!(split_layout_free(bad), (bad.to_string(), vec![]), "{bad}");
        }
        // Names as written: `none` is the caller's to read.
        assert_eq!(
            split_layout_free(" matmul(8,8,8,layout_free=none) "),
            (" matmul(8,8,8) ".to_string(), vec!["none".to_string()])
        );
        // A text form is no call: left as it is.
        let text = "Y[i] = relu(X[i]) where i<4";
        assert_eq!(split_layout_free(text), (text.to_string(), vec![]));
    }
}
