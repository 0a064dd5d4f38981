//! Hand-written schedules for library operators: what an expert writes in our steps, used as
//! the yardstick in benchmarks and as known-good programs in tests.

use super::{Annotation, Schedule, Step};

/// Register-tiled `ops::matmul(n, n, n)`: a TI x TJ accumulator block (cache_write) per
/// parallel tile, tiles column-panel by column-panel, the reduction split by 4 and unrolled,
/// the TJ loop vectorized (4 AVX-512 vectors at TJ = 64).
pub fn matmul_register_tiled(n: i64, ti: i64, tj: i64) -> Schedule {
    use Step::*;
    // Stages: A = 0, B = 1, C = 2; after cache_write, C.local = 2 and C = 3.
    Schedule::new(vec![
        CacheWrite { stage: 2 },
        Split {
            stage: 3,
            iter: 0,
            extent: Some(n),
            lengths: vec![ti],
            inner_to_outer: true,
        },
        Split {
            stage: 3,
            iter: 2,
            extent: Some(n),
            lengths: vec![tj],
            inner_to_outer: true,
        },
        Reorder {
            stage: 3,
            // j.0 outermost: consecutive tiles of a thread reuse one B panel from cache
            // (measured: 1.7x over i.0 outermost at 8x64 on 2 threads).
            order: vec![2, 0, 1, 3],
        },
        Fuse {
            stage: 3,
            iters: vec![0, 1],
        },
        Annotate {
            stage: 3,
            iter: 0,
            ann: Annotation::Parallel,
        },
        Annotate {
            stage: 3,
            iter: 2,
            ann: Annotation::Vectorize,
        },
        ComputeAt {
            stage: 2,
            target: 3,
            target_iter: 0,
        },
        Split {
            stage: 2,
            iter: 2,
            extent: Some(n),
            lengths: vec![4],
            inner_to_outer: true,
        },
        Reorder {
            stage: 2,
            order: vec![2, 3, 0, 1],
        },
        Annotate {
            stage: 2,
            iter: 1,
            ann: Annotation::Unroll,
        },
        Annotate {
            stage: 2,
            iter: 2,
            ann: Annotation::Unroll,
        },
        Annotate {
            stage: 2,
            iter: 3,
            ann: Annotation::Vectorize,
        },
    ])
}
