//! Task extraction on networks built in code: the task list against each architecture's layer
//! table (counts and weights computed here from the table), the errors a bad model gets, and
//! every workload the extraction writes checked against the reference on real kernels.

use std::collections::BTreeMap;
use tunehub_engine::measure::{ErrorCode, MeasureOptions, Measurer};
use tunehub_engine::ops::{LayoutFree, OpSpec};
use tunehub_engine::sample::RandomSampler;
use tunehub_engine::target::Target;
use tunehub_onnx::builder::ModelBuilder;
use tunehub_onnx::{
    Extraction, ImportError, InputShapes, Layout, Operand, TaskList, extract, nets,
};

fn tasks_of(bytes: &[u8]) -> TaskList {
    extract(bytes, &InputShapes::default(), &Extraction::strict()).expect("the model's tasks")
}

/// Weight by label.
fn weights(l: &TaskList) -> BTreeMap<String, u32> {
    let mut m = BTreeMap::new();
    for t in &l.tasks {
        *m.entry(t.label.clone()).or_default() += t.weight;
    }
    m
}

fn label(ops: &str, shape: &[i64]) -> String {
    let d: Vec<String> = shape.iter().map(i64::to_string).collect();
    format!("{ops} -> [{}]", d.join(","))
}

#[test]
fn resnet18_is_its_layer_table() {
    let l = tasks_of(&tunehub_onnx::nets::resnet18(Some(1), 224));
    // torchvision's table: (channels, output size) per stage, two basic blocks each; the first
    // block of stages 2-4 has stride 2 and a 1x1 shortcut.
    let cbr = "Conv+BatchNormalization+Relu";
    let res = "Conv+BatchNormalization+Add+Relu";
    let mut want: BTreeMap<String, u32> = BTreeMap::new();
    let mut add = |k: String| *want.entry(k).or_default() += 1;
    add(label(cbr, &[1, 64, 112, 112]));
    add(label("MaxPool", &[1, 64, 56, 56]));
    for (stage, (c, s)) in [(64, 56), (128, 28), (256, 14), (512, 7)]
        .into_iter()
        .enumerate()
    {
        for block in 0..2 {
            add(label(cbr, &[1, c, s, s]));
            add(label(res, &[1, c, s, s]));
            if stage > 0 && block == 0 {
                add(label("Conv+BatchNormalization", &[1, c, s, s]));
            }
        }
    }
    add(label("GlobalAveragePool", &[1, 512, 1, 1]));
    add(label("Gemm", &[1, 1000]));
    assert_eq!(weights(&l), want);
    // 20 convolutions, a max pool, a global pool, the classifier: each in one task.
    assert_eq!(l.tasks.iter().map(|t| t.weight).sum::<u32>(), 23);
    // Stride-2 3x3 convolutions differ from the stride-1 ones of the same stage: 18 tasks.
    assert_eq!(l.tasks.len(), 18);
    assert!(l.skipped.is_empty());
    // Folded batch norm: one bias per channel, no scale; the library's convolution fits.
    let stem = &l.tasks[0];
    assert_eq!(stem.nodes.len(), 3, "{:?}", stem.nodes);
    assert!(
        stem.expr.contains("relu((O[i0,i1,i2,i3] + B[i1]))"),
        "{}",
        stem.expr
    );
    // Its library form, canonical: what `tunehub tasks --json` prints, and pasted back the
    // same workload.
    let canonical = "conv2d_nchw(n=1,c=3,h=224,w=224,f=64,kh=7,kw=7,stride=2,pad=3,bias=1,relu=1,layout_free=kernel)";
    let spec = stem.op_spec.as_ref().unwrap();
    assert_eq!(spec.to_string(), canonical);
    assert_eq!(serde_json::to_value(stem).unwrap()["op_spec"], canonical);
    assert_eq!(
        OpSpec::parse(canonical).unwrap().task().unwrap().key,
        stem.workload_key
    );
    assert_eq!(stem.layout_free, ["kernel"]);
    // The residual add is no library operator: the text form.
    let res = l.tasks.iter().find(|t| t.label.contains("Add")).unwrap();
    assert_eq!(res.op_spec, None);
    assert!(serde_json::to_value(res).unwrap()["op_spec"].is_null());
    assert!(res.expr.contains("+ T[i1,i2,i3]"), "{}", res.expr);
    assert_eq!(res.layout_free, ["W"]);
    // FLOPs: 2 * 64 * 3 * 7 * 7 per output point, plus the bias and relu.
    assert_eq!(stem.flops, 112 * 112 * 64 * (2 * 3 * 49 + 2));
}

#[test]
fn a_dynamic_batch_needs_a_value_and_takes_it() {
    let m = nets::resnet18(None, 32);
    let e = extract(&m, &InputShapes::default(), &Extraction::strict()).unwrap_err();
    assert!(matches!(e, ImportError::DynamicDim { ref input, dim: 0, .. } if input == "input"));
    assert!(e.to_string().contains("--batch"), "{e}");
    let two = InputShapes {
        batch: Some(2),
        ..InputShapes::default()
    };
    let l = extract(&m, &two, &Extraction::strict()).unwrap();
    assert_eq!(
        l.tasks[0].label,
        "Conv+BatchNormalization+Relu -> [2,64,16,16]"
    );
    let named = InputShapes {
        shapes: vec![("input".into(), vec![1, 3, 64, 64])],
        ..InputShapes::default()
    };
    let l = extract(&m, &named, &Extraction::strict()).unwrap();
    assert_eq!(
        l.tasks[0].label,
        "Conv+BatchNormalization+Relu -> [1,64,32,32]"
    );
    let wrong = InputShapes {
        shapes: vec![("image".into(), vec![1, 3, 64, 64])],
        ..InputShapes::default()
    };
    let e = extract(&m, &wrong, &Extraction::strict())
        .unwrap_err()
        .to_string();
    assert!(e.contains("image") && e.contains("inputs: input"), "{e}");
}

#[test]
fn mobilenet_v2_block_is_three_fused_convolutions() {
    let l = tasks_of(&nets::mobilenet_v2_block());
    let labels: Vec<(&str, u32)> = l
        .tasks
        .iter()
        .map(|t| (t.label.as_str(), t.weight))
        .collect();
    assert_eq!(
        labels,
        [
            ("Conv+BatchNormalization+Clip -> [1,144,56,56]", 1),
            ("Conv+BatchNormalization+Clip -> [1,144,28,28]", 1),
            ("Conv+BatchNormalization -> [1,32,28,28]", 1),
        ]
    );
    let dw = &l.tasks[1].expr;
    // Depthwise: one input channel per output channel, stride 2; ReLU6 as a clamp.
    assert!(
        dw.contains("P[i0,i1,i2*2+k1,i3*2+k2] * W[i1,0,k1,k2]"),
        "{dw}"
    );
    assert!(dw.contains("min(max("), "{dw}");
    assert!(dw.contains("0.0), 6.0)"), "{dw}");
}

/// BERT-base and GPT-2 share one layer table: three projections (weight 3), the two
/// attention products, softmax, the output projection with its residual, two layer norms,
/// the FFN's dense+GELU and its dense with the residual.
fn transformer_table(rows: &[i64], seq: i64, kv: i64) -> BTreeMap<String, u32> {
    let h = |n: i64| [rows, &[n]].concat();
    let mut want = BTreeMap::new();
    let mut add = |k: String, w: u32| *want.entry(k).or_default() += w;
    add(label("MatMul+Add", &h(768)), 3);
    let scores = if seq > 1 {
        "MatMul+Div+Add"
    } else {
        "MatMul+Div"
    };
    add(label(scores, &[1, 12, seq, kv]), 1);
    add(label("Softmax", &[1, 12, seq, kv]), 1);
    add(label("MatMul", &[1, 12, seq, 64]), 1);
    add(label("MatMul+Add+Add", &h(768)), 2);
    add(label("LayerNormalization", &h(768)), 2);
    add(label("MatMul+Add+Div+Erf+Add+Mul+Mul", &h(3072)), 1);
    want
}

#[test]
fn bert_encoder_layer_is_its_layer_table() {
    let l = tasks_of(&nets::bert_layer(128));
    assert_eq!(weights(&l), transformer_table(&[1, 128], 128, 128));
    assert_eq!(l.tasks.len(), 8);
    // The glue (reshapes, transposes) yields no task.
    assert_eq!(l.glue, 8);
    let gelu = l.tasks.iter().find(|t| t.label.contains("Erf")).unwrap();
    assert!(gelu.expr.contains("erf("), "{}", gelu.expr);
    // The dense layer's rows are flattened: one 128 x 3072 x 768 product.
    assert!(
        gelu.expr.contains("where i0<128, i1<3072, k0<768"),
        "{}",
        gelu.expr
    );
    assert!(gelu.flops > 2 * 128 * 3072 * 768, "{}", gelu.flops);
}

#[test]
fn gpt2_decoder_step_is_matrix_vector_products() {
    let l = tasks_of(&nets::gpt2_step(127));
    assert_eq!(weights(&l), transformer_table(&[1, 1], 1, 128));
    for t in l.tasks.iter().filter(|t| t.label.starts_with("MatMul+Add")) {
        assert!(t.expr.contains("where i0<1, i1<"), "one row: {}", t.expr);
    }
}

#[test]
fn bad_models_are_errors_naming_what_is_wrong() {
    let m = nets::mobilenet_v2_block();
    let e = extract(
        &m[..m.len() / 2],
        &InputShapes::default(),
        &Extraction::strict(),
    )
    .unwrap_err();
    assert!(matches!(e, ImportError::Malformed(_)), "{e}");
    assert!(e.to_string().contains("truncated or malformed"), "{e}");
    let e = extract(
        b"\x0a\xff\xff\xff\xff",
        &InputShapes::default(),
        &Extraction::strict(),
    )
    .unwrap_err();
    assert!(matches!(e, ImportError::Malformed(_)), "{e}");

    // An operator outside the list: an error naming the node and the operator when strict,
    // else skipped and listed while the rest is tuned.
    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[1, 8, 4, 4]);
    let y = b.node("Relu", &[&x], vec![]);
    let s = b.node("Sin", &[&y], vec![]);
    let sin = b.last_node().to_string();
    let g = b.node("GlobalAveragePool", &[&s], vec![]);
    b.output(&g);
    let m = b.encode();
    let e = extract(&m, &InputShapes::default(), &Extraction::strict()).unwrap_err();
    let text = e.to_string();
    assert!(
        matches!(e, ImportError::Unsupported { ref node, ref op, .. } if *node == sin && op == "Sin")
    );
    assert!(
        text.starts_with(&format!("node '{sin}' (Sin): unsupported operator")),
        "{text}"
    );
    let l = extract(&m, &InputShapes::default(), &Extraction::lenient()).unwrap();
    assert_eq!(l.skipped.len(), 1);
    assert_eq!(
        (l.skipped[0].node.as_str(), l.skipped[0].op.as_str()),
        (sin.as_str(), "Sin")
    );
    let labels: Vec<&str> = l.tasks.iter().map(|t| t.label.as_str()).collect();
    assert_eq!(
        labels,
        ["Relu -> [1,8,4,4]", "GlobalAveragePool -> [1,8,1,1]"]
    );

    // Nothing to tune at all: an error naming the unsupported node.
    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[4]);
    let s = b.node("Sin", &[&x], vec![]);
    b.output(&s);
    let e = extract(&b.encode(), &InputShapes::default(), &Extraction::lenient())
        .unwrap_err()
        .to_string();
    assert!(e.contains("no task") && e.contains("(Sin)"), "{e}");
}

#[test]
fn every_generated_workload_matches_the_reference() {
    let l = tasks_of(&nets::tiny());
    // Every construct: convolutions (plain, grouped, depthwise), folded and standalone batch
    // norm, ReLU6, a residual add, pools, a dense layer with GELU, a batched product, softmax,
    // layer norm.
    assert_eq!(l.tasks.len(), 12, "{:#?}", l.tasks);
    // And the rest: a mean, a broadcast subtraction, Pow, sigmoid, Gemm with alpha, beta and a
    // bias, leaky relu, exp.
    let rest = tasks_of(&nets::tiny_rest());
    let labels: Vec<&str> = rest.tasks.iter().map(|t| t.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "ReduceMean -> [1,6,1]",
            "Sub+Pow+Sigmoid -> [1,6,8]",
            "Gemm+LeakyRelu+Exp -> [1,10]"
        ]
    );
    let target = Target::detect();
    let mut measurer = Measurer::new(&target, MeasureOptions::check_only());
    for (i, t) in l.tasks.iter().chain(&rest.tasks).enumerate() {
        let task = t.task().unwrap();
        assert_eq!(task.key, t.workload_key);
        // A library form says its layout-free inputs (the model's, not the default), prints
        // canonically and reads back as the same workload.
        if let Some(spec) = &t.op_spec {
            assert_ne!(*spec.layout_free(), LayoutFree::Default, "{spec}");
            assert_eq!(spec.options(), t.options());
            let back = OpSpec::parse(&spec.to_string()).unwrap();
            assert_eq!(&back, spec);
            assert_eq!(back.task().unwrap().key, t.workload_key);
            assert_eq!(task.desc, spec.to_string());
        }
        // A library operator's text form is checked too (it is what the listing shows).
        let text = t.op_spec.as_ref().map(|_| {
            let dag = tunehub_engine::text::parse(&t.expr).unwrap();
            tunehub_engine::task::Task::new(dag, t.expr.clone())
        });
        for task in std::iter::once(task).chain(text) {
            check(&target, &mut measurer, t, &task, 7 + i as u64);
        }
    }
}

/// Issue 60: in NHWC the tiny network yields the same tasks (labels and weights); the window
/// operators write NHWC (read back through `output_perm`), the grouped convolution stays
/// NCHW, and every workload matches the reference under random schedules.
#[test]
fn in_nhwc_the_same_tasks_run_channels_last() {
    let nchw = tasks_of(&nets::tiny());
    let how = Extraction::strict().in_layout(Layout::Nhwc);
    let nhwc = extract(&nets::tiny(), &InputShapes::default(), &how).unwrap();
    assert_eq!(nhwc.layout, Layout::Nhwc);
    assert_eq!(weights(&nchw), weights(&nhwc));
    let target = Target::detect();
    let mut measurer = Measurer::new(&target, MeasureOptions::check_only());
    let mut channels_last = vec![];
    for (i, t) in nhwc.tasks.iter().enumerate() {
        let call = nhwc.calls.iter().find(|c| c.task == i).unwrap();
        if call.output_perm.is_some() {
            assert_eq!(call.output_perm.as_deref(), Some(&[0, 3, 1, 2][..]));
            // Its data is read transposed, into channels last.
            assert!(
                call.operands.iter().any(|(_, o)| matches!(
                    o,
                    Operand::Transposed { perm, .. } if perm == &[0, 2, 3, 1]
                )),
                "{}: {:?}",
                t.label,
                call.operands
            );
            channels_last.push(t.label.clone());
        }
        check(&target, &mut measurer, t, &t.task().unwrap(), 31 + i as u64);
    }
    let windows = |l: &TaskList| {
        l.tasks
            .iter()
            .filter(|t| {
                ["Conv", "MaxPool", "AveragePool"]
                    .iter()
                    .any(|o| t.label.starts_with(o))
            })
            .filter(|t| !t.expr.contains("i1*"))
            .count()
    };
    // Every window operator but the grouped convolution (and the global pool, which writes
    // no map).
    assert!(!channels_last.is_empty());
    assert_eq!(channels_last.len(), windows(&nchw), "{channels_last:?}");
}

/// Random schedules of `task` (a workload of `t`) compile, run and match the reference.
fn check(
    target: &Target,
    measurer: &mut Measurer,
    t: &tunehub_onnx::NetTask,
    task: &tunehub_engine::task::Task,
    seed: u64,
) {
    let mut sampler = RandomSampler::new(&task.dag, target, seed);
    let schedules: Vec<_> = (0..3).map(|_| sampler.sample()).collect();
    for (s, r) in schedules.iter().zip(measurer.measure(task, &schedules)) {
        assert_eq!(
            r.error,
            ErrorCode::NoError,
            "{}:\n{}\n{}\nschedule: {}",
            t.label,
            t.expr,
            r.error_msg,
            s.to_json()
        );
    }
}

/// Issue 64: a matrix product whose operands do not multiply is named (node, operator, both
/// shapes, what differs), strict or not, instead of "the model yields no task to tune"; an
/// input dimension of 0 is said to be 0, not dynamic.
#[test]
fn a_broken_product_and_a_zero_dimension_are_named() {
    let refused = |m: &[u8], shapes: &InputShapes, want: &[&str]| {
        for strict in [false, true] {
            let how = Extraction {
                strict,
                ..Default::default()
            };
            let e = extract(m, shapes, &how).unwrap_err().to_string();
            for w in want {
                assert!(e.contains(w), "{w:?} not in {e:?} (strict: {strict})");
            }
        }
    };
    // The inner dimensions differ.
    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[2, 3]);
    let w = b.weight(&[4, 5]);
    let y = b.node("MatMul", &[&x, &w], vec![]);
    let mm = b.last_node().to_string();
    b.output(&y);
    refused(
        &b.encode(),
        &InputShapes::default(),
        &[
            &format!("node '{mm}' (MatMul): its operands 'x' [2,3] and"),
            "[4,5] do not multiply: the first's last dimension (3) differs from the second's \
             second-to-last (4)",
            "check its export",
        ],
    );
    // Batch dimensions that do not broadcast; then a Gemm's transposed operand.
    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[2, 4, 3]);
    let w = b.input_fixed("w", &[5, 3, 6]);
    let y = b.node("MatMul", &[&x, &w], vec![]);
    b.output(&y);
    refused(
        &b.encode(),
        &InputShapes::default(),
        &["batch dimensions [2] and [5] do not broadcast"],
    );
    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[2, 3]);
    let w = b.weight(&[3, 4]);
    let y = b.node(
        "Gemm",
        &[&x, &w],
        vec![tunehub_onnx::builder::int("transB", 1)],
    );
    let gemm = b.last_node().to_string();
    b.output(&y);
    refused(
        &b.encode(),
        &InputShapes::default(),
        &[&format!("node '{gemm}' (Gemm)"), "second's last (4)"],
    );

    // A dimension of 0: not dynamic, and a value for it is what fixes it.
    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[1, 0, 4]);
    let y = b.node("Relu", &[&x], vec![]);
    b.output(&y);
    let m = b.encode();
    let e = extract(&m, &InputShapes::default(), &Extraction::lenient()).unwrap_err();
    assert!(
        matches!(e, ImportError::NotASize { ref input, dim: 1, value: 0, .. } if input == "x"),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(
        text.contains("dimension 1 is 0, not a size") && !text.contains("dynamic ("),
        "{text}"
    );
    assert!(
        text.contains("--shape x=") && !text.contains("--batch"),
        "{text}"
    );
    let fixed = InputShapes {
        shapes: vec![("x".into(), vec![1, 2, 4])],
        ..InputShapes::default()
    };
    assert_eq!(
        extract(&m, &fixed, &Extraction::strict())
            .unwrap()
            .tasks
            .len(),
        1
    );
}
