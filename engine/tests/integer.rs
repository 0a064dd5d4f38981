//! Integer kernels (`dtype=u8i8` / `i8i8`, issue 62's first step): every schedule the search
//! draws for the integer forms of the matrix products and convolutions, on odd shapes (channels
//! not a multiple of 4, every 8-bit value in the data, extremes included), compiles with the
//! real C compiler, writes integer C, and matches the reference exactly; a kernel off by one
//! unit anywhere is a wrong answer.

use rand::SeedableRng;
use tunehub_engine::codegen;
use tunehub_engine::measure::{
    BuildInput, ErrorCode, LocalBuilder, LocalRunner, MeasureOptions, Measurer, measure_batch,
};
use tunehub_engine::ops::OpSpec;
use tunehub_engine::reference;
use tunehub_engine::sample::RandomSampler;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::search::annotate::{AnnotateContext, Decider, annotate};
use tunehub_engine::search::sketch::{cpu_rules, generate};
use tunehub_engine::target::{Target, TargetOverrides};
use tunehub_engine::task::Task;

const SPECS: &[&str] = &[
    "matmul(m=5,n=19,k=37,dtype=u8i8)",
    "matmul(m=16,n=48,k=64,dtype=i8i8)",
    "dense(m=3,n=17,k=30,dtype=u8i8)",
    "batch_matmul(b=2,m=3,n=5,k=7,dtype=i8i8)",
    "conv2d_nchw(n=1,c=3,h=7,w=9,f=5,kh=3,kw=3,pad=1,dtype=u8i8)",
    "conv2d_nhwc(n=1,h=6,w=5,c=7,f=6,kh=3,kw=3,stride=2,pad=1,bias=1,relu=1,dtype=i8i8)",
    "depthwise_conv2d_nchw(n=1,c=5,h=7,w=7,kh=3,kw=3,pad=1,bias=1,relu=1,dtype=u8i8)",
    "depthwise_conv2d_nhwc(n=1,h=7,w=6,c=19,kh=3,kw=3,stride=2,pad=1,bias=1,relu=1,dtype=i8i8)",
];

/// `per` schedules of each sketch of `task`, as the search draws them (sketch rules, then random
/// annotation), from `seed`.
fn drawn(task: &Task, ctx: &AnnotateContext, seed: u64, per: usize) -> Vec<Schedule> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut out = vec![];
    for sk in generate(&task.dag, &cpu_rules()) {
        for _ in 0..per {
            let (s, _) = annotate(&task.dag, &sk, ctx, &mut Decider::sample(&mut rng)).unwrap();
            out.push(s);
        }
    }
    out
}

/// Two schedules per sketch as the search draws them, and four from the random sampler.
fn drawn_and_sampled(
    task: &Task,
    ctx: &AnnotateContext,
    target: &Target,
    seed: u64,
) -> Vec<Schedule> {
    let mut schedules = drawn(task, ctx, seed, 2);
    let mut sampler = RandomSampler::new(&task.dag, target, seed);
    schedules.extend((0..4).map(|_| sampler.sample()));
    schedules
}

/// The C source of each of `schedules` of `task` on `target`.
fn c_sources(task: &Task, schedules: &[Schedule], target: &Target) -> Vec<String> {
    schedules
        .iter()
        .map(|s| {
            codegen::generate_with(&task.dag, s, target, &task.lower_options())
                .unwrap()
                .source
        })
        .collect()
}

/// Every schedule measures without error (its kernel matches the reference), or the failure
/// names the spec and the schedule.
fn all_pass(measurer: &mut Measurer, task: &Task, spec: &str, schedules: &[Schedule]) {
    for (s, r) in schedules.iter().zip(measurer.measure(task, schedules)) {
        assert_eq!(
            r.error,
            ErrorCode::NoError,
            "{spec}: {}\nschedule: {}",
            r.error_msg,
            s.to_json()
        );
    }
}

/// Specs whose sums the dot tiles take, with the extent of their vector axis (the output
/// channels): the reduction a multiple of 4 and read contiguously by the data; signed and
/// unsigned data, inlined padding, requantized outputs, and channel counts that fill only a
/// narrower vector (24, 40, 12) or none (20 on AVX-512).
const DOT_SPECS: &[(&str, i64)] = &[
    ("matmul(m=6,n=32,k=20,dtype=u8i8)", 32),
    ("matmul(m=5,n=48,k=36,dtype=i8i8)", 48),
    ("dense(m=3,n=32,k=12,dtype=i8i8)", 32),
    (
        "conv2d_nhwc(n=1,h=5,w=6,c=8,f=16,kh=3,kw=3,pad=1,dtype=u8i8)",
        16,
    ),
    (
        "conv2d_nhwc(n=1,h=5,w=5,c=12,f=32,kh=3,kw=3,stride=2,pad=1,dtype=i8i8)",
        32,
    ),
    (
        "conv2d_nhwc(n=1,h=5,w=6,c=8,f=16,kh=3,kw=3,pad=1,bias=1,relu=1,dtype=u8i8,out_dtype=u8)",
        16,
    ),
    ("matmul(m=5,n=48,k=36,dtype=i8i8,out_dtype=i8)", 48),
    (
        "conv2d_nhwc(n=1,h=5,w=6,c=12,f=24,kh=1,kw=1,bias=1,dtype=u8i8,out_dtype=u8)",
        24,
    ),
    ("dense(m=2,n=40,k=16,bias=1,dtype=i8i8)", 40),
    ("matmul(m=3,n=12,k=8,dtype=u8i8)", 12),
    ("matmul(m=3,n=20,k=8,dtype=u8i8)", 20),
];

/// The targets the dot tiles are checked on: AVX-512 VNNI and AVX-VNNI as the code generator
/// sees them, compiled for baseline x86-64 (so the portable form of the instruction runs, on
/// any x86-64 host), and the host itself where it has the instruction (the native form).
fn dot_targets(host: &Target) -> Vec<(String, Target)> {
    assert_eq!(
        host.arch, "x86_64",
        "the dot tiles are written for x86 today"
    );
    let claim = |features: &[&str]| {
        host.clone().with_overrides(&TargetOverrides {
            march: Some("x86-64".into()),
            features: Some(features.iter().map(|f| f.to_string()).collect()),
            ..Default::default()
        })
    };
    let mut out = vec![
        (
            "avx512vnni, portable".to_string(),
            claim(&[
                "sse2",
                "avx",
                "avx2",
                "fma",
                "avx512f",
                "avx512vl",
                "avx512vnni",
            ]),
        ),
        (
            "avxvnni, portable".to_string(),
            claim(&["sse2", "avx", "avx2", "fma", "avxvnni"]),
        ),
    ];
    if host.has_int8_dot() {
        out.push(("host, native".to_string(), host.clone()));
    }
    // AVX-VNNI's own encoding (256- and 128-bit `vpdpbusd` without AVX-512), natively where
    // the host runs it: compiled for Alder Lake, which has it and no AVX-512.
    if host.has_feature("avxvnni") {
        let mut t = claim(&["sse2", "avx", "avx2", "fma", "avxvnni"]);
        t.march = "alderlake".into();
        out.push(("avxvnni, native (alderlake)".to_string(), t));
    }
    out
}

/// Schedules drawn with the dot-product rule: a spec gets dot tiles at the widest of the
/// target's widths its channels fill, and none where they fill none; every kernel matches the
/// reference exactly.
#[test]
fn dot_tiles_are_exact_natively_and_portably() {
    for (what, target) in dot_targets(&Target::detect()) {
        assert!(target.has_int8_dot(), "{what}");
        let ctx = AnnotateContext::for_target(&target);
        let mut measurer = Measurer::new(&target, MeasureOptions::check_only());
        // Tiles whose band holds the whole sum start from zero in their registers.
        let mut fresh = 0;
        for (n, &(spec, channels)) in DOT_SPECS.iter().enumerate() {
            let task = OpSpec::parse(spec).unwrap().task().unwrap();
            let schedules = drawn(&task, &ctx, n as u64, 3);
            let sources = c_sources(&task, &schedules, &target);
            match target.int8_dot_lanes().iter().find(|&&w| channels % w == 0) {
                Some(w) => assert!(
                    sources.iter().any(|c| c.contains(&format!("= th_dot{w}("))),
                    "{what}: {spec}: no dot tile of {w} lanes among {} schedules",
                    schedules.len()
                ),
                None => assert!(
                    !sources.iter().any(|c| c.contains("= th_dot")),
                    "{what}: {spec}: a dot tile where no width fits {channels} channels"
                ),
            }
            fresh += sources
                .iter()
                .filter(|c| c.contains("_d0 = (th_vi"))
                .count();
            all_pass(&mut measurer, &task, &format!("{what}: {spec}"), &schedules);
        }
        assert!(fresh > 0, "{what}: no dot tile started from zero");
    }
}

/// Two schedules per sketch, as the search draws them, and four from the random sampler.
#[test]
fn integer_schedules_are_exact() {
    let target = Target::detect();
    let ctx = AnnotateContext::for_target(&target);
    let mut measurer = Measurer::new(&target, MeasureOptions::check_only());
    for (n, spec) in SPECS.iter().enumerate() {
        let task = OpSpec::parse(spec).unwrap().task().unwrap();
        let schedules = drawn_and_sampled(&task, &ctx, &target, n as u64);
        for s in &schedules {
            let k = codegen::generate_with(&task.dag, s, &target, &task.lower_options()).unwrap();
            assert!(
                k.source.contains("int32_t* restrict") && !k.source.contains("float* restrict"),
                "{spec}: an integer kernel has integer arguments only"
            );
        }
        all_pass(&mut measurer, &task, spec, &schedules);
    }
}

/// Max pools' compared forms (`dtype=u8|i8`): every stage keeps the data's 8-bit type, the
/// padding is the type's least value (a window at a border whose data are all negative keeps
/// its max, not 0), and every schedule drawn matches the reference.
#[test]
fn compared_max_pools_are_exact() {
    let target = Target::detect();
    let ctx = AnnotateContext::for_target(&target);
    let mut measurer = Measurer::new(&target, MeasureOptions::check_only());
    for (n, spec) in [
        "max_pool2d_nhwc(n=1,h=9,w=7,c=19,kh=3,kw=3,stride=2,pad=1,dtype=u8)",
        "max_pool2d_nhwc(n=2,h=8,w=5,c=5,kh=2,kw=3,stride=1,pad=1,dilation=2,dtype=i8)",
        "max_pool2d_nhwc(n=1,h=13,w=13,c=40,kh=3,kw=3,stride=2,pad=1,dtype=i8)",
        "max_pool2d(n=1,c=3,h=7,w=6,kh=3,kw=3,stride=2,pad=1,dtype=i8)",
    ]
    .into_iter()
    .enumerate()
    {
        let task = OpSpec::parse(spec).unwrap().task().unwrap();
        let schedules = drawn_and_sampled(&task, &ctx, &target, n as u64);
        for s in &schedules {
            let k = codegen::generate_with(&task.dag, s, &target, &task.lower_options()).unwrap();
            assert!(
                k.source.contains("int8_t* restrict")
                    && !k.source.contains("float* restrict")
                    && !k.source.contains("int32_t* restrict"),
                "{spec}: a compared kernel keeps its 8-bit type\n{}",
                k.source
            );
        }
        all_pass(&mut measurer, &task, spec, &schedules);
    }
}

/// Integer sums of one product per lane (a depthwise window, a sum too short for the dot
/// product) in whole vectors of the target's width, a half or a quarter of it: some schedule
/// of each writes an integer register tile (u8 by i8 products in 16 bits), and every kernel
/// matches the reference exactly (requantized ones within one unit).
#[test]
fn integer_register_tiles_are_exact() {
    const TILED: &[&str] = &[
        "depthwise_conv2d_nhwc(n=1,h=7,w=9,c=32,kh=3,kw=3,pad=1,bias=1,relu=1,dtype=u8i8)",
        "depthwise_conv2d_nhwc(n=1,h=9,w=8,c=32,kh=3,kw=3,stride=2,pad=1,dtype=i8i8)",
        "depthwise_conv2d_nhwc(n=1,h=6,w=6,c=48,kh=5,kw=5,pad=2,bias=1,dtype=u8i8,out_dtype=u8)",
        "matmul(m=4,n=32,k=7,dtype=u8i8)",
        // Channels that fill only half or a quarter of a 16-lane vector.
        "depthwise_conv2d_nhwc(n=1,h=5,w=7,c=24,kh=3,kw=3,pad=1,dtype=u8i8)",
        "depthwise_conv2d_nhwc(n=1,h=6,w=5,c=20,kh=3,kw=3,stride=2,pad=1,bias=1,dtype=i8i8,out_dtype=i8)",
    ];
    let target = Target::detect();
    let ctx = AnnotateContext::for_target(&target);
    let mut measurer = Measurer::new(&target, MeasureOptions::check_only());
    // Tiles whose band holds the whole sum start from zero in their registers.
    let mut fresh = 0;
    for (n, spec) in TILED.iter().enumerate() {
        let task = OpSpec::parse(spec).unwrap().task().unwrap();
        let mut schedules = drawn(&task, &ctx, n as u64, 3);
        let mut sampler = RandomSampler::new(&task.dag, &target, n as u64);
        schedules.extend((0..4).map(|_| sampler.sample()));
        let sources = c_sources(&task, &schedules, &target);
        let tiled = sources.iter().filter(|c| c.contains("th_vint")).count();
        fresh += sources
            .iter()
            .filter(|c| c.contains("_i0 = (th_vint"))
            .count();
        assert!(
            tiled > 0,
            "{spec}: no integer tile among {} schedules",
            schedules.len()
        );
        // u8 data by i8 weights multiply in 16 bits (`vpmaddwd`); i8 by i8 cannot: neither
        // factor is known non-negative.
        let in_16_bits = sources
            .iter()
            .filter(|c| {
                c.lines()
                    .any(|l| l.contains(" + th_vint") && l.contains("_mul16("))
            })
            .count();
        if spec.contains("dtype=u8i8") {
            assert!(in_16_bits > 0, "{spec}: no tile multiplies in 16 bits");
        } else {
            assert_eq!(in_16_bits, 0, "{spec}: i8 by i8 multiplied in 16 bits");
        }
        all_pass(&mut measurer, &task, spec, &schedules);
    }
    assert!(fresh > 0, "no integer tile started from zero");
}

/// The reference is exact and so is the check: the right kernel passes, one unit off in one
/// element fails, naming the element.
#[test]
fn one_unit_off_is_a_wrong_answer() {
    let target = Target::detect();
    let task = OpSpec::parse("matmul(m=3,n=5,k=200,dtype=u8i8,layout_free=none)")
        .unwrap()
        .task()
        .unwrap();
    let expected = reference::outputs(&task.dag);
    let sampler_schedule = RandomSampler::new(&task.dag, &target, 7).sample();
    let k = codegen::generate_with(&task.dag, &sampler_schedule, &target, &task.lower_options())
        .unwrap();
    let input = |source: String| BuildInput {
        kernel_source: source,
        args: k.args.clone(),
        threads: 1,
    };
    // The same kernel with one more in element 14 of C, after the kernel's own loops (the
    // source ends with the kernel's closing brace: no packed input).
    let name = &k.args[2].name;
    let end = k.source.rfind("}\n").unwrap();
    let off = format!("{}  {name}[14] += 1;\n}}\n", &k.source[..end]);
    let o = MeasureOptions::check_only();
    let builder = LocalBuilder::new(&target, &o);
    let mut runner = LocalRunner::new(&target, o);
    let rs = measure_batch(
        &builder,
        &mut runner,
        &[
            (input(k.source.clone()), &expected),
            (input(off), &expected),
        ],
    );
    assert_eq!(rs[0].error, ErrorCode::NoError, "{}", rs[0].error_msg);
    assert_eq!(rs[1].error, ErrorCode::WrongAnswer, "{}", rs[1].error_msg);
    assert!(
        rs[1].error_msg.contains("flat index 14") && rs[1].error_msg.contains("exactly"),
        "{}",
        rs[1].error_msg
    );
}

/// A pack of integer kernels (dot tiles and plain integer loops side by side, as one file
/// holds them) compiles with gcc and clang under -Wall -Werror with the target's flags, and its
/// header, in the argument types, from C++.
#[test]
fn integer_kernels_pack_and_link_cleanly() {
    use tunehub_engine::package::{self, Provenance};
    let target = Target::detect();
    let ctx = AnnotateContext::for_target(&target);
    let mut kernels = vec![];
    for (n, spec) in [
        "matmul(m=4,n=32,k=16,dtype=u8i8)",
        "dense(m=3,n=17,k=30,dtype=i8i8)",
        "matmul(m=4,n=32,k=16,dtype=u8i8,out_dtype=u8)",
        "dense(m=3,n=17,k=30,bias=1,relu=1,dtype=i8i8,out_dtype=i8)",
    ]
    .iter()
    .enumerate()
    {
        let task = OpSpec::parse(spec).unwrap().task().unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(n as u64);
        for (i, sk) in generate(&task.dag, &cpu_rules()).iter().enumerate() {
            let (s, _) = annotate(&task.dag, sk, &ctx, &mut Decider::sample(&mut rng)).unwrap();
            let provenance = Provenance {
                record_id: format!("r{n}{i}"),
                workload_key: task.key.clone(),
                target_key: target.key(),
                description: format!("{spec} sketch {i}"),
                gflops: 1.0,
            };
            kernels.push(package::kernel(&task, &s, &target, provenance, "q_").unwrap());
        }
    }
    let pack = package::pack("ints", &kernels).unwrap();
    assert!(pack.header.contains("const uint8_t* ") && pack.header.contains("int32_t* "));
    assert!(pack.header.contains("const float* ") && pack.header.contains(" int8_t* "));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ints.c"), &pack.source).unwrap();
    std::fs::write(dir.path().join("ints.h"), &pack.header).unwrap();
    std::fs::write(
        dir.path().join("use.cc"),
        "#include \"ints.h\"\nint main() { return 0; }\n",
    )
    .unwrap();
    let flags = target.compile_flags();
    for (cc, file) in [("gcc", "ints.c"), ("clang", "ints.c"), ("g++", "use.cc")] {
        let mut cmd = std::process::Command::new(cc);
        if file.ends_with(".c") {
            cmd.args(&flags);
        }
        let out = cmd
            .args(["-Wall", "-Werror", "-c", file, "-o", "/dev/null"])
            .current_dir(dir.path())
            .output()
            .unwrap_or_else(|e| panic!("{cc}: {e}"));
        assert!(
            out.status.success(),
            "{cc} {file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Requantized forms (`out_dtype=`) on odd shapes: signed and unsigned outputs, with and
/// without bias and relu, each channel its own multiplier.
const REQUANT_SPECS: &[&str] = &[
    "matmul(m=5,n=19,k=37,dtype=u8i8,out_dtype=u8)",
    "dense(m=3,n=32,k=12,bias=1,relu=1,dtype=i8i8,out_dtype=i8)",
    "conv2d_nhwc(n=1,h=5,w=6,c=8,f=16,kh=3,kw=3,pad=1,bias=1,relu=1,dtype=u8i8,out_dtype=u8)",
    "conv2d_nchw(n=1,c=3,h=7,w=9,f=5,kh=3,kw=3,pad=1,dtype=i8i8,out_dtype=i8)",
    "depthwise_conv2d_nchw(n=1,c=5,h=7,w=7,kh=3,kw=3,stride=2,pad=1,dtype=u8i8,out_dtype=u8)",
    "depthwise_conv2d_nhwc(n=1,h=5,w=5,c=33,kh=5,kw=5,pad=2,bias=1,dtype=u8i8,out_dtype=u8)",
    "batch_matmul(b=2,m=3,n=5,k=7,dtype=u8i8,out_dtype=i8)",
];

/// The check data of a requantized form reach both saturated ends and the values between
/// (so that a wrong multiplier, zero point or rounding shows), and every schedule the search
/// draws, dot tiles among them where the host has the instruction, matches the reference
/// within the one unit a tie rounded the other way may take.
#[test]
fn requantized_schedules_match_within_one_unit() {
    let target = Target::detect();
    let ctx = AnnotateContext::for_target(&target);
    let mut measurer = Measurer::new(&target, MeasureOptions::check_only());
    let mut ends = (0, 0);
    for (n, spec) in REQUANT_SPECS.iter().enumerate() {
        let task = OpSpec::parse(spec).unwrap().task().unwrap();
        let out = &reference::outputs(&task.dag)[0];
        let (lo, hi) = task.dag.stages[task.dag.outputs()[0]]
            .dtype
            .int_range()
            .unwrap();
        let at = |v: i64| out.iter().filter(|&&x| x == v as f64).count();
        let inside = out.len() - at(lo) - at(hi);
        assert!(
            2 * inside > out.len(),
            "{spec}: {inside} of {} inside",
            out.len()
        );
        ends.0 += at(lo);
        ends.1 += at(hi);
        let schedules = drawn_and_sampled(&task, &ctx, &target, n as u64);
        all_pass(&mut measurer, &task, spec, &schedules);
    }
    assert!(ends.0 > 0 && ends.1 > 0, "saturated at the ends: {ends:?}");
}

/// Quantizing stores of vectorized loops (`codegen::quantize`, a QDQ model's quantized add):
/// rows longer than the split's chunk (2500 elements: two whole chunks and a part), to u8 and
/// to i8, saturating at both ends. The schedules the search draws and one that vectorizes the
/// whole row (the chunked form) write the split loops, and every one matches the reference
/// within one unit.
#[test]
fn quantizing_stores_are_split_and_match() {
    use tunehub_engine::schedule::{Annotation, Step};
    let target = Target::detect();
    let ctx = AnnotateContext::for_target(&target);
    let mut measurer = Measurer::new(&target, MeasureOptions::check_only());
    for (n, (t, zero)) in [("u8", "+ 4"), ("i8", "- 100")].into_iter().enumerate() {
        let src = format!(
            "input u8 A[2, 2500]\ninput i8 B[2, 2500]\n\
             {t} Y[i,j] = round(((A[i,j] - 3) * 0.05 + (B[i,j] + 7) * 0.02) / 0.05) {zero} \
             where i<2, j<2500"
        );
        let task = Task::new(tunehub_engine::text::parse(&src).unwrap(), "quantized add");
        let out = &reference::outputs(&task.dag)[0];
        let y = task.dag.outputs()[0];
        let (lo, hi) = task.dag.stages[y].dtype.int_range().unwrap();
        assert!(
            out.contains(&(lo as f64)) && out.contains(&(hi as f64)),
            "{t}: the check data saturate at both ends"
        );
        let mut schedules = drawn_and_sampled(&task, &ctx, &target, n as u64);
        let whole_row = Schedule::new(vec![Step::Annotate {
            stage: y,
            iter: 1,
            ann: Annotation::Vectorize,
        }]);
        schedules.push(whole_row);
        let sources = c_sources(&task, &schedules, &target);
        let split = |c: &String| c.contains(&format!("= th_c{t}("));
        let drawn = sources.iter().rev().skip(1).filter(|c| split(c)).count();
        let last = sources.last().unwrap();
        assert!(drawn > 0, "{t}: no drawn schedule splits its store");
        assert!(
            split(last) && last.contains("+= 1024)"),
            "{t}: the whole row is not chunked\n{last}"
        );
        all_pass(&mut measurer, &task, &src, &schedules);
    }
}
