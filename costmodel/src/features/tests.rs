//! Features of known programs: counts, annotations, accesses and reuse.

use super::layout::{F_MAD, F_MUL};
use super::*;
use tunehub_engine::lower::Stmt;
use tunehub_engine::ops;
use tunehub_engine::sample::RandomSampler;
use tunehub_engine::schedule::{Annotation, Step};
use tunehub_engine::target::Target;

fn lowered(dag: &ComputeDag, sched: &Schedule) -> LoweredFunc {
    lower(&sched.replay(dag).expect("replays")).expect("lowers")
}

fn count_stores(stmts: &[Stmt]) -> usize {
    stmts
        .iter()
        .map(|s| match s {
            Stmt::For { body, .. } | Stmt::Alloc { body, .. } | Stmt::Guard { body, .. } => {
                count_stores(body)
            }
            Stmt::Let { .. } => 0,
            Stmt::Store { .. } => 1,
        })
        .sum()
}

fn update(fs: &[StoreFeatures]) -> &StoreFeatures {
    fs.iter()
        .find(|f| f.values[STORE] == 1.0)
        .expect("a reduction update")
}

/// Feature `field` (e.g. `reuse_dis_bytes`) of buffer `buf`'s slot.
fn buf_feature(f: &StoreFeatures, buf: &str, field: &str) -> f32 {
    let slot = f
        .slot_of(buf)
        .unwrap_or_else(|| panic!("{buf} not accessed: {:?}", f.accessed));
    f.get(&format!("b{slot}.{field}")).expect("a feature name")
}

#[test]
fn layout_and_names_agree() {
    assert_eq!(N_FEATURES, 162);
    assert_eq!(FEATURE_NAMES[LOOPS], "vec_num");
    assert_eq!(FEATURE_NAMES[LOOPS + 2 * PER_LOOP_KIND], "par_num");
    assert_eq!(FEATURE_NAMES[BUFFERS], "b0.acc_read");
    assert_eq!(FEATURE_NAMES[BUFFERS + PER_BUFFER - 1], "b0.stride");
    assert_eq!(FEATURE_NAMES[INTENSITY - 1], "b4.stride");
    assert_eq!(FEATURE_NAMES[INTENSITY], "ai_0");
    assert_eq!(FEATURE_NAMES[ALLOC], "alloc_size");
    assert_eq!(FEATURE_NAMES[OUTER], "outer_prod");
    assert_eq!(FEATURE_NAMES[STORE], "is_reduce_update");
    assert_eq!(FEATURE_NAMES[REGTILE], "regtile_acc");
    let mut names = FEATURE_NAMES.to_vec();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), N_FEATURES, "names are unique");
}

/// The model's path (no names) gives the same vectors as the inspected one.
#[test]
fn values_alone_equal_the_named_extraction() {
    let dag =
        ops::OpSpec::parse("conv2d_nchw(n=1,c=8,h=14,w=14,f=8,kh=3,kw=3,pad=1,bias=1,relu=1)")
            .unwrap()
            .dag()
            .unwrap();
    let mut s = RandomSampler::new(&dag, &Target::detect(), 5);
    for _ in 0..50 {
        let f = lowered(&dag, &s.sample());
        let named: Vec<[f32; N_FEATURES]> = extract(&f).into_iter().map(|x| x.values).collect();
        let bare = extract_values(&f);
        assert_eq!(named.len(), bare.len());
        for (a, b) in named.iter().zip(&bare) {
            assert!(a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()));
        }
    }
}

#[test]
fn deterministic_finite_and_one_vector_per_store() {
    let win = ops::Window {
        kh: 3,
        kw: 3,
        stride: 1,
        pad: 1,
        dilation: 1,
    };
    let dags = [
        ops::matmul(64, 64, 64).unwrap(),
        ops::conv2d_nchw(1, 8, 14, 14, 8, win, true, true).unwrap(),
        ops::softmax(32, 64).unwrap(),
    ];
    for dag in &dags {
        let mut sampler = RandomSampler::new(dag, &Target::detect(), 7);
        for _ in 0..20 {
            let func = lowered(dag, &sampler.sample());
            let a = extract(&func);
            assert_eq!(a, extract(&func));
            assert_eq!(a.len(), count_stores(&func.body));
            for f in &a {
                assert!(f.values.iter().all(|v| v.is_finite()), "{f:?}");
                assert!(!f.accessed.is_empty() && f.accessed.len() <= MAX_BUFFERS);
            }
        }
    }
}

#[test]
fn naive_matmul_counts_and_accesses() {
    let dag = ops::matmul(64, 64, 64).unwrap();
    let func = lowered(&dag, &Schedule::default());
    let raw = extract_raw(&func);
    // The initialisation and the update are separate stores, as in Ansor.
    assert_eq!(raw.len(), 2);
    assert_eq!(raw[0].values[STORE + 1], 1.0, "init stores a constant");
    assert_eq!(raw[0].accessed, ["C"]);
    let up = update(&raw);
    assert_eq!(up.buffer, "C");
    assert_eq!(up.values[COMPUTE + F_MAD], 262_144.0);
    assert_eq!(
        up.values[COMPUTE + F_MUL],
        0.0,
        "the product is part of the mad"
    );
    let mut acc = up.accessed.clone();
    acc.sort();
    assert_eq!(acc, ["A", "B", "C"]);
    assert_eq!(buf_feature(up, "C", "acc_rw"), 1.0);
    assert_eq!(buf_feature(up, "A", "acc_read"), 1.0);
    assert_eq!(buf_feature(up, "A", "bytes"), 262_144.0 * 4.0);
    assert_eq!(buf_feature(up, "A", "unique_bytes"), 4096.0 * 4.0);
    // A[i, k] is reused across j: every 64 iterations, 64 times.
    assert_eq!(buf_feature(up, "A", "reuse_loop"), 1.0);
    assert_eq!(buf_feature(up, "A", "reuse_ct"), 64.0);
    assert_eq!(buf_feature(up, "A", "reuse_dis_iter"), 64.0);
    // B[k, j] along k (innermost) has a stride of a row; C is reused along k.
    assert_eq!(buf_feature(up, "B", "stride"), 64.0);
    assert_eq!(buf_feature(up, "C", "reuse_dis_iter"), 1.0);
    assert_eq!(up.values[OUTER], 262_144.0);
    assert_eq!(up.values[OUTER + 1], 3.0);

    // Scaled: log2(1 + x) of the same value.
    let scaled = extract(&func);
    assert_eq!(
        update(&scaled).values[COMPUTE + F_MAD],
        (1.0f32 + 262_144.0).log2()
    );
    assert_eq!(update(&scaled).values[STORE], 1.0, "flags stay raw");
}

/// The integer form of the same program: its multiply-adds are integer ones, and its 8-bit
/// inputs a quarter of the bytes (the accumulator stays 4).
#[test]
fn integer_matmul_counts_integer_operations_and_bytes() {
    use super::layout::I_MAD;
    let dag = ops::OpSpec::parse("matmul(64,64,64,dtype=u8i8,layout_free=none)")
        .unwrap()
        .dag()
        .unwrap();
    let raw = extract_raw(&lowered(&dag, &Schedule::default()));
    let up = update(&raw);
    assert_eq!(up.values[COMPUTE + F_MAD], 0.0);
    let f32_form = extract_raw(&lowered(
        &ops::matmul(64, 64, 64).unwrap(),
        &Schedule::default(),
    ));
    let f = update(&f32_form);
    // The index arithmetic's mads are in the integer slot in both; the product's move there.
    assert_eq!(
        up.values[COMPUTE + I_MAD],
        f.values[COMPUTE + I_MAD] + 262_144.0
    );
    assert_eq!(buf_feature(up, "A", "bytes"), 262_144.0);
    assert_eq!(buf_feature(up, "A", "unique_bytes"), 4096.0);
    assert_eq!(buf_feature(up, "C", "unique_bytes"), 4096.0 * 4.0);
}

#[test]
fn vectorize_and_parallel_annotations() {
    let dag = ops::matmul(64, 64, 64).unwrap();
    use Step::*;
    let s = Schedule::new(vec![
        Reorder {
            stage: 2,
            order: vec![0, 2, 1],
        },
        Annotate {
            stage: 2,
            iter: 2,
            ann: Annotation::Vectorize,
        },
        Annotate {
            stage: 2,
            iter: 0,
            ann: Annotation::Parallel,
        },
    ]);
    let raw = extract_raw(&lowered(&dag, &s));
    for f in &raw {
        assert_eq!(f.get("vec_len"), Some(64.0));
        assert_eq!(f.get("vec_num"), Some(1.0));
        assert_eq!(f.get("vec_pos_inner_spatial"), Some(1.0));
        assert_eq!(f.get("par_prod"), Some(64.0));
        assert_eq!(f.get("par_pos_outer_spatial"), Some(1.0));
        assert_eq!(f.get("unroll_pos_none"), Some(1.0));
    }
    assert_eq!(raw.len(), 2);

    let fused = Schedule::new(vec![
        Fuse {
            stage: 2,
            iters: vec![0, 1],
        },
        Annotate {
            stage: 2,
            iter: 0,
            ann: Annotation::Parallel,
        },
    ]);
    let raw = extract_raw(&lowered(&dag, &fused));
    let up = update(&raw);
    assert_eq!(up.get("par_prod"), Some(4096.0));
    assert_eq!(
        up.get("par_pos_mixed"),
        Some(1.0),
        "a fused loop indexes two dims"
    );
    assert_eq!(up.get("vec_pos_none"), Some(1.0));
    assert_eq!(up.values[COMPUTE + F_MAD], 262_144.0);
}

#[test]
fn tiling_with_cache_write_shortens_reuse_of_b() {
    let dag = ops::matmul(64, 64, 64).unwrap();
    let naive = extract_raw(&lowered(&dag, &Schedule::default()));
    let func = lowered(
        &dag,
        &tunehub_engine::schedule::hand::matmul_register_tiled(64, 4, 16),
    );
    let fs = extract_raw(&func);
    // C.local's init and update, and the copy to C.
    assert_eq!(fs.len(), 3);
    assert_eq!(fs.len(), count_stores(&func.body));
    let (n, t) = (update(&naive), update(&fs));
    assert_eq!(t.buffer, "C.local");
    assert_eq!(
        t.values[COMPUTE + F_MAD],
        262_144.0,
        "tiling keeps the work"
    );
    for field in ["reuse_dis_bytes", "reuse_dis_iter"] {
        let (a, b) = (buf_feature(n, "B", field), buf_feature(t, "B", field));
        assert!(b < a, "{field}: tiled {b} vs naive {a}");
    }
    // The accumulator tile is a small local buffer, all of it reused in registers.
    assert!(buf_feature(t, "C.local", "unique_bytes") < buf_feature(n, "C", "unique_bytes"));
    assert_eq!(t.get("alloc_size"), Some(4.0 * 16.0 * 4.0));
    assert_eq!(t.get("vec_len"), Some(16.0));
    assert_eq!(t.get("unroll_prod"), Some(16.0));
    assert_eq!(t.get("par_prod"), Some(64.0));
    assert_eq!(
        t.get("par_pos_outer_spatial"),
        Some(1.0),
        "the consumer's loop is outside"
    );
    // 4 rows x 16 lanes of accumulators over the whole reduction (k.0 x k.1 = 16 x 4).
    assert_eq!(t.get("regtile_acc"), Some(64.0));
    assert_eq!(t.get("regtile_band"), Some(64.0));
    let init = fs
        .iter()
        .find(|f| f.get("is_const_store") == Some(1.0))
        .unwrap();
    assert_eq!(
        init.get("regtile_acc"),
        Some(0.0),
        "only reductions are tiles"
    );
    // 32 rows x 64 lanes do not fit any register file: no tile.
    let big = extract_raw(&lowered(
        &dag,
        &tunehub_engine::schedule::hand::matmul_register_tiled(64, 32, 64),
    ));
    assert_eq!(update(&big).get("regtile_acc"), Some(0.0));
}
