//! Server replicas sharing the fleet through one PostgreSQL database: a pool of workers is owned
//! by one replica under a database lease (`pool_owners`), a worker registering with another is
//! sent to the owner, and when the owner is killed (kill -9) its pool and its jobs continue on
//! the other replica once the leases lapse, each trial stored once.
//!
//! Real `tunehub server` and `tunehub-worker` processes on loopback; the database is a fresh
//! one on the PostgreSQL test cluster (TUNEHUB_TEST_PG_URL).

use sqlx::{Connection, Row};
use std::process::Command;
use std::time::Duration;
use tonic::Code;
use tunehub::client::Clients;
use tunehub_proto::v1 as pb;
use tunehub_tests::{
    Server, Worker, binaries, code_of, fresh_db, get, quick, submit, task, wait, wait_final,
    wait_trials,
};

/// Keeps the workers' target apart from the servers' own ("local") one.
const FLEET_CFLAGS: &str = "--cflags=-DTUNEHUB_REPLICAS_TEST";

/// Short heartbeats: a dead replica's workers notice, and go elsewhere, within a second.
const FAST: [&str; 4] = ["--heartbeat-ms", "200", "--population", "64"];

/// The workers a replica lists as online, by device id.
async fn online(c: &mut Clients) -> Vec<String> {
    let mut ids: Vec<String> = c
        .workers
        .list(pb::ListWorkersRequest {})
        .await
        .expect("list workers")
        .into_inner()
        .workers
        .into_iter()
        .filter(|w| w.status != "offline")
        .map(|w| w.device_id)
        .collect();
    ids.sort();
    ids
}

async fn wait_online(c: &mut Clients, want: &[&str]) {
    wait::until(
        &format!("workers {want:?} registered"),
        Duration::from_secs(60),
        async || (online(c).await == want).then_some(()),
    )
    .await
}

async fn count(url: &str, sql: &str) -> i64 {
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    let n = sqlx::query(sql)
        .fetch_one(&mut conn)
        .await
        .unwrap()
        .get::<i64, _>(0);
    conn.close().await.unwrap();
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_of_one_pool_gather_at_the_replica_that_owns_it() {
    let Some(url) = fresh_db("replicas_pool").await else {
        return;
    };
    // One first, so that the migrations are applied once.
    let a = Server::start(&url, "rep-a", &FAST);
    let b = Server::start(&url, "rep-b", &FAST);
    let (mut ca, mut cb) = (a.client().await, b.client().await);

    // A bad description is refused by either replica, and takes no pool.
    let bad = cb
        .workers
        .register(pb::RegisterWorkerRequest {
            device_id: "bad".into(),
            target_json: "{".into(),
        })
        .await;
    let (code, msg) = code_of(bad);
    assert_eq!(code, Code::InvalidArgument, "{msg}");
    assert!(msg.contains("target_json"), "{msg}");
    assert_eq!(count(&url, "SELECT COUNT(*) FROM pool_owners").await, 0);

    let _wa = Worker::start(&a.url(), "wa", &[FLEET_CFLAGS]);
    wait_online(&mut ca, &["wa"]).await;
    // Pointed at the other replica, the second worker of the pool is sent to the owner.
    let _wb = Worker::start(&b.url(), "wb", &[FLEET_CFLAGS]);
    wait_online(&mut ca, &["wa", "wb"]).await;
    assert_eq!(online(&mut cb).await, Vec::<String>::new(), "b keeps none");
    let owner = count(
        &url,
        "SELECT COUNT(*) FROM pool_owners WHERE owner = 'rep-a'",
    )
    .await;
    assert_eq!(owner, 1, "one pool, owned by rep-a");
    // The listing carries the pool's description once, not per worker.
    let list = ca
        .workers
        .list(pb::ListWorkersRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.targets.len(), 1, "{:?}", list.targets.keys());
    let desc = &list.targets[&list.workers[0].target_key];
    assert!(desc.contains("\"arch\""), "{desc}");
    assert!(list.workers.iter().all(|w| w.target_json.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replicas_pool_and_job_continue_on_the_other_each_trial_once() {
    const TRIALS: u32 = 8;
    let Some(url) = fresh_db("replicas_kill").await else {
        return;
    };
    let mut a = Server::start(&url, "rep-a", &FAST);
    let b = Server::start(&url, "rep-b", &FAST);
    let mut cb = b.client().await;
    // The worker knows both (as a Service would give them); the first it reaches owns the pool.
    let servers = format!("{},{}", a.url(), b.url());
    let _w = Worker::start(&servers, "w1", &[FLEET_CFLAGS]);
    let mut ca = a.client().await;
    wait_online(&mut ca, &["w1"]).await;
    let pool = ca
        .workers
        .list(pb::ListWorkersRequest {})
        .await
        .unwrap()
        .into_inner()
        .workers[0]
        .target_key
        .clone();

    // Submitted through b: a claims it, as the pool's owner.
    let job = submit(
        &mut cb,
        pb::SubmitRequest {
            tasks: vec![task("matmul(8,8,16)", TRIALS)],
            target: pool.clone(),
            measure: Some(quick()),
            batch_size: 2,
            seed: 5,
            ..Default::default()
        },
    )
    .await;
    let n = wait_trials(&mut cb, &job.id, 2, Duration::from_secs(300)).await;
    assert!(n < TRIALS, "the job ended before the kill");
    let seen = get(&mut cb, &job.id).await;
    assert_eq!(seen.claimed_by, "rep-a");
    // Seen through b, the job names the replica that owns its pool, not "no worker online".
    assert!(
        seen.waiting.contains("server replica rep-a"),
        "{}",
        seen.waiting
    );

    a.kill();
    let j = wait_final(&mut cb, &job.id, Duration::from_secs(300)).await;
    assert_eq!(j.state, pb::JobState::Done as i32, "{j:?}");
    assert_eq!(
        j.claimed_by, "rep-b",
        "finished by the surviving replica: {j:?}"
    );
    assert_eq!(j.tasks[0].trials_done, TRIALS, "{j:?}");
    assert_eq!(online(&mut cb).await, ["w1"], "the worker moved to b");
    // Each trial once: job_records rows = distinct records = the pair's records.
    let id = &job.id;
    let rows = count(
        &url,
        &format!("SELECT COUNT(*) FROM job_records WHERE job_id = '{id}'"),
    )
    .await;
    let distinct = count(
        &url,
        &format!("SELECT COUNT(DISTINCT record_id) FROM job_records WHERE job_id = '{id}'"),
    )
    .await;
    let records = count(
        &url,
        &format!(
            "SELECT COUNT(*) FROM records WHERE workload_key = '{}' AND target_key = '{pool}'",
            j.tasks[0].workload_key
        ),
    )
    .await;
    let want = i64::from(TRIALS);
    assert_eq!(
        (rows, distinct, records),
        (want, want, want),
        "job_records rows, distinct records, records of the job's (workload, target)"
    );
}

#[test]
fn a_blank_advertise_address_is_bad_input() {
    let out = Command::new(binaries::tunehub())
        .args(["server", "--allow-unauthenticated", "--advertise-addr", " "])
        .env_remove("TUNEHUB_CONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("advertise address"), "{err}");
}
