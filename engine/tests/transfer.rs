//! Schedules carried to other shapes (`transfer::adapt`): for random pairs of shapes of each
//! library operator, a schedule drawn for the first, adapted to the second, compiles with the
//! real C compiler, runs, and matches the second's reference.

use proptest::prelude::*;
use tunehub_engine::ir::ComputeDag;
use tunehub_engine::measure::{ErrorCode, MeasureOptions, Measurer};
use tunehub_engine::ops::{self, Window};
use tunehub_engine::sample::RandomSampler;
use tunehub_engine::schedule::{Schedule, Step, hand};
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;
use tunehub_engine::transfer::{AdaptError, adapt};

/// `n` schedules drawn for `from`, adapted to `to`, measured on `to`: every one correct.
fn check_adapted(from: ComputeDag, to: ComputeDag, seed: u64, n: usize) {
    let target = Target::detect();
    let mut sampler = RandomSampler::new(&from, &target, seed);
    let mut adapted = vec![];
    for _ in 0..n {
        let s = sampler.sample();
        let a = adapt(&s, &from, &to).unwrap_or_else(|e| panic!("{e}\nschedule: {}", s.to_json()));
        adapted.push(a.schedule);
    }
    let task = Task::new(to, "adapted");
    let results = Measurer::new(&target, MeasureOptions::check_only()).measure(&task, &adapted);
    for (s, r) in adapted.iter().zip(&results) {
        assert_eq!(
            r.error,
            ErrorCode::NoError,
            "{}\nschedule: {}",
            r.error_msg,
            s.to_json()
        );
    }
}

fn win(stride: i64, pad: i64) -> Window {
    Window::square(3, stride, pad)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3, failure_persistence: None, max_shrink_iters: 8, ..ProptestConfig::default() })]

    #[test]
    fn adapted_schedules_replay_and_match_the_reference(
        (m1, n1, k1) in (1..40i64, 1..40i64, 1..40i64),
        (m2, n2, k2) in (1..40i64, 1..40i64, 1..40i64),
        (c1, h1, f1) in (1..6i64, 3..10i64, 1..6i64),
        (c2, h2, f2) in (1..6i64, 3..10i64, 1..6i64),
        stride in 1..=2i64,
        seed: u64,
    ) {
        check_adapted(ops::matmul(m1, n1, k1).unwrap(), ops::matmul(m2, n2, k2).unwrap(), seed, 4);
        check_adapted(
            ops::dense(m1, n1, k1, true, true).unwrap(),
            ops::dense(m2, n2, k2, true, true).unwrap(),
            seed,
            4,
        );
        check_adapted(
            ops::conv2d_nchw(1, c1, h1, h1 + 1, f1, win(stride, 1), true, true).unwrap(),
            ops::conv2d_nchw(1, c2, h2, h2 + 1, f2, win(stride, 1), true, true).unwrap(),
            seed,
            4,
        );
        check_adapted(
            ops::depthwise_conv2d_nchw(1, c1, h1, h1, win(stride, 1), false, false).unwrap(),
            ops::depthwise_conv2d_nchw(1, c2, h2, h2, win(stride, 1), false, false).unwrap(),
            seed,
            4,
        );
        check_adapted(ops::softmax(m1, n1).unwrap(), ops::softmax(m2, n2).unwrap(), seed, 4);
    }
}

/// A tuned-looking schedule (hand-written matmul tiles) keeps its shape where the new extents
/// allow: the same number of steps, factors that divide the new loops.
#[test]
fn a_tiled_matmul_keeps_its_tiles_on_a_compatible_shape() {
    let target = Target::detect();
    let from = ops::matmul(256, 256, 256).unwrap();
    let to = ops::matmul(128, 768, 64).unwrap();
    let tiled = [
        hand::matmul_register_tiled(256, 8, 64),
        hand::matmul_register_tiled(256, 4, 32),
    ];
    for s in &tiled {
        let a = adapt(s, &from, &to).unwrap();
        assert_eq!(a.schedule.steps.len() + a.dropped.len(), s.steps.len());
        // Tiles of 8 or 4 rows and 64 or 32 columns divide 128 and 768: kept as they were.
        let lengths = |s: &Schedule| -> Vec<Vec<i64>> {
            s.steps
                .iter()
                .filter_map(|st| match st {
                    Step::Split { lengths, .. } => Some(lengths.clone()),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(lengths(&a.schedule), lengths(s));
        let task = Task::new(to.clone(), "adapted");
        let r = &Measurer::new(&target, MeasureOptions::check_only())
            .measure(&task, std::slice::from_ref(&a.schedule))[0];
        assert_eq!(r.error, ErrorCode::NoError, "{}", r.error_msg);
    }
    let other = ops::batch_matmul(2, 256, 256, 256).unwrap();
    assert_eq!(
        adapt(&tiled[0], &from, &other),
        Err(AdaptError::OtherStructure)
    );
}
