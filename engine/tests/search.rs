//! The search's guarantees, with real kernels: every candidate it proposes (sampled or
//! mutated) is correct on small shapes, and it is deterministic for a seed whatever the thread
//! count. The tiny end-to-end tuning run has its own file (`tune_e2e.rs`), so that no other
//! test of this binary measures while it times kernels.

use std::sync::Arc;
use tunehub_engine::ir::ComputeDag;
use tunehub_engine::lower::lower_with;
use tunehub_engine::measure::{ErrorCode, MeasureOptions, Measurer};
use tunehub_engine::ops::{self, PoolKind, Window};
use tunehub_engine::schedule::Schedule;
use tunehub_engine::search::evolve::program_hash;
use tunehub_engine::search::{RandomModel, SearchParams, TaskSearch};
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;

fn small_params(threads: usize) -> SearchParams {
    SearchParams {
        population: 64,
        generations: 2,
        threads,
        ..SearchParams::default()
    }
}

fn workloads() -> Vec<(ComputeDag, &'static str)> {
    vec![
        (ops::matmul(24, 40, 16).unwrap(), "matmul"),
        (ops::batch_matmul(2, 8, 12, 6).unwrap(), "batch_matmul"),
        (
            ops::dense(4, 24, 20, true, true).unwrap(),
            "dense+bias+relu",
        ),
        (
            ops::conv2d_nchw(1, 4, 9, 9, 8, Window::square(3, 1, 1), true, true).unwrap(),
            "conv2d_nchw+bias+relu",
        ),
        (
            ops::conv2d_nchw(1, 3, 8, 8, 4, Window::square(3, 2, 1), false, false).unwrap(),
            "conv2d_nchw",
        ),
        (
            ops::conv2d_nhwc(1, 7, 7, 4, 8, Window::square(3, 1, 1), false, true).unwrap(),
            "conv2d_nhwc+relu",
        ),
        (
            ops::depthwise_conv2d_nchw(1, 4, 10, 10, Window::square(3, 1, 1), true, false).unwrap(),
            "depthwise",
        ),
        (
            ops::pool2d(PoolKind::Max, 1, 3, 8, 8, Window::square(2, 2, 0)).unwrap(),
            "max_pool",
        ),
        // Rows of 32: long enough for rfactor sketches.
        (ops::softmax(4, 32).unwrap(), "softmax"),
        (ops::elementwise(6, 20).unwrap(), "elementwise"),
    ]
}

/// Softmax's row max and row sum each get a sketch with rfactor: annotated, their partials are
/// a vectorized stage of their own, and the kernels compute the reference.
#[test]
fn rfactor_sketches_vectorize_partials_and_are_correct() {
    use rand::SeedableRng;
    use tunehub_engine::search::annotate::{AnnotateContext, Decider, annotate};
    use tunehub_engine::search::sketch::{StagePlan, cpu_rules, generate};
    let target = Target::detect();
    let dag = ops::softmax(3, 48).unwrap();
    let sketches = generate(&dag, &cpu_rules());
    let n_rf = |k: &tunehub_engine::search::sketch::Sketch| {
        k.plans.iter().filter(|p| **p == StagePlan::Rfactor).count()
    };
    let mut counts: Vec<usize> = sketches.iter().map(n_rf).collect();
    counts.sort_unstable();
    // Row max and row sum with or without rfactor, exp inlined or not.
    assert_eq!(counts, vec![0, 0, 1, 1, 1, 1, 2, 2], "{sketches:?}");
    let ctx = AnnotateContext {
        cores: 2,
        vector_lanes: 8,
        dot_lanes: &[],
    };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    let mut scheds = vec![];
    for k in sketches.iter().filter(|k| n_rf(k) > 0) {
        for _ in 0..6 {
            let (s, state) = annotate(&dag, k, &ctx, &mut Decider::sample(&mut rng)).unwrap();
            if !s.to_json().contains("\"RF\"") {
                continue; // a factor of 1 leaves the reduction as it is
            }
            // Each partial stage is named for its reduction and vectorizes its last loop.
            let rf: Vec<_> = (0..state.dag.stages.len())
                .filter(|&t| state.dag.stages[t].name.ends_with(".rf"))
                .collect();
            assert!(!rf.is_empty(), "{}", s.to_json());
            for t in rf {
                let st = &state.stages[t];
                let last = &st.nodes[*st.leaves.last().unwrap()];
                assert_eq!(
                    last.ann,
                    tunehub_engine::schedule::Annotation::Vectorize,
                    "{}: {}",
                    state.dag.stages[t].name,
                    s.to_json()
                );
            }
            scheds.push(s);
        }
    }
    assert!(
        scheds.len() >= 6,
        "only {} rfactored schedules",
        scheds.len()
    );
    let task = Task::new(dag, "softmax(3,48)");
    let mut measurer = Measurer::new(&target, MeasureOptions::check_only());
    for (s, r) in scheds.iter().zip(measurer.measure(&task, &scheds)) {
        assert_eq!(
            r.error,
            ErrorCode::NoError,
            "{}: {}",
            s.to_json(),
            r.error_msg
        );
    }
}

/// Two rounds per workload: the second breeds from measured elites, so proposals include
/// mutated candidates; every one must build, run and match the reference.
#[test]
fn proposed_candidates_match_the_reference() {
    let target = Target::detect();
    let mut measurer = Measurer::new(&target, MeasureOptions::check_only());
    for (dag, name) in workloads() {
        let task = Arc::new(Task::new(dag, name));
        let mut search = TaskSearch::new(task.clone(), &target, small_params(0), 11);
        let mut model = RandomModel::new(5);
        let mut total = 0;
        for _ in 0..2 {
            let batch = search.next_batch(&mut model, 8).unwrap();
            let results = measurer.measure(&task, &batch);
            for (s, r) in batch.iter().zip(&results) {
                assert_eq!(
                    r.error,
                    ErrorCode::NoError,
                    "{name}: {}\nschedule: {}",
                    r.error_msg,
                    s.to_json()
                );
            }
            search.record(&mut model, &batch, &results).unwrap();
            total += batch.len();
        }
        assert!(total > 0, "{name}: nothing proposed");
        assert_eq!(
            search.stats.rejected, 0,
            "{name}: {:?}",
            search.stats.last_rejection
        );
        assert!(search.best().is_some(), "{name}");
    }
}

/// A correct, quiet measurement of `cost` seconds (the tests stand in for the runner).
fn timed(cost: f64) -> tunehub_engine::measure::MeasureResult {
    tunehub_engine::measure::MeasureResult {
        costs: vec![cost],
        error: ErrorCode::NoError,
        error_msg: String::new(),
        build_s: 0.0,
        run_s: 0.0,
        noisy: false,
    }
}

fn batches(threads: usize, seed: u64) -> Vec<Vec<Schedule>> {
    let target = Target::detect();
    let task = Arc::new(Task::new(ops::matmul(32, 48, 64).unwrap(), "matmul"));
    let mut search = TaskSearch::new(task, &target, small_params(threads), seed);
    let mut model = RandomModel::new(seed);
    (0..3)
        .map(|_| {
            let b = search.next_batch(&mut model, 16).unwrap();
            // Pretend costs that depend on the schedule only, so the run is reproducible.
            let results: Vec<_> = b
                .iter()
                .map(|s| timed(1e-3 + (s.to_json().len() % 97) as f64 * 1e-6))
                .collect();
            search.record(&mut model, &b, &results).unwrap();
            b
        })
        .collect()
}

#[test]
fn search_is_deterministic_for_a_seed_whatever_the_threads() {
    let a = batches(1, 42);
    assert_eq!(a, batches(2, 42));
    assert_eq!(a, batches(3, 42));
    assert_ne!(a, batches(1, 43));
    // Never the same schedule twice.
    let all: Vec<&Schedule> = a.iter().flatten().collect();
    let distinct: std::collections::HashSet<&Schedule> = all.iter().copied().collect();
    assert_eq!(all.len(), distinct.len());
}

/// Distinct step lists can lower to one kernel (an auto-unroll step that unrolls nothing more,
/// a split whose parts are fused back); the search proposes each kernel once. Small dense and
/// softmax spaces hold many such twins (a tenth of the schedules of the benchmark's dense and
/// softmax runs generated C already measured).
#[test]
fn no_two_proposals_generate_the_same_kernel() {
    let target = Target::detect();
    for (dag, name) in [
        (ops::dense(1, 64, 96, true, true).unwrap(), "dense"),
        (ops::softmax(8, 64).unwrap(), "softmax"),
    ] {
        let task = Arc::new(Task::new(dag, name));
        let mut search = TaskSearch::new(task.clone(), &target, small_params(0), 3);
        let mut model = RandomModel::new(3);
        let mut kernels = std::collections::HashMap::new();
        let mut proposed = 0;
        for _ in 0..6 {
            let batch = search.next_batch(&mut model, 16).unwrap();
            let results: Vec<_> = batch.iter().map(|_| timed(1e-3)).collect();
            for s in &batch {
                let c = tunehub_engine::codegen::generate_with(
                    &task.dag,
                    s,
                    &target,
                    &task.lower_options(),
                )
                .unwrap()
                .source;
                if let Some(first) = kernels.insert(c, s.to_json()) {
                    panic!(
                        "{name}: two schedules generate one kernel:\n{first}\n{}",
                        s.to_json()
                    );
                }
            }
            proposed += batch.len();
            search.record(&mut model, &batch, &results).unwrap();
        }
        assert!(proposed >= 48, "{name}: only {proposed} proposals");
    }
}

/// Random scores that it remembers by kernel, so that a test can tell which proposals the
/// ranking chose (scored near the top) and which came from the random share (scored anywhere).
struct RememberingRandomModel {
    inner: RandomModel,
    target: Target,
    scores: std::collections::HashMap<u64, f32>,
}

impl tunehub_engine::search::CostModel for RememberingRandomModel {
    fn predict(
        &mut self,
        task: &Task,
        programs: &[&tunehub_engine::lower::LoweredFunc],
    ) -> Result<Vec<f32>, tunehub_engine::search::CostModelError> {
        let s = self.inner.predict(task, programs)?;
        for (p, &v) in programs.iter().zip(&s) {
            self.scores.insert(program_hash(p, &self.target), v);
        }
        Ok(s)
    }
    fn update(
        &mut self,
        _: &Task,
        _: &[&tunehub_engine::lower::LoweredFunc],
        _: &[tunehub_engine::measure::MeasureResult],
    ) -> Result<(), tunehub_engine::search::CostModelError> {
        Ok(())
    }
    fn name(&self) -> &str {
        "remembering-random"
    }
}

/// A task's first batch, before any record of it, takes `first_batch_random` of its candidates
/// at random; later batches only `eps_greedy`.
#[test]
fn the_first_batch_is_half_random_the_later_ones_ranked() {
    let target = Target::detect();
    let task = Arc::new(Task::new(ops::matmul(64, 64, 64).unwrap(), "matmul"));
    let params = SearchParams {
        population: 512,
        ..small_params(0)
    };
    assert_eq!((params.first_batch_random, params.eps_greedy), (0.5, 0.05));
    let mut search = TaskSearch::new(Arc::clone(&task), &target, params, 7);
    let mut model = RememberingRandomModel {
        inner: RandomModel::new(7),
        target: target.clone(),
        scores: Default::default(),
    };
    let n = 64;
    let mut high = vec![];
    for _ in 0..2 {
        let b = search.next_batch(&mut model, n).unwrap();
        assert_eq!(b.len(), n);
        // The ranked picks are the best scored of more than a thousand uniform scores (all
        // above 0.9); of the random share about a tenth is.
        high.push(
            b.iter()
                .filter(|s| {
                    let f = lower_with(&s.replay(&task.dag).unwrap(), &task.lower_options());
                    model.scores[&program_hash(&f.unwrap(), &target)] > 0.9
                })
                .count(),
        );
        let results: Vec<_> = b.iter().map(|_| timed(1e-3)).collect();
        search.record(&mut model, &b, &results).unwrap();
    }
    assert!((32..=42).contains(&high[0]), "first batch: {high:?}");
    assert!(high[1] >= 58, "second batch: {high:?}");
}

/// `n` schedules a search of `from` proposes (seeded with `seed`), adapted to `to`: what a
/// warm start from a tuned neighbour seeds a search of `to` with.
fn adapted_from(from: &ComputeDag, to: &ComputeDag, n: usize, seed: u64) -> Vec<Schedule> {
    let mut donor = TaskSearch::new(
        Arc::new(Task::new(from.clone(), "donor")),
        &Target::detect(),
        small_params(0),
        seed,
    );
    donor
        .next_batch(&mut RandomModel::new(seed), n)
        .unwrap()
        .iter()
        .map(|s| {
            tunehub_engine::transfer::adapt(s, from, to)
                .unwrap()
                .schedule
        })
        .collect()
}

/// A warm start: seeds (the adapted best of other shapes) come first, in order, once each; a
/// seed already proposed, or one that does not fit the DAG, is passed over; the search fills
/// the rest of the batch.
#[test]
fn seeds_are_proposed_first_and_once() {
    let target = Target::detect();
    let from = ops::matmul(64, 64, 64).unwrap();
    let dag = ops::matmul(32, 48, 64).unwrap();
    let task = Arc::new(Task::new(dag.clone(), "matmul"));
    let mut model = RandomModel::new(5);
    let seeds = adapted_from(&from, &dag, 3, 5);
    // Not a schedule of this DAG: its stage numbers do not exist.
    let foreign = Schedule::new(vec![tunehub_engine::schedule::Step::ComputeInline {
        stage: 9,
    }]);

    let mut search = TaskSearch::new(task, &target, small_params(0), 5);
    search.seed([
        seeds[0].clone(),
        foreign,
        seeds[1].clone(),
        seeds[0].clone(),
    ]);
    let first = search.next_batch(&mut model, 2).unwrap();
    assert_eq!(first, seeds[..2]);
    search.seed([seeds[2].clone(), seeds[1].clone()]);
    let second = search.next_batch(&mut model, 4).unwrap();
    assert_eq!(second.len(), 4);
    assert_eq!(second[0], seeds[2]);
    assert!(!second[1..].contains(&seeds[1]), "a seed proposed twice");
}

/// Measured schedules the search did not make, a warm start's seeds and a resumed job's
/// records, seed later populations as its own do: their decisions are recovered at the next
/// round. Failed and noisy ones are not bred from.
#[test]
fn measured_seeds_and_resumed_records_join_the_population() {
    let target = Target::detect();
    let from = ops::matmul(64, 64, 64).unwrap();
    let dag = ops::matmul(32, 48, 64).unwrap();
    let mut model = RandomModel::new(7);
    let adapted = adapted_from(&from, &dag, 6, 7);

    // A warm start: three seeds measured, one of them noisy.
    let task = Arc::new(Task::new(dag, "matmul"));
    let mut search = TaskSearch::new(Arc::clone(&task), &target, small_params(0), 7);
    search.seed(adapted[..3].to_vec());
    let first = search.next_batch(&mut model, 3).unwrap();
    assert_eq!(first, adapted[..3]);
    let mut noisy = timed(3e-3);
    noisy.noisy = true;
    search
        .record(&mut model, &first, &[timed(1e-3), timed(2e-3), noisy])
        .unwrap();
    search.next_batch(&mut model, 4).unwrap();
    assert_eq!(search.stats.recovered + search.stats.unrecovered, 2);
    assert!(search.stats.recovered >= 1, "{:?}", search.stats);

    // A resumed job: its records are re-added, the failed one is not tried.
    let mut resumed = TaskSearch::new(task, &target, small_params(0), 8);
    for (i, s) in adapted[3..].iter().enumerate() {
        let mut r = timed(1e-3 * (i + 1) as f64);
        if i == 2 {
            r.error = ErrorCode::RuntimeError;
            r.costs.clear();
        }
        resumed.add_measured(s, &r);
    }
    resumed.next_batch(&mut model, 4).unwrap();
    assert_eq!(resumed.stats.recovered + resumed.stats.unrecovered, 2);
    assert!(resumed.stats.recovered >= 1, "{:?}", resumed.stats);
}
