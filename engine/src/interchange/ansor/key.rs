//! Workload keys: `["tunehub.<op>", params..., layout_free]`, as Python's `json.dumps` writes
//! the key of a function registered by name (`", "` between items), so that the string TVM
//! makes from the registered definition and the one in an exported file are the same.

use super::AnsorError;
use crate::ops::{LayoutFree, OpDef, OpSpec};
use crate::task::{Task, WorkloadOptions};
use serde_json::Value;
use std::collections::BTreeMap;

/// The operators whose DAG is one to one a TE definition.
pub const OPERATORS: [&str; 6] = [
    "matmul",
    "batch_matmul",
    "dense",
    "conv2d_nchw",
    "conv2d_nhwc",
    "depthwise_conv2d_nchw",
];

/// Prefix of the registered TE functions' names.
pub const FUNC_PREFIX: &str = "tunehub.";

/// A library operator with all its parameters and its layout-free inputs.
#[derive(Clone)]
pub struct AnsorWorkload {
    pub op: &'static OpDef,
    pub params: BTreeMap<&'static str, i64>,
    /// Inputs by name whose layout the kernel chooses (Ansor's `layout_free_placeholders`).
    pub layout_free: Vec<String>,
}

impl std::fmt::Debug for AnsorWorkload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {:?}", self.op_spec(), self.layout_free)
    }
}

impl AnsorWorkload {
    /// From a stored workload's description (an op spec) and options; refused for the
    /// operators without a TE twin and for descriptions that are not op specs (the text form).
    pub fn from_op_spec(spec: &str, options: &WorkloadOptions) -> Result<Self, AnsorError> {
        // A stored description without `layout_free=` meant none; typed options, when there
        // are any, are the stored truth.
        let parsed = OpSpec::parse(spec)
            .map_err(|e| {
                AnsorError::Unsupported(format!("'{spec}' is not a library operator ({e})"))
            })?
            .unpacked_by_default();
        let op = parsed.op();
        // The export's TE twins are the f32 operators: an integer form under one of their keys
        // would be another computation's record.
        if parsed.dtype() != crate::ops::OpDType::F32 || parsed.out_dtype().is_some() {
            return Err(AnsorError::Unsupported(format!(
                "'{spec}': integer forms have no TE definition in the export (f32 only)"
            )));
        }
        if !OPERATORS.contains(&op.name) {
            return Err(AnsorError::Unsupported(format!(
                "{} has no one-to-one TE definition (exported: {})",
                op.name,
                OPERATORS.join(", ")
            )));
        }
        let layout_free = if options.is_empty() {
            parsed.options().layout_free
        } else {
            options.layout_free.clone()
        };
        Ok(AnsorWorkload {
            op,
            params: parsed.params().clone(),
            layout_free,
        })
    }

    /// The TVM workload key.
    pub fn key(&self) -> String {
        let mut items = vec![Value::from(format!("{FUNC_PREFIX}{}", self.op.name))];
        items.extend(
            self.op
                .params
                .iter()
                .map(|p| Value::from(self.params[p.name])),
        );
        items.push(Value::from(self.layout_free.join(",")));
        let parts: Vec<String> = items.iter().map(Value::to_string).collect();
        format!("[{}]", parts.join(", "))
    }

    /// Reads a key written by [`AnsorWorkload::key`] (any JSON spacing).
    pub fn parse_key(key: &str) -> Result<Self, AnsorError> {
        let bad = |msg: String| AnsorError::Key {
            key: key.chars().take(200).collect(),
            msg,
        };
        let v: Value = serde_json::from_str(key)
            .map_err(|_| bad("not a JSON list [\"function\", args...]".into()))?;
        let items = v
            .as_array()
            .ok_or_else(|| bad("not a JSON list [\"function\", args...]".into()))?;
        let func = items.first().and_then(Value::as_str).ok_or_else(|| {
            bad("no function name first (a Relay task's hashed key cannot be mapped)".into())
        })?;
        let known = || {
            OPERATORS
                .iter()
                .map(|o| format!("{FUNC_PREFIX}{o}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let op_name = func
            .strip_prefix(FUNC_PREFIX)
            .filter(|n| OPERATORS.contains(n))
            .ok_or_else(|| {
                bad(format!(
                    "unknown function '{func}' (known: {}; their TE definitions are in \
                     bench/ansor_apply.py)",
                    known()
                ))
            })?;
        let op = crate::ops::find_op(op_name).expect("OPERATORS are library operators");
        let want = op.params.len() + 2;
        if items.len() != want {
            return Err(bad(format!(
                "{func} takes {} arguments ({}, layout_free), got {}",
                want - 1,
                op.params
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", "),
                items.len() - 1
            )));
        }
        let mut values = vec![];
        for (p, x) in op.params.iter().zip(&items[1..]) {
            let n = x
                .as_i64()
                .ok_or_else(|| bad(format!("{} must be an integer, got {x}", p.name)))?;
            values.push((p.name, n));
        }
        // Checked as a typed spec's parameters; the layout-free names are checked by `task`.
        let params = OpSpec::new(op.name, &values, LayoutFree::Default)
            .map_err(|e| bad(e.to_string()))?
            .params()
            .clone();
        let lf = items[want - 1]
            .as_str()
            .ok_or_else(|| bad("the last argument (layout_free) must be a string".into()))?;
        let layout_free = lf
            .split(',')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        Ok(AnsorWorkload {
            op,
            params,
            layout_free,
        })
    }

    /// The op spec, every parameter named: the description of an imported workload.
    pub fn op_spec(&self) -> String {
        let ps: Vec<String> = self
            .op
            .params
            .iter()
            .map(|p| format!("{}={}", p.name, self.params[p.name]))
            .collect();
        format!("{}({})", self.op.name, ps.join(","))
    }

    /// The tuning task: the library DAG with the layout-free inputs.
    pub fn task(&self) -> Result<Task, AnsorError> {
        let dag = self
            .op
            .build(&self.params)
            .map_err(|e| AnsorError::Unsupported(e.to_string()))?;
        let names: Vec<&str> = self.layout_free.iter().map(String::as_str).collect();
        Task::new(dag, self.op_spec())
            .with_layout_free(&names)
            .map_err(AnsorError::Unsupported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_written_as_python_writes_them_and_read_back() {
        let w = AnsorWorkload::from_op_spec(
            "matmul(64,32,16)",
            &WorkloadOptions {
                layout_free: vec!["B".into()],
            },
        )
        .unwrap();
        assert_eq!(w.key(), r#"["tunehub.matmul", 64, 32, 16, "B"]"#);
        let back = AnsorWorkload::parse_key(r#"["tunehub.matmul",64,32,16,"B"]"#).unwrap();
        assert_eq!(back.task().unwrap().key, w.task().unwrap().key);
        let conv = AnsorWorkload::from_op_spec(
            "conv2d_nchw(n=1,c=4,h=8,w=8,f=4,pad=1)",
            &WorkloadOptions::default(),
        )
        .unwrap();
        assert_eq!(
            conv.key(),
            r#"["tunehub.conv2d_nchw", 1, 4, 8, 8, 4, 3, 3, 1, 1, 1, 0, 0, ""]"#
        );
        assert_eq!(
            conv.op_spec(),
            "conv2d_nchw(n=1,c=4,h=8,w=8,f=4,kh=3,kw=3,stride=1,pad=1,dilation=1,bias=0,relu=0)"
        );
    }

    #[test]
    fn other_keys_and_operators_are_refused_with_the_reason() {
        for (key, want) in [
            (
                r#"["matmul_add", 64, 64, 64, "float32"]"#,
                "unknown function",
            ),
            (r#"["3a1b2c", [1, 64]]"#, "unknown function"),
            (r#"[[1], 2]"#, "hashed key"),
            ("nope", "JSON list"),
            (r#"["tunehub.matmul", 64, 64]"#, "takes 4 arguments"),
            (
                r#"["tunehub.matmul", 64, 64, "x", ""]"#,
                "k must be an integer",
            ),
            (r#"["tunehub.matmul", 0, 64, 64, ""]"#, "out of range"),
            (r#"["tunehub.softmax", 4, 4, ""]"#, "unknown function"),
        ] {
            let e = AnsorWorkload::parse_key(key).unwrap_err().to_string();
            assert!(e.contains(want), "{key}: {e}");
        }
        let e = AnsorWorkload::from_op_spec("softmax(4,4)", &WorkloadOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("no one-to-one TE definition"), "{e}");
        // An integer form is not its f32 operator's TE twin.
        for spec in [
            "matmul(4,4,4,dtype=u8i8)",
            "conv2d_nhwc(1,4,4,8,8,dtype=i8i8,out_dtype=i8)",
        ] {
            let e = AnsorWorkload::from_op_spec(spec, &WorkloadOptions::default())
                .unwrap_err()
                .to_string();
            assert!(e.contains("integer forms"), "{spec}: {e}");
        }
        let lf = AnsorWorkload::parse_key(r#"["tunehub.matmul", 4, 4, 4, "Z"]"#)
            .unwrap()
            .task()
            .unwrap_err()
            .to_string();
        assert!(lf.contains("not an input"), "{lf}");
    }
}
