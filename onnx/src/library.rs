//! A group as an operator of the engine's library when one fits exactly (a convolution with
//! its bias or folded batch norm and relu, a dense layer, a plain matrix product, a pool, a row
//! softmax): it then shares its records with the same operator typed by hand. Anything else is
//! written in the text form (`workload`).

use crate::fuse::Group;
use crate::graph::{Graph, Node};

/// The op spec and its layout-free inputs, when the group is exactly a library operator.
pub fn spec(g: &Graph, group: &Group) -> Option<(String, Vec<String>)> {
    let a = &g.nodes[group.anchor?];
    let members: Vec<&Node> = group.members.iter().map(|&m| &g.nodes[m]).collect();
    let x = g.shape(a.input(0)?)?;
    let out = g.shape(a.outputs.first()?)?;
    let constant_weight = a.input(1).is_some_and(|w| g.is_constant(w));
    match a.op.as_str() {
        "Conv" => {
            let mut rest = members.as_slice();
            let mut bias = a.input(2).is_some();
            if rest.first().is_some_and(|n| n.op == "BatchNormalization") {
                bias = true;
                rest = &rest[1..];
            }
            let relu = rest.first().is_some_and(|n| n.op == "Relu");
            if rest.len() > usize::from(relu) || !constant_weight {
                return None;
            }
            let w = g.shape(a.input(1)?)?;
            let (win, groups) = (window(a, w[2], w[3])?, a.int("group").unwrap_or(1));
            let (n, c, h, wd, f) = (x[0], x[1], x[2], x[3], w[0]);
            let (b, r) = (i64::from(bias), i64::from(relu));
            let spec = if groups == 1 {
                format!("conv2d_nchw(n={n},c={c},h={h},w={wd},f={f},{win},bias={b},relu={r})")
            } else if groups == c && f == c {
                format!("depthwise_conv2d_nchw(n={n},c={c},h={h},w={wd},{win},bias={b},relu={r})")
            } else {
                return None;
            };
            Some((spec, vec!["kernel".into()]))
        }
        "Gemm" => {
            let plain = a.int("transA").unwrap_or(0) == 0
                && a.int("transB").unwrap_or(0) == 1
                && a.float("alpha").unwrap_or(1.0) == 1.0
                && a.float("beta").unwrap_or(1.0) == 1.0;
            let bias = match a.input(2).and_then(|c| g.shape(c)) {
                None => a.input(2).is_none().then_some(false)?,
                Some(s) if s.last() == out.last() && s.iter().product::<i64>() == out[1] => true,
                Some(_) => return None,
            };
            let relu = members.first().is_some_and(|n| n.op == "Relu");
            if !plain || members.len() > usize::from(relu) || !constant_weight {
                return None;
            }
            let spec = format!(
                "dense(m={},n={},k={},bias={},relu={})",
                x[0],
                out[1],
                x[1],
                i64::from(bias),
                i64::from(relu)
            );
            Some((spec, vec!["weight".into()]))
        }
        "MatMul" => {
            let w = g.shape(a.input(1)?)?;
            if !members.is_empty() || w.len() != 2 || !constant_weight {
                return None;
            }
            let rows: i64 = out[..out.len() - 1].iter().product();
            Some((
                format!("matmul(m={rows},n={},k={})", w[1], w[0]),
                vec!["B".into()],
            ))
        }
        "MaxPool" | "AveragePool" => {
            let k = a.ints("kernel_shape")?;
            let win = window(a, *k.first()?, *k.get(1)?)?;
            let max = a.op == "MaxPool";
            let no_pad = a.ints("pads").is_none_or(|p| p.iter().all(|&p| p == 0));
            // The library's average counts padding, ONNX's default does not; the library's
            // padded max pool fills with -infinity, which a stored DAG (JSON) cannot hold.
            if !members.is_empty() || a.int("ceil_mode").unwrap_or(0) != 0 || !no_pad {
                return None;
            }
            let name = if max { "max_pool2d" } else { "avg_pool2d" };
            Some((
                format!("{name}(n={},c={},h={},w={},{win})", x[0], x[1], x[2], x[3]),
                vec![],
            ))
        }
        "Softmax" => {
            let r = x.len() as i64;
            let axis = a.int("axis").unwrap_or(-1);
            if !members.is_empty() || (axis != -1 && axis != r - 1) {
                return None;
            }
            let rows: i64 = x[..x.len() - 1].iter().product();
            Some((format!("softmax(m={rows},n={})", x[x.len() - 1]), vec![]))
        }
        _ => None,
    }
}

/// `kh=..,kw=..,stride=..,pad=..,dilation=..` when the window is the library's: symmetric pads,
/// one stride and one dilation for both dimensions.
fn window(n: &Node, kh: i64, kw: i64) -> Option<String> {
    let one = |v: Option<Vec<i64>>, default: i64| -> Option<i64> {
        match v {
            None => Some(default),
            Some(v) if !v.is_empty() && v.iter().all(|&x| x == v[0]) => Some(v[0]),
            Some(_) => None,
        }
    };
    let stride = one(n.ints("strides"), 1)?;
    let pad = one(n.ints("pads"), 0)?;
    let dilation = one(n.ints("dilations"), 1)?;
    Some(format!(
        "kh={kh},kw={kw},stride={stride},pad={pad},dilation={dilation}"
    ))
}
