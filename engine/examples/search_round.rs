//! Times one search round (sketch annotation, mutation, lowering, random scores) without
//! measuring anything: `cargo run --release -p tunehub-engine --example search_round -- [spec] [threads]`.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;
use std::time::Instant;
use tunehub_engine::ops::OpSpec;
use tunehub_engine::search::{RandomModel, SearchParams, TaskSearch};
use tunehub_engine::target::Target;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let spec = args.get(1).map_or("matmul(512,512,512)", |s| s.as_str());
    let threads: usize = args.get(2).and_then(|t| t.parse().ok()).unwrap_or(0);
    let target = Target::detect();
    // As the spec is written: no `layout_free=` packs nothing here, as this example always did.
    let task = Arc::new(
        OpSpec::parse(spec)
            .unwrap()
            .unpacked_by_default()
            .task()
            .unwrap(),
    );
    let params = SearchParams {
        threads,
        ..SearchParams::default()
    };
    let mut s = TaskSearch::new(task, &target, params, 1);
    let mut m = RandomModel::new(1);
    for round in 0..3 {
        let t = Instant::now();
        let b = s.next_batch(&mut m, 64).unwrap();
        println!(
            "round {round}: {} proposed in {:.3} s; {} generated, {} lowered, {} scored, {} rejected so far",
            b.len(),
            t.elapsed().as_secs_f64(),
            s.stats.generated,
            s.stats.lowered,
            s.stats.scored,
            s.stats.rejected
        );
    }
}
