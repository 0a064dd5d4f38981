//! The model as the extraction reads it: ONNX nodes in order (operator, name, inputs,
//! outputs, attributes) from the protobuf, and every tensor's shape (and a scalar constant's
//! value) from tract's shape inference, which is not redone here.

use crate::error::ImportError;
use crate::shapes::InputShapes;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tract_onnx::pb;
use tract_onnx::prelude::Tensor;
use tract_onnx::tract_hir::infer::{Factoid, InferenceModelExt};

/// One ONNX node.
#[derive(Debug, Clone)]
pub struct Node {
    /// The node's name (its first output's when it has none, as tract names it).
    pub name: String,
    pub op: String,
    /// Tensor names; "" for an omitted optional input.
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    attrs: Vec<pb::AttributeProto>,
}

impl Node {
    fn attr(&self, name: &str) -> Option<&pb::AttributeProto> {
        self.attrs.iter().find(|a| a.name == name)
    }
    pub fn int(&self, name: &str) -> Option<i64> {
        self.attr(name).map(|a| a.i)
    }
    pub fn float(&self, name: &str) -> Option<f32> {
        self.attr(name).map(|a| a.f)
    }
    pub fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.attr(name).map(|a| a.ints.clone())
    }
    pub fn string(&self, name: &str) -> Option<String> {
        self.attr(name)
            .map(|a| String::from_utf8_lossy(&a.s).into_owned())
    }
    /// The non-empty input `i`.
    pub fn input(&self, i: usize) -> Option<&str> {
        self.inputs
            .get(i)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }
}

/// What tract inferred of one tensor.
#[derive(Debug, Clone, Default)]
pub struct TensorInfo {
    /// Concrete dimensions, when known.
    pub shape: Option<Vec<i64>>,
    /// Its value is known without running the model (an initializer, a Constant, or folded
    /// from them): a weight, a bias, a shape computation.
    pub constant: bool,
    /// The value of a one-element constant.
    pub scalar: Option<f64>,
    /// A constant's value (what a compiled model stores or folds).
    pub value: Option<Arc<Tensor>>,
}

/// The model decoded, with a graph of at least one node, its dynamic input dimensions fixed.
pub(crate) fn decode(bytes: &[u8], shapes: &InputShapes) -> Result<pb::ModelProto, ImportError> {
    use prost::Message;
    let mut proto =
        pb::ModelProto::decode(bytes).map_err(|e| ImportError::Malformed(e.to_string()))?;
    let graph = proto
        .graph
        .as_mut()
        .ok_or_else(|| ImportError::Malformed("the model has no graph".into()))?;
    if graph.node.is_empty() {
        return Err(ImportError::Malformed("the graph has no node".into()));
    }
    shapes.apply(graph)?;
    Ok(proto)
}

/// The graph.
#[derive(Debug)]
pub struct Graph {
    pub nodes: Vec<Node>,
    pub tensors: HashMap<String, TensorInfo>,
    /// Tensors the model returns.
    pub outputs: HashSet<String>,
    /// The model's inputs that are not constants, in the model's order.
    pub input_order: Vec<String>,
    /// The model's outputs, in the model's order.
    pub output_order: Vec<String>,
    /// Why shape inference stopped early, if it did (named when a shape is missing).
    pub inference_error: Option<String>,
}

impl Graph {
    pub fn info(&self, t: &str) -> Option<&TensorInfo> {
        self.tensors.get(t)
    }
    pub fn shape(&self, t: &str) -> Option<&[i64]> {
        self.tensors.get(t).and_then(|i| i.shape.as_deref())
    }
    pub fn is_constant(&self, t: &str) -> bool {
        self.tensors.get(t).is_some_and(|i| i.constant)
    }
    pub fn scalar(&self, t: &str) -> Option<f64> {
        self.tensors.get(t).and_then(|i| i.scalar)
    }
    /// A constant's value.
    pub fn value(&self, t: &str) -> Option<&Tensor> {
        self.tensors.get(t).and_then(|i| i.value.as_deref())
    }

    /// A constant's elements as floats (row-major), whatever its type.
    pub fn floats(&self, t: &str) -> Option<Vec<f32>> {
        let v = self.value(t)?.cast_to::<f32>().ok()?;
        let v = v.try_as_plain_ram().ok()?.as_slice::<f32>().ok()?.to_vec();
        Some(v)
    }
    /// A constant's elements as integers (indices, shapes, pads).
    pub fn ints(&self, t: &str) -> Option<Vec<i64>> {
        let v = self.value(t)?.cast_to::<i64>().ok()?;
        let v = v.try_as_plain_ram().ok()?.as_slice::<i64>().ok()?.to_vec();
        Some(v)
    }
    /// A constant's element type, when it is one the engine has.
    pub fn constant_dtype(&self, t: &str) -> Option<tunehub_engine::ir::DType> {
        use tract_onnx::prelude::DatumType;
        use tunehub_engine::ir::DType;
        Some(match self.value(t)?.datum_type() {
            DatumType::F32 => DType::F32,
            DatumType::I32 => DType::I32,
            DatumType::U8 => DType::U8,
            DatumType::I8 => DType::I8,
            _ => return None,
        })
    }
    /// The type of a tensor when it is known not to be 32-bit float (a constant's).
    pub fn is_float(&self, t: &str) -> bool {
        self.value(t)
            .is_none_or(|v| v.datum_type() == tract_onnx::prelude::DatumType::F32)
    }

    /// The shape of `node`'s tensor `t`, or an error naming the node.
    pub fn need_shape(&self, node: &Node, t: &str) -> Result<Vec<i64>, ImportError> {
        self.shape(t).map(<[i64]>::to_vec).ok_or_else(|| {
            let why = self.inference_error.as_deref().map_or(String::new(), |e| {
                format!(" (shape inference stopped: {e})")
            });
            ImportError::node(node, format!("the shape of '{t}' is not known{why}"))
        })
    }

    /// Reads a model: decodes it, fixes its dynamic input dimensions, reads its QOperator
    /// nodes as QDQ (`qoperator`), lets tract infer the shapes. `dir` is where external weight
    /// files are looked for.
    pub fn load(
        bytes: &[u8],
        shapes: &InputShapes,
        dir: Option<&str>,
    ) -> Result<Graph, ImportError> {
        let mut proto = decode(bytes, shapes)?;
        crate::qoperator::as_qdq(proto.graph.as_mut().expect("decode checks it"), dir);
        let graph = proto.graph.as_ref().expect("decode checks it");
        let nodes: Vec<Node> = graph
            .node
            .iter()
            .enumerate()
            .map(|(i, n)| Node {
                name: if !n.name.is_empty() {
                    n.name.clone()
                } else if n.output.first().is_some_and(|o| !o.is_empty()) {
                    n.output[0].clone()
                } else {
                    format!("{i}-{}", n.op_type)
                },
                op: n.op_type.clone(),
                inputs: n.input.clone(),
                outputs: n.output.clone(),
                attrs: n.attribute.clone(),
            })
            .collect();
        let output_order: Vec<String> = graph.output.iter().map(|o| o.name.clone()).collect();
        let outputs = output_order.iter().cloned().collect();
        let initializers: HashSet<&str> =
            graph.initializer.iter().map(|t| t.name.as_str()).collect();
        let input_order = graph
            .input
            .iter()
            .filter(|i| !initializers.contains(i.name.as_str()))
            .map(|i| i.name.clone())
            .collect();

        let parsed = tract_onnx::onnx()
            .parse(&proto, dir)
            .map_err(|e| ImportError::Graph(format!("{e:#}")))?;
        if let Some(t) = parsed.unresolved_inputs.first() {
            let user = nodes.iter().find(|n| n.inputs.contains(t));
            return Err(match user {
                Some(n) => ImportError::node(n, format!("reads '{t}', which nothing defines")),
                None => ImportError::Malformed(format!("'{t}' is read but never defined")),
            });
        }
        let mut model = parsed.model;
        // Obstinate: infer what can be inferred past an operator tract does not know; a task
        // that needs a missing shape says so, naming this error.
        let inference_error = model.analyse(true).err().map(|e| format!("{e:#}"));
        let mut tensors = HashMap::new();
        for (name, outlet) in &parsed.outlets_by_name {
            let fact = model
                .outlet_fact(*outlet)
                .map_err(|e| ImportError::Graph(format!("{e:#}")))?;
            let shape = fact
                .shape
                .as_concrete_finite()
                .ok()
                .flatten()
                .map(|d| d.iter().map(|&x| x as i64).collect());
            let value = fact.value.concretize();
            let scalar = value
                .as_ref()
                .filter(|v| v.len() == 1)
                .and_then(|v| v.cast_to_scalar::<f64>().ok());
            tensors.insert(
                name.clone(),
                TensorInfo {
                    shape,
                    constant: value.is_some(),
                    scalar,
                    value,
                },
            );
        }
        Ok(Graph {
            nodes,
            tensors,
            outputs,
            input_order,
            output_order,
            inference_error,
        })
    }
}
