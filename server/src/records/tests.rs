//! The SQL store against a real SQLite file.

use super::*;
use std::sync::Arc;
use tunehub_engine::measure::{ErrorCode, MeasureResult};
use tunehub_engine::ops;
use tunehub_engine::task::{Task, WorkloadOptions};

const W: &str = "w0";
const T: &str = "t0";

async fn new_store(dir: &tempfile::TempDir) -> SqlStore {
    let path = dir.path().join("t.db");
    let store = SqlStore::open(path.to_str().unwrap()).await.unwrap();
    for w in ["w0", "w1"] {
        store
            .put_workload(
                w,
                &format!("op {w}"),
                "{}",
                1_000_000,
                &WorkloadOptions::default(),
            )
            .await
            .unwrap();
    }
    for t in ["t0", "t1"] {
        store.put_target(t, "{}").await.unwrap();
    }
    store
}

/// A record of candidate `sched` (its steps are `[["SP", sched]]`).
fn rec(w: &str, t: &str, sched: u32, costs: &[f64], error: ErrorCode, noisy: bool) -> NewRecord {
    NewRecord {
        workload_key: w.into(),
        target_key: t.into(),
        steps_json: format!("[[\"SP\", {sched}]]"),
        costs: costs.to_vec(),
        error_code: error.code(),
        error_msg: if error == ErrorCode::NoError {
            String::new()
        } else {
            format!("failed {sched}")
        },
        noisy,
        build_s: 0.5,
        run_s: 0.25,
        worker: Some("local".into()),
        created_at: None,
    }
}

fn ok(sched: u32, cost: f64) -> NewRecord {
    rec(W, T, sched, &[cost, cost], ErrorCode::NoError, false)
}

#[tokio::test]
async fn migrations_apply_to_a_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fresh.db");
    let store = SqlStore::open(path.to_str().unwrap()).await.unwrap();
    assert!(path.exists());
    let tables: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_%' ESCAPE '\\' ORDER BY name")
            .fetch_all(&store.pool)
            .await
            .unwrap();
    assert_eq!(
        tables,
        [
            "best_records",
            "cost_models",
            "job_records",
            "jobs",
            "pool_owners",
            "record_counts",
            "records",
            "shape_range_jobs",
            "shape_ranges",
            "targets",
            "tasks",
            "workloads"
        ]
    );
    let applied: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations WHERE success")
        .fetch_one(&store.pool)
        .await
        .unwrap();
    assert_eq!(applied as usize, crate::records::migrations::all().len());
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&store.pool)
        .await
        .unwrap();
    assert_eq!(mode, "wal");
    // The sqlite:// URL form opens the same file.
    store.close().await;
    let url = format!("sqlite://{}?mode=rwc", path.display());
    SqlStore::open(&url).await.unwrap().close().await;
    assert!(matches!(
        SqlStore::open("mysql://x/y").await,
        Err(StoreError::UnsupportedUrl(_))
    ));
}

#[tokio::test]
async fn best_is_the_lowest_mean_cost() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_store(&dir).await;
    assert_eq!(s.best(W, T).await.unwrap(), None);
    assert_eq!(
        s.commit(&ok(1, 3e-3)).await.unwrap(),
        CommitOutcome::Inserted { is_new_best: true }
    );
    assert_eq!(
        s.commit(&ok(2, 1e-3)).await.unwrap(),
        CommitOutcome::Inserted { is_new_best: true }
    );
    assert_eq!(
        s.commit(&ok(3, 2e-3)).await.unwrap(),
        CommitOutcome::Inserted { is_new_best: false }
    );
    // A tie keeps the earlier record.
    assert_eq!(
        s.commit(&ok(4, 1e-3)).await.unwrap(),
        CommitOutcome::Inserted { is_new_best: false }
    );
    let best = s.best(W, T).await.unwrap().unwrap();
    assert_eq!(best.steps_json, r#"[["SP",2]]"#, "stored canonical");
    assert_eq!(best.mean_cost, Some(1e-3));
    assert_eq!(best.costs, [1e-3, 1e-3]);
    assert_eq!(best.worker.as_deref(), Some("local"));
    assert!(best.is_ok());
    let top: Vec<f64> = s
        .top_k(W, T, 3)
        .await
        .unwrap()
        .iter()
        .map(|r| r.mean_cost.unwrap())
        .collect();
    assert_eq!(top, [1e-3, 1e-3, 2e-3]);
    assert!(s.top_k(W, T, 0).await.unwrap().is_empty());
    // Other (workload, target) pairs are untouched.
    assert_eq!(s.best("w1", T).await.unwrap(), None);
    assert_eq!(s.best(W, "t1").await.unwrap(), None);
    assert_eq!(s.targets_of(W).await.unwrap(), [("t0".to_string(), 4)]);
}

#[tokio::test]
async fn errors_and_noisy_records_never_become_best() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_store(&dir).await;
    let err = rec(W, T, 1, &[], ErrorCode::CompileError, false);
    assert_eq!(
        s.commit(&err).await.unwrap(),
        CommitOutcome::Inserted { is_new_best: false }
    );
    // An error code with costs attached still has no mean cost and does not qualify.
    let wrong = rec(W, T, 2, &[1e-6], ErrorCode::WrongAnswer, false);
    assert_eq!(
        s.commit(&wrong).await.unwrap(),
        CommitOutcome::Inserted { is_new_best: false }
    );
    let noisy = rec(W, T, 3, &[1e-6], ErrorCode::NoError, true);
    assert_eq!(
        s.commit(&noisy).await.unwrap(),
        CommitOutcome::Inserted { is_new_best: false }
    );
    assert_eq!(s.best(W, T).await.unwrap(), None);
    assert!(s.top_k(W, T, 10).await.unwrap().is_empty());
    assert_eq!(
        s.commit(&ok(4, 1e-3)).await.unwrap(),
        CommitOutcome::Inserted { is_new_best: true }
    );
    assert_eq!(s.best(W, T).await.unwrap().unwrap().mean_cost, Some(1e-3));
    assert_eq!(
        s.count(W, T).await.unwrap(),
        RecordCounts { total: 4, ok: 2 }
    );
    let all = s.records(W, T).await.unwrap();
    assert_eq!(all.len(), 4);
    let stored_err = all
        .iter()
        .find(|r| r.error_code == ErrorCode::CompileError.code())
        .unwrap();
    assert_eq!(
        (stored_err.error_msg.as_str(), stored_err.mean_cost),
        ("failed 1", None)
    );
    assert_eq!(stored_err.error(), Some(ErrorCode::CompileError));
    assert!(all.iter().any(|r| r.noisy));
}

#[tokio::test]
async fn a_duplicate_commit_is_a_no_op() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_store(&dir).await;
    assert_eq!(
        s.commit(&ok(1, 2e-3)).await.unwrap(),
        CommitOutcome::Inserted { is_new_best: true }
    );
    let before = (s.count(W, T).await.unwrap(), s.best(W, T).await.unwrap());
    // The same schedule, differently spaced and with a better time: still the same candidate.
    let mut again = ok(1, 1e-3);
    again.steps_json = "[ [ \"SP\" ,1 ] ]".into();
    assert_eq!(s.commit(&again).await.unwrap(), CommitOutcome::Duplicate);
    assert_eq!(
        s.commit(&rec(W, T, 1, &[], ErrorCode::RunTimeout, false))
            .await
            .unwrap(),
        CommitOutcome::Duplicate
    );
    assert_eq!(
        (s.count(W, T).await.unwrap(), s.best(W, T).await.unwrap()),
        before
    );
    // The same schedule on another target is another candidate.
    let other = rec(W, "t1", 1, &[1e-3], ErrorCode::NoError, false);
    assert_eq!(
        s.commit(&other).await.unwrap(),
        CommitOutcome::Inserted { is_new_best: true }
    );
}

#[tokio::test]
async fn bad_input_is_rejected_and_nothing_stored() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_store(&dir).await;
    let mut bad = ok(1, 1e-3);
    bad.steps_json = "[[\"SP\", ".into();
    assert!(matches!(s.commit(&bad).await, Err(StoreError::BadSteps(_))));
    let nan = ok(2, f64::NAN);
    assert!(matches!(s.commit(&nan).await, Err(StoreError::Invalid(_))));
    // Unknown workload: the foreign key refuses it.
    let orphan = rec("nope", T, 3, &[1e-3], ErrorCode::NoError, false);
    assert!(matches!(s.commit(&orphan).await, Err(StoreError::Db(_))));
    assert_eq!(s.count(W, T).await.unwrap(), RecordCounts::default());
    assert_eq!(s.count("nope", T).await.unwrap(), RecordCounts::default());
}

/// A small deterministic generator (xorshift64*), so that a failure replays.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[tokio::test]
async fn best_records_match_a_brute_force_min_after_random_commits() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_store(&dir).await;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let pairs = [("w0", "t0"), ("w0", "t1"), ("w1", "t0"), ("w1", "t1")];
    assert_eq!(
        s.best_with_counts("w0", "t0").await.unwrap(),
        (None, RecordCounts::default()),
        "no record yet"
    );
    for step in 0..400 {
        let (w, t) = pairs[rng.below(4) as usize];
        // Few schedules per pair, so that duplicates are common.
        let sched = rng.below(60) as u32;
        let error = match rng.below(10) {
            0 => ErrorCode::CompileError,
            1 => ErrorCode::WrongAnswer,
            2 => ErrorCode::RunTimeout,
            _ => ErrorCode::NoError,
        };
        let costs: Vec<f64> = (0..1 + rng.below(3))
            .map(|_| (1 + rng.below(1000)) as f64 * 1e-6)
            .collect();
        let costs = if error == ErrorCode::NoError || rng.below(2) == 0 {
            costs
        } else {
            vec![]
        };
        let r = rec(w, t, sched, &costs, error, rng.below(8) == 0);

        let before = s.records(w, t).await.unwrap();
        let best_before = s.best(w, t).await.unwrap();
        let outcome = s.commit(&r).await.unwrap();
        let after = s.records(w, t).await.unwrap();

        let hash = schedule_hash(&canonical_steps(&r.steps_json).unwrap());
        let was_there = before.iter().any(|x| x.schedule_hash == hash);
        assert_eq!(
            outcome == CommitOutcome::Duplicate,
            was_there,
            "step {step}"
        );
        assert_eq!(
            after.len(),
            before.len() + usize::from(!was_there),
            "step {step}"
        );

        // The brute-force best: min mean cost over trusted successes.
        let brute = after
            .iter()
            .filter(|x| x.is_ok() && !x.noisy)
            .map(|x| x.mean_cost.unwrap())
            .fold(None, |m: Option<f64>, c| Some(m.map_or(c, |m| m.min(c))));
        let best = s.best(w, t).await.unwrap();
        assert_eq!(
            best.as_ref().and_then(|b| b.mean_cost),
            brute,
            "step {step}"
        );
        if let Some(b) = &best {
            assert!(b.is_ok() && !b.noisy, "step {step}");
        }
        let moved = best.as_ref().map(|b| &b.id) != best_before.as_ref().map(|b| &b.id);
        assert_eq!(
            outcome == CommitOutcome::Inserted { is_new_best: true },
            moved,
            "step {step}"
        );
        let counts = s.count(w, t).await.unwrap();
        assert_eq!(counts.total as usize, after.len());
        assert_eq!(
            counts.ok as usize,
            after.iter().filter(|x| x.error_code == 0).count()
        );
        // The cache's one-statement read agrees with the two.
        assert_eq!(
            s.best_with_counts(w, t).await.unwrap(),
            (best.clone(), counts),
            "step {step}"
        );
        let top = s.top_k(w, t, 5).await.unwrap();
        assert_eq!(top.first().and_then(|r| r.mean_cost), brute);
        assert!(top.windows(2).all(|p| p[0].mean_cost <= p[1].mean_cost));
    }
}

#[tokio::test]
async fn counts_of_records_stored_before_migration_3_are_backfilled() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    {
        // A database at schema version 2, with records written as version 2 wrote them.
        let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}?mode=rwc", path.display()))
            .await
            .unwrap();
        super::migrations::up_to(2).run(&pool).await.unwrap();
        sqlx::query(
            "INSERT INTO workloads VALUES ('w0', 'w', '{}', 1, 0), ('w1', 'w', '{}', 1, 0)",
        )
        .execute(&pool)
        .await
        .unwrap();
        sqlx::query("INSERT INTO targets VALUES ('t0', '{}', 0)")
            .execute(&pool)
            .await
            .unwrap();
        for (id, w, code) in [
            ("a", "w0", 0),
            ("b", "w0", 2),
            ("c", "w0", 0),
            ("d", "w1", 5),
        ] {
            let mean = (code == 0).then_some(1e-3);
            sqlx::query(
                "INSERT INTO records VALUES ($1, $2, 't0', $1, '[]', '[]', $3, $4, '', 0, 0, 0, NULL, 0)",
            )
            .bind(id)
            .bind(w)
            .bind(mean)
            .bind(code)
            .execute(&pool)
            .await
            .unwrap();
        }
        pool.close().await;
    }
    let s = SqlStore::open(path.to_str().unwrap()).await.unwrap();
    assert_eq!(
        s.count("w0", "t0").await.unwrap(),
        RecordCounts { total: 3, ok: 2 }
    );
    assert_eq!(
        s.count("w1", "t0").await.unwrap(),
        RecordCounts { total: 1, ok: 0 }
    );
    // And kept from there on.
    s.commit(&rec("w1", "t0", 9, &[2e-3], ErrorCode::NoError, false))
        .await
        .unwrap();
    assert_eq!(
        s.count("w1", "t0").await.unwrap(),
        RecordCounts { total: 2, ok: 1 }
    );
    assert_eq!(s.targets_of("w0").await.unwrap(), [("t0".to_string(), 3)]);
    let targets = s.targets().await.unwrap();
    assert_eq!((targets[0].0.as_str(), targets[0].2), ("t0", 5));
}

#[tokio::test]
async fn reopening_the_file_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let (records, best, workload) = {
        let s = new_store(&dir).await;
        s.commit(&ok(1, 2e-3)).await.unwrap();
        s.commit(&ok(2, 1e-3)).await.unwrap();
        s.commit(&rec(W, T, 3, &[], ErrorCode::CompileError, false))
            .await
            .unwrap();
        let out = (
            s.records(W, T).await.unwrap(),
            s.best(W, T).await.unwrap(),
            s.workload(W).await.unwrap(),
        );
        s.close().await;
        out
    };
    let s = SqlStore::open(path.to_str().unwrap()).await.unwrap();
    assert_eq!(s.records(W, T).await.unwrap(), records);
    assert_eq!(s.best(W, T).await.unwrap(), best);
    let w = s.workload(W).await.unwrap().unwrap();
    assert_eq!(Some(&w), workload.as_ref());
    assert_eq!(
        (w.description.as_deref(), w.flops),
        (Some("op w0"), 1_000_000)
    );
    assert_eq!(s.target_json(T).await.unwrap().as_deref(), Some("{}"));
    assert_eq!(s.target_json("zz").await.unwrap(), None);
    assert_eq!(
        s.count(W, T).await.unwrap(),
        RecordCounts { total: 3, ok: 2 }
    );
    // Putting a known workload again keeps the first description.
    s.put_workload(W, "renamed", "{}", 1, &WorkloadOptions::default())
        .await
        .unwrap();
    assert_eq!(
        s.workload(W).await.unwrap().unwrap().description.as_deref(),
        Some("op w0")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_commits_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(new_store(&dir).await);
    let tasks: Vec<_> = (0..8u32)
        .map(|t| {
            let s = Arc::clone(&s);
            tokio::spawn(async move {
                for i in 0..25u32 {
                    // Every task also re-reports a shared candidate, to race on duplicates.
                    let sched = if i == 0 { 0 } else { t * 1000 + i };
                    let cost = f64::from(1 + (sched * 7919) % 997) * 1e-6;
                    s.commit(&ok(sched, cost)).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let all = s.records(W, T).await.unwrap();
    assert_eq!(all.len(), 8 * 24 + 1);
    assert_eq!(
        s.count(W, T).await.unwrap(),
        RecordCounts {
            total: 193,
            ok: 193
        }
    );
    let min = all
        .iter()
        .map(|r| r.mean_cost.unwrap())
        .fold(f64::INFINITY, f64::min);
    assert_eq!(s.best(W, T).await.unwrap().unwrap().mean_cost, Some(min));
}

#[test]
fn ids_and_hashes_are_stable() {
    let steps = canonical_steps("[ [\"SP\", 0, 1, 512, [16, 4], 1] ]").unwrap();
    assert_eq!(steps, r#"[["SP",0,1,512,[16,4],1]]"#);
    let h = schedule_hash(&steps);
    assert_eq!(h.len(), 32);
    assert_eq!(
        h,
        schedule_hash(&canonical_steps(r#"[["SP",0,1,512,[16,4],1]]"#).unwrap())
    );
    assert_ne!(record_id("a", "b", &h), record_id("a", "c", &h));
    // The separator keeps ("ab", "c") and ("a", "bc") apart.
    assert_ne!(record_id("ab", "c", &h), record_id("a", "bc", &h));
}

#[test]
fn new_record_from_a_measurement() {
    let m = MeasureResult {
        costs: vec![1.0, 3.0],
        error: ErrorCode::NoError,
        error_msg: String::new(),
        build_s: 1.0,
        run_s: 2.0,
        noisy: false,
    };
    let r = NewRecord::from_measure("w", "t", "[]".into(), &m, Some("local"));
    assert_eq!(r.mean_cost(), Some(2.0));
    assert!(r.qualifies_for_best());
    let e = NewRecord::from_measure(
        "w",
        "t",
        "[]".into(),
        &MeasureResult::error(ErrorCode::CompileError, "x"),
        None,
    );
    assert_eq!((e.mean_cost(), e.error_code, e.worker), (None, 2, None));
}

/// A database at schema version 3, as version 3 wrote it: one layout-free workload (its inputs
/// named in its description only), one plain one, and a record of each.
async fn version_3_database(path: &std::path::Path, lf: &Task, plain: &Task) {
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}?mode=rwc", path.display()))
        .await
        .unwrap();
    super::migrations::up_to(3).run(&pool).await.unwrap();
    for (t, desc) in [
        (lf, "matmul(8,8,8, layout_free=B)"),
        (plain, "matmul(8,8,8)"),
    ] {
        sqlx::query("INSERT INTO workloads VALUES ($1, $2, $3, 1024, 0)")
            .bind(&t.key)
            .bind(desc)
            .bind(serde_json::to_string(&t.dag).unwrap())
            .execute(&pool)
            .await
            .unwrap();
    }
    pool.close().await;
}

#[tokio::test]
async fn layout_free_workloads_stored_before_migration_4_get_typed_options() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v3.db");
    let dag = ops::matmul(8, 8, 8).unwrap();
    let lf = Task::new(dag.clone(), "m")
        .with_layout_free(&["B"])
        .unwrap();
    let plain = Task::new(dag, "m");
    version_3_database(&path, &lf, &plain).await;

    let s = SqlStore::open(path.to_str().unwrap()).await.unwrap();
    let w = s.workload(&lf.key).await.unwrap().unwrap();
    assert_eq!(w.options.layout_free, ["B"]);
    assert_eq!(w.description.as_deref(), Some("matmul(8,8,8)"));
    // The stored key is the one the typed options make: old records keep matching.
    let task = w.to_task().unwrap();
    assert_eq!(
        (task.key.as_str(), task.layout_free.as_slice()),
        (lf.key.as_str(), &[1][..])
    );
    let p = s.workload(&plain.key).await.unwrap().unwrap();
    assert!(p.options.is_empty());
    assert_eq!(p.to_task().unwrap().key, plain.key);
    s.close().await;
    // Opening again changes nothing.
    let s = SqlStore::open(path.to_str().unwrap()).await.unwrap();
    assert_eq!(s.workload(&lf.key).await.unwrap().unwrap(), w);
}

#[tokio::test]
async fn a_workloads_options_are_stored_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_store(&dir).await;
    let t = Task::new(ops::matmul(8, 8, 8).unwrap(), "matmul(8,8,8)")
        .with_layout_free(&["B"])
        .unwrap();
    let dag_json = serde_json::to_string(&t.dag).unwrap();
    s.put_workload(&t.key, &t.desc, &dag_json, t.flops, &t.options())
        .await
        .unwrap();
    let w = s.workload(&t.key).await.unwrap().unwrap();
    assert_eq!(w.options, t.options());
    assert_eq!(w.to_task().unwrap().key, t.key);
    // Options that do not make the stored key are refused when the task is rebuilt.
    let wrong = Workload {
        options: WorkloadOptions::default(),
        ..w.clone()
    };
    assert!(wrong.to_task().unwrap_err().contains("make key"));
}

/// Stores `task` as a workload and, with `cost`, a best record of it on `T`.
async fn put_tuned(s: &SqlStore, task: &Task, cost: Option<f64>) {
    let dag_json = serde_json::to_string(&task.dag).unwrap();
    s.put_workload(
        &task.key,
        &task.desc,
        &dag_json,
        task.flops,
        &task.options(),
    )
    .await
    .unwrap();
    if let Some(c) = cost {
        s.commit(&rec(&task.key, T, 1, &[c, c], ErrorCode::NoError, false))
            .await
            .unwrap();
    }
}

fn mm(m: i64, n: i64, k: i64) -> Task {
    Task::new(
        ops::matmul(m, n, k).unwrap(),
        format!("matmul({m},{n},{k})"),
    )
}

/// The nearest tuned workloads: same structure only, tuned on the target only, nearest first,
/// the workload itself left out, at most k.
#[tokio::test]
async fn nearest_tuned_workloads_of_one_structure_come_nearest_first() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_store(&dir).await;
    let asked = mm(96, 64, 64);
    put_tuned(&s, &asked, Some(1e-3)).await;
    put_tuned(&s, &mm(128, 64, 64), Some(1e-3)).await;
    put_tuned(&s, &mm(512, 512, 512), Some(1e-3)).await;
    put_tuned(&s, &mm(64, 64, 64), Some(1e-3)).await;
    // Same structure but not tuned; tuned but another structure or another layout.
    put_tuned(&s, &mm(100, 64, 64), None).await;
    let bmm = Task::new(ops::batch_matmul(1, 96, 64, 64).unwrap(), "bmm");
    put_tuned(&s, &bmm, Some(1e-3)).await;
    let lf = mm(96, 64, 64).with_layout_free(&["B"]).unwrap();
    put_tuned(&s, &lf, Some(1e-3)).await;

    let near = s.nearest(&asked, T, 10).await.unwrap();
    let keys: Vec<&str> = near.iter().map(|n| n.workload.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            mm(128, 64, 64).key.as_str(),
            mm(64, 64, 64).key.as_str(),
            mm(512, 512, 512).key.as_str()
        ]
    );
    assert!(near.windows(2).all(|w| w[0].distance <= w[1].distance));
    assert!(near.iter().all(|n| n.best.workload_key == n.workload.key));
    assert_eq!(s.nearest(&asked, T, 1).await.unwrap().len(), 1);
    assert!(s.nearest(&asked, "t1", 10).await.unwrap().is_empty());
    // A workload never stored is answered from its structure all the same.
    let unseen = s.nearest(&mm(100, 60, 64), T, 10).await.unwrap();
    assert_eq!(unseen.len(), 4, "{unseen:?}");
    // The layout-free one has its own structure: its neighbours are layout-free too (none).
    assert!(s.nearest(&lf, T, 10).await.unwrap().is_empty());
}

/// The neighbours with their fastest records: per workload the `per` fastest timed ones,
/// fastest first, noisy and failed ones left out, the first the neighbour's best; found in
/// two queries whatever the number of neighbours (`tests/tests/postgres.rs`: the same on
/// PostgreSQL).
#[tokio::test]
async fn nearest_workloads_come_with_their_fastest_records() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_store(&dir).await;
    let (near, far) = (mm(64, 64, 64), mm(512, 64, 64));
    put_tuned(&s, &near, None).await;
    put_tuned(&s, &far, Some(4e-3)).await;
    for (sched, cost, error, noisy) in [
        (1, 3e-3, ErrorCode::NoError, false),
        (2, 1e-3, ErrorCode::NoError, false),
        (3, 2e-3, ErrorCode::NoError, false),
        (4, 5e-4, ErrorCode::NoError, true),
        (5, 0.0, ErrorCode::CompileError, false),
    ] {
        let costs: &[f64] = if error == ErrorCode::NoError {
            &[cost, cost]
        } else {
            &[]
        };
        s.commit(&rec(&near.key, T, sched, costs, error, noisy))
            .await
            .unwrap();
    }
    let got = s
        .nearest_with_records(&mm(96, 64, 64), T, 2, 2)
        .await
        .unwrap();
    let seen: Vec<(&str, Vec<Option<f64>>)> = got
        .iter()
        .map(|(n, rs)| {
            assert_eq!(n.best, rs[0], "the best is the fastest");
            (
                n.workload.key.as_str(),
                rs.iter().map(|r| r.mean_cost).collect(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (near.key.as_str(), vec![Some(1e-3), Some(2e-3)]),
            (far.key.as_str(), vec![Some(4e-3)])
        ]
    );
    assert_eq!(
        s.nearest(&mm(96, 64, 64), T, 1).await.unwrap()[0]
            .best
            .mean_cost,
        Some(1e-3)
    );
}

/// Workloads stored before migration 6 get their structure when the database is opened.
#[tokio::test]
async fn workloads_stored_before_migration_6_get_their_structure_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v5.db");
    let (a, b) = (mm(32, 32, 32), mm(64, 32, 32));
    {
        let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}?mode=rwc", path.display()))
            .await
            .unwrap();
        super::migrations::up_to(5).run(&pool).await.unwrap();
        for t in [&a, &b] {
            sqlx::query("INSERT INTO workloads VALUES ($1, $2, $3, 1024, 0, '[]')")
                .bind(&t.key)
                .bind(&t.desc)
                .bind(serde_json::to_string(&t.dag).unwrap())
                .execute(&pool)
                .await
                .unwrap();
        }
        pool.close().await;
    }
    let s = SqlStore::open(path.to_str().unwrap()).await.unwrap();
    s.put_target(T, "{}").await.unwrap();
    s.commit(&rec(&b.key, T, 1, &[1e-3, 1e-3], ErrorCode::NoError, false))
        .await
        .unwrap();
    let near = s.nearest(&a, T, 5).await.unwrap();
    assert_eq!(near.len(), 1);
    assert_eq!(near[0].workload.key, b.key);
    assert!(
        (near[0].distance - 2.0 * 2f64.ln()).abs() < 1e-9,
        "{}",
        near[0].distance
    );
}

/// The neighbour index: `refill` reads every set of a target; a better record of a workload
/// the index holds keeps the sets, and the first best of a new workload forgets them (so the
/// next lookup sees it).
#[tokio::test]
async fn the_neighbour_index_is_forgotten_only_for_a_new_tuned_workload() {
    use super::neighbours::Lookup;
    let dir = tempfile::tempdir().unwrap();
    let s = new_store(&dir).await;
    let (a, b) = (mm(64, 64, 64), mm(128, 64, 64));
    put_tuned(&s, &a, Some(1e-3)).await;
    let structure = tunehub_engine::transfer::structure_key(&a.dag, &a.layout_free);
    assert_eq!(s.neighbours.get(&structure, T), Lookup::Missing);
    s.refill(T).await.unwrap();
    let Lookup::Fresh(tuned) = s.neighbours.get(&structure, T) else {
        panic!("refill reads the set")
    };
    assert_eq!(tuned.len(), 1);
    assert!(
        s.neighbours
            .holds_all(T, &std::collections::HashSet::from([a.key.as_str()]))
    );

    // A faster record of `a`: a new best, the same set.
    let faster = NewRecord {
        workload_key: a.key.clone(),
        ..rec(W, T, 7, &[5e-4, 5e-4], ErrorCode::NoError, false)
    };
    assert_eq!(
        s.commit(&faster).await.unwrap(),
        CommitOutcome::Inserted { is_new_best: true }
    );
    assert!(matches!(s.neighbours.get(&structure, T), Lookup::Fresh(_)));

    // The first best of `b`: forgotten, and read again with it.
    put_tuned(&s, &b, Some(1e-3)).await;
    assert_eq!(s.neighbours.get(&structure, T), Lookup::Missing);
    let near = s.nearest(&mm(96, 64, 64), T, 10).await.unwrap();
    assert_eq!(near.len(), 2, "{near:?}");
}

/// Records stored in one millisecond (a job's batch) export in the order they were stored, not
/// by id: a job's records read back in its batches' order.
#[tokio::test]
async fn records_of_one_millisecond_export_in_the_order_stored() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_store(&dir).await;
    let at = |r: NewRecord, ms: i64| NewRecord {
        created_at: Some(ms),
        ..r
    };
    let scheds = [7, 3, 9, 1, 5, 8, 2];
    for (k, sched) in scheds.into_iter().enumerate() {
        s.commit(&at(ok(sched, 1.0 + k as f64), 1_000))
            .await
            .unwrap();
    }
    s.commit(&at(ok(4, 0.5), 999)).await.unwrap();
    let out = s.export_records(Some(W), Some(T)).await.unwrap();
    let order: Vec<&str> = out.iter().map(|r| r.steps_json.as_str()).collect();
    let mut want = vec!["[[\"SP\",4]]".to_string()];
    want.extend(scheds.iter().map(|k| format!("[[\"SP\",{k}]]")));
    assert_eq!(order, want, "oldest first, then as stored");
    let ids: Vec<&str> = out[1..].iter().map(|r| r.id.as_str()).collect();
    assert!(!ids.is_sorted(), "the ids alone would give another order");
}

#[tokio::test]
async fn a_locked_database_is_unavailable_a_broken_constraint_is_not() {
    use sqlx::{Connection, Executor, SqliteConnection};
    let dir = tempfile::tempdir().unwrap();
    let store = new_store(&dir).await;
    // Another process's write lock (an operator's sqlite3, a backup) ...
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let mut holder = SqliteConnection::connect(&url).await.unwrap();
    holder.execute("BEGIN IMMEDIATE").await.unwrap();
    // ... met by one of the store's connections (through the Any driver, as in the server),
    // without waiting for it.
    let mut conn = store.pool().acquire().await.unwrap();
    conn.execute("PRAGMA busy_timeout = 0").await.unwrap();
    let insert = "INSERT INTO targets (key, target_json, created_at) VALUES ('t9', '{}', 0)";
    let busy = conn.execute(insert).await.unwrap_err();
    assert!(StoreError::Db(busy).is_unavailable());
    holder.execute("ROLLBACK").await.unwrap();
    conn.execute(insert).await.unwrap();
    let duplicate = conn.execute(insert).await.unwrap_err();
    assert!(!StoreError::Db(duplicate).is_unavailable());
}

#[tokio::test]
async fn a_damaged_file_is_refused_at_open_naming_the_damage() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let store = new_store(&dir).await;
    for i in 0..200 {
        store
            .commit(&ok(i, 1e-3 + f64::from(i) * 1e-6))
            .await
            .unwrap();
    }
    store.close().await;
    let good = std::fs::read(&path).unwrap();
    let open = |bytes: Vec<u8>| {
        let p = path.clone();
        async move {
            std::fs::write(&p, bytes).unwrap();
            SqlStore::open(p.to_str().unwrap()).await
        }
    };
    // The file opens as it is.
    open(good.clone()).await.unwrap().close().await;
    // A damaged header: not a database, said at once (not 30 s of retries).
    let mut header = good.clone();
    header[..16].copy_from_slice(b"not a database!!");
    let e = open(header).await.unwrap_err();
    let chain = format!("{e}: {}", std::error::Error::source(&e).unwrap());
    assert!(chain.contains("not a database"), "{chain}");
    // Damage in the middle: a page past the header overwritten.
    let page = 4096;
    assert!(good.len() >= 4 * page, "a file of {} bytes", good.len());
    let mut middle = good.clone();
    middle[2 * page..3 * page].fill(0xA5);
    let e = open(middle).await.unwrap_err();
    assert!(matches!(e, StoreError::Damaged { .. }), "{e}");
    assert!(e.to_string().contains("restore it"), "{e}");
}

/// A transaction SQLite ended by itself (as it does on an I/O error or a full disk, the file
/// made unwritable), which sqlx still counts open: its connection must not go on holding a
/// transaction, nor SQLite's write lock (issue 64: every later write "database is locked").
#[tokio::test]
async fn a_transaction_sqlite_ended_itself_leaves_no_lock_in_the_pool() {
    use sqlx::{Acquire, Connection, Executor, SqliteConnection};
    let dir = tempfile::tempdir().unwrap();
    let store = new_store(&dir).await;
    let insert = |k: &str| {
        format!("INSERT INTO targets (key, target_json, created_at) VALUES ('{k}', '{{}}', 0)")
    };
    {
        let mut conn = store.pool().acquire().await.unwrap();
        let mut tx = conn.begin().await.unwrap();
        tx.execute(insert("t8").as_str()).await.unwrap();
        // SQLite's own rollback, behind sqlx's back; then sqlx's ROLLBACK on drop fails.
        tx.execute("ROLLBACK").await.unwrap();
    }
    // Every connection the pool may hold, the one above among them, runs a transaction that is
    // rolled back. On a connection whose count was left at 1 that was a `SAVEPOINT` and a
    // `ROLLBACK TO`, which kept SQLite's write transaction open.
    let mut held = vec![];
    for _ in 0..store.pool().options().get_max_connections() {
        held.push(store.pool().acquire().await.unwrap());
    }
    for conn in &mut held {
        assert!(!conn.is_in_transaction());
        let mut tx = conn.begin().await.unwrap();
        tx.execute(insert("t9").as_str()).await.unwrap();
        tx.rollback().await.unwrap();
    }
    drop(held);
    // Another process takes the write lock at once.
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let mut other = SqliteConnection::connect(&url).await.unwrap();
    other.execute("PRAGMA busy_timeout = 0").await.unwrap();
    other.execute("BEGIN IMMEDIATE").await.unwrap();
    other.execute("ROLLBACK").await.unwrap();
    // And the pool writes.
    store.pool().execute(insert("t9").as_str()).await.unwrap();
}
