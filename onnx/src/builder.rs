//! Building ONNX models in code (tests, benchmarks): f32 inputs, zero-filled weights, nodes with
//! attributes, encoded with tract-onnx's protobuf types. Nothing is downloaded.

use prost::Message;
use tract_onnx::pb;
use tract_onnx::pb::attribute_proto::AttributeType;
use tract_onnx::pb::tensor_shape_proto::{Dimension, dimension};

/// ONNX's element type number for f32.
const FLOAT: i32 = 1;

/// One attribute of a node.
pub fn int(name: &str, v: i64) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.into(),
        r#type: AttributeType::Int as i32,
        i: v,
        ..Default::default()
    }
}
pub fn ints(name: &str, v: &[i64]) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.into(),
        r#type: AttributeType::Ints as i32,
        ints: v.to_vec(),
        ..Default::default()
    }
}
pub fn float(name: &str, v: f32) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.into(),
        r#type: AttributeType::Float as i32,
        f: v,
        ..Default::default()
    }
}
pub fn string(name: &str, v: &str) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.into(),
        r#type: AttributeType::String as i32,
        s: v.as_bytes().to_vec(),
        ..Default::default()
    }
}

/// A model under construction.
#[derive(Debug, Default)]
pub struct ModelBuilder {
    graph: pb::GraphProto,
    count: usize,
    /// Seeded: weights are pseudo-random (models whose outputs are checked); else zeros
    /// (models whose shapes only matter).
    random: Option<u64>,
}

impl ModelBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// A builder whose weights are pseudo-random from `seed`: uniform in [-0.5, 0.5), and
    /// batch norms' variances in [0.5, 1.5).
    pub fn seeded(seed: u64) -> Self {
        ModelBuilder {
            random: Some(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
            ..Self::default()
        }
    }

    /// The next value in [0, 1) (xorshift64*), or 0 when not seeded.
    fn unit(&mut self) -> f32 {
        let Some(x) = self.random.as_mut() else {
            return 0.0;
        };
        *x ^= *x >> 12;
        *x ^= *x << 25;
        *x ^= *x >> 27;
        let r = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
        (r >> 40) as f32 / (1u64 << 24) as f32
    }

    fn values(&mut self, n: usize, lo: f32) -> Vec<u8> {
        (0..n)
            .flat_map(|_| (lo + self.unit()).to_le_bytes())
            .collect()
    }

    /// A graph input; a `None` dimension is dynamic (a `dim_param` named `N<d>`).
    pub fn input(&mut self, name: &str, dims: &[Option<i64>]) -> String {
        let dim = dims
            .iter()
            .enumerate()
            .map(|(i, d)| Dimension {
                value: Some(match d {
                    Some(v) => dimension::Value::DimValue(*v),
                    None => dimension::Value::DimParam(if i == 0 {
                        "batch".into()
                    } else {
                        format!("N{i}")
                    }),
                }),
                ..Default::default()
            })
            .collect();
        self.graph.input.push(value_info(name, Some(dim)));
        name.into()
    }

    /// A graph input of fixed shape.
    pub fn input_fixed(&mut self, name: &str, dims: &[i64]) -> String {
        let d: Vec<Option<i64>> = dims.iter().map(|&d| Some(d)).collect();
        self.input(name, &d)
    }

    /// A constant (an initializer): zeros, or random in [-0.5, 0.5) when seeded.
    pub fn weight(&mut self, dims: &[i64]) -> String {
        let n = dims.iter().product::<i64>() as usize;
        let raw = self.values(n, -0.5);
        self.constant(dims, raw)
    }

    /// A constant of positive values (a variance): ones, or random in [0.5, 1.5) when seeded.
    pub fn positive(&mut self, dims: &[i64]) -> String {
        let n = dims.iter().product::<i64>() as usize;
        let raw = if self.random.is_some() {
            self.values(n, 0.5)
        } else {
            1f32.to_le_bytes().repeat(n)
        };
        self.constant(dims, raw)
    }

    /// Batch norm parameters of `c` channels: scale, bias, mean, variance.
    pub fn bn_params(&mut self, c: i64) -> [String; 4] {
        [
            self.weight(&[c]),
            self.weight(&[c]),
            self.weight(&[c]),
            self.positive(&[c]),
        ]
    }

    /// A one-element constant.
    pub fn scalar(&mut self, v: f32) -> String {
        self.constant(&[], v.to_le_bytes().to_vec())
    }

    fn constant(&mut self, dims: &[i64], raw: Vec<u8>) -> String {
        self.typed_constant(dims, FLOAT, raw)
    }

    fn typed_constant(&mut self, dims: &[i64], data_type: i32, raw: Vec<u8>) -> String {
        self.count += 1;
        let name = format!("w{}", self.count);
        self.graph.initializer.push(pb::TensorProto {
            name: name.clone(),
            dims: dims.to_vec(),
            data_type,
            raw_data: raw,
            ..Default::default()
        });
        name
    }

    /// An integer constant of ONNX type `u8`, `i8` or `i32` (a QDQ model's quantized weights,
    /// biases and zero points), its values given.
    pub fn integers(&mut self, dims: &[i64], dtype: &str, values: &[i64]) -> String {
        let (data_type, raw): (i32, Vec<u8>) = match dtype {
            "u8" => (2, values.iter().map(|&v| v as u8).collect()),
            "i8" => (3, values.iter().map(|&v| v as i8 as u8).collect()),
            "i32" => (
                6,
                values
                    .iter()
                    .flat_map(|&v| (v as i32).to_le_bytes())
                    .collect(),
            ),
            _ => panic!("integers: u8, i8 or i32, not {dtype}"),
        };
        self.typed_constant(dims, data_type, raw)
    }

    /// Constants of one f32 value each (a QDQ model's scales).
    pub fn floats(&mut self, dims: &[i64], values: &[f32]) -> String {
        self.constant(dims, values.iter().flat_map(|v| v.to_le_bytes()).collect())
    }

    /// `x` quantized with one `scale` and a zero point of `dtype` (`u8` or `i8`) and
    /// dequantized, as a QDQ model holds an activation: (the quantized tensor, the
    /// dequantized one).
    pub fn qdq(&mut self, x: &str, dtype: &str, scale: f32, zero_point: i64) -> (String, String) {
        let s = self.floats(&[], &[scale]);
        let z = self.integers(&[], dtype, &[zero_point]);
        let q = self.node("QuantizeLinear", &[x, &s, &z], vec![]);
        let d = self.node("DequantizeLinear", &[&q, &s, &z], vec![]);
        (q, d)
    }

    /// A weight of `dims` as a QDQ model keeps it: i8 `values`, one scale per index of `axis`
    /// (a Conv's or a transposed Gemm's output channels are axis 0, a MatMul's its last),
    /// zero points `zero_point`: (the i8 constant, its dequantized value).
    pub fn quantized_weight(
        &mut self,
        dims: &[i64],
        values: &[i64],
        scales: &[f32],
        zero_point: i64,
        axis: usize,
    ) -> (String, String) {
        let c = scales.len() as i64;
        let w = self.integers(dims, "i8", values);
        let s = self.floats(&[c], scales);
        let z = self.integers(&[c], "i8", &vec![zero_point; c as usize]);
        let d = self.node(
            "DequantizeLinear",
            &[&w, &s, &z],
            vec![int("axis", axis as i64)],
        );
        (w, d)
    }

    /// A node of one output; returns the output's name.
    pub fn node(&mut self, op: &str, inputs: &[&str], attrs: Vec<pb::AttributeProto>) -> String {
        self.count += 1;
        let out = format!("t{}", self.count);
        self.graph.node.push(pb::NodeProto {
            name: format!("{op}_{}", self.count),
            op_type: op.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![out.clone()],
            attribute: attrs,
            ..Default::default()
        });
        out
    }

    /// A node of two outputs; returns their names.
    pub fn node2(
        &mut self,
        op: &str,
        inputs: &[&str],
        attrs: Vec<pb::AttributeProto>,
    ) -> (String, String) {
        let [first, second] = self.node_n(op, inputs, attrs);
        (first, second)
    }

    /// A node of `N` outputs; returns their names.
    pub fn node_n<const N: usize>(
        &mut self,
        op: &str,
        inputs: &[&str],
        attrs: Vec<pb::AttributeProto>,
    ) -> [String; N] {
        let first = self.node(op, inputs, attrs);
        let names: [String; N] = std::array::from_fn(|i| match i {
            0 => first.clone(),
            i => format!("{first}_{i}"),
        });
        if let Some(n) = self.graph.node.last_mut() {
            n.output = names.to_vec();
        }
        names
    }

    /// The name the last node was given.
    pub fn last_node(&self) -> &str {
        self.graph.node.last().map_or("", |n| n.name.as_str())
    }

    pub fn output(&mut self, t: &str) {
        self.graph.output.push(value_info(t, None));
    }

    /// The encoded model (opset 17: LayerNormalization is in it, Gelu is not).
    pub fn encode(mut self) -> Vec<u8> {
        self.graph.name = "built".into();
        pb::ModelProto {
            ir_version: 8,
            producer_name: "tunehub-onnx builder".into(),
            opset_import: vec![pb::OperatorSetIdProto {
                domain: String::new(),
                version: 17,
            }],
            graph: Some(self.graph),
            ..Default::default()
        }
        .encode_to_vec()
    }

    // Layers that the test networks share.

    /// `Conv` (with `pad` on every side) then `BatchNormalization`, then `Relu` when `relu`.
    #[allow(clippy::too_many_arguments)]
    pub fn conv_bn(
        &mut self,
        x: &str,
        c: i64,
        f: i64,
        k: i64,
        stride: i64,
        pad: i64,
        groups: i64,
        relu: bool,
    ) -> String {
        let w = self.weight(&[f, c / groups, k, k]);
        let y = self.node(
            "Conv",
            &[x, &w],
            vec![
                ints("kernel_shape", &[k, k]),
                ints("strides", &[stride, stride]),
                ints("pads", &[pad, pad, pad, pad]),
                int("group", groups),
            ],
        );
        let p = self.bn_params(f);
        let y = self.node(
            "BatchNormalization",
            &[&y, &p[0], &p[1], &p[2], &p[3]],
            vec![float("epsilon", 1e-5)],
        );
        if relu {
            self.node("Relu", &[&y], vec![])
        } else {
            y
        }
    }

    /// `x @ W + b` over the last dimension (`MatMul` then `Add`, as torch exports a linear layer
    /// on a 3-D input).
    pub fn linear(&mut self, x: &str, k: i64, n: i64) -> String {
        let w = self.weight(&[k, n]);
        let y = self.node("MatMul", &[x, &w], vec![]);
        let b = self.weight(&[n]);
        self.node("Add", &[&y, &b], vec![])
    }

    /// GELU as torch exports it before opset 20: `x * 0.5 * (1 + erf(x / sqrt(2)))`.
    pub fn gelu(&mut self, x: &str) -> String {
        let s = self.scalar(std::f32::consts::SQRT_2);
        let d = self.node("Div", &[x, &s], vec![]);
        let e = self.node("Erf", &[&d], vec![]);
        let one = self.scalar(1.0);
        let a = self.node("Add", &[&e, &one], vec![]);
        let m = self.node("Mul", &[x, &a], vec![]);
        let half = self.scalar(0.5);
        self.node("Mul", &[&m, &half], vec![])
    }

    pub fn layer_norm(&mut self, x: &str, n: i64) -> String {
        let g = self.weight(&[n]);
        let b = self.weight(&[n]);
        self.node(
            "LayerNormalization",
            &[x, &g, &b],
            vec![int("axis", -1), float("epsilon", 1e-5)],
        )
    }

    /// A constant 1-D int64 tensor (a shape for `Reshape`).
    pub fn shape_const(&mut self, dims: &[i64]) -> String {
        self.count += 1;
        let name = format!("s{}", self.count);
        self.graph.initializer.push(pb::TensorProto {
            name: name.clone(),
            dims: vec![dims.len() as i64],
            data_type: 7,
            int64_data: dims.to_vec(),
            ..Default::default()
        });
        name
    }
}

fn value_info(name: &str, dims: Option<Vec<Dimension>>) -> pb::ValueInfoProto {
    pb::ValueInfoProto {
        name: name.into(),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: FLOAT,
                shape: dims.map(|dim| pb::TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}
