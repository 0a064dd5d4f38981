//! `tunehub ops`: the operator library as a person reads it.

use crate::usage::emit;
use std::fmt::Write;
use std::process::ExitCode;
use tunehub_engine::ops::{IntegerForm, OPS, OpDef};

pub fn run() -> anyhow::Result<ExitCode> {
    emit(&render())?;
    Ok(ExitCode::SUCCESS)
}

/// The spec signature: required parameters bare, optional ones with their defaults,
/// e.g. `conv2d_nchw(n, c, h, w, f, kh=3, ...)`.
pub fn signature(op: &OpDef) -> String {
    let params: Vec<String> = op
        .params
        .iter()
        .map(|p| match p.default {
            Some(d) => format!("{}={d}", p.name),
            None => p.name.to_string(),
        })
        .collect();
    format!("{}({})", op.name, params.join(", "))
}

/// Every operator: signature, what it computes, and each parameter's meaning.
pub fn render() -> String {
    let mut out = String::new();
    for op in OPS {
        let _ = writeln!(out, "{}\n    {}", signature(op), op.doc);
        let width = op.params.iter().map(|p| p.name.len()).max().unwrap_or(0);
        for p in op.params {
            let default = p
                .default
                .map_or_else(|| "required".to_string(), |d| format!("default {d}"));
            let _ = writeln!(out, "    {:width$}  {} ({default})", p.name, p.doc);
        }
        match op.integer {
            Some(IntegerForm::Sum { .. }) => {
                let _ = writeln!(
                    out,
                    "    integer forms: dtype=u8i8|i8i8 (8-bit data and weights, i32 result), \
                     out_dtype=u8|i8 (requantized)"
                );
            }
            Some(IntegerForm::Compare) => {
                let _ = writeln!(out, "    integer forms: dtype=u8|i8 (8-bit, exact)");
            }
            None => {}
        }
        out.push('\n');
    }
    out.push_str(
        "Positional values fill parameters in order; named ones (name=value) may follow.\n\
         Example: tunehub tune 'conv2d_nchw(1, 64, 56, 56, 64, pad=1)'\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_every_operator_with_its_parameters() {
        let text = render();
        for op in OPS {
            assert!(text.contains(&signature(op)), "{}", op.name);
            for p in op.params {
                assert!(text.contains(p.doc), "{}.{}", op.name, p.name);
            }
        }
        let matmul = OPS.iter().find(|o| o.name == "matmul").unwrap();
        assert_eq!(signature(matmul), "matmul(m, n, k)");
        let conv = OPS.iter().find(|o| o.name == "conv2d_nchw").unwrap();
        assert!(signature(conv).contains("pad=0"), "{}", signature(conv));
    }
}
