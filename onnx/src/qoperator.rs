//! QOperator models (`onnxruntime.quantization` with `QuantFormat.QOperator`, and converters
//! from TFLite): a quantized convolution or matrix product is one node, `QLinearConv` or
//! `QLinearMatMul`. The import reads each as the QDQ form it is defined by, so that one path
//! (`quantized`) makes both formats integer tasks:
//!
//! - `QLinearConv(x, sx, zx, w, sw, zw, sy, zy, B)` is `QuantizeLinear(Conv(DequantizeLinear(x,
//!   sx, zx), DequantizeLinear(w, sw, zw, axis 0), DequantizeLinear(B, sx * sw, axis 0)), sy,
//!   zy)`, its attributes the `Conv`'s;
//! - `QLinearMatMul(a, sa, za, b, sb, zb, sy, zy)` is the same around a `MatMul`, the weight's
//!   scales along its last axis.
//!
//! ONNX defines the operators by these conversions (the bias in units of `sx * sw`, zero point
//! 0), so the graph read computes the model's values. The build's check still runs tract on
//! the file as written, the operators themselves.
//!
//! The bias's scale is the one value the rewrite computes, a new constant. A node whose bias
//! scales, or whose per-column weight of unknown rank, the file does not give as constants
//! stays as written, and the import names it as an operator it does not take.

use crate::builder::int;
use std::collections::HashSet;
use tract_onnx::data_resolver::FopenDataResolver;
use tract_onnx::pb;
use tract_onnx::tensor::load_tensor;

const FLOAT: i32 = 1;

/// Rewrites `graph`'s `QLinearConv` and `QLinearMatMul` nodes into their QDQ form.
/// `dir` is where external weight files are looked for.
pub(crate) fn as_qdq(graph: &mut pb::GraphProto, dir: Option<&str>) {
    let mut names: HashSet<String> = graph
        .node
        .iter()
        .flat_map(|n| n.input.iter().chain(&n.output).cloned())
        .chain(graph.initializer.iter().map(|t| t.name.clone()))
        .collect();
    let nodes = std::mem::take(&mut graph.node);
    for n in nodes {
        let rewritten = match n.op_type.as_str() {
            "QLinearConv" => conv(graph, &n, &mut names, dir),
            "QLinearMatMul" => mat_mul(graph, &n, &mut names, dir),
            _ => None,
        };
        match rewritten {
            Some(nodes) => graph.node.extend(nodes),
            None => graph.node.push(n),
        }
    }
}

/// A name for a tensor the rewrite adds, after the node's output, taken by nothing else.
fn fresh(names: &mut HashSet<String>, base: &str, what: &str) -> String {
    let mut name = format!("{base}.{what}");
    let mut i = 1;
    while names.contains(&name) {
        i += 1;
        name = format!("{base}.{what}{i}");
    }
    names.insert(name.clone());
    name
}

/// One node of the rewrite, named after the node it replaces (so that errors name it) and
/// its own output (so that the names stay distinct).
fn node(
    from: &pb::NodeProto,
    op: &str,
    inputs: &[&str],
    output: &str,
    attribute: Vec<pb::AttributeProto>,
) -> pb::NodeProto {
    let base = match from.name.as_str() {
        "" => from.output.first().map_or("", String::as_str),
        name => name,
    };
    pb::NodeProto {
        name: format!("{base}.{op}.{output}"),
        op_type: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        attribute,
        ..Default::default()
    }
}

/// Input `i` of `n`, "" when omitted.
fn input(n: &pb::NodeProto, i: usize) -> &str {
    n.input.get(i).map_or("", String::as_str)
}

/// The initializer called `name`.
fn initializer<'g>(graph: &'g pb::GraphProto, name: &str) -> Option<&'g pb::TensorProto> {
    graph.initializer.iter().find(|t| t.name == name)
}

/// The values of the f32 initializer `name`, with its dimensions, decoded by tract (inline or
/// raw data, or an external file under `dir`).
fn floats(graph: &pb::GraphProto, name: &str, dir: Option<&str>) -> Option<(Vec<i64>, Vec<f32>)> {
    let t = initializer(graph, name).filter(|t| t.data_type == FLOAT)?;
    let v = load_tensor(&FopenDataResolver, t, dir).ok()?;
    let values = v.try_as_plain_ram().ok()?.as_slice::<f32>().ok()?.to_vec();
    Some((t.dims.clone(), values))
}

/// Whether a scale of one value is a scalar, as the operators define a per-tensor one (a
/// `[1]` scale would be one per channel of a single channel to `DequantizeLinear`).
fn per_tensor_is_scalar((dims, values): &(Vec<i64>, Vec<f32>)) -> bool {
    values.len() != 1 || dims.is_empty()
}

/// The data and the weight dequantized, and the output's quantization, around `op`: the
/// nodes, in order. `axis` is the weight's scales' axis, `bias` the bias's dequantization.
fn around(
    n: &pb::NodeProto,
    names: &mut HashSet<String>,
    (op, axis, attrs): (&str, i64, Vec<pb::AttributeProto>),
    bias: Option<(pb::NodeProto, String)>,
) -> Vec<pb::NodeProto> {
    let out = n.output.first().map_or("", String::as_str).to_string();
    let x = fresh(names, &out, "x");
    let w = fresh(names, &out, "w");
    let y = fresh(names, &out, "y");
    let mut nodes = vec![
        node(
            n,
            "DequantizeLinear",
            &[input(n, 0), input(n, 1), input(n, 2)],
            &x,
            vec![],
        ),
        node(
            n,
            "DequantizeLinear",
            &[input(n, 3), input(n, 4), input(n, 5)],
            &w,
            vec![int("axis", axis)],
        ),
    ];
    let mut inputs = vec![x.as_str(), w.as_str()];
    if let Some((dq, b)) = &bias {
        nodes.push(dq.clone());
        inputs.push(b);
    }
    nodes.push(node(n, op, &inputs, &y, attrs));
    nodes.push(node(
        n,
        "QuantizeLinear",
        &[&y, input(n, 6), input(n, 7)],
        &out,
        vec![],
    ));
    nodes
}

fn conv(
    graph: &mut pb::GraphProto,
    n: &pb::NodeProto,
    names: &mut HashSet<String>,
    dir: Option<&str>,
) -> Option<Vec<pb::NodeProto>> {
    let out = n.output.first()?.clone();
    let bias = match input(n, 8) {
        "" => None,
        b => {
            // The bias is in units of sx * sw[c]: a new constant of those products.
            let (_, sx) = floats(graph, input(n, 1), dir).filter(|(_, v)| v.len() == 1)?;
            let (dims, sw) = floats(graph, input(n, 4), dir).filter(per_tensor_is_scalar)?;
            let name = fresh(names, &out, "bias_scale");
            graph.initializer.push(pb::TensorProto {
                name: name.clone(),
                dims,
                data_type: FLOAT,
                raw_data: sw.iter().flat_map(|s| (s * sx[0]).to_le_bytes()).collect(),
                ..Default::default()
            });
            let db = fresh(names, &out, "b");
            let dq = node(
                n,
                "DequantizeLinear",
                &[b, &name],
                &db,
                vec![int("axis", 0)],
            );
            Some((dq, db))
        }
    };
    Some(around(n, names, ("Conv", 0, n.attribute.clone()), bias))
}

fn mat_mul(
    graph: &mut pb::GraphProto,
    n: &pb::NodeProto,
    names: &mut HashSet<String>,
    dir: Option<&str>,
) -> Option<Vec<pb::NodeProto>> {
    // Per-column scales lie along the weight's last axis: its rank must be known.
    let (scale_dims, _) = floats(graph, input(n, 4), dir).filter(per_tensor_is_scalar)?;
    let axis = if scale_dims.is_empty() {
        1
    } else {
        initializer(graph, input(n, 3))?.dims.len() as i64 - 1
    };
    Some(around(n, names, ("MatMul", axis, vec![]), None))
}
