//! Data parallelism on scoped threads: the search lowers and scores candidates, and the cost
//! model extracts features, on all cores.

use std::sync::OnceLock;

/// The cores this process may use, read once (`available_parallelism` reads the cgroup's
/// quota from files on every call).
pub fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Runs `f(0..n)` on `threads` scoped threads, results in index order.
pub fn par_map<T: Send>(n: usize, threads: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = threads.clamp(1, n.max(1));
    if threads == 1 {
        return (0..n).map(f).collect();
    }
    let chunk = n.div_ceil(threads);
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    (t * chunk..((t + 1) * chunk).min(n))
                        .map(f)
                        .collect::<Vec<T>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a par_map worker panicked"))
            .collect()
    })
}

/// Drops `items` on `threads` scoped threads, for large piles of small allocations.
pub fn par_drop<T: Send>(mut items: Vec<T>, threads: usize) {
    let chunk = items.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|scope| {
        while items.len() > chunk {
            let part = items.split_off(items.len() - chunk);
            scope.spawn(move || drop(part));
        }
        drop(items);
    });
}
