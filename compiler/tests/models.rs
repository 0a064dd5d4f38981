//! Models built in code, compiled with untuned kernels (the default schedule of each task: the
//! graph's correctness does not depend on the schedule), built with the C compiler and run
//! against tract on the same inputs.

use std::path::Path;
use tunehub_compiler::{Library, Options, check, compile};
use tunehub_engine::package::{self, Kernel, Provenance};
use tunehub_engine::schedule::Schedule;
use tunehub_engine::target::Target;
use tunehub_onnx::builder::ModelBuilder;
use tunehub_onnx::graph::Graph;
use tunehub_onnx::{Extraction, InputShapes, Layout, Operand, TaskList, choice, nets, tasks};

fn kernels(list: &tunehub_onnx::TaskList, target: &Target) -> Vec<Kernel> {
    list.tasks
        .iter()
        .map(|t| {
            let task = t.task().expect("a task");
            let prov = Provenance {
                record_id: "untuned".into(),
                workload_key: task.key.clone(),
                target_key: target.key(),
                description: task.desc.clone(),
                gflops: 0.0,
            };
            package::kernel(&task, &Schedule::default(), target, prov, "m_").expect("a kernel")
        })
        .collect()
}

/// Compiles `bytes` as `name` into `dir` in each layout, builds each, and checks each against
/// tract; the model's layout's library.
fn build_and_check(bytes: &[u8], name: &str, dir: &Path) -> Library {
    let (nchw, nhwc) = (dir.join("nchw"), dir.join("nhwc"));
    let options = Options::default();
    let lib = build_and_check_with(bytes, name, &nhwc, &options, Layout::Nhwc);
    assert_eq!(lib.manifest.layout, "nhwc");
    build_and_check_with(bytes, name, &nchw, &options, Layout::Nchw)
}

fn build_and_check_with(
    bytes: &[u8],
    name: &str,
    dir: &Path,
    options: &Options,
    layout: Layout,
) -> Library {
    let shapes = InputShapes::default();
    let g = Graph::load(bytes, &shapes, None).expect("the model loads");
    let how = Extraction::strict().in_layout(layout);
    let list = tasks::extract(&g, &how).expect("its tasks");
    build_list_and_check(bytes, &g, &list, name, dir, options)
}

/// Compiles `list` (of `g`, loaded from `bytes`) as `name` into `dir`, builds it, and checks it
/// against tract.
fn build_list_and_check(
    bytes: &[u8],
    g: &Graph,
    list: &TaskList,
    name: &str,
    dir: &Path,
    options: &Options,
) -> Library {
    let shapes = InputShapes::default();
    let target = Target::detect();
    let compiled =
        compile(g, list, &kernels(list, &target), name, "test", options).expect("compiles");
    let reference = check::Reference {
        model: bytes,
        shapes: &shapes,
        dir: None,
    };
    let (lib, _) = compiled
        .build_checked(dir, None, &reference, 7)
        .expect("builds and matches tract");
    lib
}

#[test]
fn the_tiny_network_runs_as_tract_does() {
    let dir = tempfile::tempdir().unwrap();
    build_and_check(&nets::tiny_in(ModelBuilder::seeded(1)), "tiny", dir.path());
}

#[test]
fn the_rest_of_the_constructs_run_as_tract_does() {
    let dir = tempfile::tempdir().unwrap();
    build_and_check(
        &nets::tiny_rest_in(ModelBuilder::seeded(2)),
        "rest",
        dir.path(),
    );
}

use tunehub_onnx::builder::{int, ints};

/// A ResNet stage as torchvision exports it: a strided conv with batch norm and relu, a second
/// conv, a 1x1 strided shortcut, the residual add and relu, a padded max pool, the global pool
/// as `ReduceMean(axes=[2,3], keepdims=0)`, and a `Gemm` classifier.
fn resnet_stage() -> Vec<u8> {
    let mut b = ModelBuilder::seeded(3);
    let x = b.input_fixed("image", &[1, 8, 16, 16]);
    let h = b.conv_bn(&x, 8, 16, 3, 2, 1, 1, true);
    let h = b.conv_bn(&h, 16, 16, 3, 1, 1, 1, false);
    let s = b.conv_bn(&x, 8, 16, 1, 2, 0, 1, false);
    let y = b.node("Add", &[&h, &s], vec![]);
    let y = b.node("Relu", &[&y], vec![]);
    let y = b.node(
        "MaxPool",
        &[&y],
        vec![
            ints("kernel_shape", &[3, 3]),
            ints("strides", &[2, 2]),
            ints("pads", &[1, 1, 1, 1]),
        ],
    );
    let y = b.node(
        "ReduceMean",
        &[&y],
        vec![ints("axes", &[2, 3]), int("keepdims", 0)],
    );
    let w = b.weight(&[10, 16]);
    let c = b.weight(&[10]);
    let y = b.node("Gemm", &[&y, &w, &c], vec![int("transB", 1)]);
    b.output(&y);
    b.encode()
}

/// MobileNetV2's inverted residuals: one that keeps its shape (the input added back) and one
/// with a stride-2 depthwise conv; ReLU6 as `Clip`.
fn mobilenet_blocks() -> Vec<u8> {
    let mut b = ModelBuilder::seeded(4);
    let x = b.input_fixed("image", &[1, 8, 14, 14]);
    let y = nets::mobilenet_block(&mut b, &x, 8, 8, 1, 4);
    let y = nets::mobilenet_block(&mut b, &y, 8, 16, 2, 2);
    b.output(&y);
    b.encode()
}

/// A transformer encoder layer (attention through Reshape and Transpose, Softmax, LayerNorm,
/// Erf-GELU), its output and its first token (`Gather`, as a pooler takes it) and a `Slice`
/// of its last two tokens.
fn encoder() -> Vec<u8> {
    let mut b = ModelBuilder::seeded(5);
    let y = nets::encoder_layer(&mut b, 6, 16, 2, 32);
    let zero = b.shape_const(&[0]);
    let first = b.node("Gather", &[&y, &zero], vec![int("axis", 1)]);
    let (starts, ends, axes) = (
        b.shape_const(&[-2]),
        b.shape_const(&[6]),
        b.shape_const(&[1]),
    );
    let last = b.node("Slice", &[&y, &starts, &ends, &axes], vec![]);
    b.output(&y);
    b.output(&first);
    b.output(&last);
    b.encode()
}

/// A ShuffleNetV2 unit: the channels split in two, one half through 1x1, an explicitly padded
/// depthwise 3x3 and 1x1 convs, concatenated back, then the channel shuffle as
/// Reshape-Transpose-Reshape.
fn shuffle_unit() -> Vec<u8> {
    let mut b = ModelBuilder::seeded(6);
    let x = b.input_fixed("image", &[1, 8, 8, 8]);
    let split = b.shape_const(&[4, 4]);
    let (a, c) = b.node2("Split", &[&x, &split], vec![int("axis", 1)]);
    let h = b.conv_bn(&c, 4, 4, 1, 1, 0, 1, true);
    let pads = b.shape_const(&[0, 0, 1, 1, 0, 0, 1, 1]);
    let h = b.node("Pad", &[&h, &pads], vec![]);
    let h = b.conv_bn(&h, 4, 4, 3, 1, 0, 4, false);
    let h = b.conv_bn(&h, 4, 4, 1, 1, 0, 1, true);
    let y = b.node("Concat", &[&a, &h], vec![int("axis", 1)]);
    let s1 = b.shape_const(&[1, 2, 4, 8, 8]);
    let y = b.node("Reshape", &[&y, &s1], vec![]);
    let y = b.node("Transpose", &[&y], vec![ints("perm", &[0, 2, 1, 3, 4])]);
    let s2 = b.shape_const(&[1, 8, 8, 8]);
    let y = b.node("Reshape", &[&y, &s2], vec![]);
    b.output(&y);
    b.encode()
}

#[test]
fn a_resnet_stage_runs_as_tract_does() {
    let dir = tempfile::tempdir().unwrap();
    let lib = build_and_check(&resnet_stage(), "resnet_stage", dir.path());
    // Batch norms folded: no node is left to run them.
    assert!(
        lib.manifest
            .nodes
            .iter()
            .filter(|n| n.op == "BatchNormalization")
            .all(|n| n.how == "kernel")
    );
    assert!(
        lib.manifest.arena_bytes < lib.manifest.intermediate_bytes,
        "buffers are reused"
    );
}

#[test]
fn mobilenet_inverted_residuals_run_as_tract_does() {
    let dir = tempfile::tempdir().unwrap();
    build_and_check(&mobilenet_blocks(), "mobilenet", dir.path());
}

#[test]
fn a_transformer_encoder_layer_runs_as_tract_does() {
    let dir = tempfile::tempdir().unwrap();
    let lib = build_and_check(&encoder(), "encoder", dir.path());
    assert_eq!(lib.manifest.outputs.len(), 3);
    assert_eq!(lib.manifest.outputs[1].shape, vec![1, 1, 16]);
    // The scores and the context read the queries' and values' heads through their
    // transposes; the keys' moves the summed axis innermost over 6 tokens and is copied, as
    // the merged heads are for the flattened product after them.
    assert_eq!(
        fates(&lib, "Transpose"),
        ["unused", "copy", "unused", "copy"]
    );
}

/// What the build did with each node of type `op`, in the model's order (the manifest's
/// `how`).
fn fates<'l>(lib: &'l Library, op: &str) -> Vec<&'l str> {
    lib.manifest
        .nodes
        .iter()
        .filter(|n| n.op == op)
        .map(|n| n.how.as_str())
        .collect()
}

/// A decoder step's attention, small (GPT-2's): one token's query, the new key appended to
/// the cached ones and transposed for the scores' product, the query's and the values' heads
/// split by transposes. The value transpose is also an output.
fn decoder_attention() -> Vec<u8> {
    let mut b = ModelBuilder::seeded(8);
    let q = b.input_fixed("query", &[1, 1, 2, 4]);
    let past = b.input_fixed("past_key", &[1, 2, 5, 4]);
    let k = b.input_fixed("key", &[1, 2, 1, 4]);
    let v = b.input_fixed("value", &[1, 6, 2, 4]);
    let q = b.node("Transpose", &[&q], vec![ints("perm", &[0, 2, 1, 3])]);
    let k = b.node("Concat", &[&past, &k], vec![int("axis", 2)]);
    let kt = b.node("Transpose", &[&k], vec![ints("perm", &[0, 1, 3, 2])]);
    let s = b.node("MatMul", &[&q, &kt], vec![]);
    let p = b.node("Softmax", &[&s], vec![int("axis", -1)]);
    let v = b.node("Transpose", &[&v], vec![ints("perm", &[0, 2, 1, 3])]);
    let ctx = b.node("MatMul", &[&p, &v], vec![]);
    b.output(&ctx);
    b.output(&v);
    b.encode()
}

/// The products read their operands through the transposes that make them: a transpose
/// nothing else reads is not run, one an output reads still is. A matrix-vector product
/// reads its keys through `K^T` too, whose innermost axis is the summed one.
#[test]
fn products_read_through_transposes() {
    let dir = tempfile::tempdir().unwrap();
    let lib = build_and_check(&decoder_attention(), "decoder", dir.path());
    assert_eq!(
        fates(&lib, "Transpose"),
        ["unused", "unused", "copy"],
        "{:#?}",
        lib.manifest.nodes
    );
    let copies = lib
        .manifest
        .steps
        .iter()
        .filter(|s| s.how == "copy")
        .count();
    assert_eq!(
        copies, 3,
        "the concat's two parts and the output's transpose"
    );
}

#[test]
fn a_shufflenet_unit_runs_as_tract_does() {
    let dir = tempfile::tempdir().unwrap();
    let lib = build_and_check(&shuffle_unit(), "shuffle", dir.path());
    assert_eq!(fates(&lib, "Reshape")[0], "view");
    assert_eq!(fates(&lib, "Split"), ["copy"]);
}

/// Means over axes that are not the last ones: over a sequence (`axes=[1]`, keepdims 0, the
/// pooled sentence embedding), over the channels and width of a map keeping its rank
/// (`axes=[1,-1]`), and over the first axis.
fn means() -> Vec<u8> {
    let mut b = ModelBuilder::seeded(9);
    let x = b.input_fixed("tokens", &[2, 5, 6]);
    let pooled = b.node(
        "ReduceMean",
        &[&x],
        vec![ints("axes", &[1]), int("keepdims", 0)],
    );
    b.output(&pooled);
    let m = b.input_fixed("map", &[1, 4, 3, 5]);
    let kept = b.node("ReduceMean", &[&m], vec![ints("axes", &[1, -1])]);
    b.output(&kept);
    let first = b.node(
        "ReduceMean",
        &[&x],
        vec![ints("axes", &[0]), int("keepdims", 0)],
    );
    b.output(&first);
    b.encode()
}

#[test]
fn means_over_any_axes_run_as_tract_does() {
    let dir = tempfile::tempdir().unwrap();
    let lib = build_and_check(&means(), "means", dir.path());
    let shapes: Vec<&[i64]> = lib
        .manifest
        .outputs
        .iter()
        .map(|o| o.shape.as_slice())
        .collect();
    assert_eq!(shapes, [&[2, 6][..], &[1, 1, 3, 1], &[5, 6]]);
}

#[test]
fn an_unsupported_operator_is_named() {
    let mut b = ModelBuilder::seeded(7);
    let x = b.input_fixed("x", &[1, 4]);
    let y = b.node("Hardmax", &[&x], vec![]);
    let y = b.node("Relu", &[&y], vec![]);
    b.output(&y);
    let bytes = b.encode();
    let g = Graph::load(&bytes, &InputShapes::default(), None).unwrap();
    let e = tasks::extract(&g, &Extraction::strict())
        .unwrap_err()
        .to_string();
    assert!(e.contains("node 'Hardmax_1' (Hardmax)"), "{e}");
}

#[test]
fn embedded_weights_need_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        embed_weights: true,
    };
    let bytes = nets::tiny_in(ModelBuilder::seeded(8));
    drop(build_and_check_with(
        &bytes,
        "embedded",
        dir.path(),
        &options,
        Layout::Nchw,
    ));
    std::fs::remove_file(dir.path().join("embedded.weights")).unwrap();
    let mut lib = Library::open(dir.path()).expect("loads without its weights file");
    check::against_reference(&mut lib, &bytes, &InputShapes::default(), None, 9)
        .expect("matches tract");
}

#[test]
fn a_weights_file_of_another_build_is_refused() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for (seed, dir) in [(12, &a), (13, &b)] {
        drop(build_and_check_with(
            &nets::tiny_in(ModelBuilder::seeded(seed)),
            "same",
            dir.path(),
            &Options::default(),
            Layout::Nchw,
        ));
    }
    std::fs::copy(b.path().join("same.weights"), a.path().join("same.weights")).unwrap();
    let e = Library::open(a.path()).err().expect("refused").to_string();
    assert!(e.contains("not this build's"), "{e}");
}

#[test]
fn a_kernel_whose_names_are_not_identifiers_is_refused() {
    let bytes = nets::tiny_in(ModelBuilder::seeded(14));
    let g = Graph::load(&bytes, &InputShapes::default(), None).unwrap();
    let list = tasks::extract(&g, &Extraction::strict()).unwrap();
    let mut ks = kernels(&list, &Target::detect());
    ks[0].symbol = "f(); system(\"x\")".into();
    let e = compile(&g, &list, &ks, "m", "test", &Options::default())
        .err()
        .expect("refused")
        .to_string();
    assert!(
        e.contains("task 0") && e.contains("not a C identifier"),
        "{e}"
    );
}

/// A QDQ model builds with its integer tasks as integer kernels, its conversions as steps
/// (those only an integer kernel reads behind, dropped), and runs as tract runs the file.
#[test]
fn a_qdq_model_runs_as_tract_does() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = nets::qdq_block();
    let lib = build_and_check(&bytes, "qdq", dir.path());
    let m = &lib.manifest;
    // The first conv (its padding holds the data's zero point 128), the second, the
    // residual add between conversions (8-bit in, 8-bit out), the depthwise one, the max
    // pool, the 1x1 conv with its data zero point folded, the classifier.
    let labels: Vec<&str> = m.tasks.iter().map(|t| t.label.as_str()).collect();
    let integer = labels
        .iter()
        .filter(|l| l.contains("QuantizeLinear"))
        .count();
    assert_eq!(integer, 7, "{labels:#?}");
    assert!(labels.iter().any(|l| l.starts_with("Add+QuantizeLinear")));
    assert!(
        m.tasks.iter().any(|t| t.symbol.contains("max_pool2d_nhwc")),
        "{labels:#?}"
    );
    let hows: Vec<&str> = m.steps.iter().map(|s| s.how.as_str()).collect();
    assert!(
        hows.contains(&"quantize") && hows.contains(&"dequantize"),
        "{hows:?}"
    );
    assert!(
        m.nodes.iter().any(|n| n.how == "unused"),
        "the conversions integer kernels read behind are dropped"
    );
}

/// A QOperator model (`QLinearConv`, `QLinearMatMul`) builds with its operators as integer
/// kernels, read as their QDQ form, and runs as tract runs the file as written.
#[test]
fn a_qoperator_model_runs_as_tract_does() {
    let dir = tempfile::tempdir().unwrap();
    let lib = build_and_check(&nets::quantized_formats(true), "qop", dir.path());
    let labels: Vec<&str> = lib
        .manifest
        .tasks
        .iter()
        .map(|t| t.label.as_str())
        .collect();
    let integer = labels
        .iter()
        .filter(|l| l.contains("QuantizeLinear"))
        .count();
    assert_eq!(integer, 3, "{labels:#?}");
}

/// A dynamically quantized model (`DynamicQuantizeLinear`, `ConvInteger`, `MatMulInteger`,
/// then f32) builds with its products as integer kernels, their sums corrected by the zero
/// points computed at run time and cast to f32 in one pass, the scale arithmetic on single
/// values as glue, and runs as tract runs the file (in NHWC, the convolutions' results are
/// corrected as kept).
#[test]
fn a_dynamically_quantized_model_runs_as_tract_does() {
    let dir = tempfile::tempdir().unwrap();
    let lib = build_and_check(&nets::dynamic_quantized(), "dyn", dir.path());
    let how = |h: &str| lib.manifest.steps.iter().filter(|s| s.how == h).count();
    let steps = &lib.manifest.steps;
    assert_eq!(how("dynamic_quantize"), 3, "{steps:#?}");
    assert_eq!(how("zero_point_shift"), 3, "{steps:#?}");
    assert_eq!(how("scalar"), 3, "{steps:#?}");
    // The casts are the corrections' results: no conversion of its own.
    assert_eq!(how("dequantize"), 0, "{steps:#?}");
    let integer = lib
        .manifest
        .tasks
        .iter()
        .filter(|t| t.label.contains("Integer"))
        .count();
    assert_eq!(integer, 3, "{:#?}", lib.manifest.tasks);
}

/// The integer convolutions' NHWC results stay NHWC through the conversions, the residual
/// add and the 8-bit max pool between them; the model's layout is copied back once, where
/// the global pool reads it. The copies are the first conv's padded input, the depthwise
/// conv's padded input (from the sum, as kept), and the 1x1 conv's result back for the global
/// pool: without the layout kept, each conv's result would be copied back and transposed
/// again. The first and the last convert between layouts; the depthwise's only pads.
#[test]
fn convolutions_keep_their_layout_between_them() {
    let bytes = nets::qdq_block();
    let g = Graph::load(&bytes, &InputShapes::default(), None).unwrap();
    let list = tasks::extract(&g, &Extraction::strict()).unwrap();
    let ks = kernels(&list, &Target::detect());
    let c = compile(&g, &list, &ks, "m", "test", &Options::default()).unwrap();
    let copies: Vec<&str> = c
        .manifest
        .steps
        .iter()
        .filter(|s| s.how == "copy" || s.how == "layout")
        .map(|s| s.how.as_str())
        .collect();
    assert_eq!(copies, ["layout", "copy", "layout"]);
    let fills = c.manifest.steps.iter().filter(|s| s.how == "fill").count();
    assert_eq!(
        fills, 2,
        "the padded inputs are filled with their zero points"
    );
}

/// A conversion of an activation with a scale per channel is refused before anything is
/// tuned, naming the node.
#[test]
fn a_per_channel_conversion_of_an_activation_is_refused() {
    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[1, 2, 3, 3]);
    let s = b.floats(&[2], &[0.1, 0.2]);
    let z = b.integers(&[2], "u8", &[0, 0]);
    let q = b.node("QuantizeLinear", &[&x, &s, &z], vec![]);
    let name = b.last_node().to_string();
    let d = b.node("DequantizeLinear", &[&q, &s, &z], vec![]);
    let y = b.node("Relu", &[&d], vec![]);
    b.output(&y);
    let g = Graph::load(&b.encode(), &InputShapes::default(), None).unwrap();
    let e = tunehub_compiler::check_buildable(&g)
        .expect_err("refused")
        .to_string();
    assert!(e.contains(&name) && e.contains("one scale"), "{e}");
}

/// Odd shapes in NHWC (issue 60): channels that fill no vector (3, 5, 6, 7, 9), a 7x7 map, a
/// 5x5 window, a stride-2 depthwise conv, a max pool, a conv on a 2x2 map and one on the
/// 1x1 map the global pool leaves, and a concat of unequal parts, which reads the model's
/// layout: a conversion back at the region's edge, then into NHWC again after it.
fn odd_convolutions() -> Vec<u8> {
    let mut b = ModelBuilder::seeded(21);
    let x = b.input_fixed("image", &[1, 5, 7, 7]);
    let a = b.conv_bn(&x, 5, 3, 3, 1, 1, 1, true);
    let c = b.conv_bn(&x, 5, 6, 5, 1, 2, 1, false);
    let y = b.node("Concat", &[&a, &c], vec![int("axis", 1)]);
    let y = b.conv_bn(&y, 9, 9, 3, 2, 1, 9, true);
    let y = b.conv_bn(&y, 9, 7, 1, 1, 0, 1, false);
    let y = b.node(
        "MaxPool",
        &[&y],
        vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
    );
    let y = b.conv_bn(&y, 7, 4, 3, 1, 1, 1, true);
    let y = b.node("GlobalAveragePool", &[&y], vec![]);
    let y = b.conv_bn(&y, 4, 3, 1, 1, 0, 1, false);
    b.output(&y);
    b.encode()
}

#[test]
fn odd_convolutions_run_as_tract_does_in_each_layout() {
    let dir = tempfile::tempdir().unwrap();
    drop(build_and_check(&odd_convolutions(), "odd", dir.path()));
}

/// In NHWC, a run of f32 convolutions, their residual add and the depthwise ones between pays
/// one copy at each end: the input into NHWC, the result back. Each convolution reads the one
/// before as it was written, the residual add's shortcut included.
#[test]
fn f32_convolutions_in_nhwc_keep_their_layout_between_them() {
    let bytes = mobilenet_blocks();
    let g = Graph::load(&bytes, &InputShapes::default(), None).unwrap();
    // (copies, layout conversions)
    let copies = |layout: Layout| {
        let list = tasks::extract(&g, &Extraction::strict().in_layout(layout)).unwrap();
        let ks = kernels(&list, &Target::detect());
        let c = compile(&g, &list, &ks, "m", "test", &Options::default()).unwrap();
        let count = |how: &str| c.manifest.steps.iter().filter(|s| s.how == how).count();
        (count("copy"), count("layout"))
    };
    assert_eq!(copies(Layout::Nchw), (0, 0));
    assert_eq!(copies(Layout::Nhwc), (0, 2));
    // No NHWC kernel reads a map of its output's shape in NCHW (the residual add's shortcut
    // is read as kept), and one does read such a map.
    let list = tasks::extract(&g, &Extraction::strict().in_layout(Layout::Nhwc)).unwrap();
    let mut shortcuts = 0;
    for call in list.calls.iter().filter(|c| c.output_perm.is_some()) {
        let out = g.shape(&call.output).unwrap();
        for (arg, o) in &call.operands {
            match o {
                Operand::Tensor { name } => assert_ne!(g.shape(name), Some(out), "{arg}"),
                Operand::Transposed { name, .. } if g.shape(name) == Some(out) => shortcuts += 1,
                _ => {}
            }
        }
    }
    assert!(shortcuts > 0);
}

/// 3x3 stride-1 convolutions in every Winograd case: an 8x8 map (F(4x4, 3x3)), a 6x6 one
/// (F(2x2, 3x3)) and a 5x5 one (neither: direct), with 3, 17 and 5 channels (no multiple of a
/// vector), a convolution's own bias, batch norms, a residual add with relu, and a strided
/// convolution and a sigmoid between (the NHWC region's edges).
fn winograd_cases() -> Vec<u8> {
    let mut b = ModelBuilder::seeded(11);
    let x = b.input_fixed("image", &[1, 3, 8, 8]);
    let h = b.conv_bn(&x, 3, 17, 3, 1, 1, 1, true);
    let w = b.weight(&[17, 17, 3, 3]);
    let bias = b.weight(&[17]);
    let k3 = ints("kernel_shape", &[3, 3]);
    let pad1 = ints("pads", &[1, 1, 1, 1]);
    let y = b.node("Conv", &[&h, &w, &bias], vec![k3.clone(), pad1.clone()]);
    let y = b.node("Add", &[&y, &h], vec![]);
    let y = b.node("Relu", &[&y], vec![]);
    // 8x8 -> 6x6: a 3x3 window unpadded (direct), then 6x6 maps in 2x2 tiles.
    let w = b.weight(&[5, 17, 3, 3]);
    let y = b.node("Conv", &[&y, &w], vec![k3.clone()]);
    let y = b.conv_bn(&y, 5, 5, 3, 1, 1, 1, false);
    let y = b.node("Sigmoid", &[&y], vec![]);
    // 6x6 -> 5x5 (a 2x2 window, stride 1), then a 5x5 map: direct.
    let w = b.weight(&[5, 5, 2, 2]);
    let y = b.node("Conv", &[&y, &w], vec![ints("kernel_shape", &[2, 2])]);
    let y = b.conv_bn(&y, 5, 4, 3, 1, 1, 1, true);
    b.output(&y);
    b.encode()
}

#[test]
fn winograd_convolutions_run_as_tract_does() {
    let bytes = winograd_cases();
    let g = Graph::load(&bytes, &InputShapes::default(), None).unwrap();
    let list = tasks::extract(&g, &Extraction::strict().in_layout(Layout::Winograd)).unwrap();
    // Three of the six convolutions take the Winograd form: two calls before each.
    let internal: Vec<_> = list.calls.iter().filter(|c| c.internal.is_some()).collect();
    assert_eq!(
        internal.len(),
        6,
        "{:?}",
        list.tasks.iter().map(|t| &t.label).collect::<Vec<_>>()
    );
    let products: Vec<String> = list
        .tasks
        .iter()
        .filter_map(|t| t.op_spec.as_ref().map(|s| s.to_string()))
        .collect();
    assert!(
        products.iter().any(|s| s.contains("b=36")) && products.iter().any(|s| s.contains("b=16")),
        "both tile sizes: {products:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let lib = build_and_check_with(
        &bytes,
        "wino",
        dir.path(),
        &Options::default(),
        Layout::Winograd,
    );
    assert_eq!(lib.manifest.layout, "winograd");
}

/// Issue 60: a convolution in the Winograd form beside direct ones, each way round (the first
/// 8x8 convolution by Winograd and the second, reading its result and adding it back, direct;
/// then the reverse), runs as tract does: both forms hand NHWC on with no conversion.
#[test]
fn winograd_and_direct_convolutions_mix_as_tract_runs_them() {
    let bytes = winograd_cases();
    let g = Graph::load(&bytes, &InputShapes::default(), None).unwrap();
    let list = |l| tasks::extract(&g, &Extraction::strict().in_layout(l)).unwrap();
    let (direct, winograd) = (list(Layout::Nhwc), list(Layout::Winograd));
    let dir = tempfile::tempdir().unwrap();
    // Times that make one convolution's product (3 or 17 input channels) cheap: its
    // convolution alone turns.
    for k in ["k=3,", "k=17,"] {
        let times: Vec<Option<f64>> = winograd
            .tasks
            .iter()
            .map(|t| {
                let cheap = t
                    .op_spec
                    .as_ref()
                    .is_some_and(|s| s.to_string().contains(k));
                Some(if cheap { -5.0 } else { 1.0 })
            })
            .collect();
        let ones = vec![Some(1.0); direct.tasks.len()];
        let mixed = choice::per_convolution(&g, &direct, &ones, &winograd, &times);
        assert_eq!((mixed.winograd, mixed.eligible), (1, 3), "{k}");
        let lib = build_list_and_check(
            &bytes,
            &g,
            &mixed.list,
            "mixed",
            &dir.path().join(k),
            &Options::default(),
        );
        assert_eq!(lib.manifest.layout, "winograd");
    }
}
