//! The feature vector's layout: every group's offset and size, the slots inside a group, and
//! one name per feature ([`FEATURE_NAMES`] follows the same order); and [`StoreFeatures`], one
//! store's vector with its buffer names.

use tunehub_engine::lower::LoopKind;

/// Group 1: executed operation counts (16).
pub const COMPUTE: usize = 0;
pub const N_COMPUTE: usize = 16;
/// Group 2: vectorize, unroll and parallel annotations, 11 each (num, prod, len, 8 positions).
pub const LOOPS: usize = COMPUTE + N_COMPUTE;
pub const PER_LOOP_KIND: usize = 11;
pub(super) const LOOP_KINDS: [LoopKind; 3] =
    [LoopKind::Vectorized, LoopKind::Unrolled, LoopKind::Parallel];
/// Group 3: the accessed buffers, 18 features each, most bytes first.
pub const BUFFERS: usize = LOOPS + LOOP_KINDS.len() * PER_LOOP_KIND;
pub const MAX_BUFFERS: usize = 5;
pub const PER_BUFFER: usize = 18;
/// Group 4: arithmetic intensity curve (10 samples).
pub const INTENSITY: usize = BUFFERS + MAX_BUFFERS * PER_BUFFER;
pub const N_INTENSITY: usize = 10;
/// Group 5: allocation of the stored buffer (5).
pub const ALLOC: usize = INTENSITY + N_INTENSITY;
pub const N_ALLOC: usize = 5;
/// Group 6: outer scope (3).
pub const OUTER: usize = ALLOC + N_ALLOC;
pub const N_OUTER: usize = 3;
/// Group 7: kind of store (3).
pub const STORE: usize = OUTER + N_OUTER;
pub const N_STORE: usize = 3;
/// Group 8: the register tile of an accumulating store (2).
pub const REGTILE: usize = STORE + N_STORE;
pub const N_REGTILE: usize = 2;
pub const N_FEATURES: usize = REGTILE + N_REGTILE;

/// Accumulator floats a register tile may hold: the code generator's limit on the largest
/// register file among the targets (AVX-512: 32 registers of 16 lanes). A per-target model
/// learns where its own, smaller, file ends.
pub(super) const MAX_TILE_FLOATS: f64 = (tunehub_engine::codegen::max_tile_vectors(32) * 16) as f64;

// Group 1 slots.
pub(super) const F_MAD: usize = 0;
pub(super) const F_ADDSUB: usize = 1;
pub(super) const F_MUL: usize = 2;
pub(super) const F_DIV: usize = 3;
pub(super) const F_MINMAX: usize = 4;
pub(super) const F_CMP: usize = 5;
pub(super) const F_MATH: usize = 6;
pub(super) const F_OTHER: usize = 7;
pub(super) const I_MAD: usize = 8;
pub(super) const I_ADDSUB: usize = 9;
pub(super) const I_MUL: usize = 10;
pub(super) const I_DIVMOD: usize = 11;
pub(super) const I_MINMAX: usize = 12;
pub(super) const I_CMP: usize = 13;
pub(super) const BOOL_OP: usize = 14;
pub(super) const SELECT: usize = 15;

// Annotation positions (Ansor's `AnnotationPosType`), offsets inside a loop-kind group after
// num, prod and len.
pub(super) const POS_NONE: usize = 0;
pub(super) const POS_INNER_SPATIAL: usize = 1;
pub(super) const POS_MIDDLE_SPATIAL: usize = 2;
pub(super) const POS_OUTER_SPATIAL: usize = 3;
pub(super) const POS_INNER_REDUCE: usize = 4;
pub(super) const POS_MIDDLE_REDUCE: usize = 5;
pub(super) const POS_OUTER_REDUCE: usize = 6;
pub(super) const POS_MIXED: usize = 7;

// Per-buffer slots.
pub(super) const B_READ: usize = 0;
pub(super) const B_WRITE: usize = 1;
pub(super) const B_RW: usize = 2;
pub(super) const B_BYTES: usize = 3;
pub(super) const B_UNIQUE_BYTES: usize = 4;
pub(super) const B_LINES: usize = 5;
pub(super) const B_UNIQUE_LINES: usize = 6;
pub(super) const B_REUSE_LOOP: usize = 7;
pub(super) const B_REUSE_SERIAL: usize = 8;
pub(super) const B_REUSE_NONE: usize = 9;
pub(super) const B_REUSE_DIS_ITER: usize = 10;
pub(super) const B_REUSE_DIS_BYTES: usize = 11;
pub(super) const B_REUSE_CT: usize = 12;
pub(super) const B_BYTES_D_REUSE: usize = 13;
pub(super) const B_UNIQUE_BYTES_D_REUSE: usize = 14;
pub(super) const B_LINES_D_REUSE: usize = 15;
pub(super) const B_UNIQUE_LINES_D_REUSE: usize = 16;
pub(super) const B_STRIDE: usize = 17;

macro_rules! feature_names {
    (loops: $($l:literal),*; buffers: $($b:literal),*) => {
        [
            // Group 1: executed counts of each operation class (float, then index arithmetic).
            "float_mad", "float_addsub", "float_mul", "float_div", "float_minmax", "float_cmp",
            "float_math", "float_other", "int_mad", "int_addsub", "int_mul", "int_divmod",
            "int_minmax", "int_cmp", "bool_op", "select",
            // Group 2: per annotation kind.
            $(
                concat!($l, "_num"), concat!($l, "_prod"), concat!($l, "_len"),
                concat!($l, "_pos_none"), concat!($l, "_pos_inner_spatial"),
                concat!($l, "_pos_middle_spatial"), concat!($l, "_pos_outer_spatial"),
                concat!($l, "_pos_inner_reduce"), concat!($l, "_pos_middle_reduce"),
                concat!($l, "_pos_outer_reduce"), concat!($l, "_pos_mixed"),
            )*
            // Group 3: per accessed buffer.
            $(
                concat!($b, ".acc_read"), concat!($b, ".acc_write"), concat!($b, ".acc_rw"),
                concat!($b, ".bytes"), concat!($b, ".unique_bytes"), concat!($b, ".lines"),
                concat!($b, ".unique_lines"), concat!($b, ".reuse_loop"),
                concat!($b, ".reuse_serial"), concat!($b, ".reuse_none"),
                concat!($b, ".reuse_dis_iter"), concat!($b, ".reuse_dis_bytes"),
                concat!($b, ".reuse_ct"), concat!($b, ".bytes_d_reuse_ct"),
                concat!($b, ".unique_bytes_d_reuse_ct"), concat!($b, ".lines_d_reuse_ct"),
                concat!($b, ".unique_lines_d_reuse_ct"), concat!($b, ".stride"),
            )*
            // Group 4.
            "ai_0", "ai_1", "ai_2", "ai_3", "ai_4", "ai_5", "ai_6", "ai_7", "ai_8", "ai_9",
            // Group 5.
            "alloc_size", "alloc_prod", "alloc_outer_prod", "alloc_inner_prod", "num_allocs",
            // Group 6.
            "outer_prod", "num_loops", "auto_unroll",
            // Group 7.
            "is_reduce_update", "is_const_store", "guarded",
            // Group 8.
            "regtile_acc", "regtile_band",
        ]
    };
}

/// One short name per feature, in layout order.
///
/// - Group 1 (`float_*`, `int_*`, `bool_op`, `select`): operations executed by the store over
///   the whole nest (per-iteration count x product of enclosing extents). `float_mad` counts
///   `a*b+c` patterns and sum-reductions of a product; `float_math` is exp/log/sqrt/rsqrt/tanh/
///   sigmoid/erf; `float_other` is abs; neg counts as addsub and relu as minmax; `int_*` is index
///   arithmetic of loads, the store and guards (a coefficient multiply followed by an add is a
///   mad); `int_cmp` counts guard and index conditions.
/// - Group 2 (`vec_*`, `unroll_*`, `par_*`): number of enclosing loops of that kind, product of
///   their extents, extent of the innermost one, and its position one-hot: spatial if its
///   variable indexes the stored buffer (inner/middle/outer by the buffer dimension it indexes;
///   loops of an enclosing consumer stage count as outer spatial), reduce otherwise (by order
///   among the stage's reduce loops), mixed when fused (the variable is under a div/mod).
/// - Group 3 (`b0..b4.*`): per accessed buffer, sorted by bytes: access type one-hot; bytes
///   accessed; unique bytes (footprint); cache lines accessed; unique lines; reuse type one-hot
///   (the innermost loop not changing the index reuses: loop; else several accesses in one
///   iteration: serial; else none); reuse distance in iterations (of the loops inside the reuse
///   loop) and in bytes (footprint of all buffers inside it); reuse count (the reuse loop's
///   extent); the four sizes divided by the reuse count; stride (elements) of the innermost loop
///   that changes the index.
/// - Group 4 (`ai_*`): arithmetic intensity curve, Ansor's: per loop level, log2 FLOPs over
///   log2 bytes touched under it, sampled at 10 even points of log2 FLOPs.
/// - Group 5: bytes of the stored buffer when it is allocated in the program, that size times
///   the iterations around its allocation, those iterations, the iterations between allocation
///   and store, and the number of live allocations.
/// - Group 6: product of all enclosing extents, number of enclosing loops, and the product of
///   the innermost run of unrolled loops (what auto-unroll expanded).
/// - Group 7: flags: the store is a reduction update; it stores a constant (a reduction's
///   initialisation); it sits under a guard (non-divisible tiles).
/// - Group 8: the register tile the code generator writes out for a sum whose perfect nest
///   ends in the vector loop (see `tunehub_engine::codegen`): accumulator floats (the space
///   loops inside the band, vector loop included) and the band's iterations (the reduction
///   loops, from the outermost one where the tile still fits [`MAX_TILE_FLOATS`]); accumulators
///   are loaded and stored once per band. 0 when the nest does not qualify (the value's
///   gathers and math calls, which also disqualify it, are not checked).
pub const FEATURE_NAMES: [&str; N_FEATURES] = feature_names!(
    loops: "vec", "unroll", "par";
    buffers: "b0", "b1", "b2", "b3", "b4"
);

/// The features of one `Store` statement.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreFeatures {
    /// The stored buffer's name.
    pub buffer: String,
    /// Names of the buffers in slots `b0..`, in slot order (at most [`MAX_BUFFERS`]).
    pub accessed: Vec<String>,
    pub values: [f32; N_FEATURES],
}

impl StoreFeatures {
    /// The value of the feature called `name`.
    pub fn get(&self, name: &str) -> Option<f32> {
        FEATURE_NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| self.values[i])
    }

    /// The slot (`0..MAX_BUFFERS`) holding buffer `name`, if it is among the accessed ones.
    pub fn slot_of(&self, name: &str) -> Option<usize> {
        self.accessed.iter().position(|n| n == name)
    }
}
