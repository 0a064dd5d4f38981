//! QDQ models (issue 62): a model in onnxruntime.quantization's format, built in code, yields
//! its convolutions and matrix products in their integer forms, requantized, where the
//! integer form computes what the model says, and f32 tasks where it does not.

use tunehub_onnx::builder::{ModelBuilder, int, ints};
use tunehub_onnx::graph::Graph;
use tunehub_onnx::requantization::requantization;
use tunehub_onnx::{Extraction, InputShapes, Operand, TaskList, extract};

/// Pseudo-random integers in `lo..=hi` (the weights' values do not matter to the tasks).
fn values(n: i64, lo: i64, hi: i64) -> Vec<i64> {
    (0..n).map(|i| lo + (i * 37 + 11) % (hi - lo + 1)).collect()
}

/// `x` quantized with a scale of 0.05 and zero point of `dtype`, and dequantized.
fn qdq(b: &mut ModelBuilder, x: &str, dtype: &str, zero_point: i64) -> (String, String) {
    b.qdq(x, dtype, 0.05, zero_point)
}

/// A weight of `dims` with scales of 0.01 along axis 0, zero points `zero_point`.
fn weight(b: &mut ModelBuilder, dims: &[i64], zero_point: i64) -> (String, String) {
    weight_along(b, dims, zero_point, 0)
}

/// [`weight`] with its scales along `axis` (a MatMul's output channels are its last axis).
fn weight_along(
    b: &mut ModelBuilder,
    dims: &[i64],
    zero_point: i64,
    axis: usize,
) -> (String, String) {
    let n: i64 = dims.iter().product();
    let scales = vec![0.01; dims[axis] as usize];
    b.quantized_weight(dims, &values(n, -127, 127), &scales, zero_point, axis)
}

/// The model's tasks, strictly extracted.
fn tasks_of(b: ModelBuilder) -> TaskList {
    extract(&b.encode(), &InputShapes::default(), &Extraction::strict()).unwrap()
}

/// The tasks' op specs, in the order the network runs them.
fn specs_of(list: &TaskList) -> Vec<String> {
    list.tasks
        .iter()
        .filter_map(|t| t.op_spec.as_ref().map(|s| s.to_string()))
        .collect()
}

#[test]
fn a_qdq_model_yields_integer_tasks_where_they_compute_the_same() {
    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[1, 8, 9, 9]);
    let (xq, xd) = qdq(&mut b, &x, "u8", 0);
    // A padded convolution with its i32 bias and relu: u8 x i8, requantized to u8.
    let (wa, wad) = weight(&mut b, &[6, 8, 3, 3], 0);
    let bias = b.integers(&[6], "i32", &values(6, -500, 500));
    let bias_s = b.floats(&[6], &[0.0005; 6]);
    let bias_z = b.integers(&[6], "i32", &[0; 6]);
    let bd = b.node(
        "DequantizeLinear",
        &[&bias, &bias_s, &bias_z],
        vec![int("axis", 0)],
    );
    let pads = || ints("pads", &[1, 1, 1, 1]);
    let ca = b.node("Conv", &[&xd, &wad, &bd], vec![pads()]);
    let ra = b.node("Relu", &[&ca], vec![]);
    let (_, yd) = qdq(&mut b, &ra, "u8", 0);
    // Padded, and its data's zero point is 5: the padding must hold 5, so the data is read
    // padded explicitly, its 6 channels filled to 8 (the dot products' groups of 4).
    let (zq, zd) = qdq(&mut b, &yd, "u8", 5);
    let (wb, wbd) = weight(&mut b, &[4, 6, 3, 3], 0);
    let cb = b.node("Conv", &[&zd, &wbd], vec![pads()]);
    let (_, cbd) = qdq(&mut b, &cb, "u8", 0);
    let gap = b.node("GlobalAveragePool", &[&cbd], vec![]);
    let flat = b.node("Flatten", &[&gap], vec![]);
    // A Gemm on i8 data, requantized to i8.
    let (_, fd) = qdq(&mut b, &flat, "i8", 0);
    let (_, wgd) = weight(&mut b, &[10, 4], 0);
    let gemm = b.node("Gemm", &[&fd, &wgd], vec![int("transB", 1)]);
    let (_, gd) = qdq(&mut b, &gemm, "i8", 0);
    // Weights with a zero point other than 0 (asymmetric): f32.
    let (_, wmd) = weight_along(&mut b, &[10, 3], 2, 1);
    let mm = b.node("MatMul", &[&gd, &wmd], vec![]);
    let (_, out) = qdq(&mut b, &mm, "i8", 0);
    b.output(&out);

    let list = tasks_of(b);
    let specs = specs_of(&list);
    let want = [
        "conv2d_nhwc(n=1,h=9,w=9,c=8,f=6,pad=1,bias=1,relu=1,dtype=u8i8,out_dtype=u8,\
         layout_free=kernel)",
        "conv2d_nhwc(n=1,h=11,w=11,c=8,f=4,bias=1,dtype=u8i8,out_dtype=u8,layout_free=kernel)",
        "dense(m=1,n=10,k=4,bias=0,relu=0,dtype=i8i8,out_dtype=i8,layout_free=weight)",
        "matmul(m=1,n=3,k=10,layout_free=B)",
    ];
    for w in want {
        assert!(specs.iter().any(|s| s == w), "{w} not in {specs:#?}");
    }
    assert_eq!(
        specs.iter().filter(|s| s.contains("dtype=")).count(),
        3,
        "{specs:#?}"
    );
    // The integer task reads the quantized tensor and the i8 constant, and computes the
    // QuantizeLinear's output.
    let t = list
        .tasks
        .iter()
        .position(|t| t.label == "Conv+Relu+QuantizeLinear -> [1,6,9,9]")
        .unwrap_or_else(|| {
            panic!(
                "{:#?}",
                list.tasks.iter().map(|t| &t.label).collect::<Vec<_>>()
            )
        });
    let call = list.calls.iter().find(|c| c.task == t).unwrap();
    let operand = |name: &str| {
        call.operands
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, o)| o.clone())
    };
    // In NHWC (the dot products sum channels side by side), the weight HWIO; the output
    // copied back to NCHW.
    let transposed = |name: &str, perm: &[usize]| Operand::Transposed {
        name: name.into(),
        perm: perm.to_vec(),
    };
    assert_eq!(operand("data"), Some(transposed(&xq, &[0, 2, 3, 1])));
    assert_eq!(operand("kernel"), Some(transposed(&wa, &[2, 3, 1, 0])));
    assert_eq!(call.output_perm, Some(vec![0, 3, 1, 2]));
    // The bias, multipliers and zero point are computed by the build.
    for part in ["bias", "scale", "zero_point"] {
        assert!(
            matches!(operand(part), Some(Operand::Requantized { .. })),
            "{part}: {:?}",
            operand(part)
        );
    }
    // The explicitly padded one: rows and columns of the zero point around NHWC data, its
    // channels filled with it too; the weight's input channels filled with 0.
    let padded = list
        .calls
        .iter()
        .find(|c| {
            let spec = list.tasks[c.task].op_spec.as_ref();
            spec.is_some_and(|s| s.to_string().contains("h=11"))
        })
        .expect("the padded convolution's call");
    assert_eq!(
        padded.operands[..2],
        [
            (
                "data".to_string(),
                Operand::Padded {
                    name: zq.clone(),
                    perm: vec![0, 2, 3, 1],
                    pads: vec![0, 1, 1, 0, 0, 1, 1, 2],
                    value: 5,
                }
            ),
            (
                "kernel".to_string(),
                Operand::Padded {
                    name: wb.clone(),
                    perm: vec![2, 3, 1, 0],
                    pads: vec![0, 0, 0, 0, 0, 0, 2, 0],
                    value: 0,
                }
            ),
        ]
    );
    // The Q/DQ pairs that only convert are glue, not skipped.
    assert!(list.skipped.is_empty(), "{:?}", list.skipped);
}

/// A weight too large for the graph to fold its `DequantizeLinear` is still the layer's
/// constant weight (ResNet-18's 512-channel convolutions are).
#[test]
fn a_large_quantized_weight_is_still_a_constant_weight() {
    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[1, 256, 3, 3]);
    let (_, xd) = qdq(&mut b, &x, "u8", 0);
    let (_, wd) = weight(&mut b, &[512, 256, 3, 3], 0);
    let c = b.node("Conv", &[&xd, &wd], vec![]);
    let (_, out) = qdq(&mut b, &c, "u8", 0);
    b.output(&out);
    assert_eq!(
        specs_of(&tasks_of(b)),
        ["conv2d_nhwc(n=1,h=3,w=3,c=256,f=512,dtype=u8i8,out_dtype=u8,layout_free=kernel)"]
    );
}

/// A data zero point other than 0: an unpadded convolution without a bias gets one in its
/// task (the build folds `-zero_point * sum(weights)` into it); a MatMul, with no bias to
/// take it, stays f32.
#[test]
fn a_data_zero_point_gives_the_task_a_bias_or_keeps_it_f32() {
    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[1, 8, 5, 5]);
    let (_, xd) = qdq(&mut b, &x, "u8", 7);
    let (_, wd) = weight(&mut b, &[6, 8, 1, 1], 0);
    let c = b.node("Conv", &[&xd, &wd], vec![]);
    let (_, cd) = qdq(&mut b, &c, "u8", 7);
    let flat = b.node("Flatten", &[&cd], vec![]);
    let (_, fd) = qdq(&mut b, &flat, "u8", 7);
    let (_, wm) = weight_along(&mut b, &[150, 4], 0, 1);
    let mm = b.node("MatMul", &[&fd, &wm], vec![]);
    let (_, out) = qdq(&mut b, &mm, "u8", 7);
    b.output(&out);
    let specs = specs_of(&tasks_of(b));
    assert_eq!(
        specs,
        [
            "conv2d_nhwc(n=1,h=5,w=5,c=8,f=6,kh=1,kw=1,bias=1,dtype=u8i8,out_dtype=u8,\
             layout_free=kernel)",
            "matmul(m=1,n=4,k=150,layout_free=B)"
        ]
    );
}

/// Per-channel weight scales factor out of the sum only along the output's channels: a
/// MatMul whose scales run along the summed axis stays f32.
#[test]
fn scales_along_the_sum_keep_a_product_f32() {
    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[2, 4]);
    let (_, xd) = qdq(&mut b, &x, "i8", 0);
    let (_, w1) = weight_along(&mut b, &[4, 3], 0, 1);
    let m1 = b.node("MatMul", &[&xd, &w1], vec![]);
    let (_, m1d) = qdq(&mut b, &m1, "i8", 0);
    let (_, w2) = weight_along(&mut b, &[3, 5], 0, 0);
    let m2 = b.node("MatMul", &[&m1d, &w2], vec![]);
    let (_, out) = qdq(&mut b, &m2, "i8", 0);
    b.output(&out);
    let specs = specs_of(&tasks_of(b));
    assert_eq!(
        specs,
        [
            "matmul(m=2,n=3,k=4,dtype=i8i8,out_dtype=i8,layout_free=B)",
            "matmul(m=2,n=5,k=3,layout_free=B)"
        ]
    );
}

/// A product between DequantizeLinear nodes whose result is the model's output, with no
/// QuantizeLinear after it, is f32 (and no reader is looked up past the graph's end).
#[test]
fn a_dequantized_product_that_is_the_output_stays_f32() {
    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[2, 4]);
    let (_, xd) = qdq(&mut b, &x, "i8", 0);
    let (_, w) = weight_along(&mut b, &[4, 3], 0, 1);
    let m = b.node("MatMul", &[&xd, &w], vec![]);
    b.output(&m);
    assert_eq!(
        specs_of(&tasks_of(b)),
        ["matmul(m=2,n=3,k=4,layout_free=B)"]
    );
}

/// The constants a build gives a quantized anchor: the quantizer's i32 bias unchanged where
/// it is written in the units `sx * sw[c]`, less `zx * sum(w[c])`; the multipliers
/// `sx * sw[c] / sy`; the output's zero point.
#[test]
fn requantization_constants_are_onnx_runtimes() {
    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[1, 2, 3, 3]);
    let (_, xd) = b.qdq(&x, "u8", 0.5, 7);
    let w = [1, 2, 3, 4, 5, -6];
    let (_, wd) = b.quantized_weight(&[3, 2, 1, 1], &w, &[0.25, 0.5, 1.0], 0, 0);
    let bias = b.integers(&[3], "i32", &[10, -20, 30]);
    let units = b.floats(&[3], &[0.125, 0.25, 0.5]);
    let bd = b.node("DequantizeLinear", &[&bias, &units], vec![int("axis", 0)]);
    let c = b.node("Conv", &[&xd, &wd, &bd], vec![]);
    let (_, out) = b.qdq(&c, "i8", 2.0, -3);
    b.output(&out);
    let g = Graph::load(&b.encode(), &InputShapes::default(), None).unwrap();
    let a = g.nodes.iter().position(|n| n.op == "Conv").unwrap();
    let r = requantization(&g, a).unwrap();
    assert_eq!(r.bias, [10 - 7 * 3, -20 - 7 * 7, 30 + 7]);
    assert_eq!(r.scale, [0.0625, 0.125, 0.25]);
    assert_eq!(r.zero_point, -3);
    assert_eq!(r.out, tunehub_engine::ir::DType::I8);
}

/// A quantized depthwise convolution runs in NHWC, its `[c,1,kh,kw]` weight read as
/// `[kh,kw,c,1]`; where its window pads data whose zero point is not 0, the data are padded
/// with the zero point explicitly (no channels added: a depthwise window sums none).
#[test]
fn a_quantized_depthwise_convolution_runs_in_nhwc() {
    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[1, 6, 7, 7]);
    let (xq, xd) = qdq(&mut b, &x, "u8", 9);
    let (w, wd) = weight(&mut b, &[6, 1, 3, 3], 0);
    let c = b.node(
        "Conv",
        &[&xd, &wd],
        vec![int("group", 6), ints("pads", &[1, 1, 1, 1])],
    );
    let (_, out) = qdq(&mut b, &c, "u8", 0);
    b.output(&out);
    let list = tasks_of(b);
    assert_eq!(
        specs_of(&list),
        [
            "depthwise_conv2d_nhwc(n=1,h=9,w=9,c=6,bias=1,dtype=u8i8,out_dtype=u8,\
          layout_free=kernel)"
        ]
    );
    let call = &list.calls[0];
    assert_eq!(call.output_perm, Some(vec![0, 3, 1, 2]));
    assert_eq!(
        call.operands[..2],
        [
            (
                "data".to_string(),
                Operand::Padded {
                    name: xq,
                    perm: vec![0, 2, 3, 1],
                    pads: vec![0, 1, 1, 0, 0, 1, 1, 0],
                    value: 9,
                }
            ),
            (
                "kernel".to_string(),
                Operand::Padded {
                    name: w,
                    perm: vec![2, 3, 0, 1],
                    pads: vec![0; 8],
                    value: 0,
                }
            ),
        ]
    );
}

/// A max pool between conversions of one scale and zero point is the 8-bit max pool in NHWC
/// (padded: its padding is the type's least value); with another scale after it, or an i8
/// tensor quantized to u8, it stays f32.
#[test]
fn a_max_pool_between_one_scale_is_an_8bit_max_pool() {
    let pool = |b: &mut ModelBuilder, x: &str| {
        b.node(
            "MaxPool",
            &[x],
            vec![
                ints("kernel_shape", &[3, 3]),
                ints("strides", &[2, 2]),
                ints("pads", &[1, 1, 1, 1]),
            ],
        )
    };
    for (dtype, zero_point) in [("u8", 3), ("i8", -5)] {
        let mut b = ModelBuilder::new();
        let x = b.input_fixed("x", &[1, 6, 9, 7]);
        let (xq, xd) = qdq(&mut b, &x, dtype, zero_point);
        let p = pool(&mut b, &xd);
        let (_, out) = qdq(&mut b, &p, dtype, zero_point);
        b.output(&out);
        let list = tasks_of(b);
        assert_eq!(
            specs_of(&list),
            [format!(
                "max_pool2d_nhwc(n=1,h=9,w=7,c=6,kh=3,kw=3,pad=1,dtype={dtype})"
            )]
        );
        let call = &list.calls[0];
        assert_eq!(call.output_perm, Some(vec![0, 3, 1, 2]));
        let data = Operand::Transposed {
            name: xq,
            perm: vec![0, 2, 3, 1],
        };
        assert_eq!(call.operands, [("data".to_string(), data)]);
    }
    for (after, zero_point) in [("u8", 4), ("i8", 3)] {
        let mut b = ModelBuilder::new();
        let x = b.input_fixed("x", &[1, 6, 9, 7]);
        let (_, xd) = qdq(&mut b, &x, "u8", 3);
        let p = pool(&mut b, &xd);
        let (_, out) = qdq(&mut b, &p, after, zero_point);
        b.output(&out);
        let list = tasks_of(b);
        assert!(specs_of(&list).is_empty(), "{after} {zero_point}");
        assert_eq!(list.tasks.len(), 1);
    }
}

/// An elementwise chain between conversions (a residual add and its relu, ONNX Runtime's
/// `QLinearAdd`) reads the 8-bit tensors and writes the quantized one, its conversions
/// folded in: flat when its operands have its shape, nested when one broadcasts along the
/// channels. A chain whose result another node reads too, or that reads an f32 activation,
/// stays f32.
#[test]
fn a_chain_between_conversions_is_8_bit() {
    let model = |scale_by: Option<&[i64]>, also_read: bool, f32_operand: bool| {
        let mut b = ModelBuilder::new();
        let x = b.input_fixed("x", &[1, 6, 5, 3]);
        let y = b.input_fixed("y", &[1, 6, 5, 3]);
        let (xq, xd) = qdq(&mut b, &x, "u8", 3);
        let (yq, yd) = qdq(&mut b, &y, "i8", -2);
        let y_in = if f32_operand { y.clone() } else { yd };
        let mut s = b.node("Add", &[&xd, &y_in], vec![]);
        if let Some(dims) = scale_by {
            let n: i64 = dims.iter().product();
            let w: Vec<f32> = (0..n).map(|i| 0.5 + i as f32 / 8.0).collect();
            let w = b.floats(dims, &w);
            s = b.node("Mul", &[&s, &w], vec![]);
        }
        let r = b.node("Relu", &[&s], vec![]);
        let (_, out) = qdq(&mut b, &r, "u8", 5);
        b.output(&out);
        if also_read {
            b.output(&r);
        }
        (tasks_of(b), xq, yq)
    };
    let (list, xq, yq) = model(None, false, false);
    let [task] = &list.tasks[..] else {
        panic!("{:#?}", list.tasks)
    };
    assert!(task.op_spec.is_none());
    for want in [
        "input u8 T[1,90]",
        "input i8 T1[1,90]",
        "u8 Y[i0,i1] = (round(",
        "where i0<1, i1<90",
    ] {
        assert!(task.expr.contains(want), "{want}:\n{}", task.expr);
    }
    assert_eq!(
        list.calls[0].operands,
        [
            ("T".to_string(), Operand::tensor(&xq)),
            ("T1".to_string(), Operand::tensor(&yq))
        ]
    );
    let (list, _, _) = model(Some(&[6, 1, 1]), false, false);
    let expr = &list.tasks[0].expr;
    assert!(
        expr.contains("input u8 T[6,5,3]") && expr.contains("u8 Y[i0,i1,i2,i3]"),
        "{expr}"
    );
    for (also_read, f32_operand) in [(true, false), (false, true)] {
        let (list, _, _) = model(None, also_read, f32_operand);
        assert!(
            list.tasks.iter().all(|t| !t.expr.contains("u8")),
            "{:#?}",
            list.tasks
        );
    }
}

/// A QOperator model (`QLinearConv`, `QLinearMatMul`) is read as the QDQ form the operators
/// are defined by: the same tasks as the same model written in QDQ, its convolutions and
/// matrix product integer and requantized.
#[test]
fn a_qoperator_model_yields_the_tasks_of_its_qdq_form() {
    let tasks = |qoperator: bool| {
        let bytes = tunehub_onnx::nets::quantized_formats(qoperator);
        extract(&bytes, &InputShapes::default(), &Extraction::strict()).unwrap()
    };
    let (qop, qdq) = (tasks(true), tasks(false));
    let specs = specs_of(&qop);
    assert_eq!(specs, specs_of(&qdq));
    let keys =
        |l: &TaskList| -> Vec<String> { l.tasks.iter().map(|t| t.workload_key.clone()).collect() };
    assert_eq!(keys(&qop), keys(&qdq));
    let integer: Vec<&String> = specs.iter().filter(|s| s.contains("dtype=u8i8")).collect();
    assert_eq!(integer.len(), 3, "{specs:#?}");
    assert!(
        integer.iter().any(|s| s.contains("out_dtype=i8")),
        "{specs:#?}"
    );
}

/// A dynamically quantized model (`quantize_dynamic`'s `ConvInteger` and `MatMulInteger` on
/// data quantized at run time) yields its products as integer tasks with i32 results: no
/// requantization, no bias (the data zero point is the build's correction), a convolution of
/// 6 channels padded to 8 in NHWC.
#[test]
fn a_dynamically_quantized_model_yields_integer_tasks() {
    let bytes = tunehub_onnx::nets::dynamic_quantized();
    let list = extract(&bytes, &InputShapes::default(), &Extraction::strict()).unwrap();
    let specs = specs_of(&list);
    let integer: Vec<&String> = specs.iter().filter(|s| s.contains("dtype=u8i8")).collect();
    assert_eq!(integer.len(), 3, "{specs:#?}");
    for s in &integer {
        assert!(!s.contains("out_dtype") && !s.contains("bias=1"), "{s}");
    }
    assert!(
        integer
            .iter()
            .any(|s| s.starts_with("conv2d_nhwc(") && s.contains("c=8")),
        "{specs:#?}"
    );
    assert!(
        integer
            .iter()
            .any(|s| s.starts_with("depthwise_conv2d_nhwc(")),
        "{specs:#?}"
    );
    assert!(
        integer
            .iter()
            .any(|s| s.starts_with("matmul(m=1,n=10,k=200")),
        "{specs:#?}"
    );
}

/// An integer product the library's integer form does not compute is named, with why: u8
/// weights, or weights whose zero point is not 0.
#[test]
fn an_integer_product_it_cannot_run_says_why() {
    for (dtype, zero_point, why) in [("u8", 0, "i8 constant"), ("i8", 3, "weight zero point")] {
        let mut b = ModelBuilder::new();
        let x = b.input_fixed("x", &[2, 16]);
        let [q, _, zx] = b.node_n("DynamicQuantizeLinear", &[&x], vec![]);
        let w = b.integers(&[16, 4], dtype, &values(64, 0, 100));
        let zw = b.integers(&[], dtype, &[zero_point]);
        let y = b.node("MatMulInteger", &[&q, &w, &zx, &zw], vec![]);
        let y = b.node("Cast", &[&y], vec![int("to", 1)]);
        b.output(&y);
        let e = extract(&b.encode(), &InputShapes::default(), &Extraction::strict())
            .unwrap_err()
            .to_string();
        assert!(e.contains("MatMulInteger") && e.contains(why), "{e}");
    }
}
