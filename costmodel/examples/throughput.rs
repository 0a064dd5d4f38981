//! The cost model's speed figures: feature extraction + prediction of already-lowered candidate
//! programs on one core (the search hands the model lowered programs; lowering is excluded and
//! timed apart), and training time on 5,000 records.
//!
//! `cargo run -p tunehub-costmodel --example throughput`
//!
//! The training records are random valid schedules of four workloads with synthetic costs:
//! tree building time depends on the rows and features, not on where the labels came from.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Instant;
use tunehub_costmodel::features::N_FEATURES;
use tunehub_costmodel::samples::Sample;
use tunehub_costmodel::xgb_model::program_features;
use tunehub_costmodel::{Objective, XgbModel, XgbParams};
use tunehub_engine::lower::{LoweredFunc, lower};
use tunehub_engine::ops;
use tunehub_engine::sample::RandomSampler;
use tunehub_engine::target::Target;

fn programs(spec: &str, n: usize, seed: u64) -> Vec<LoweredFunc> {
    let dag = ops::OpSpec::parse(spec).expect("op").dag().expect("op");
    let mut s = RandomSampler::new(&dag, &Target::detect(), seed);
    (0..n)
        .map(|_| lower(&s.sample().replay(&dag).expect("replays")).expect("lowers"))
        .collect()
}

fn main() {
    let specs = [
        "matmul(256,256,256)",
        "conv2d_nchw(n=1,c=64,h=56,w=56,f=64,kh=3,kw=3,pad=1)",
        "dense(m=64,n=256,k=256)",
        "batch_matmul(4,64,64,64)",
    ];
    let t = Instant::now();
    let funcs: Vec<Vec<LoweredFunc>> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| programs(s, 1250, i as u64))
        .collect();
    let lowered = funcs.iter().map(Vec::len).sum::<usize>();
    println!(
        "sampling + lowering {lowered} programs: {:.0} programs/s (not part of the figures below)",
        lowered as f64 / t.elapsed().as_secs_f64()
    );

    // Training on 5,000 records, one thread (the default).
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for objective in [Objective::PackSum, Objective::RankPairwise] {
        let mut m = XgbModel::new(XgbParams {
            objective,
            ..XgbParams::default()
        });
        for (spec, fs) in specs.iter().zip(&funcs) {
            let refs: Vec<&LoweredFunc> = fs.iter().collect();
            let samples = program_features(&refs).into_iter().map(|stores| Sample {
                stores,
                cost: rng.gen_range(1e-4..1e-2),
            });
            m.add_samples(spec, samples);
        }
        let t = Instant::now();
        m.retrain().expect("trains");
        println!(
            "{}: training on {} records ({} rounds, depth {}, 1 thread): {:.2} s",
            m.params().name(),
            m.num_samples(),
            m.params().rounds,
            m.params().max_depth,
            t.elapsed().as_secs_f64()
        );

        // Prediction in batches of 1,000 programs, as the search asks.
        for (spec, fs) in specs.iter().zip(&funcs) {
            let refs: Vec<&LoweredFunc> = fs.iter().collect();
            let mut extract_s = 0.0;
            let mut predict_s = 0.0;
            for chunk in refs.chunks(1000) {
                let t = Instant::now();
                let feats = program_features(chunk);
                extract_s += t.elapsed().as_secs_f64();
                let t = Instant::now();
                let stores: Vec<&[[f32; N_FEATURES]]> =
                    feats.iter().map(|f| f.as_slice()).collect();
                std::hint::black_box(m.predict_stores(&stores).expect("predicts"));
                predict_s += t.elapsed().as_secs_f64();
            }
            let n = refs.len() as f64;
            println!(
                "  {spec:<52} extract {:>8.0}/s  predict {:>8.0}/s  both {:>8.0} programs/s",
                n / extract_s,
                n / predict_s,
                n / (extract_s + predict_s)
            );
        }
    }
}
