//! The service on PostgreSQL: the same code path as SQLite, and two servers sharing one
//! database never running a job twice.
//!
//! Needs TUNEHUB_TEST_PG_URL (a database the tests may create databases with; `.ci/run` starts
//! a throwaway cluster and sets it). Without it the tests fail under CI=true and are skipped,
//! with a note, elsewhere.

use sqlx::Row;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tunehub_proto::v1 as pb;
use tunehub_server::jobs::store::JobStore;
use tunehub_server::records::{NewRecord, RecordStore, SqlStore};
use tunehub_tests::*;

#[tokio::test]
async fn submit_watch_and_query_on_postgres() {
    let Some(url) = fresh_db("e2e").await else {
        return;
    };
    let server = Server::start(&url, "pg1", &[]);
    let mut c = server.client().await;
    let job = submit(&mut c, submit_req(vec![task("matmul(32,32,32)", 3)], 3)).await;
    let j = wait_final(&mut c, &job.id, Duration::from_secs(240)).await;
    assert_eq!(j.state, pb::JobState::Done as i32, "{j:?}");
    assert_eq!(j.tasks[0].trials_done, 3);
    let best = c
        .query
        .best(pb::BestRequest {
            workload: Some(op("matmul(32,32,32)")),
            target: String::new(),
            with_source: true,
            allow_transfer: false,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(best.found && best.source.contains("void tunehub_"));
    assert_eq!(best.records_total, 3);
    // Export and import through the same server: everything already known.
    let mut s = c
        .records
        .export(pb::ExportRequest::default())
        .await
        .unwrap()
        .into_inner();
    let mut lines = vec![];
    while let Some(m) = tokio_stream::StreamExt::next(&mut s).await {
        lines.extend(m.unwrap().lines);
    }
    assert_eq!(lines.len(), 5);
    let r = c
        .records
        .import(tokio_stream::iter(vec![pb::RecordLines { lines }]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((r.records_new, r.records_known), (0, 3));
}

/// A store on `url` holding target `t` and workload `w`, for records and jobs to refer to.
async fn store_with_one_pair(url: &str) -> SqlStore {
    let store = SqlStore::open(url).await.unwrap();
    store.put_target("t", "{}").await.unwrap();
    store
        .put_workload("w", "w", "{}", 1, &Default::default())
        .await
        .unwrap();
    store
}

#[tokio::test]
async fn a_failed_record_then_a_timed_one_on_one_connection() {
    let Some(url) = fresh_db("nullcost").await else {
        return;
    };
    let store = store_with_one_pair(&url).await;
    let rec = |n: u32, costs: Vec<f64>, error_code: i32| NewRecord {
        workload_key: "w".into(),
        target_key: "t".into(),
        steps_json: format!("[[\"SP\", {n}]]"),
        costs,
        error_code,
        error_msg: String::new(),
        noisy: false,
        build_s: 0.0,
        run_s: 0.0,
        worker: None,
        created_at: None,
    };
    // One transaction, so one connection: the insert statement is first run with no mean
    // cost (a compile error), then with one; an import or a job's batch does the same.
    let (new, known) = store
        .import(
            &[],
            &[],
            &[],
            &[rec(1, vec![], 2), rec(2, vec![1e-3], 0), rec(3, vec![], 2)],
        )
        .await
        .unwrap();
    assert_eq!((new, known), (3, 0));
    let best = store.best("w", "t").await.unwrap().unwrap();
    assert_eq!(best.mean_cost, Some(1e-3));
    assert_eq!(store.records("w", "t").await.unwrap().len(), 3);
}

#[tokio::test]
async fn concurrent_claims_take_each_job_once() {
    let Some(url) = fresh_db("claims").await else {
        return;
    };
    let store = store_with_one_pair(&url).await;
    let jobs = JobStore::new(store);
    let mut ids = HashSet::new();
    for _ in 0..20 {
        ids.insert(jobs.create(&store_job()).await.unwrap());
    }
    // Eight claimers race until nothing is left; a long lease, so nothing expires meanwhile.
    let jobs = Arc::new(jobs);
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let jobs = Arc::clone(&jobs);
            tokio::spawn(async move {
                let mut got = vec![];
                while let Some(j) = jobs
                    .claim_next(&format!("c{i}"), "t", 600_000, None)
                    .await
                    .unwrap()
                {
                    got.push(j.id);
                }
                got
            })
        })
        .collect();
    let mut claimed = vec![];
    for h in handles {
        claimed.extend(h.await.unwrap());
    }
    assert_eq!(claimed.len(), 20, "every job claimed exactly once");
    assert_eq!(claimed.iter().cloned().collect::<HashSet<_>>(), ids);
}

#[tokio::test]
async fn two_servers_on_one_database_never_run_a_job_twice() {
    let Some(url) = fresh_db("two").await else {
        return;
    };
    // Start one first so that the migrations are applied once, then the second.
    let a = Server::start(&url, "A", &[]);
    let b = Server::start(&url, "B", &[]);
    let mut ca = a.client().await;
    let mut cb = b.client().await;
    let mut ids = vec![];
    for (i, spec) in [
        "matmul(16,16,16)",
        "matmul(16,8,16)",
        "matmul(8,16,16)",
        "matmul(8,8,16)",
    ]
    .iter()
    .enumerate()
    {
        let c = if i % 2 == 0 { &mut ca } else { &mut cb };
        ids.push(submit(c, submit_req(vec![task(spec, 3)], 3)).await.id);
    }
    let mut runners = HashSet::new();
    for id in &ids {
        let j = wait_final(&mut ca, id, Duration::from_secs(300)).await;
        assert_eq!(j.state, pb::JobState::Done as i32, "{j:?}");
        assert_eq!(j.claims, 1, "claimed once: {j:?}");
        assert_eq!(j.tasks[0].trials_done, 3);
        runners.insert(j.claimed_by.clone());
    }
    // Every record of a job was measured by the server that claimed it.
    let store = SqlStore::open(&url).await.unwrap();
    let rows = sqlx::query(
        "SELECT j.id, j.claimed_by, r.worker FROM job_records jr JOIN jobs j ON j.id = jr.job_id \
         JOIN records r ON r.id = jr.record_id",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    assert_eq!(rows.len(), 12);
    for r in &rows {
        let (claimed, worker): (String, String) = (r.try_get(1).unwrap(), r.try_get(2).unwrap());
        assert_eq!(claimed, worker);
    }
    eprintln!("jobs ran on: {runners:?}");
}

#[tokio::test]
async fn workload_options_are_stored_and_legacy_descriptions_moved_on_postgres() {
    use tunehub_engine::{ops, task::Task};
    let Some(url) = fresh_db("options").await else {
        return;
    };
    let store = SqlStore::open(&url).await.unwrap();
    let dag = ops::matmul(8, 8, 8).unwrap();
    let typed = Task::new(dag.clone(), "matmul(8,8,8)")
        .with_layout_free(&["B"])
        .unwrap();
    let dag_json = serde_json::to_string(&dag).unwrap();
    store
        .put_workload(&typed.key, &typed.desc, &dag_json, 1, &typed.options())
        .await
        .unwrap();
    let w = store.workload(&typed.key).await.unwrap().unwrap();
    assert_eq!(w.to_task().unwrap().key, typed.key);
    // A row as a server before typed options wrote it: the names in the description only.
    let legacy = Task::new(dag, "").with_layout_free(&["A"]).unwrap();
    sqlx::query(
        "INSERT INTO workloads (key, description, dag_json, flops, created_at) \
         VALUES ($1, 'matmul(8,8,8,layout_free=A)', $2, 1, 0)",
    )
    .bind(&legacy.key)
    .bind(&dag_json)
    .execute(store.pool())
    .await
    .unwrap();
    store.close().await;
    let store = SqlStore::open(&url).await.unwrap();
    let w = store.workload(&legacy.key).await.unwrap().unwrap();
    assert_eq!(
        (w.description.as_deref(), w.options.layout_free.as_slice()),
        (Some("matmul(8,8,8)"), &["A".to_string()][..])
    );
    assert_eq!(w.to_task().unwrap().key, legacy.key);
    let tuned = store.tuned().await.unwrap();
    assert!(tuned.is_empty(), "no records yet: {tuned:?}");
}

/// The neighbours with their fastest records on PostgreSQL (one windowed query for all of
/// them): per workload the `per` fastest timed records, fastest first, noisy ones left out.
#[tokio::test]
async fn nearest_workloads_come_with_their_fastest_records_on_postgres() {
    use tunehub_engine::{ops, task::Task};
    let Some(url) = fresh_db("nearest").await else {
        return;
    };
    let store = SqlStore::open(&url).await.unwrap();
    store.put_target("t", "{}").await.unwrap();
    let mm = |m: i64| {
        Task::new(
            ops::matmul(m, 64, 64).unwrap(),
            format!("matmul({m},64,64)"),
        )
    };
    let (near, far) = (mm(64), mm(512));
    for t in [&near, &far] {
        let dag = serde_json::to_string(&t.dag).unwrap();
        store
            .put_workload(&t.key, &t.desc, &dag, t.flops, &t.options())
            .await
            .unwrap();
    }
    let rec = |w: &Task, n: u32, cost: f64, noisy: bool| NewRecord {
        workload_key: w.key.clone(),
        target_key: "t".into(),
        steps_json: format!("[[\"SP\", {n}]]"),
        costs: vec![cost, cost],
        error_code: 0,
        error_msg: String::new(),
        noisy,
        build_s: 0.0,
        run_s: 0.0,
        worker: None,
        created_at: None,
    };
    for r in [
        rec(&near, 1, 3e-3, false),
        rec(&near, 2, 1e-3, false),
        rec(&near, 3, 2e-3, false),
        rec(&near, 4, 5e-4, true),
        rec(&far, 1, 4e-3, false),
    ] {
        store.commit(&r).await.unwrap();
    }
    let got = store
        .nearest_with_records(&mm(96), "t", 2, 2)
        .await
        .unwrap();
    let seen: Vec<(String, Vec<Option<f64>>)> = got
        .iter()
        .map(|(n, rs)| {
            assert_eq!(n.best, rs[0], "the best is the fastest");
            (
                n.workload.key.clone(),
                rs.iter().map(|r| r.mean_cost).collect(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (near.key.clone(), vec![Some(1e-3), Some(2e-3)]),
            (far.key.clone(), vec![Some(4e-3)])
        ]
    );
}
