//! The stores' writes that return rows (`UPDATE ... RETURNING`: a job's claim, its lease's
//! renewal, a pool's owner row) on a SQLite file made unwritable for a while: each must fail
//! when its commit does, never report what was not saved, and work again once the file is
//! writable.

use sqlx::Executor;
use tunehub_server::fleet::OwnerStore;
use tunehub_server::fleet::owners::Claim;
use tunehub_server::jobs::store::{Holder, JobStore, Lease};
use tunehub_server::records::{RecordStore, SqlStore, StoreError};
use tunehub_tests::{Immutable, sqlite_path, store_job};

#[tokio::test]
async fn writes_returning_rows_fail_while_the_database_is_unwritable() {
    let test = "writes_returning_rows_fail_while_the_database_is_unwritable";
    let dir = tempfile::tempdir().unwrap();
    if !Immutable::available(test, dir.path()) {
        return;
    }
    let db = sqlite_path(dir.path(), "faults.db");
    let store = SqlStore::open(&db).await.unwrap();
    store.put_target("t", "{}").await.unwrap();
    store
        .put_workload("w", "w", "{}", 1, &Default::default())
        .await
        .unwrap();
    let jobs = JobStore::new(store.clone());
    let owners = OwnerStore::new(store.clone());
    let (first, second) = (
        jobs.create(&store_job()).await.unwrap(),
        jobs.create(&store_job()).await.unwrap(),
    );
    let lease = 600_000;
    let claimed = jobs
        .claim_next("A", "t", lease, Some(&first))
        .await
        .unwrap()
        .expect("the first job is queued");
    let holder = Holder {
        instance: "A",
        claim: claimed.claims,
    };
    // Each take renews the row until a later time.
    let take = |now| owners.take("t", "A", "127.0.0.1:1", lease, now);
    assert_eq!(take(1_000).await.unwrap(), Claim::Owned);

    // The file and its log unwritable (not the `-shm`, shared memory: see service.rs's
    // `a_database_unwritable_for_a_while_then_writable_again_needs_no_restart`).
    let fault = Immutable::set(&[db.clone(), format!("{db}-wal")]);
    let renewed = jobs.renew(&first, holder, lease).await;
    assert!(renewed.is_err(), "a renewal not saved: {renewed:?}");
    let next = jobs.claim_next("A", "t", lease, Some(&second)).await;
    assert!(next.is_err(), "a claim not saved: {next:?}");
    let owned = take(2_000).await;
    assert!(owned.is_err(), "a pool's owner row not saved: {owned:?}");
    // Every connection the pool may hold, at once: one it opened now, on the unwritable file,
    // SQLite would open read-only, for good.
    let mut held = vec![];
    for _ in 0..store.pool().options().get_max_connections() {
        held.push(store.pool().acquire().await.unwrap());
    }
    fault.lift();
    for (n, conn) in held.iter_mut().enumerate() {
        let insert = format!(
            "INSERT INTO targets (key, target_json, created_at) VALUES ('after-{n}', '{{}}', 0)"
        );
        conn.execute(insert.as_str())
            .await
            .unwrap_or_else(|e| panic!("connection {n} cannot write after the fault: {e}"));
    }
    drop(held);

    assert_eq!(
        jobs.renew(&first, holder, lease).await.unwrap(),
        Lease::Held
    );
    let next = jobs
        .claim_next("A", "t", lease, Some(&second))
        .await
        .unwrap()
        .expect("the second job, not claimed under the fault");
    assert_eq!((next.id, next.claims), (second, 1));
    assert_eq!(take(3_000).await.unwrap(), Claim::Owned);
}

/// A database file SQLite can open only read-only is refused when the store opens, with the
/// reason; it used to open and fail at its first write, and stay so after the file was fixed.
#[tokio::test]
async fn a_database_file_that_cannot_be_written_is_refused_at_open() {
    let test = "a_database_file_that_cannot_be_written_is_refused_at_open";
    let dir = tempfile::tempdir().unwrap();
    if !Immutable::available(test, dir.path()) {
        return;
    }
    // An empty file is an empty database. None of this process's connections has had it open:
    // SQLite reuses a closed connection's descriptor of a file (opened read-write, before the
    // flag) while another of the process holds a lock on it.
    let db = sqlite_path(dir.path(), "ro.db");
    std::fs::write(&db, b"").unwrap();
    let fault = Immutable::set(std::slice::from_ref(&db));
    let refused = SqlStore::open(&db).await.map(|_| ()).unwrap_err();
    let shown = format!("{refused:#}");
    assert!(
        matches!(refused, StoreError::Unwritable { .. }) && shown.contains(&db),
        "{shown}"
    );
    fault.lift();

    let store = SqlStore::open(&db).await.unwrap();
    store.put_target("t", "{}").await.unwrap();
    let targets: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM targets")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(targets, 1);
}
