//! Ansor-style program features: one vector of [`N_FEATURES`] floats per buffer store of a
//! lowered program.
//!
//! As in Ansor, every `Store` statement is a sample: a reduction's initialisation and its
//! update are two stores (two `BufferStore` nodes in TVM), and a cache_write copy-out is a
//! third. The cost model later predicts a score per store and sums them per program.
//!
//! The features are computed from the loop nest alone (no simulation): access footprints and
//! strides come from the coefficients of each loop variable in the flattened index `Lin`, so
//! extraction is linear in the size of the program. Approximations, all documented where they
//! are made:
//! - executed counts multiply per-iteration counts by every enclosing extent; guards are
//!   ignored (boundary tiles count as full ones);
//! - the unique elements an access touches under a loop level are the product of the extents of
//!   the loops that change its index, capped by the index's span and the buffer's size (exact for
//!   disjoint tiles, and for overlapping windows such as `y + ry` thanks to the span cap);
//! - accesses of one buffer with different indices add their footprints (overlap not removed);
//! - unique cache lines divide the unique elements by the elements a line holds at the access's
//!   stride (a tile narrower than a line is undercounted);
//! - every tensor is `f32` (4 bytes) and a cache line is 64 bytes.

//!
//! One module per idea: `layout` (offsets, slots, names), `walk` (the traversal) over `nest`
//! (the enclosing loops), `store` (one store's vector), `counts` (group 1's operation counts),
//! `lets` (region starts), `scale` (the log scaling).

mod counts;
mod layout;
mod lets;
mod nest;
mod scale;
mod store;
#[cfg(test)]
mod tests;
mod walk;

pub use layout::{
    ALLOC, BUFFERS, COMPUTE, FEATURE_NAMES, INTENSITY, LOOPS, MAX_BUFFERS, N_ALLOC, N_COMPUTE,
    N_FEATURES, N_INTENSITY, N_OUTER, N_REGTILE, N_STORE, OUTER, PER_BUFFER, PER_LOOP_KIND,
    REGTILE, STORE, StoreFeatures,
};
pub use scale::is_log_scaled;

use scale::log_scale;
use tunehub_engine::ir::ComputeDag;
use tunehub_engine::lower::{LoweredFunc, lower};
use tunehub_engine::schedule::{Schedule, ScheduleError};
use walk::walk;

/// Features of every store of `func`, in program order, with count-like features as
/// `log2(1 + x)`.
pub fn extract(func: &LoweredFunc) -> Vec<StoreFeatures> {
    let mut out = extract_raw(func);
    for f in &mut out {
        log_scale(&mut f.values);
    }
    out
}

/// Like [`extract`], before the `log2(1 + x)` scaling (for tests and inspection).
pub fn extract_raw(func: &LoweredFunc) -> Vec<StoreFeatures> {
    walk(func, true)
}

/// The feature vectors alone, log-scaled as by [`extract`]: the model's path, which needs no
/// buffer names.
pub fn extract_values(func: &LoweredFunc) -> Vec<[f32; N_FEATURES]> {
    walk(func, false)
        .into_iter()
        .map(|mut f| {
            log_scale(&mut f.values);
            f.values
        })
        .collect()
}

/// Replays and lowers `sched`, then extracts its features.
pub fn extract_schedule(
    dag: &ComputeDag,
    sched: &Schedule,
) -> Result<Vec<StoreFeatures>, ScheduleError> {
    Ok(extract(&lower(&sched.replay(dag)?)?))
}
