//! Operand shapes of matrix products, checked before grouping. A model whose `MatMul` or `Gemm`
//! operands do not multiply is broken, not unsupported: tract's shape inference stops there,
//! the product (and all after it) has no shape, and the extraction used to find no task
//! without saying why (issue 64). Here the node is named with its operands' shapes and what
//! disagrees, whether or not the extraction is strict.

use crate::error::ImportError;
use crate::graph::{Graph, Node};

/// `[2,3]`.
fn dims(s: &[i64]) -> String {
    let d: Vec<String> = s.iter().map(i64::to_string).collect();
    format!("[{}]", d.join(","))
}

/// `Err` naming `n` when it is a matrix product whose known operand shapes do not multiply
/// (numpy's rules: inner dimensions equal, batch dimensions equal or 1). Unknown shapes and
/// 1-D operands are left to the classification, which says them.
pub fn check(g: &Graph, n: &Node) -> Result<(), ImportError> {
    let (ta, tb) = match n.op.as_str() {
        "MatMul" | "MatMulInteger" => (false, false),
        "Gemm" => (
            n.int("transA").unwrap_or(0) != 0,
            n.int("transB").unwrap_or(0) != 0,
        ),
        _ => return Ok(()),
    };
    let (Some(a), Some(b)) = (n.input(0), n.input(1)) else {
        return Ok(());
    };
    let (Some(sa), Some(sb)) = (g.shape(a), g.shape(b)) else {
        return Ok(());
    };
    let (ra, rb) = (sa.len(), sb.len());
    if ra < 2 || rb < 2 {
        return Ok(());
    }
    let bad = |why: String| {
        ImportError::node(
            n,
            format!(
                "its operands '{a}' {} and '{b}' {} do not multiply: {why}; the model is \
                 inconsistent (check its export), or an input shape given for it is wrong",
                dims(sa),
                dims(sb)
            ),
        )
    };
    let k_a = if ta { sa[ra - 2] } else { sa[ra - 1] };
    let k_b = if tb { sb[rb - 1] } else { sb[rb - 2] };
    if k_a != k_b {
        let which = |t: bool, last: &'static str, other: &'static str| if t { other } else { last };
        return Err(bad(format!(
            "the first's {} dimension ({k_a}) differs from the second's {} ({k_b})",
            which(ta, "last", "second-to-last"),
            which(tb, "second-to-last", "last"),
        )));
    }
    // Batch dimensions, aligned from the right: equal, or one of them 1.
    let (ba, bb) = (&sa[..ra - 2], &sb[..rb - 2]);
    for (x, y) in ba.iter().rev().zip(bb.iter().rev()) {
        if x != y && *x != 1 && *y != 1 {
            return Err(bad(format!(
                "their batch dimensions {} and {} do not broadcast ({x} against {y})",
                dims(ba),
                dims(bb)
            )));
        }
    }
    Ok(())
}
