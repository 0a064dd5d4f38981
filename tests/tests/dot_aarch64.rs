//! The integer kernels' dot tiles on aarch64 (issue 62): an edge board with the dot-product
//! extension, as a fleet's cross-compiling worker sees it (aarch64-linux-gnu-gcc, qemu-user).
//! Schedules drawn with the dot-product rule write `sdot` (`vdotq_s32`), signed data as it
//! is and unsigned data flipped and compensated, and match the reference exactly.

use rand::SeedableRng;
use tunehub_engine::codegen;
use tunehub_engine::measure::{ErrorCode, MeasureOptions, Measurer};
use tunehub_engine::ops::OpSpec;
use tunehub_engine::search::annotate::{AnnotateContext, Decider, annotate};
use tunehub_engine::search::sketch::{cpu_rules, generate};
use tunehub_engine::target::{Target, TargetOverrides};
use tunehub_tests::tools;

#[test]
fn aarch64_dot_tiles_are_exact_under_qemu() {
    let test = "aarch64_dot_tiles_are_exact_under_qemu";
    if !tools::require(test, &["aarch64-linux-gnu-gcc", "qemu-aarch64"]) {
        return;
    }
    let target = Target::detect().with_overrides(&TargetOverrides {
        arch: Some("aarch64".into()),
        compiler: Some("aarch64-linux-gnu-gcc".into()),
        run_prefix: Some(vec![
            "qemu-aarch64".into(),
            "-L".into(),
            "/usr/aarch64-linux-gnu".into(),
        ]),
        features: Some(vec!["neon".into(), "dotprod".into()]),
        ..Default::default()
    });
    assert!(target.has_int8_dot());
    assert!(
        target
            .compile_flags()
            .iter()
            .any(|f| f.contains("+dotprod")),
        "{:?}",
        target.compile_flags()
    );
    let ctx = AnnotateContext::for_target(&target);
    // Timed after a flush: the harness's aarch64 eviction (`dc civac`) runs too.
    let options = MeasureOptions {
        flush_cache: true,
        ..MeasureOptions::check_only()
    };
    let mut measurer = Measurer::new(&target, options);
    for (n, spec) in [
        "matmul(m=5,n=12,k=20,dtype=i8i8)",
        "matmul(m=3,n=8,k=36,dtype=u8i8)",
        "conv2d_nhwc(n=1,h=5,w=4,c=8,f=8,kh=3,kw=3,pad=1,dtype=u8i8)",
    ]
    .iter()
    .enumerate()
    {
        let task = OpSpec::parse(spec).unwrap().task().unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(n as u64);
        let mut schedules = vec![];
        for sk in generate(&task.dag, &cpu_rules()) {
            for _ in 0..2 {
                let (s, _) =
                    annotate(&task.dag, &sk, &ctx, &mut Decider::sample(&mut rng)).unwrap();
                schedules.push(s);
            }
        }
        let sources: Vec<String> = schedules
            .iter()
            .map(|s| {
                codegen::generate_with(&task.dag, s, &target, &task.lower_options())
                    .unwrap()
                    .source
            })
            .collect();
        assert!(
            sources
                .iter()
                .any(|c| c.contains("vdotq_s32") && c.contains("= th_dot")),
            "{spec}: no dot tile among {} schedules",
            schedules.len()
        );
        for (s, r) in schedules.iter().zip(measurer.measure(&task, &schedules)) {
            assert_eq!(
                r.error,
                ErrorCode::NoError,
                "{spec}: {}\nschedule: {}",
                r.error_msg,
                s.to_json()
            );
        }
    }
}
