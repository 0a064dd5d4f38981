//! Schedules replay deterministically, and invalid step lists are errors, never panics.

use proptest::prelude::*;
use serde_json::json;
use tunehub_engine::codegen::kernel_source;
use tunehub_engine::lower::lower;
use tunehub_engine::ops::{self, Window};
use tunehub_engine::sample::RandomSampler;
use tunehub_engine::schedule::{Schedule, ScheduleError};
use tunehub_engine::target::Target;

fn conv() -> tunehub_engine::ir::ComputeDag {
    ops::conv2d_nchw(1, 8, 14, 14, 16, Window::square(3, 1, 1), true, true).unwrap()
}

#[test]
fn json_steps_state_c_is_deterministic() {
    let target = Target::detect();
    for dag in [
        ops::matmul(64, 48, 32).unwrap(),
        conv(),
        ops::softmax(8, 40).unwrap(),
    ] {
        let mut sampler = RandomSampler::new(&dag, &target, 11);
        for _ in 0..20 {
            let sched = sampler.sample();
            let text = sched.to_json();
            let back = Schedule::from_json(&text).unwrap();
            assert_eq!(back, sched, "JSON round trip changes the steps");
            assert_eq!(back.to_json(), text, "the JSON form is not canonical");
            let c1 = kernel_source(&dag, &sched, &target).unwrap();
            let c2 = kernel_source(&dag, &back, &target).unwrap();
            assert_eq!(c1, c2, "replaying the same steps gave different code");
            assert_eq!(back.replay(&dag).unwrap(), sched.replay(&dag).unwrap());
        }
    }
}

fn replay_err(dag: &tunehub_engine::ir::ComputeDag, steps: serde_json::Value) -> String {
    let sched = Schedule::from_json_value(&steps).expect("well-formed JSON");
    match sched.replay(dag).and_then(|st| lower(&st).map(|_| ())) {
        Ok(()) => panic!("{steps} was accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn invalid_step_lists_are_errors_with_reasons() {
    let mm = ops::matmul(64, 64, 64).unwrap(); // stages: A=0, B=1, C=2
    let cases = [
        (json!([["SP", 7, 0, null, [4], 1]]), "no stage 7"),
        (json!([["CI", 7]]), "no stage 7"),
        (json!([["SP", 0, 0, null, [4], 1]]), "is an input"),
        (json!([["SP", 2, 5, null, [4], 1]]), "no loop 5"),
        (json!([["SP", 2, 0, null, [0], 1]]), "positive"),
        (json!([["RE", 2, [0, 0, 1]]]), "permutation"),
        (json!([["FU", 2, [0, 2]]]), "consecutive"),
        (json!([["FU", 2, [1, 2]]]), "space and reduction"),
        (json!([["AN", 2, 2, 3]]), "only space loops"),
        (json!([["AN", 2, 0, 2]]), "innermost"),
        (json!([["CI", 2]]), "reduction cannot be inlined"),
        (json!([["CA", 2, 2, 0]]), "itself"),
        (
            json!([["SP", 2, 0, null, [4], 1], ["CHW", 2, "local"]]),
            "before any other step",
        ),
        (
            json!([["AN", 2, 0, 3], ["AN", 2, 1, 3]]),
            "nested inside another parallel",
        ),
        (
            json!([["PR", 2, 0, "auto_unroll_max_step$99999"]]),
            "0..=4096",
        ),
    ];
    for (steps, want) in cases {
        let e = replay_err(&mm, steps.clone());
        assert!(
            e.contains(want),
            "{steps}: error '{e}' does not say '{want}'"
        );
    }
    // rfactor: only a reduction axis, a dividing factor, before the stage's other steps.
    for (steps, want) in [
        (json!([["RF", 2, 0, 4]]), "not a reduction axis"),
        (json!([["RF", 2, 2, 3]]), "divides 64"),
        (json!([["RF", 2, 2, 1]]), "at least 2"),
        (
            json!([["SP", 2, 0, null, [4], 1], ["RF", 2, 2, 4]]),
            "before any other step",
        ),
        (json!([["RF", 0, 0, 4]]), "is an input"),
    ] {
        let e = replay_err(&mm, steps.clone());
        assert!(
            e.contains(want),
            "{steps}: error '{e}' does not say '{want}'"
        );
    }
    // compute_at on a stage that does not read the producer.
    let c = conv(); // data=0 kernel=1 pad=2 conv=3 bias=4 bias_relu=5
    let e = replay_err(&c, json!([["CA", 2, 5, 0]]));
    assert!(e.contains("does not read"), "{e}");
    // An output stays at root.
    let e = replay_err(&c, json!([["CA", 5, 3, 0]]));
    assert!(e.contains("output"), "{e}");
    // A loop with a stage attached cannot be split any more.
    let e = replay_err(&c, json!([["CA", 2, 3, 1], ["SP", 3, 1, null, [2], 1]]));
    assert!(e.contains("split before compute_at"), "{e}");
}

#[test]
fn malformed_json_is_an_error() {
    for bad in [
        "",
        "{}",
        "[1]",
        "[[\"XX\", 1]]",
        "[[\"SP\", 1]]",
        "[[\"AN\", 0, 0, 9]]",
        "[[\"SP\", -1, 0, null, [2], 1]]",
        "[[\"CHW\", 1, \"shared\"]]",
        "[[\"RF\", 1, 0]]",
        "[[\"RF\", 1, 0, \"4\"]]",
    ] {
        match Schedule::from_json(bad) {
            Err(ScheduleError::Json(msg)) => assert!(!msg.is_empty()),
            other => panic!("{bad:?} gave {other:?}"),
        }
    }
}

fn arb_step() -> impl Strategy<Value = serde_json::Value> {
    let n = 0..6usize;
    prop_oneof![
        (
            n.clone(),
            n.clone(),
            prop::collection::vec(0..70i64, 0..4),
            any::<bool>()
        )
            .prop_map(|(s, i, l, o)| json!(["SP", s, i, null, l, i64::from(o)])),
        (n.clone(), prop::collection::vec(0..8usize, 0..8)).prop_map(|(s, o)| json!(["RE", s, o])),
        (n.clone(), prop::collection::vec(0..8usize, 0..4)).prop_map(|(s, o)| json!(["FU", s, o])),
        (n.clone(), n.clone(), 0..4i64).prop_map(|(s, i, a)| json!(["AN", s, i, a])),
        (n.clone(), n.clone(), n.clone()).prop_map(|(s, t, i)| json!(["CA", s, t, i])),
        n.clone().prop_map(|s| json!(["CI", s])),
        n.clone().prop_map(|s| json!(["CR", s])),
        n.clone().prop_map(|s| json!(["CHW", s, "local"])),
        (n.clone(), n.clone(), 0..9i64).prop_map(|(s, a, f)| json!(["RF", s, a, f])),
        (n.clone(), n, 0..600i64).prop_map(|(s, i, m)| json!([
            "PR",
            s,
            i,
            format!("auto_unroll_max_step${m}")
        ])),
    ]
}

proptest! {
    /// Arbitrary step lists either replay, lower and generate, or fail with an error.
    #[test]
    fn arbitrary_step_lists_never_panic(steps in prop::collection::vec(arb_step(), 0..12)) {
        let dag = conv();
        let target = Target::detect();
        if let Ok(s) = Schedule::from_json_value(&serde_json::Value::Array(steps)) {
            let _ = kernel_source(&dag, &s, &target);
        }
    }
}

/// Auto-unroll counts a vectorized loop per 16 lanes and stops at 64 steps: a 4-row tile of a
/// 64-lane vector loop with the reduction split by 4 unrolls its row and inner reduction loops
/// (4 x 4 x 4 = 64 steps) but not the outer reduction loop (8 x 64 = 512 steps), even at max
/// step 512.
#[test]
fn auto_unroll_counts_vectors_and_stops_at_64_steps() {
    let dag = ops::matmul(64, 64, 32).unwrap();
    let steps = json!([
        ["CHW", 2, "local"],
        ["SP", 3, 0, 64, [4], 1],
        ["SP", 3, 2, 64, [64], 1],
        ["RE", 3, [2, 0, 1, 3]],
        ["FU", 3, [0, 1]],
        ["AN", 3, 0, 3],
        ["AN", 3, 2, 2],
        ["CA", 2, 3, 0],
        ["SP", 2, 2, 32, [4], 1],
        ["RE", 2, [2, 3, 0, 1]],
        ["AN", 2, 3, 2],
        ["PR", 2, 0, "auto_unroll_max_step$512"]
    ]);
    let sched = Schedule::from_json_value(&steps).expect("parses");
    let src = kernel_source(&dag, &sched, &Target::detect()).expect("lowers");
    // The update nest: k.0 (8) rolled; k.1 (4) and the rows (4) unrolled.
    let lines: Vec<&str> = src.lines().map(str::trim).collect();
    let pragma_before = |loop_var: &str| {
        let at = lines
            .iter()
            .position(|l| l.starts_with(&format!("for (int {loop_var} ")))
            .unwrap_or_else(|| panic!("no {loop_var} loop in\n{src}"));
        lines[at - 1]
    };
    assert_eq!(
        pragma_before("C_local_k_1"),
        "#pragma GCC unroll 4",
        "{src}"
    );
    assert!(!pragma_before("C_local_k_0").contains("unroll"), "{src}");
}
