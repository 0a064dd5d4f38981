//! The guarantee the search relies on: for every operator of the library and random valid
//! schedules (random shapes too, odd ones included), the generated kernel compiles with the
//! real C compiler, runs, and matches the reference.

use proptest::prelude::*;
use tunehub_engine::ir::ComputeDag;
use tunehub_engine::measure::{ErrorCode, MeasureOptions, Measurer};
use tunehub_engine::ops::{self, PoolKind, Window};
use tunehub_engine::sample::RandomSampler;
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;

fn check_random_schedules(dag: ComputeDag, seed: u64, n: usize) {
    check_random_schedules_of(Task::new(dag, "property test"), seed, n)
}

/// Every input but the first marked layout-free (weights, filters, biases).
fn check_layout_free(dag: ComputeDag, seed: u64, n: usize) {
    let inputs: Vec<String> = dag
        .placeholders()
        .iter()
        .skip(1)
        .map(|&s| dag.stages[s].name.clone())
        .collect();
    let names: Vec<&str> = inputs.iter().map(String::as_str).collect();
    let task = Task::new(dag, "layout-free property test")
        .with_layout_free(&names)
        .unwrap();
    check_random_schedules_of(task, seed, n)
}

fn check_random_schedules_of(task: Task, seed: u64, n: usize) {
    let target = Target::detect();
    let mut sampler = RandomSampler::new(&task.dag, &target, seed);
    let schedules: Vec<_> = (0..n).map(|_| sampler.sample()).collect();
    assert_eq!(
        sampler.rejected, 0,
        "the sampler drew invalid schedules: {:?}",
        sampler.last_rejection
    );
    let mut measurer = Measurer::new(&target, MeasureOptions::check_only());
    let results = measurer.measure(&task, &schedules);
    for (s, r) in schedules.iter().zip(&results) {
        assert_eq!(
            r.error,
            ErrorCode::NoError,
            "{}: {}\nschedule: {}",
            task.desc,
            r.error_msg,
            s.to_json()
        );
        assert!(!r.costs.is_empty() && r.costs.iter().all(|&c| c > 0.0));
    }
}

const PER_CASE: usize = 6;

/// A tile whose inlined padding does not depend on the lane (channels innermost) reads its
/// data only where the padding's condition holds: this case's tile, had it read first, would
/// load 208 floats before its data (it faulted, found by the property test below).
#[test]
fn a_padded_tile_reads_inside_its_data_only() {
    let w = Window {
        kh: 1,
        kw: 2,
        stride: 2,
        pad: 1,
        dilation: 1,
    };
    let dag = ops::depthwise_conv2d_nhwc(1, 10, 12, 16, w, true, true).unwrap();
    check_random_schedules(dag, 4113375099963233286, PER_CASE);
}

#[test]
fn hand_written_matmul_schedules_match_the_reference() {
    let target = Target::detect();
    let task = Task::new(ops::matmul(64, 64, 64).unwrap(), "matmul(64,64,64)");
    let schedules: Vec<_> = [(4, 64), (8, 32), (8, 16)]
        .into_iter()
        .map(|(ti, tj)| tunehub_engine::schedule::hand::matmul_register_tiled(64, ti, tj))
        .collect();
    all_match_the_reference(&target, &task, &schedules);
}

#[test]
fn hand_written_matmul_with_packed_weights_matches_the_reference() {
    let target = Target::detect();
    let task = Task::new(ops::matmul(64, 64, 64).unwrap(), "matmul(64,64,64)")
        .with_layout_free(&["B"])
        .unwrap();
    let sched = tunehub_engine::schedule::hand::matmul_register_tiled(64, 4, 16);
    let k =
        tunehub_engine::codegen::generate_with(&task.dag, &sched, &target, &task.lower_options())
            .unwrap();
    assert!(k.source.contains("tunehub_kernel_pack_1"), "B is packed");
    assert_eq!(k.args[1].packed_len, Some(64 * 64));
    all_match_the_reference(&target, &task, &[sched]);
}

fn win() -> impl Strategy<Value = Window> {
    (1..=3i64, 1..=3i64, 1..=2i64, 0..=1i64, 1..=2i64).prop_map(
        |(kh, kw, stride, pad, dilation)| Window {
            kh,
            kw,
            stride,
            pad,
            dilation,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, failure_persistence: None, max_shrink_iters: 8, ..ProptestConfig::default() })]
    #[test]
    fn layout_free_weights(m in 1..24i64, n in 1..24i64, k in 1..24i64, c in 1..5i64, h in 3..9i64, f in 1..5i64, w in win(), seed: u64) {
        check_layout_free(ops::matmul(m, n, k).unwrap(), seed, PER_CASE);
        check_layout_free(ops::dense(m, n, k, true, true).unwrap(), seed, PER_CASE);
        if let Ok(dag) = ops::conv2d_nchw(1, c, h, h + 1, f, w, true, false) {
            check_layout_free(dag, seed, PER_CASE);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3, failure_persistence: None, max_shrink_iters: 8, ..ProptestConfig::default() })]

    #[test]
    fn matmul(m in 1..48i64, n in 1..48i64, k in 1..48i64, seed: u64) {
        check_random_schedules(ops::matmul(m, n, k).unwrap(), seed, PER_CASE);
    }

    #[test]
    fn batch_matmul(b in 1..4i64, m in 1..24i64, n in 1..24i64, k in 1..24i64, seed: u64) {
        check_random_schedules(ops::batch_matmul(b, m, n, k).unwrap(), seed, PER_CASE);
    }

    #[test]
    fn dense_bias_relu(m in 1..24i64, n in 1..40i64, k in 1..40i64, bias: bool, relu: bool, seed: u64) {
        check_random_schedules(ops::dense(m, n, k, bias, relu).unwrap(), seed, PER_CASE);
    }

    /// Stride 2: the vector axis may be the channels or rows as well as the strided columns;
    /// odd channel counts and widths leave partial vectors.
    #[test]
    fn strided_conv2d(c in 1..5i64, h in 4..13i64, f in 1..20i64, kh in 1..=3i64, pad in 0..=1i64, packed: bool, seed: u64) {
        let w = Window { kh, kw: kh, stride: 2, pad, dilation: 1 };
        let dag = ops::conv2d_nchw(1, c, h, h, f, w, false, false).unwrap();
        if packed {
            check_layout_free(dag, seed, 2 * PER_CASE);
        } else {
            check_random_schedules(dag, seed, 2 * PER_CASE);
        }
    }

    /// One row: the rfactor sketch of a streamed weight (odd lengths: factors with tails of
    /// no vector), beside the tiled ones, packed weight or not.
    #[test]
    fn matrix_vector(n in 1..40i64, k in 16..70i64, bias: bool, relu: bool, packed: bool, seed: u64) {
        let dag = ops::dense(1, n, k, bias, relu).unwrap();
        if packed {
            check_layout_free(dag, seed, 2 * PER_CASE);
        } else {
            check_random_schedules(dag, seed, 2 * PER_CASE);
        }
    }

    #[test]
    fn conv2d_nchw(c in 1..6i64, h in 3..12i64, f in 1..6i64, w in win(), bias: bool, relu: bool, seed: u64) {
        if let Ok(dag) = ops::conv2d_nchw(1, c, h, h + 1, f, w, bias, relu) {
            check_random_schedules(dag, seed, PER_CASE);
        }
    }

    #[test]
    fn conv2d_nhwc(c in 1..6i64, h in 3..12i64, f in 1..6i64, w in win(), bias: bool, relu: bool, seed: u64) {
        if let Ok(dag) = ops::conv2d_nhwc(2, h, h, c, f, w, bias, relu) {
            check_random_schedules(dag, seed, PER_CASE);
        }
    }

    #[test]
    fn depthwise_conv2d(c in 1..8i64, h in 3..12i64, w in win(), bias: bool, seed: u64) {
        if let Ok(dag) = ops::depthwise_conv2d_nchw(1, c, h, h, w, bias, true) {
            check_random_schedules(dag, seed, PER_CASE);
        }
    }

    /// Channels innermost: odd counts up to past two AVX-512 vectors of f32.
    #[test]
    fn depthwise_conv2d_nhwc(c in 1..40i64, h in 1..12i64, w in win(), bias: bool, relu: bool, seed: u64) {
        if let Ok(dag) = ops::depthwise_conv2d_nhwc(1, h, h + 2, c, w, bias, relu) {
            check_random_schedules(dag, seed, PER_CASE);
        }
    }

    #[test]
    fn pool2d(max: bool, c in 1..6i64, h in 3..12i64, w in win(), seed: u64) {
        let kind = if max { PoolKind::Max } else { PoolKind::Avg };
        if let Ok(dag) = ops::pool2d(kind, 1, c, h, h, w) {
            check_random_schedules(dag, seed, PER_CASE);
        }
    }

    #[test]
    fn softmax(m in 1..16i64, n in 1..70i64, seed: u64) {
        check_random_schedules(ops::softmax(m, n).unwrap(), seed, PER_CASE);
    }

    #[test]
    fn elementwise(m in 1..40i64, n in 1..40i64, seed: u64) {
        check_random_schedules(ops::elementwise(m, n).unwrap(), seed, PER_CASE);
    }

    #[test]
    fn text_form(m in 1..20i64, n in 1..20i64, seed: u64) {
        let src = format!(
            "T[i,j] = max(A[i,j] * 2.0, A[i,j] - 1.0) where i<{m}, j<{n}\nS[i] += T[i,j] * B[j] where i<{m}, j<{n}\nO[i] = sigmoid(S[i]) where i<{m}"
        );
        check_random_schedules(tunehub_engine::text::parse(&src).unwrap(), seed, PER_CASE);
    }
}

/// 3x3, stride 1, pad 1.
fn same_3x3() -> Window {
    Window::square(3, 1, 1)
}

/// A schedule of conv2d NCHW 1x8x8x8, 32 filters, 3x3: two output rows of 8 per parallel
/// tile, a local tile of `cols` columns by all 32 channels (vectorized) under the reduction
/// band `rc.1 ry.1 rx.1`.
fn conv_channel_tile(cols: i64) -> serde_json::Value {
    serde_json::json!([
        ["CHW", 3, "local"],
        ["SP", 4, 3, 8, [1, 8], 1],
        ["SP", 4, 2, 8, [4, 2], 1],
        ["SP", 4, 1, 32, [1, 32], 1],
        ["SP", 4, 0, 1, [1, 1], 1],
        ["RE", 4, [0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11]],
        ["FU", 4, [0, 1, 2, 3, 4, 5, 6]],
        ["AN", 4, 0, 3],
        ["CA", 3, 4, 1],
        ["SP", 3, 6, 3, [3], 1],
        ["SP", 3, 5, 3, [3], 1],
        ["SP", 3, 4, 8, [8], 1],
        ["SP", 3, 3, 8, [cols], 1],
        ["SP", 3, 2, 2, [1], 1],
        ["SP", 3, 1, 32, [32], 1],
        ["SP", 3, 0, 1, [1], 1],
        // rc.0 ry.0 rx.0 | i.0 j.0 k.0 l.0 | rc.1 ry.1 rx.1 | i.1 k.1 l.1 j.1 (vectorized)
        ["RE", 3, [8, 10, 12, 0, 2, 4, 6, 9, 11, 13, 1, 5, 7, 3]],
        ["AN", 3, 13, 2]
    ])
}

/// A conv2d NCHW register tile vectorized over output channels (not the last axis), two
/// output rows per tile: the local accumulator is laid out channel-innermost, the store goes
/// through a base pointer that holds the tile-row offset, and the kernel matches the reference.
#[test]
fn conv_tile_vectorized_over_channels_is_contiguous_and_correct() {
    let win = same_3x3();
    let dag = ops::conv2d_nchw(1, 8, 8, 8, 32, win, false, false).unwrap();
    let steps = conv_channel_tile(8);
    let sched = tunehub_engine::schedule::Schedule::from_json_value(&steps).unwrap();
    let state = sched.replay(&dag).unwrap();
    let f = tunehub_engine::lower::lower(&state).unwrap();
    let local = f.buffers.iter().find(|b| b.name == "conv.local").unwrap();
    // Region (n, f, y, x) = (1, 32, 2, 8): channels innermost, then x, then the two rows.
    assert_eq!(local.shape, [1, 32, 2, 8]);
    assert_eq!(local.strides[1], 1, "{local:?}");
    assert_eq!(local.strides[3], 32, "{local:?}");
    assert_eq!(local.strides[2], 256, "{local:?}");

    let target = Target::detect();
    let src = tunehub_engine::codegen::kernel_source(&dag, &sched, &target).unwrap();
    let update = src
        .lines()
        .find(|l| l.contains("] = conv_local_acc["))
        .unwrap_or_else(|| panic!("no store through the accumulator base in\n{src}"));
    let target_index = update.split(" = ").next().unwrap();
    assert!(!target_index.contains("conv_local_k_0"), "{update}");
    assert!(src.contains("conv_local_acc = conv_local + ("), "{src}");

    let task = Task::new(dag, "conv2d tile over channels");
    all_match_the_reference(&target, &task, &[sched]);
}

/// A layout-free conv2d tile and a matmul tile whose row loop sits between the two reduction
/// loops: both get their accumulators as vector variables (the generator unrolls the tile
/// inside the innermost reduction loop), read each operand vector once per band iteration into
/// a register (pinned, where the target has an asm constraint for one), and match the
/// reference. The tiles are sized for the machine's lanes: 8 accumulators on AVX-512 and AVX2.
#[test]
fn register_tiles_are_written_out_and_correct() {
    let target = Target::detect();
    let lanes = i64::from(target.vector_lanes_f32());
    if lanes != 8 && lanes != 16 {
        eprintln!("skipped: the tiles below are for 8 or 16 f32 lanes");
        return;
    }
    let win = same_3x3();
    let conv = Task::new(
        ops::conv2d_nchw(1, 8, 8, 8, 32, win, false, false).unwrap(),
        "conv2d, packed filter",
    )
    .with_layout_free(&["kernel"])
    .unwrap();
    // 32 channels (32/lanes vectors) by 8/(32/lanes) columns: 8 accumulators.
    let channel_vectors = 32 / lanes;
    let conv_steps = conv_channel_tile(8 / channel_vectors);
    // k.0 | i.0 (2 rows) | k.1 | i.1 (2 rows) j.1 (16 floats): 4 rows of 16/lanes vectors.
    let mm = Task::new(ops::matmul(64, 64, 64).unwrap(), "matmul(64,64,64)");
    let mm_steps = serde_json::json!([
        ["CHW", 2, "local"],
        ["SP", 3, 1, 64, [16], 1],
        ["SP", 3, 0, 64, [4], 1],
        ["RE", 3, [0, 2, 1, 3]],
        ["FU", 3, [0, 1]],
        ["AN", 3, 0, 3],
        ["CA", 2, 3, 0],
        ["SP", 2, 2, 64, [2], 1],
        ["SP", 2, 0, 4, [2], 1],
        ["RE", 2, [3, 0, 4, 1, 2]],
        ["AN", 2, 4, 2]
    ]);
    let pinned = matches!(target.arch.as_str(), "x86_64" | "aarch64");
    for (task, steps, accumulators, operands) in [
        (conv, conv_steps, 8, channel_vectors),
        (mm, mm_steps, 4 * 16 / lanes, 16 / lanes),
    ] {
        let sched = tunehub_engine::schedule::Schedule::from_json_value(&steps).unwrap();
        let k = tunehub_engine::codegen::generate_with(
            &task.dag,
            &sched,
            &target,
            &task.lower_options(),
        )
        .unwrap();
        let src = &k.source;
        let loads = src.matches("= th_vload(&").count() as i64;
        // The accumulators' loads, and one load per operand vector inside the band.
        assert_eq!(loads, accumulators + operands, "{}:\n{src}", task.desc);
        assert_eq!(src.matches("th_vstore(&").count() as i64, accumulators);
        let pins = src
            .lines()
            .filter(|l| l.trim_start().starts_with("TH_PIN("))
            .count() as i64;
        assert_eq!(
            pins,
            if pinned { operands } else { 0 },
            "{}:\n{src}",
            task.desc
        );
        all_match_the_reference(&target, &task, &[sched]);
    }
}

/// The operand pins are inline asm with a register-class constraint per vector width ("v" for
/// AVX-512's 32 registers, "x" below it): a tile generated for each x86-64 level compiles with
/// that level's flags, whatever this host runs, and with the baseline's (the pin then a no-op).
#[test]
fn pinned_operands_compile_for_every_x86_vector_width() {
    let host = Target::detect();
    let task = Task::new(ops::matmul(64, 64, 64).unwrap(), "matmul(64,64,64)");
    // i.0 | j.0 | k | i.1 (1 row) j.1 (16 floats, vectorized).
    let steps = serde_json::json!([
        ["SP", 2, 1, 64, [16], 1],
        ["SP", 2, 0, 64, [1], 1],
        ["RE", 2, [0, 2, 4, 1, 3]],
        ["AN", 2, 4, 2]
    ]);
    let sched = tunehub_engine::schedule::Schedule::from_json_value(&steps).unwrap();
    let baseline = host
        .clone()
        .with_overrides(&tunehub_engine::target::TargetOverrides {
            march: Some("x86-64".into()),
            features: Some(vec!["sse2".into()]),
            ..Default::default()
        });
    for (march, target) in x86_levels(&host, false) {
        let k = tunehub_engine::codegen::generate_with(
            &task.dag,
            &sched,
            &target,
            &task.lower_options(),
        )
        .unwrap();
        assert!(
            k.source.contains("__asm__"),
            "{march}: no pin in\n{}",
            k.source
        );
        compile(&target, &k.source, &["-c", "-o", "k.o"], march);
        // Written out and compiled without the level's flags, the pin falls away (plain
        // `cc`: baseline x86-64, 16-byte registers only).
        compile(&baseline, &k.source, &["-c", "-o", "k.o"], march);
    }
}

/// On glibc x86-64 a vectorized loop of `expf` calls libmvec's vector exp (GCC emits it for
/// the declaration the generator writes), links, and matches the reference.
#[test]
fn vectorized_exp_calls_vector_math_and_is_correct() {
    let target = Target::detect();
    if !target.has_vector_math() {
        eprintln!("skipped: libmvec is x86-64 Linux only (an ISA skip, not a missing tool)");
        return;
    }
    // softmax(4, 64): x=0 row_max=1 exp=2 row_sum=3 softmax=4; exp at root, its row vectorized.
    let task = Task::new(ops::softmax(4, 64).unwrap(), "softmax(4,64)");
    let sched =
        tunehub_engine::schedule::Schedule::from_json_value(&serde_json::json!([["AN", 2, 1, 2]]))
            .unwrap();
    let k =
        tunehub_engine::codegen::generate_with(&task.dag, &sched, &target, &task.lower_options())
            .unwrap();
    let dir = compile(&target, &k.source, &["-S", "-o", "k.s"], "softmax");
    let asm = std::fs::read_to_string(dir.path().join("k.s")).unwrap();
    assert!(
        asm.contains("_ZGV") && asm.contains("v_expf"),
        "no vector expf call in:\n{}",
        k.source
    );
    all_match_the_reference(&target, &task, &[sched]);
}

/// A serial reduction loop over operands contiguous along it (a dense row's dot product, a row
/// max, rfactor's combination of partials) is vectorized: in whole vectors, as vector
/// accumulators and a horizontal tree (`th_hsum`, `th_hmax`); otherwise (an odd length) as
/// `omp simd reduction`. A strided one (a naive matmul's column of B) is left in order. All
/// match the reference.
#[test]
fn contiguous_reductions_are_vectorized_and_correct() {
    #[derive(Debug, PartialEq)]
    enum Form {
        Tree,
        Simd,
        InOrder,
    }
    let target = Target::detect();
    let naive = tunehub_engine::schedule::Schedule::default();
    // 64 and 48 are whole vectors of 4, 8 and 16 lanes; 37 and 29 are not.
    let cases = [
        (ops::dense(3, 5, 37, true, false).unwrap(), Form::Simd),
        (ops::softmax(3, 29).unwrap(), Form::Simd),
        (ops::dense(3, 5, 64, true, false).unwrap(), Form::Tree),
        (ops::softmax(3, 48).unwrap(), Form::Tree),
        (ops::matmul(3, 5, 37).unwrap(), Form::InOrder),
    ];
    for (dag, form) in cases {
        let task = Task::new(dag, "contiguous reduction");
        let k = tunehub_engine::codegen::generate_with(
            &task.dag,
            &naive,
            &target,
            &task.lower_options(),
        )
        .unwrap();
        let simd = k.source.contains("#pragma omp simd reduction(");
        let tree = k.source.contains(" + th_hsum(");
        assert_eq!(
            (simd, tree),
            (form == Form::Simd, form == Form::Tree),
            "{form:?}: {}",
            k.source
        );
        if form == Form::Simd {
            assert!(k.source.contains("reduction(+:"), "{}", k.source);
        }
        for r in Measurer::new(&target, MeasureOptions::check_only())
            .measure(&task, std::slice::from_ref(&naive))
        {
            assert_eq!(r.error, ErrorCode::NoError, "{form:?}: {}", r.error_msg);
        }
    }
    // Row max: the max clause, or the max tree.
    let source = |dag: &ComputeDag| {
        tunehub_engine::codegen::generate_with(dag, &naive, &target, &Default::default())
            .unwrap()
            .source
    };
    let odd = source(&ops::softmax(3, 29).unwrap());
    assert!(odd.contains("reduction(max:"), "{odd}");
    let whole = source(&ops::softmax(3, 48).unwrap());
    assert!(
        whole.contains("th_hmax(") && !whole.contains("reduction(max:"),
        "{whole}"
    );
}

/// Compiles `source` as `k.c` with the target's flags and `args` in a fresh directory, which
/// it returns; a compiler error fails the test, named by `what`.
fn compile(target: &Target, source: &str, args: &[&str], what: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.c"), source).unwrap();
    let out = std::process::Command::new(&target.compiler)
        .args(target.compile_flags())
        .args(args)
        .arg("k.c")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

#[test]
fn erf_in_an_epilogue_matches_the_reference() {
    // A dense layer with the exact GELU, as ONNX models write it.
    let dag = tunehub_engine::text::parse(
        "O[i,j] += A[i,k] * B[k,j] where i<8, j<24, k<16
         Y[i,j] = 0.5 * O[i,j] * (1.0 + erf(O[i,j] * 0.7071067811865476)) where i<8, j<24",
    )
    .unwrap();
    check_random_schedules(dag, 27, PER_CASE);
}

/// GELU's two forms (erf in BERT, tanh in GPT-2) vectorize through libmvec where glibc has
/// them (2.35 on), so a fused GELU epilogue no longer costs a scalar call per element; older
/// glibc builds them scalar. Either way the kernel links and matches the reference.
#[test]
fn vectorized_erf_and_tanh_call_vector_math_where_glibc_has_them() {
    let target = Target::detect();
    if !target.has_vector_math() {
        eprintln!("skipped: libmvec is x86-64 Linux only (an ISA skip, not a missing tool)");
        return;
    }
    let dag =
        tunehub_engine::text::parse("Y[i,j] = erf(X[i,j]) + tanh(X[i,j] * 0.5) where i<3, j<67")
            .unwrap();
    let task = Task::new(dag, "erf and tanh");
    // Stage 1 (Y), its inner loop vectorized.
    let sched =
        tunehub_engine::schedule::Schedule::from_json_value(&serde_json::json!([["AN", 1, 1, 2]]))
            .unwrap();
    let k =
        tunehub_engine::codegen::generate_with(&task.dag, &sched, &target, &task.lower_options())
            .unwrap();
    assert!(k.source.contains("#pragma omp simd"), "{}", k.source);
    let dir = compile(&target, &k.source, &["-S", "-o", "k.s"], "erf and tanh");
    let asm = std::fs::read_to_string(dir.path().join("k.s")).unwrap();
    let glibc = std::process::Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .expect("getconf runs on glibc Linux");
    let version = String::from_utf8_lossy(&glibc.stdout);
    let minor: u32 = version
        .trim()
        .strip_prefix("glibc 2.")
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("unexpected `getconf GNU_LIBC_VERSION`: {version}"));
    let gcc = !target.compiler.contains("clang");
    let vector = asm.contains("v_erff") && asm.contains("v_tanhf");
    assert_eq!(
        vector,
        gcc && minor >= 35,
        "glibc 2.{minor}, compiler {}: vector calls {vector} in:\n{}",
        target.compiler,
        k.source
    );
    all_match_the_reference(&target, &task, &[sched]);
}

/// A depthwise convolution with its own loops reordered to `n c y ry rx x`, `x` vectorized:
/// the nest from `ry` down is a register tile of one row whose lane loop is the output width
/// (a partial last vector unless it is a multiple of the lanes), whose input is read at the
/// convolution's stride along the lanes, and whose padding is computed at root or, inlined,
/// read under a mask of the lanes inside the input.
fn depthwise_row_tile(dag: &ComputeDag, inline_pad: bool) -> tunehub_engine::schedule::Schedule {
    let s = dag
        .stages
        .iter()
        .position(|st| st.name == "depthwise")
        .unwrap();
    let mut steps = vec![];
    if inline_pad && let Some(p) = dag.stages.iter().position(|st| st.name == "pad") {
        steps.push(serde_json::json!(["CI", p]));
    }
    steps.push(serde_json::json!(["RE", s, [0, 1, 2, 4, 5, 3]]));
    steps.push(serde_json::json!(["AN", s, 5, 2]));
    tunehub_engine::schedule::Schedule::from_json_value(&serde_json::Value::Array(steps)).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, failure_persistence: None, max_shrink_iters: 8, ..ProptestConfig::default() })]

    /// Register tiles with a masked last vector, stride-2 lane loads (two loads and a shuffle
    /// per vector, in the shuffle's lane order: every vector operand of a depthwise row is one)
    /// and inlined padding (loads under a mask of the lanes in range), on odd shapes: the source
    /// has the forms expected, and the kernel matches the reference.
    #[test]
    fn register_tiles_with_partial_strided_and_masked_vectors(c in 1..4i64, h in 3..9i64, w in 33..75i64, kh in 1..=3i64, stride in 1..=2i64, pad in 0..=2i64, inline_pad: bool) {
        let target = Target::detect();
        let lanes = i64::from(target.vector_lanes_f32());
        let win = Window { kh, kw: kh, stride, pad, dilation: 1 };
        let dag = ops::depthwise_conv2d_nchw(1, c, h, w, win, false, false).unwrap();
        let ow = (w + 2 * pad - kh) / stride + 1;
        let sched = depthwise_row_tile(&dag, inline_pad);
        let task = Task::new(dag, "depthwise row tile");
        let k = tunehub_engine::codegen::generate_with(&task.dag, &sched, &target, &task.lower_options()).unwrap();
        if lanes > 1 && ow >= lanes {
            let src = &k.source;
            prop_assert!(src.contains("th_vf depthwise_r0"), "no register tile in\n{}", src);
            // Stride 2 and a window of 2 or 3 columns: the columns share their loads (a pair
            // per output vector, one beside the row and the accumulators fit the registers).
            let shared = stride == 2 && kh >= 2 && columns_fit(&target, ow, false);
            let masked = inline_pad && pad > 0;
            let load = match (stride, masked) {
                _ if shared => "const th_vf depthwise_w0 = th_vload",
                (2, true) => "th_vload2mp(&",
                (2, false) => "th_vload2p(&",
                (_, true) => "th_vloadm(&",
                _ => "th_vload(&",
            };
            prop_assert!(src.contains(load), "no {} in\n{}", load, src);
            prop_assert_eq!(src.contains("th_vstoren(&"), ow % lanes != 0, "{}", src);
            prop_assert_eq!(src.contains("TH_LANEPERM(depthwise_r0)"), stride == 2 && !shared, "{}", src);
        }
        for r in Measurer::new(&target, MeasureOptions::check_only()).measure(&task, &[sched]) {
            prop_assert_eq!(r.error, ErrorCode::NoError, "{}", r.error_msg);
        }
    }

    /// Rows wider than a vector: the sampler's tiles may end in partial vectors and read their
    /// input at a stride of 2.
    #[test]
    fn wide_depthwise(c in 1..5i64, w in 33..75i64, stride in 1..=2i64, pad in 0..=1i64, seed: u64) {
        let win = Window { kh: 3, kw: 3, stride, pad, dilation: 1 };
        let dag = ops::depthwise_conv2d_nchw(1, c, 5, w, win, false, false).unwrap();
        check_random_schedules(dag, seed, 2 * PER_CASE);
    }
}

/// A window operator's own loops reordered to put the window (and, for a convolution, its input
/// channels) outside a tile of every output row by the whole row, the row vectorized and the
/// padding inlined: `n c ry rx y x` for a depthwise convolution, `n f rc ry rx y x` for conv2d.
fn whole_map_tile(dag: &ComputeDag, stage: &str) -> tunehub_engine::schedule::Schedule {
    let s = dag.stages.iter().position(|st| st.name == stage).unwrap();
    // n, c (or f), y, x, then the reductions: c's, ry and rx for conv2d, ry and rx for a
    // depthwise convolution.
    let axes = if stage == "conv" { 7 } else { 6 };
    let mut steps = vec![];
    if let Some(p) = dag.stages.iter().position(|st| st.name == "pad") {
        steps.push(serde_json::json!(["CI", p]));
    }
    let order: Vec<usize> = [0, 1].into_iter().chain(4..axes).chain([2, 3]).collect();
    steps.push(serde_json::json!(["RE", s, order]));
    steps.push(serde_json::json!(["AN", s, axes - 1, 2]));
    tunehub_engine::schedule::Schedule::from_json_value(&serde_json::Value::Array(steps)).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, failure_persistence: None, max_shrink_iters: 8, ..ProptestConfig::default() })]

    /// Rows shorter than a vector, packed into its lanes (`codegen::rows`): depthwise and
    /// conv2d tiles of a whole map, windows 1-7, dilation 1-2, stride 1-2, no padding, padding
    /// that keeps the width, or more, channels 1-67, maps 1-33 rows by 1-15 columns. Where the
    /// input rows are as wide as the output's (stride 1, padding `(k - 1) * d / 2`) the tile has one
    /// accumulator per vector of the packed map, not per row, and its padding is read under
    /// literal masks (on AVX-512, a padded window's taps shifted out of anchors); on AVX-512
    /// a stride-2 map of one vector is one accumulator, its taps shifted out of phases (with
    /// or without padding); every kernel matches the reference.
    #[test]
    fn rows_packed_into_lanes_match_the_reference(
        c in 1..68i64, h in 1..34i64, w in 1..16i64, k in 1..=7i64, dilation in 1..=2i64,
        stride in 1..=2i64, padding in 0..3usize, conv: bool,
    ) {
        let target = Target::detect();
        let lanes = i64::from(target.vector_lanes_f32());
        let half = (k - 1) * dilation / 2;
        let pad = [0, half, half + 1][padding];
        let win = Window { kh: k, kw: k, stride, pad, dilation };
        let span = (k - 1) * dilation + 1;
        let (oh, ow) = ((h + 2 * pad - span) / stride + 1, (w + 2 * pad - span) / stride + 1);
        prop_assume!(h + 2 * pad >= span && w + 2 * pad >= span);
        let (dag, stage) = if conv {
            (ops::conv2d_nchw(1, c.min(9), h, w, 3, win, false, false).unwrap(), "conv")
        } else {
            (ops::depthwise_conv2d_nchw(1, c, h, w, win, false, false).unwrap(), "depthwise")
        };
        let sched = whole_map_tile(&dag, stage);
        let task = Task::new(dag, "rows packed");
        let src = checked_source(&task, &sched, &target, "rows packed");
        // The packed tile must fit the registers (32 at 512 bits, else 16).
        let registers = if target.vector_bits() >= 512 { 32 } else { 16 };
        let fits = (oh * ow + lanes - 1) / lanes <= tunehub_engine::codegen::max_tile_vectors(registers);
        // A one-column row is no tile (`regtile`).
        let packs = lanes > 1 && stride == 1 && ow == w && (2..lanes).contains(&w) && oh >= 2 && fits;
        let accumulators = src.matches(&format!("th_vf {stage}_r")).count() as i64;
        // Stride 2 packs on AVX-512, its taps shifted out of the input's phases
        // (`codegen::phases`): surely where the map is one vector and either a phase's row
        // (every other input column) fits an output row (one accumulator beside at most two
        // vectors of each of the 4 phases) or the window is 3x3 (a tap whose column would run
        // into the next row reads a phase of its own: at most 9, of two vectors each), and
        // built once for all the taps of a row of the window at least.
        let aligns = target.arch == "x86_64" && lanes == 16;
        let phases_fit = oh * ow <= lanes && ((w + 1) / 2 <= ow || (k <= 3 && dilation == 1));
        if aligns && stride == 2 && (2..lanes).contains(&ow) && oh >= 2 && phases_fit {
            prop_assert_eq!(accumulators, 1, "{}", src);
            // (A map whose every tap is padding reads nothing.)
            prop_assert!(src.contains("th_vf th_phase") || !src.contains("th_op"), "{}", src);
            // Built once for the window's taps, not per tap: its columns written out.
            let rx_loop = format!("for (int {stage}_rx = 0");
            prop_assert!(!src.contains(&rx_loop), "{}", src);
        }
        prop_assert!(stride == 2 || !src.contains("th_phase"), "{}", src);
        if packs {
            prop_assert_eq!(accumulators, (oh * ow + lanes - 1) / lanes, "{}", src);
            prop_assert!(pad == 0 || src.contains("u, 0.0f)"), "no literal mask in\n{}", src);
            // On AVX-512 a padded window's taps are shifted out of anchors (`codegen::anchors`)
            // where they fit the registers beside the accumulators: a row of taps spans at most
            // one vector more than the map (6 * 2 columns), so surely where twice the
            // accumulators and 3 fit.
            let anchored = src.contains("th_vf th_anchor");
            let padded_window = target.arch == "x86_64" && lanes == 16 && k > 1 && pad > 0;
            prop_assert!(padded_window || !anchored, "{}", src);
            if padded_window && 2 * accumulators + 3 <= registers {
                prop_assert!(anchored, "{}", src);
            }
        }
    }
}

/// The packed rows at every x86-64 vector width the host runs (AVX-512's masked loads, AVX's
/// `vmaskmovps`, SSE's lane-by-lane copies): 3x3 and 5x5 depthwise convolutions on a 7x5 map,
/// packed where a 5-wide row is shorter than a vector (one row per vector on SSE's 4 lanes).
/// On 16 lanes the window's taps are shifted out of anchors (`codegen::anchors`), under
/// AVX-512's flags and without them (generic shuffles and blends); a stride-2 window's out of
/// phases, with padding and without. Each kernel is checked against the reference.
#[test]
fn rows_packed_into_lanes_match_the_reference_at_every_x86_vector_width() {
    for k in [3, 5] {
        let win = Window::square(k, 1, (k - 1) / 2);
        let dag = ops::depthwise_conv2d_nchw(1, 5, 7, 5, win, false, false).unwrap();
        let sched = whole_map_tile(&dag, "depthwise");
        let task = Task::new(dag, "rows packed");
        for (march, target) in x86_levels_and_generic_16(&Target::detect()) {
            let what = format!("{march}, {k}x{k}");
            let lanes = i64::from(target.vector_lanes_f32());
            let src = checked_source(&task, &sched, &target, &what);
            let accumulators = src.matches("th_vf depthwise_r").count() as i64;
            let expected = if 5 < lanes {
                (35 + lanes - 1) / lanes
            } else {
                7 * ((5 + lanes - 1) / lanes)
            };
            assert_eq!(accumulators, expected, "{what}:\n{src}");
            assert_eq!(
                src.contains("th_vf th_anchor"),
                lanes == 16,
                "{what}:\n{src}"
            );
        }
    }
    // Stride 2, packed on 16 lanes only, its taps shifted out of the input's phases
    // (`codegen::phases`) built once for the window (its loops written out); a row per vector
    // elsewhere. Padded (4 rows of 3 outputs) and not (a pool's window, a valid convolution's:
    // 3 rows of 3), where a tap's column shift would carry a row's last output into the next
    // row and the tap reads a phase of its own.
    for (w, pad, rows) in [(5, 1, 4), (7, 0, 3)] {
        let win = Window::square(3, 2, pad);
        let dag = ops::depthwise_conv2d_nchw(1, 5, 7, w, win, false, false).unwrap();
        let sched = whole_map_tile(&dag, "depthwise");
        let task = Task::new(dag, "phases");
        for (march, target) in x86_levels_and_generic_16(&Target::detect()) {
            let what = format!("{march}, stride 2, padding {pad}");
            let lanes = i64::from(target.vector_lanes_f32());
            let src = checked_source(&task, &sched, &target, &what);
            let accumulators = src.matches("th_vf depthwise_r").count();
            let expected = if lanes == 16 { 1 } else { rows };
            assert_eq!(accumulators, expected, "{what}:\n{src}");
            let phases = src.contains("th_vf th_phase");
            assert_eq!(phases, lanes == 16, "{what}:\n{src}");
            let window_loop = src.contains("for (int depthwise_rx = 0");
            assert!(!phases || !window_loop, "{what}:\n{src}");
        }
    }
}

/// MobileNetV2's stride-2 depthwise conv as the search tunes it (a schedule it found): a
/// parallel loop over channel-row blocks, each accumulating in its own stack buffer as
/// register tiles of its 28-wide output rows. Which form the tile takes follows the level's
/// registers, so each x86 level's C is checked on any x86 host: AVX2's tile is one row of 4
/// vectors, whose 5 pairs, 4 accumulators and 2 shuffle results fill its 16 registers, so the
/// taps share their loads (`window`); SSE2's row of 7 vectors does not fit, nor AVX-512's tile
/// of 14 rows, so those read the stride-2 loads in the shuffle's lane order. The kernel of
/// every level the host runs matches the reference.
#[test]
fn depthwise_s2_tiles_in_a_threads_buffer_match_the_reference() {
    let dag =
        ops::depthwise_conv2d_nchw(1, 144, 56, 56, Window::square(3, 2, 1), false, false).unwrap();
    let steps = serde_json::json!([
        ["CHW", 3, "local"],
        ["SP", 4, 3, 28, [1, 28], 1],
        ["SP", 4, 2, 28, [2, 14], 1],
        ["SP", 4, 1, 144, [18, 1], 1],
        ["SP", 4, 0, 1, [1, 1], 1],
        ["RE", 4, [0, 3, 9, 6, 1, 4, 7, 10, 2, 5, 8, 11]],
        ["FU", 4, [0, 1, 2, 3, 4, 5]],
        ["AN", 4, 0, 3],
        ["AN", 4, 6, 2],
        ["CA", 3, 4, 2],
        ["SP", 3, 5, 3, [3], 1],
        ["SP", 3, 4, 3, [3], 1],
        ["SP", 3, 3, 28, [28], 1],
        ["SP", 3, 2, 14, [1], 1],
        ["SP", 3, 1, 1, [1], 1],
        ["SP", 3, 0, 1, [1], 1],
        ["RE", 3, [8, 10, 0, 2, 4, 6, 9, 11, 1, 3, 5, 7]],
        ["AN", 3, 11, 2],
        ["PR", 3, 0, "auto_unroll_max_step$32"],
        ["CI", 2]
    ]);
    let sched = tunehub_engine::schedule::Schedule::from_json_value(&steps).unwrap();
    let task = Task::new(dag, "depthwise s2");
    let host = Target::detect();
    for (march, target) in x86_levels(&host, false) {
        let lanes = i64::from(target.vector_lanes_f32());
        let src = tunehub_engine::codegen::generate_with(
            &task.dag,
            &sched,
            &target,
            &task.lower_options(),
        )
        .unwrap()
        .source;
        let shared = src.contains("th_vf depthwise_local_p");
        assert_eq!(shared, lanes == 8, "{march}:\n{src}");
        assert_eq!(src.contains("th_vload2mp(&"), !shared, "{march}:\n{src}");
        assert_eq!(
            src.contains("TH_LANEPERM(depthwise_local_r0)"),
            !shared,
            "{march}:\n{src}"
        );
        assert_eq!(
            src.contains("th_vstoren(&"),
            28 % lanes != 0,
            "{march}:\n{src}"
        );
    }
    for (_, target) in x86_levels(&host, true) {
        all_match_the_reference(&target, &task, std::slice::from_ref(&sched));
    }
    if host.arch != "x86_64" {
        all_match_the_reference(&host, &task, &[sched]);
    }
}

/// [`x86_levels`] the host runs, and, where it runs AVX2, a kernel written for 16 lanes built
/// without AVX-512's flags: AVX2's instructions, the kernel's generic branch.
fn x86_levels_and_generic_16(host: &Target) -> Vec<(&'static str, Target)> {
    let mut levels = x86_levels(host, true);
    if let Some((_, v3)) = levels.iter().find(|l| l.0 == "x86-64-v3") {
        let mut features = v3.features.clone();
        features.push("avx512f".into());
        let wide = v3
            .clone()
            .with_overrides(&tunehub_engine::target::TargetOverrides {
                features: Some(features),
                ..Default::default()
            });
        levels.push(("x86-64-v3 with 16 lanes", wide));
    }
    levels
}

/// The host as each x86-64 level (AVX-512, AVX2, SSE2), only those it can run if `runnable`;
/// none on other hosts. The kernel's vector width and registers follow the level.
fn x86_levels(host: &Target, runnable: bool) -> Vec<(&'static str, Target)> {
    if host.arch != "x86_64" {
        eprintln!("skipped: x86-64 only");
        return vec![];
    }
    let levels = [
        ("x86-64-v4", &["sse2", "avx", "avx2", "fma", "avx512f"][..]),
        ("x86-64-v3", &["sse2", "avx", "avx2", "fma"][..]),
        ("x86-64", &["sse2"][..]),
    ];
    levels
        .into_iter()
        .filter(|(_, features)| !runnable || features.iter().all(|f| host.has_feature(f)))
        .map(|(march, features)| {
            let target = host
                .clone()
                .with_overrides(&tunehub_engine::target::TargetOverrides {
                    march: Some(march.into()),
                    features: Some(features.iter().map(|f| f.to_string()).collect()),
                    ..Default::default()
                });
            (march, target)
        })
        .collect()
}

/// The C of `sched` for `target`, its kernel checked against the reference first.
fn checked_source(
    task: &Task,
    sched: &tunehub_engine::schedule::Schedule,
    target: &Target,
    what: &str,
) -> String {
    let src =
        tunehub_engine::codegen::generate_with(&task.dag, sched, target, &task.lower_options())
            .unwrap()
            .source;
    for r in Measurer::new(target, MeasureOptions::check_only())
        .measure(task, std::slice::from_ref(sched))
    {
        assert_eq!(r.error, ErrorCode::NoError, "{what}: {}", r.error_msg);
    }
    src
}

/// Whether a row tile of `cols` output columns can share its window's columns on `target`:
/// a pair of vectors per output vector and one beside the row, its accumulators unless the
/// rows come first (max and min), and two more fit the registers (32 at 512 bits, 16 below).
fn columns_fit(target: &Target, cols: i64, rows_first: bool) -> bool {
    let lanes = i64::from(target.vector_lanes_f32());
    let registers = if target.vector_bits() >= 512 { 32 } else { 16 };
    let groups = (cols + lanes - 1) / lanes;
    2 * (groups + 1) + if rows_first { 0 } else { groups } + 2 <= registers
}

/// The partial, stride-2 and masked loads of each x86-64 vector width the host can run (AVX's
/// `vmaskmovps` on 8 lanes, the lane-by-lane copies of SSE's 4), on a row tile with every
/// form: a 37-wide output row (whole vectors and a partial one), stride 2, inlined padding
/// (masks of some lanes at the edges, of every lane inside, of none in the padded top row:
/// where the masked load is emulated, the last two are plain loads and the constant); built
/// for that width and checked against the reference.
#[test]
fn masked_loads_match_the_reference_at_every_x86_vector_width() {
    let host = Target::detect();
    let win = Window::square(3, 2, 1);
    let dag = ops::depthwise_conv2d_nchw(1, 3, 7, 73, win, false, false).unwrap();
    let sched = depthwise_row_tile(&dag, true);
    let task = Task::new(dag, "depthwise row tile");
    for (march, target) in x86_levels(&host, true) {
        let src = checked_source(&task, &sched, &target, march);
        // Masked loads either of pairs (the columns sharing their loads, where they fit the
        // registers) or of each tap.
        assert!(
            src.contains("th_vload2mp(&") || src.contains("const th_vf depthwise_w0 = th_vloadm("),
            "{march}:\n{src}"
        );
    }
}

/// A max pool's stride-2 row tile with its window's columns shared (`codegen::window`): the
/// window's rows reduced on contiguous input vectors, the columns taken from their evens, odds
/// and one-lane shifts. Windows of 2 and 3 columns, the first tap at an even or odd offset,
/// padding inlined (loads under masks) or materialized, whole rows and rows cut into two tiles
/// (the second's shifted tap reads the first's last column), built at every x86 vector width
/// the host runs: the source has the form where its vectors fit the registers, and the kernel
/// matches the reference.
#[test]
fn pooling_columns_shared_match_the_reference_at_every_x86_vector_width() {
    let host = Target::detect();
    // (window, stride-2 padding, input width): 48 output columns each.
    let cases = [(3, 1, 95), (2, 0, 97), (3, 0, 97), (2, 1, 95)];
    for (k, pad, w) in cases {
        let win = Window::square(k, 2, pad);
        let dag = ops::pool2d(PoolKind::Max, 1, 2, 5, w, win).unwrap();
        let s = dag
            .stages
            .iter()
            .position(|st| st.name == "max_pool")
            .unwrap();
        let pad_stage = dag.stages.iter().position(|st| st.name == "pad");
        let task = Task::new(dag, "pooling columns shared");
        for (inline, split) in [(true, false), (true, true), (false, true)] {
            // n c y x ry rx: the window below the columns, the columns vectorized; split, the
            // row is two tiles of 24.
            let mut steps = vec![];
            if let (true, Some(p)) = (inline, pad_stage) {
                steps.push(serde_json::json!(["CI", p]));
            }
            if split {
                steps.push(serde_json::json!(["SP", s, 3, 48, [24], 1]));
                steps.push(serde_json::json!(["RE", s, [0, 1, 2, 3, 5, 6, 4]]));
                steps.push(serde_json::json!(["AN", s, 6, 2]));
            } else {
                steps.push(serde_json::json!(["RE", s, [0, 1, 2, 4, 5, 3]]));
                steps.push(serde_json::json!(["AN", s, 5, 2]));
            }
            let sched = tunehub_engine::schedule::Schedule::from_json_value(
                &serde_json::Value::Array(steps),
            )
            .unwrap();
            for (march, target) in x86_levels(&host, true) {
                let what = format!("{march}, k {k}, pad {pad}, inline {inline}, split {split}");
                let src = checked_source(&task, &sched, &target, &what);
                // SSE's whole row of 12 vectors does not fit.
                let fits = columns_fit(&target, if split { 24 } else { 48 }, true);
                assert_eq!(
                    src.contains("max_pool_w0 = th_vmax("),
                    fits,
                    "{what}:\n{src}"
                );
            }
        }
    }
}

/// A stride-2 depthwise convolution's row tile with its window's columns shared: per window
/// row, a pair of vectors per output vector, each tap (times its weight) added from the
/// pair's evens, odds or their one-lane shifts, the accumulators starting from the zeros the
/// reduction would have stored before the tile. A 19-wide output row (a whole vector and a
/// partial one at 16 lanes), padding inlined or not, at every x86 vector width the host runs:
/// the source has the form where its vectors fit the registers, and the kernel matches the
/// reference. On 16 lanes the tile computes in the in-lane order (`vshufps`'s): checked under
/// AVX-512's flags and without them (the same order by generic shuffles), and in a tile of two
/// rows of a cache-write buffer initialized whole, whose accumulators go through memory in and
/// out of that order. Where each tile of such a buffer computes its elements once, the tiles
/// start from the initialization's constant instead.
#[test]
fn depthwise_columns_shared_match_the_reference_at_every_x86_vector_width() {
    let levels = x86_levels_and_generic_16(&Target::detect());
    let in_lane =
        |src: &str| src.contains("= TH_EVENS_IL(") && src.contains("TH_FROM_IL(depthwise");
    for (k, pad, inline) in [(3, 1, true), (3, 1, false), (2, 0, false), (3, 0, false)] {
        let win = Window::square(k, 2, pad);
        // 19 output columns: 2 * 18 + k input columns, padding included.
        let dag = ops::depthwise_conv2d_nchw(1, 3, 7, 36 + k - 2 * pad, win, false, false).unwrap();
        let sched = depthwise_row_tile(&dag, inline);
        let task = Task::new(dag, "depthwise columns shared");
        for (march, target) in &levels {
            let what = format!("{march}, k {k}, pad {pad}, inline {inline}");
            let src = checked_source(&task, &sched, target, &what);
            let fits = columns_fit(target, 19, false);
            assert_eq!(
                src.contains("const th_vf depthwise_w0 = th_vload"),
                fits,
                "{what}:\n{src}"
            );
            assert_eq!(
                in_lane(&src),
                fits && target.vector_lanes_f32() == 16,
                "{what}:\n{src}"
            );
            // The reduction's zeros stored right before the tile become its registers' start.
            assert_eq!(
                src.contains("th_vf depthwise_r0 = ((th_vf){0} + 0.0f);"),
                fits,
                "{what}:\n{src}"
            );
        }
    }
    // Two schedules of the search's, the output cached in a buffer (stage 3) zeroed whole:
    // - per channel, computed in tiles of two rows with the window's columns in a loop outside
    //   them: the accumulators are loaded, moved into the order, and back at the store;
    // - 12 channels by 2 rows, tiles of 2 channels by a row, each once per element (the
    //   window's loops all inside it): the tiles start from the zeros' constant instead.
    let cached = |c: i64, steps: serde_json::Value, from_constant: bool| {
        let dag =
            ops::depthwise_conv2d_nchw(1, c, 7, 37, Window::square(3, 2, 1), false, false).unwrap();
        let sched = tunehub_engine::schedule::Schedule::from_json_value(&steps).unwrap();
        let task = Task::new(dag, "depthwise columns shared, output cached");
        for (march, target) in &levels {
            let what = format!("{march}, {c} channels, output cached");
            let src = checked_source(&task, &sched, target, &what);
            let wide = target.vector_lanes_f32() == 16;
            assert_eq!(in_lane(&src), wide, "{what}:\n{src}");
            assert_eq!(
                src.contains("= TH_TO_IL(th_vload"),
                wide && !from_constant,
                "{what}:\n{src}"
            );
            assert_eq!(
                src.contains("th_vf depthwise_local_r0 = ((th_vf){0} + 0.0f);"),
                wide && from_constant,
                "{what}:\n{src}"
            );
        }
    };
    cached(
        3,
        serde_json::json!([
            ["CHW", 3, "local"],
            ["SP", 4, 3, 19, [1, 19], 1],
            ["SP", 4, 2, 4, [2, 2], 1],
            ["SP", 4, 1, 3, [1, 3], 1],
            ["SP", 4, 0, 1, [1, 1], 1],
            ["RE", 4, [0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11]],
            ["FU", 4, [0, 1, 2]],
            ["AN", 4, 0, 3],
            ["AN", 4, 9, 2],
            ["CA", 3, 4, 5],
            ["SP", 3, 5, 3, [3], 1],
            ["SP", 3, 4, 3, [1], 1],
            ["SP", 3, 3, 19, [19], 1],
            ["SP", 3, 2, 2, [2], 1],
            ["SP", 3, 1, 3, [1], 1],
            ["SP", 3, 0, 1, [1], 1],
            ["RE", 3, [8, 10, 0, 2, 4, 6, 9, 11, 1, 3, 5, 7]],
            ["AN", 3, 11, 2],
            ["CA", 2, 3, 2],
            ["AN", 2, 3, 2]
        ]),
        false,
    );
    cached(
        12,
        serde_json::json!([
            ["CHW", 3, "local"],
            ["SP", 4, 3, 19, [1, 19], 1],
            ["SP", 4, 2, 4, [1, 2], 1],
            ["SP", 4, 1, 12, [1, 12], 1],
            ["SP", 4, 0, 1, [1, 1], 1],
            ["RE", 4, [0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11]],
            ["FU", 4, [0, 1, 2, 3, 4, 5, 6]],
            ["AN", 4, 0, 3],
            ["AN", 4, 5, 2],
            ["CA", 3, 4, 1],
            ["SP", 3, 5, 3, [3], 1],
            ["SP", 3, 4, 3, [3], 1],
            ["SP", 3, 3, 19, [19], 1],
            ["SP", 3, 2, 2, [1], 1],
            ["SP", 3, 1, 12, [2], 1],
            ["SP", 3, 0, 1, [1], 1],
            ["RE", 3, [8, 10, 0, 2, 4, 6, 9, 11, 1, 3, 5, 7]],
            ["AN", 3, 11, 2],
            ["CI", 2]
        ]),
        true,
    );
}

/// `samples` schedules per sketch of `dag`, as the search draws them (sketch rules, then
/// random annotation).
fn sketch_schedules(
    dag: &ComputeDag,
    seed: u64,
    samples: usize,
) -> Vec<(
    tunehub_engine::search::sketch::Sketch,
    tunehub_engine::schedule::Schedule,
)> {
    use rand::SeedableRng;
    use tunehub_engine::search::annotate::{AnnotateContext, Decider, annotate};
    use tunehub_engine::search::sketch::{cpu_rules, generate};
    let target = Target::detect();
    let ctx = AnnotateContext::for_target(&target);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut out = vec![];
    for sk in generate(dag, &cpu_rules()) {
        for _ in 0..samples {
            let (s, _) = annotate(dag, &sk, &ctx, &mut Decider::sample(&mut rng)).unwrap();
            out.push((sk.clone(), s));
        }
    }
    out
}

/// The row-tile schedules the search draws for a pooling (`search::sketch::WindowRowTile`):
/// three per sketch (padding materialized or inlined; an average's division apart or with the
/// tile computed in its loops).
fn pooling_row_tiles(dag: &ComputeDag, seed: u64) -> Vec<tunehub_engine::schedule::Schedule> {
    use tunehub_engine::search::sketch::StagePlan;
    sketch_schedules(dag, seed, 3)
        .into_iter()
        .map(|(sk, s)| {
            assert!(
                sk.plans
                    .iter()
                    .any(|p| matches!(p, StagePlan::RowTile | StagePlan::RowTileFused { .. })),
                "{}",
                sk.describe(dag)
            );
            s
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, failure_persistence: None, max_shrink_iters: 8, ..ProptestConfig::default() })]

    /// Pooling as register tiles of output rows on odd shapes: windows 1-4, stride 1 or 2 (two
    /// loads and a shuffle per vector), dilation 1 or 2, padding 0-2 materialized or inlined
    /// (loads under a mask, -inf or 0 outside), max (a running `th_vmax`) or average (a sum,
    /// at root or computed in its division's tile loops), maps from 1 to 74 columns: a row
    /// shorter than a vector is one masked vector. Where the output row fits one tile loop (at
    /// most 64 columns, at least 2), every drawn schedule without a padding computed inside
    /// the pool's loops is a register tile; every kernel matches the reference.
    #[test]
    fn pooling_row_tiles_match_the_reference(max: bool, c in 1..4i64, h in 3..10i64, w in 1..75i64, k in 1..=4i64, stride in 1..=2i64, dilation in 1..=2i64, pad in 0..=2i64, seed: u64) {
        let kind = if max { PoolKind::Max } else { PoolKind::Avg };
        let win = Window { kh: k, kw: k, stride, pad, dilation };
        let Ok(dag) = ops::pool2d(kind, 1, c, h, w, win) else { return Ok(()) };
        let target = Target::detect();
        let lanes = i64::from(target.vector_lanes_f32());
        let ow = (w + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
        let scheds = pooling_row_tiles(&dag, seed);
        let task = Task::new(dag, "pooling row tile");
        for s in &scheds {
            let src = tunehub_engine::codegen::generate_with(&task.dag, s, &target, &task.lower_options()).unwrap().source;
            // A padding (stage 1) computed inside the tile's loops (a compute-at spot) breaks
            // the nest; the pool itself computed in its division's loops does not.
            let padding_inside = pad > 0 && s.to_json().to_string().contains("[\"CA\",1,");
            if lanes > 1 && (2..=64).contains(&ow) && !padding_inside {
                let (acc, update) = if max { ("th_vf max_pool_r0", "th_vmax(") } else { ("th_vf pool_sum_r0", " + ") };
                prop_assert!(src.contains(acc) && src.contains(update), "no register tile in {}\n{}", s.to_json(), src);
            }
        }
        for (s, r) in scheds.iter().zip(Measurer::new(&target, MeasureOptions::check_only()).measure(&task, &scheds)) {
            prop_assert_eq!(r.error, ErrorCode::NoError, "{}: {}", s.to_json(), r.error_msg);
        }
    }
}

/// Softmax with every producer computed at the division's row loop (exp read there by the row
/// sum too): one pass over memory, each row's exp a local buffer; it matches the reference.
#[test]
fn softmax_fused_at_the_row_loop_matches_the_reference() {
    let target = Target::detect();
    // x=0 row_max=1 exp=2 row_sum=3 softmax=4; the division's rows parallel, columns vectorized.
    let steps = serde_json::json!([
        ["AN", 4, 0, 3],
        ["AN", 4, 1, 2],
        ["CA", 3, 4, 0],
        ["CA", 2, 4, 0],
        ["AN", 2, 1, 2],
        ["CA", 1, 4, 0]
    ]);
    let sched = tunehub_engine::schedule::Schedule::from_json_value(&steps).unwrap();
    let dag = ops::softmax(5, 37).unwrap();
    let state = sched.replay(&dag).unwrap();
    let f = tunehub_engine::lower::lower(&state).unwrap();
    let exp = f.buffers.iter().find(|b| b.name == "exp").unwrap();
    assert_eq!(exp.shape, [1, 37]);
    let task = Task::new(dag, "softmax fused at the row loop");
    all_match_the_reference(&target, &task, &[sched]);
}

/// A reduction's partials (rfactor) may be computed at the loop its combination is computed at:
/// layer norm's mean and variance, partials included, all in the output's row pass. The
/// search draws such schedules, each partial buffer holds one row's partials, and every kernel
/// matches the reference.
#[test]
fn reduction_partials_in_the_consumers_row_pass_match_the_reference() {
    use tunehub_engine::schedule::Attach;
    let dag = layer_norm(5);
    let target = Target::detect();
    let mut fused = vec![];
    for (_, s) in sketch_schedules(&dag, 9, 40) {
        let state = s.replay(&dag).unwrap();
        let at = |name: &str| {
            let k = state.dag.stages.iter().position(|st| st.name == name)?;
            match state.stages[k].attach {
                Attach::At { stage, node } => Some((stage, node)),
                _ => None,
            }
        };
        let beside = |r: &str| at(r).is_some() && at(r) == at(&r.replace(".rf", ""));
        if beside("V.rf") {
            let f = tunehub_engine::lower::lower(&state).unwrap();
            let rf = f.buffers.iter().find(|b| b.name == "V.rf").unwrap();
            assert_eq!(rf.shape[0], 1, "one row's partials: {}", s.to_json());
            fused.push(s);
        }
    }
    assert!(
        fused.len() >= 3,
        "{} schedules with the partials beside",
        fused.len()
    );
    all_match_the_reference(
        &target,
        &Task::new(dag, "layer norm, partials in the row pass"),
        &fused,
    );
}

/// A row-wise output whose reductions are rfactored may take its rows a few at a time (layer
/// norm over 36 rows: 2 or 4 per step), its reductions' partials computed at that step with
/// the reduction loop outside the rows (one register tile over the step's rows). The search
/// draws such schedules and every kernel matches the reference.
#[test]
fn row_steps_run_reduction_partials_of_several_rows_together_and_match_the_reference() {
    use rand::SeedableRng;
    use tunehub_engine::schedule::{Attach, IterKind};
    use tunehub_engine::search::annotate::{AnnotateContext, Decider, annotate};
    use tunehub_engine::search::sketch::{cpu_rules, generate};
    let dag = layer_norm(36);
    let target = Target::detect();
    // Two cores: 36 rows are then enough to share out alone (the parallel rule wants 32), so
    // the rows may be stepped, whatever this machine's cores.
    let ctx = AnnotateContext {
        cores: 2,
        ..AnnotateContext::for_target(&target)
    };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let mut stepped = vec![];
    for sk in generate(&dag, &cpu_rules()) {
        for _ in 0..40 {
            let (s, state) = annotate(&dag, &sk, &ctx, &mut Decider::sample(&mut rng)).unwrap();
            let Some(k) = state.dag.stages.iter().position(|st| st.name == "V.rf") else {
                continue;
            };
            let f = tunehub_engine::lower::lower(&state).unwrap();
            let rows = f.buffers.iter().find(|b| b.name == "V.rf").unwrap().shape[0];
            if rows > 1 && state.stages[k].attach != Attach::Root {
                let st = &state.stages[k];
                assert_eq!(
                    st.nodes[st.leaves[0]].kind,
                    IterKind::Reduce,
                    "the reduction outside the rows: {}",
                    s.to_json()
                );
                assert!(rows == 2 || rows == 4, "{rows} rows: {}", s.to_json());
                stepped.push(s);
            }
        }
    }
    assert!(
        stepped.len() >= 3,
        "{} schedules with rows stepped",
        stepped.len()
    );
    all_match_the_reference(
        &target,
        &Task::new(dag, "layer norm, rows stepped"),
        &stepped,
    );
}

/// Layer norm over `rows` rows of 96 in the text form (the bench's, smaller).
fn layer_norm(rows: usize) -> ComputeDag {
    let form = "S[i] += X[i,k] where i<R, k<96
D[i,j] = X[i,j] - S[i] * 0.0104 where i<R, j<96
V[i] += D[i,k] * D[i,k] where i<R, k<96
Y[i,j] = D[i,j] * rsqrt(V[i] * 0.0104 + 0.00001) * G[j] + B[j] where i<R, j<96";
    tunehub_engine::text::parse(&form.replace('R', &rows.to_string())).unwrap()
}

/// Measures `scheds` of `task` (output check only) and asserts that each matches the reference,
/// naming the task and the schedule where one does not.
fn all_match_the_reference(
    target: &Target,
    task: &Task,
    scheds: &[tunehub_engine::schedule::Schedule],
) {
    let results = Measurer::new(target, MeasureOptions::check_only()).measure(task, scheds);
    for (s, r) in scheds.iter().zip(results) {
        assert_eq!(
            r.error,
            ErrorCode::NoError,
            "{}, {}: {}",
            task.desc,
            s.to_json(),
            r.error_msg
        );
    }
}

/// A divisor the innermost loop does not change (softmax's row sum) is written as a multiply
/// by its reciprocal, one division per row; a divisor that changes along the loop stays a
/// division. Either way the kernel matches the reference.
#[test]
fn invariant_divisors_become_reciprocals_and_stay_correct() {
    let target = Target::detect();
    let source = |dag: &ComputeDag, steps: serde_json::Value| {
        let sched = tunehub_engine::schedule::Schedule::from_json_value(&steps).unwrap();
        tunehub_engine::codegen::generate_with(dag, &sched, &target, &Default::default())
            .unwrap()
            .source
    };
    // softmax(5, 37): x=0 row_max=1 exp=2 row_sum=3 softmax=4, fused at the division's rows.
    let softmax = ops::softmax(5, 37).unwrap();
    let fused = serde_json::json!([
        ["AN", 4, 1, 2],
        ["CA", 3, 4, 0],
        ["CA", 2, 4, 0],
        ["CA", 1, 4, 0]
    ]);
    let c = source(&softmax, fused);
    assert!(c.contains("* (1.0f / row_sum["), "{c}");
    assert!(!c.contains(") / row_sum["), "{c}");
    // Per row: the reciprocal while the columns are the inner loop, a division once the rows are.
    let rows =
        tunehub_engine::text::parse("Y[i,j] = A[i,j] / (B[i] + 2.0) where i<5, j<37").unwrap();
    let c = source(&rows, serde_json::json!([]));
    assert!(c.contains("* (1.0f / (B["), "{c}");
    let c = source(&rows, serde_json::json!([["RE", 2, [1, 0]]]));
    assert!(c.contains(" / (B[") && !c.contains("1.0f / (B["), "{c}");
    let each =
        tunehub_engine::text::parse("Y[i,j] = A[i,j] / (B[i,j] + 2.0) where i<5, j<37").unwrap();
    let c = source(&each, serde_json::json!([]));
    assert!(c.contains(" / (B[") && !c.contains("1.0f / (B["), "{c}");
    check_random_schedules(rows, 31, PER_CASE);
    check_random_schedules(softmax, 32, PER_CASE);
    // A matmul with an epilogue divided by a per-row value, tiled as the search's sampler draws.
    let epilogue = tunehub_engine::text::parse(
        "O[i,j] += A[i,k] * W[k,j] where i<6, j<40, k<9
         Y[i,j] = O[i,j] / (S[i] + 2.0) where i<6, j<40",
    )
    .unwrap();
    check_random_schedules(epilogue, 33, PER_CASE);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, failure_persistence: None, max_shrink_iters: 8, ..ProptestConfig::default() })]

    /// Row-wise reductions and their readers as the search draws them, producers computed at
    /// a loop every reader shares included: softmax and layer norm on odd shapes.
    #[test]
    fn fused_row_passes_match_the_reference(m in 1..9i64, n in 1..80i64, seed: u64) {
        let layer_norm = format!(
            "S[i] += X[i,k] where i<{m}, k<{n}
             D[i,j] = X[i,j] - S[i] * {c} where i<{m}, j<{n}
             V[i] += D[i,k] * D[i,k] where i<{m}, k<{n}
             Y[i,j] = D[i,j] * rsqrt(V[i] * {c} + 0.00001) * G[j] + B[j] where i<{m}, j<{n}",
            c = 1.0 / n as f64
        );
        let target = Target::detect();
        for dag in [ops::softmax(m, n).unwrap(), tunehub_engine::text::parse(&layer_norm).unwrap()] {
            let scheds: Vec<_> = sketch_schedules(&dag, seed, 3).into_iter().map(|(_, s)| s).collect();
            let task = Task::new(dag, "row passes");
            for (s, r) in scheds.iter().zip(Measurer::new(&target, MeasureOptions::check_only()).measure(&task, &scheds)) {
                prop_assert_eq!(r.error, ErrorCode::NoError, "{}: {}", s.to_json(), r.error_msg);
            }
        }
    }
}
