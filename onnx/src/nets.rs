//! Networks built in code with [`ModelBuilder`] (zero weights: only shapes matter to tuning),
//! for tests and benchmarks that must not download anything: a ResNet-18 of torchvision's
//! layout, a MobileNetV2 inverted-residual block, a BERT-base encoder layer, a GPT-2 decoder
//! step, a tiny network with every supported construct, and a small QDQ (quantized) model.

use crate::builder::{ModelBuilder, float, int, ints};

/// ResNet-18 (torchvision's layer table) on a `batch x 3 x size x size` input; `batch` None
/// leaves the batch dimension dynamic.
pub fn resnet18(batch: Option<i64>, size: i64) -> Vec<u8> {
    resnet18_in(ModelBuilder::new(), batch, size)
}

/// [`resnet18`] built by `b` (seeded: with random weights, for a model that is run).
pub fn resnet18_in(mut b: ModelBuilder, batch: Option<i64>, size: i64) -> Vec<u8> {
    let x = b.input("input", &[batch, Some(3), Some(size), Some(size)]);
    let mut y = b.conv_bn(&x, 3, 64, 7, 2, 3, 1, true);
    y = b.node(
        "MaxPool",
        &[&y],
        vec![
            ints("kernel_shape", &[3, 3]),
            ints("strides", &[2, 2]),
            ints("pads", &[1, 1, 1, 1]),
        ],
    );
    let mut c = 64;
    for (stage, f) in [64, 128, 256, 512].into_iter().enumerate() {
        for block in 0..2 {
            let stride = if stage > 0 && block == 0 { 2 } else { 1 };
            let h = b.conv_bn(&y, c, f, 3, stride, 1, 1, true);
            let h = b.conv_bn(&h, f, f, 3, 1, 1, 1, false);
            let shortcut = if stride != 1 || c != f {
                b.conv_bn(&y, c, f, 1, stride, 0, 1, false)
            } else {
                y.clone()
            };
            let s = b.node("Add", &[&h, &shortcut], vec![]);
            y = b.node("Relu", &[&s], vec![]);
            c = f;
        }
    }
    let p = b.node("GlobalAveragePool", &[&y], vec![]);
    let p = b.node("Flatten", &[&p], vec![int("axis", 1)]);
    let w = b.weight(&[1000, 512]);
    let bias = b.weight(&[1000]);
    let out = b.node("Gemm", &[&p, &w, &bias], vec![int("transB", 1)]);
    b.output(&out);
    b.encode()
}

/// ReLU6 as torch exports it.
fn relu6(b: &mut ModelBuilder, x: &str) -> String {
    let lo = b.scalar(0.0);
    let hi = b.scalar(6.0);
    b.node("Clip", &[x, &lo, &hi], vec![])
}

/// MobileNetV2's inverted residual: expand 1x1, depthwise 3x3, project 1x1, each with batch
/// norm, ReLU6 after the first two; the input added back when the shape is kept.
pub fn mobilenet_block(
    b: &mut ModelBuilder,
    x: &str,
    c: i64,
    f: i64,
    stride: i64,
    expand: i64,
) -> String {
    let e = c * expand;
    // Expansion 1 has no expanding conv (MobileNetV2's first block).
    let h = if expand == 1 {
        x.to_string()
    } else {
        let h = b.conv_bn(x, c, e, 1, 1, 0, 1, false);
        relu6(b, &h)
    };
    let h = b.conv_bn(&h, e, e, 3, stride, 1, e, false);
    let h = relu6(b, &h);
    let h = b.conv_bn(&h, e, f, 1, 1, 0, 1, false);
    if stride == 1 && c == f {
        b.node("Add", &[&h, x], vec![])
    } else {
        h
    }
}

/// One inverted-residual block of MobileNetV2 with stride 2 (24 -> 32 channels at 56x56,
/// expansion 6), as in its third stage.
pub fn mobilenet_v2_block() -> Vec<u8> {
    let mut b = ModelBuilder::new();
    let x = b.input_fixed("input", &[1, 24, 56, 56]);
    let y = mobilenet_block(&mut b, &x, 24, 32, 2, 6);
    b.output(&y);
    b.encode()
}

/// MobileNetV2 (torchvision's layer table, width 1.0) on a `1 x 3 x size x size` input, built
/// by `b`.
pub fn mobilenet_v2_in(mut b: ModelBuilder, size: i64) -> Vec<u8> {
    let x = b.input_fixed("input", &[1, 3, size, size]);
    let y = b.conv_bn(&x, 3, 32, 3, 2, 1, 1, false);
    let mut y = relu6(&mut b, &y);
    let mut c = 32;
    for (t, f, n, s) in [
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ] {
        for i in 0..n {
            y = mobilenet_block(&mut b, &y, c, f, if i == 0 { s } else { 1 }, t);
            c = f;
        }
    }
    let y = b.conv_bn(&y, 320, 1280, 1, 1, 0, 1, false);
    let y = relu6(&mut b, &y);
    let p = b.node("GlobalAveragePool", &[&y], vec![]);
    let p = b.node("Flatten", &[&p], vec![int("axis", 1)]);
    let w = b.weight(&[1000, 1280]);
    let bias = b.weight(&[1000]);
    let out = b.node("Gemm", &[&p, &w, &bias], vec![int("transB", 1)]);
    b.output(&out);
    b.encode()
}

/// `[1, seq, heads*dh]` -> `[1, heads, seq, dh]` (or `[1, heads, dh, seq]` when `keys`).
fn heads(b: &mut ModelBuilder, x: &str, seq: i64, heads: i64, dh: i64, keys: bool) -> String {
    let shape = b.shape_const(&[1, seq, heads, dh]);
    let r = b.node("Reshape", &[x, &shape], vec![]);
    let perm: &[i64] = if keys { &[0, 2, 3, 1] } else { &[0, 2, 1, 3] };
    b.node("Transpose", &[&r], vec![ints("perm", perm)])
}

fn merge_heads(b: &mut ModelBuilder, x: &str, seq: i64, hidden: i64) -> String {
    let t = b.node("Transpose", &[x], vec![ints("perm", &[0, 2, 1, 3])]);
    let shape = b.shape_const(&[1, seq, hidden]);
    b.node("Reshape", &[&t, &shape], vec![])
}

/// A BERT-base encoder layer (hidden 768, 12 heads, FFN 3072, post-norm) over `seq` tokens,
/// with an additive attention mask input.
pub fn bert_layer(seq: i64) -> Vec<u8> {
    bert_layer_in(ModelBuilder::new(), seq)
}

/// [`bert_layer`] built by `b`.
pub fn bert_layer_in(mut b: ModelBuilder, seq: i64) -> Vec<u8> {
    let y = encoder_layer(&mut b, seq, 768, 12, 3072);
    b.output(&y);
    b.encode()
}

/// A post-norm transformer encoder layer (BERT's) over `seq` tokens of `hidden` features,
/// `nh` heads and an FFN of `ffn`, with an additive attention mask input; its output tensor.
pub fn encoder_layer(b: &mut ModelBuilder, seq: i64, hidden: i64, nh: i64, ffn: i64) -> String {
    let dh = hidden / nh;
    let x = b.input_fixed("hidden", &[1, seq, hidden]);
    let mask = b.input_fixed("mask", &[1, 1, 1, seq]);
    let q = b.linear(&x, hidden, hidden);
    let k = b.linear(&x, hidden, hidden);
    let v = b.linear(&x, hidden, hidden);
    let q = heads(b, &q, seq, nh, dh, false);
    let k = heads(b, &k, seq, nh, dh, true);
    let v = heads(b, &v, seq, nh, dh, false);
    let s = b.node("MatMul", &[&q, &k], vec![]);
    let scale = b.scalar((dh as f32).sqrt());
    let s = b.node("Div", &[&s, &scale], vec![]);
    let s = b.node("Add", &[&s, &mask], vec![]);
    let p = b.node("Softmax", &[&s], vec![int("axis", -1)]);
    let ctx = b.node("MatMul", &[&p, &v], vec![]);
    let ctx = merge_heads(b, &ctx, seq, hidden);
    let o = b.linear(&ctx, hidden, hidden);
    let o = b.node("Add", &[&o, &x], vec![]);
    let h = b.layer_norm(&o, hidden);
    let f = b.linear(&h, hidden, ffn);
    let f = b.gelu(&f);
    let f = b.linear(&f, ffn, hidden);
    let f = b.node("Add", &[&f, &h], vec![]);
    b.layer_norm(&f, hidden)
}

/// One GPT-2 (small) decoder layer for one new token at batch 1 (pre-norm; keys and values of
/// the `past` earlier tokens are inputs): every product is a matrix-vector one.
pub fn gpt2_step(past: i64) -> Vec<u8> {
    gpt2_step_in(ModelBuilder::new(), past)
}

/// [`gpt2_step`] built by `b`.
pub fn gpt2_step_in(mut b: ModelBuilder, past: i64) -> Vec<u8> {
    let (hidden, nh, dh, ffn) = (768, 12, 64, 3072);
    let x = b.input_fixed("hidden", &[1, 1, hidden]);
    let pk = b.input_fixed("past_key", &[1, nh, past, dh]);
    let pv = b.input_fixed("past_value", &[1, nh, past, dh]);
    let h = b.layer_norm(&x, hidden);
    let q = b.linear(&h, hidden, hidden);
    let k = b.linear(&h, hidden, hidden);
    let v = b.linear(&h, hidden, hidden);
    let q = heads(&mut b, &q, 1, nh, dh, false);
    let k = heads(&mut b, &k, 1, nh, dh, false);
    let v = heads(&mut b, &v, 1, nh, dh, false);
    let k = b.node("Concat", &[&pk, &k], vec![int("axis", 2)]);
    let v = b.node("Concat", &[&pv, &v], vec![int("axis", 2)]);
    let kt = b.node("Transpose", &[&k], vec![ints("perm", &[0, 1, 3, 2])]);
    let s = b.node("MatMul", &[&q, &kt], vec![]);
    let scale = b.scalar((dh as f32).sqrt());
    let s = b.node("Div", &[&s, &scale], vec![]);
    let p = b.node("Softmax", &[&s], vec![int("axis", -1)]);
    let ctx = b.node("MatMul", &[&p, &v], vec![]);
    let ctx = merge_heads(&mut b, &ctx, 1, hidden);
    let o = b.linear(&ctx, hidden, hidden);
    let a = b.node("Add", &[&o, &x], vec![]);
    let h = b.layer_norm(&a, hidden);
    let f = b.linear(&h, hidden, ffn);
    let f = b.gelu(&f);
    let f = b.linear(&f, ffn, hidden);
    let y = b.node("Add", &[&f, &a], vec![]);
    b.output(&y);
    b.encode()
}

/// A tiny network with every construct the extraction writes (plain, grouped and depthwise
/// convolutions, folded and standalone batch norm, pools, ReLU6, a residual add, a dense
/// layer with GELU, a batched product, softmax, layer norm), small enough to measure.
pub fn tiny() -> Vec<u8> {
    tiny_in(ModelBuilder::new())
}

/// [`tiny`] built by `b` (seeded: with random weights).
pub fn tiny_in(mut b: ModelBuilder) -> Vec<u8> {
    let x = b.input_fixed("input", &[1, 4, 10, 10]);
    let y = b.conv_bn(&x, 4, 8, 3, 1, 1, 1, true);
    let y = b.conv_bn(&y, 8, 8, 3, 2, 1, 2, false);
    let y = relu6(&mut b, &y);
    let y = mobilenet_block(&mut b, &y, 8, 8, 1, 2);
    let s = b.bn_params(8);
    let y = b.node(
        "BatchNormalization",
        &[&y, &s[0], &s[1], &s[2], &s[3]],
        vec![float("epsilon", 1e-5)],
    );
    let y = b.node(
        "MaxPool",
        &[&y],
        vec![
            ints("kernel_shape", &[3, 3]),
            ints("strides", &[1, 1]),
            ints("pads", &[1, 1, 1, 1]),
        ],
    );
    let y = b.node(
        "AveragePool",
        &[&y],
        vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
    );
    let g = b.node("GlobalAveragePool", &[&y], vec![]);
    let shape = b.shape_const(&[1, 2, 4]);
    let t = b.node("Reshape", &[&g, &shape], vec![]);
    let d = b.linear(&t, 4, 6);
    let d = b.gelu(&d);
    let kt = b.node("Transpose", &[&d], vec![ints("perm", &[0, 2, 1])]);
    let a = b.node("MatMul", &[&d, &kt], vec![]);
    let p = b.node("Softmax", &[&a], vec![int("axis", -1)]);
    let n = b.layer_norm(&p, 2);
    let out = b.node("Tanh", &[&n], vec![]);
    b.output(&out);
    b.encode()
}

/// The constructs [`tiny`] leaves out: a mean over the last axis, a broadcast subtraction,
/// `Pow`, sigmoid, `Gemm` with alpha, beta and a bias, leaky relu, exp.
pub fn tiny_rest() -> Vec<u8> {
    tiny_rest_in(ModelBuilder::new())
}

/// [`tiny_rest`] built by `b`.
pub fn tiny_rest_in(mut b: ModelBuilder) -> Vec<u8> {
    let x = b.input_fixed("input", &[1, 6, 8]);
    let m = b.node(
        "ReduceMean",
        &[&x],
        vec![ints("axes", &[-1]), int("keepdims", 1)],
    );
    let d = b.node("Sub", &[&x, &m], vec![]);
    let two = b.scalar(2.0);
    let p = b.node("Pow", &[&d, &two], vec![]);
    let s = b.node("Sigmoid", &[&p], vec![]);
    let f = b.node("Flatten", &[&s], vec![int("axis", 1)]);
    let w = b.weight(&[48, 10]);
    let c = b.weight(&[10]);
    let g = b.node(
        "Gemm",
        &[&f, &w, &c],
        vec![float("alpha", 0.5), float("beta", 2.0)],
    );
    let l = b.node("LeakyRelu", &[&g], vec![float("alpha", 0.1)]);
    let e = b.node("Exp", &[&l], vec![]);
    b.output(&e);
    b.encode()
}

/// Pseudo-random integers in `lo..=hi` from `seed` (a QDQ model's quantized weights).
fn integers(n: i64, lo: i64, hi: i64, seed: u64) -> Vec<i64> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            lo + (x % (hi - lo + 1) as u64) as i64
        })
        .collect()
}

/// A weight of `dims` as onnxruntime.quantization keeps one: i8 values, a scale per output
/// channel (along `axis`) that spreads a filter's sum over about one unit: (its dequantized
/// value, its scales).
fn qweight(b: &mut ModelBuilder, dims: &[i64], axis: usize, seed: u64) -> (String, Vec<f32>) {
    let n: i64 = dims.iter().product();
    let fan_in = n / dims[axis];
    let base = 1.5 / (127.0 * (fan_in as f32).sqrt());
    let scales: Vec<f32> = (0..dims[axis])
        .map(|c| base * (1.0 + c as f32 / 8.0))
        .collect();
    let (_, w) = b.quantized_weight(dims, &integers(n, -127, 127, seed), &scales, 0, axis);
    (w, scales)
}

/// An i32 bias behind its `DequantizeLinear`, as the quantizer writes it: in the units of
/// the data's scale `sx` times each channel's weight scale.
fn qbias(b: &mut ModelBuilder, sx: f32, weight_scales: &[f32], seed: u64) -> String {
    let c = weight_scales.len() as i64;
    let q = b.integers(&[c], "i32", &integers(c, -2000, 2000, seed));
    let units: Vec<f32> = weight_scales.iter().map(|w| sx * w).collect();
    let s = b.floats(&[c], &units);
    b.node("DequantizeLinear", &[&q, &s], vec![int("axis", 0)])
}

/// A small QDQ model as onnxruntime.quantization writes one (static, per-channel weights): a stem
/// whose data zero point is not 0 and which pads (its 6 channels and its padding filled with
/// the zero point explicitly), an integer conv with bias and relu, a residual add between
/// conversions, an integer depthwise conv whose padding holds its data's zero point, a padded
/// max pool between conversions of one scale (8-bit), an integer 1x1 conv whose data zero point is folded into its
/// bias, a global pool, a Flatten of a quantized tensor, and a classifier whose data zero
/// point is folded into its bias, with an i8 output.
pub fn qdq_block() -> Vec<u8> {
    let mut b = ModelBuilder::seeded(8);
    let pads = || ints("pads", &[1, 1, 1, 1]);
    let x = b.input_fixed("x", &[1, 6, 9, 9]);
    let (_, xd) = b.qdq(&x, "u8", 1.0 / 127.0, 128);
    let (w, ws) = qweight(&mut b, &[8, 6, 3, 3], 0, 1);
    let bias = qbias(&mut b, 1.0 / 127.0, &ws, 2);
    let stem = b.node("Conv", &[&xd, &w, &bias], vec![pads()]);
    let stem = b.node("Relu", &[&stem], vec![]);
    let (_, a) = b.qdq(&stem, "u8", 1.0 / 64.0, 0);
    let (w, ws) = qweight(&mut b, &[8, 8, 3, 3], 0, 3);
    let bias = qbias(&mut b, 1.0 / 64.0, &ws, 4);
    let c = b.node("Conv", &[&a, &w, &bias], vec![pads()]);
    let c = b.node("Relu", &[&c], vec![]);
    let (_, cd) = b.qdq(&c, "u8", 1.0 / 64.0, 0);
    let sum = b.node("Add", &[&a, &cd], vec![]);
    let (_, sum) = b.qdq(&sum, "u8", 1.0 / 32.0, 3);
    let (w, ws) = qweight(&mut b, &[8, 1, 3, 3], 0, 8);
    let bias = qbias(&mut b, 1.0 / 32.0, &ws, 9);
    let dw = b.node("Conv", &[&sum, &w, &bias], vec![pads(), int("group", 8)]);
    let (_, dw) = b.qdq(&dw, "u8", 1.0 / 32.0, 3);
    let pool = b.node(
        "MaxPool",
        &[&dw],
        vec![
            ints("kernel_shape", &[3, 3]),
            ints("strides", &[2, 2]),
            pads(),
        ],
    );
    let (_, pool) = b.qdq(&pool, "u8", 1.0 / 32.0, 3);
    let (w, _) = qweight(&mut b, &[5, 8, 1, 1], 0, 5);
    let c = b.node("Conv", &[&pool, &w], vec![]);
    let (_, c) = b.qdq(&c, "u8", 1.0 / 32.0, 100);
    let gap = b.node("GlobalAveragePool", &[&c], vec![]);
    let (_, gap) = b.qdq(&gap, "u8", 1.0 / 32.0, 100);
    let flat = b.node("Flatten", &[&gap], vec![]);
    let (_, flat) = b.qdq(&flat, "u8", 1.0 / 32.0, 100);
    let (w, ws) = qweight(&mut b, &[10, 5], 0, 6);
    let bias = qbias(&mut b, 1.0 / 32.0, &ws, 7);
    let y = b.node("Gemm", &[&flat, &w, &bias], vec![int("transB", 1)]);
    let (_, y) = b.qdq(&y, "i8", 1.0 / 16.0, 0);
    b.output(&y);
    b.encode()
}

/// One quantized layer of [`quantized_formats`]: `op` (`Conv` with `attrs`, or `MatMul`) on the
/// 8-bit `data` of scale `sx` and zero point `zx` (a `u8` constant), i8 weights of `dims`
/// scaled per channel along `axis`, an i32 bias for a conv, requantized to scale `sy` and zero
/// point `zy` of type `ty`: the 8-bit result, as one QOperator node or in QDQ form.
struct QLayer<'a> {
    op: &'a str,
    attrs: Vec<tract_onnx::pb::AttributeProto>,
    dims: &'a [i64],
    axis: usize,
    seed: u64,
}

fn quantized_layer(
    b: &mut ModelBuilder,
    qoperator: bool,
    (data, sx, zx): (&str, f32, i64),
    l: QLayer,
    (sy, zy, ty): (f32, i64, &str),
) -> String {
    let n: i64 = l.dims.iter().product();
    let c = l.dims[l.axis];
    let scales: Vec<f32> = (0..c).map(|i| 0.01 * (1.0 + i as f32 / 8.0)).collect();
    let w = b.integers(l.dims, "i8", &integers(n, -127, 127, l.seed));
    let sw = b.floats(&[c], &scales);
    let zw = b.integers(&[c], "i8", &vec![0; c as usize]);
    let (sxn, zxn) = (b.floats(&[], &[sx]), b.integers(&[], "u8", &[zx]));
    let (syn, zyn) = (b.floats(&[], &[sy]), b.integers(&[], ty, &[zy]));
    let bias =
        (l.op == "Conv").then(|| b.integers(&[c], "i32", &integers(c, -2000, 2000, l.seed + 1)));
    if qoperator {
        let op = if l.op == "Conv" {
            "QLinearConv"
        } else {
            "QLinearMatMul"
        };
        let mut inputs = vec![data, &sxn, &zxn, &w, &sw, &zw, &syn, &zyn];
        if let Some(bias) = &bias {
            inputs.push(bias);
        }
        return b.node(op, &inputs, l.attrs);
    }
    let d = b.node("DequantizeLinear", &[data, &sxn, &zxn], vec![]);
    let dw = b.node(
        "DequantizeLinear",
        &[&w, &sw, &zw],
        vec![int("axis", l.axis as i64)],
    );
    let mut inputs = vec![d, dw];
    if let Some(bias) = bias {
        // In units of the data's scale times each channel's, as a QDQ model holds it.
        let units: Vec<f32> = scales.iter().map(|s| s * sx).collect();
        let su = b.floats(&[c], &units);
        inputs.push(b.node("DequantizeLinear", &[&bias, &su], vec![int("axis", 0)]));
    }
    let refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
    let y = b.node(l.op, &refs, l.attrs);
    b.node("QuantizeLinear", &[&y, &syn, &zyn], vec![])
}

/// A small quantized model in either of onnxruntime.quantization's formats, the same values:
/// QOperator (`qoperator`: `QLinearConv` and `QLinearMatMul` nodes) or QDQ (the same
/// operators between `DequantizeLinear` and `QuantizeLinear`). A padded conv whose data zero
/// point is 128, with bias; a depthwise conv with bias; a Flatten of its 8-bit result; a
/// matrix product to an i8 output, dequantized.
pub fn quantized_formats(qoperator: bool) -> Vec<u8> {
    let mut b = ModelBuilder::seeded(21);
    let x = b.input_fixed("x", &[1, 6, 9, 9]);
    let (sx, zx) = (b.floats(&[], &[1.0 / 127.0]), b.integers(&[], "u8", &[128]));
    let q = b.node("QuantizeLinear", &[&x, &sx, &zx], vec![]);
    let pads = || ints("pads", &[1, 1, 1, 1]);
    let conv = |dims, seed, attrs| QLayer {
        op: "Conv",
        attrs,
        dims,
        axis: 0,
        seed,
    };
    let c1 = quantized_layer(
        &mut b,
        qoperator,
        (&q, 1.0 / 127.0, 128),
        conv(&[8, 6, 3, 3], 1, vec![pads()]),
        (1.0 / 64.0, 0, "u8"),
    );
    let c2 = quantized_layer(
        &mut b,
        qoperator,
        (&c1, 1.0 / 64.0, 0),
        conv(&[8, 1, 3, 3], 3, vec![pads(), int("group", 8)]),
        (1.0 / 32.0, 0, "u8"),
    );
    let f = b.node("Flatten", &[&c2], vec![]);
    let m = quantized_layer(
        &mut b,
        qoperator,
        (&f, 1.0 / 32.0, 0),
        QLayer {
            op: "MatMul",
            attrs: vec![],
            dims: &[648, 10],
            axis: 1,
            seed: 5,
        },
        (1.0 / 16.0, 0, "i8"),
    );
    let (sy, zy) = (b.floats(&[], &[1.0 / 16.0]), b.integers(&[], "i8", &[0]));
    let y = b.node("DequantizeLinear", &[&m, &sy, &zy], vec![]);
    b.output(&y);
    b.encode()
}

/// One layer of [`dynamic_quantized`], as `quantize_dynamic` writes it: `x` quantized at run
/// time, `op` (`ConvInteger` with `attrs`, or `MatMulInteger`) on it and i8 weights of `dims`
/// (scale 0.01, zero point 0), the i32 result cast to f32, scaled by the data's scale times
/// the weight's, plus a bias of `bias` shape.
fn dynamic_layer(
    b: &mut ModelBuilder,
    x: &str,
    op: &str,
    (dims, attrs, seed): (&[i64], Vec<tract_onnx::pb::AttributeProto>, u64),
    bias: &[i64],
) -> String {
    let [q, sx, zx] = b.node_n("DynamicQuantizeLinear", &[x], vec![]);
    let n: i64 = dims.iter().product();
    let w = b.integers(dims, "i8", &integers(n, -127, 127, seed));
    let (sw, zw) = (b.floats(&[], &[0.01]), b.integers(&[], "i8", &[0]));
    let scale = b.node("Mul", &[&sx, &sw], vec![]);
    let y = b.node(op, &[&q, &w, &zx, &zw], attrs);
    let y = b.node("Cast", &[&y], vec![int("to", 1)]);
    let y = b.node("Mul", &[&y, &scale], vec![]);
    let c: i64 = bias.iter().product();
    let bias_values: Vec<f32> = (0..c).map(|i| 0.05 * (i % 7) as f32 - 0.15).collect();
    let bias = b.floats(bias, &bias_values);
    b.node("Add", &[&y, &bias], vec![])
}

/// A small model as `onnxruntime.quantization.quantize_dynamic` writes one: every product on
/// data quantized at run time (`DynamicQuantizeLinear`, a zero point that is not 0 but after
/// a Relu), `ConvInteger` / `MatMulInteger`, then cast, scaled and biased in f32. A padded
/// conv of 6 channels (not a multiple of 4), a Relu, a padded depthwise conv of stride 2 and
/// dilation 2, a Flatten, a matrix product.
pub fn dynamic_quantized() -> Vec<u8> {
    let mut b = ModelBuilder::seeded(33);
    let x = b.input_fixed("x", &[1, 6, 9, 9]);
    let pads = || ints("pads", &[1, 1, 1, 1]);
    let c1 = dynamic_layer(
        &mut b,
        &x,
        "ConvInteger",
        (&[8, 6, 3, 3], vec![pads()], 1),
        &[1, 8, 1, 1],
    );
    let r = b.node("Relu", &[&c1], vec![]);
    let dw_attrs = vec![
        ints("pads", &[2, 2, 2, 2]),
        int("group", 8),
        ints("strides", &[2, 2]),
        ints("dilations", &[2, 2]),
    ];
    let c2 = dynamic_layer(
        &mut b,
        &r,
        "ConvInteger",
        (&[8, 1, 3, 3], dw_attrs, 2),
        &[1, 8, 1, 1],
    );
    let f = b.node("Flatten", &[&c2], vec![]);
    let y = dynamic_layer(&mut b, &f, "MatMulInteger", (&[200, 10], vec![], 3), &[10]);
    b.output(&y);
    b.encode()
}
