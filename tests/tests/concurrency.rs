//! Concurrent jobs on one server: jobs of different target pools (the server's own machine and
//! a pool of `tunehub-worker` devices) run at the same time; within one pool, queued jobs start
//! by priority, and a queued job says which job it waits behind; a priority out of range is
//! refused and stores nothing.

use std::process::Command;
use std::time::Duration;
use tonic::Code;
use tunehub_proto::v1 as pb;
use tunehub_server::client::Clients;
use tunehub_tests::{
    Server, TOKEN, Worker, binaries, code_of, get, quick, submit, task, wait, wait_final,
};

/// Keeps the worker's target apart from the server's own, as in the fleet tests.
const FLEET_CFLAGS: &str = "--cflags=-DTUNEHUB_CONCURRENCY_TEST";

fn job(spec: &str, trials: u32, target: &str, priority: i32) -> pb::SubmitRequest {
    pb::SubmitRequest {
        tasks: vec![task(spec, trials)],
        target: target.into(),
        measure: Some(quick()),
        batch_size: 2,
        seed: 5,
        scheduler: 0,
        name: format!("p{priority}"),
        priority,
        targets: vec![],
        range: None,
    }
}

/// When each record of a job's workload on `target` was stored.
async fn record_times(c: &mut Clients, spec: &str, target: &str) -> Vec<i64> {
    c.query
        .top_k(pb::TopKRequest {
            workload: Some(tunehub_tests::op(spec)),
            target: target.into(),
            k: 1000,
            omit_kernel: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .records
        .iter()
        .map(|r| r.created_at_ms)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_run_jobs_at_once_and_a_pool_takes_its_queue_by_priority() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&tunehub_tests::sqlite_path(dir.path(), "c.db"), "s1", &[]);
    let _w = Worker::start(&server.url(), "w1", &[FLEET_CFLAGS]);
    let mut c = server.client().await;
    let pool = tunehub_tests::wait_pool(&mut c).await;

    // Out of range: refused, nothing stored.
    let (code, msg) = code_of(c.jobs.submit(job("matmul(8,8,8)", 2, "local", 11)).await);
    assert_eq!(code, Code::InvalidArgument, "{msg}");
    assert!(msg.contains("priority 11"), "{msg}");
    let listed = c
        .jobs
        .list(pb::ListJobsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .jobs;
    assert!(listed.is_empty(), "{listed:?}");

    // A local job and a pool job: both running at one moment.
    let local = submit(&mut c, job("matmul(16,16,16)", 40, "local", 0)).await;
    let long = submit(&mut c, job("matmul(16,32,16)", 40, &pool, 0)).await;
    wait::until(
        "both pools running a job",
        Duration::from_secs(120),
        async || {
            let a = get(&mut c, &local.id).await;
            let b = get(&mut c, &long.id).await;
            let running = pb::JobState::Running as i32;
            (a.state == running && b.state == running).then_some(())
        },
    )
    .await;

    // Behind the running pool job: an older job at priority 0 and a newer one at 5. The pool
    // starts the newer one first; the older says what it waits for.
    let low = submit(&mut c, job("matmul(8,16,16)", 2, &pool, 0)).await;
    let high = submit(&mut c, job("matmul(16,8,16)", 2, &pool, 5)).await;
    let j = get(&mut c, &low.id).await;
    if j.state == pb::JobState::Queued as i32 {
        assert!(j.waiting.contains("queued behind job"), "{j:?}");
    }
    let out = Command::new(binaries::tunehub())
        .args(["jobs", "--server", &server.url(), "--token", TOKEN])
        .env_remove("TUNEHUB_CONFIG")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains(&pool), "{text}");
    // Enough seen of the long ones: they stop after their current batch, and the pool moves on.
    for id in [&local.id, &long.id] {
        c.jobs
            .cancel(pb::CancelJobRequest { id: id.to_string() })
            .await
            .unwrap();
    }

    for id in [&low.id, &high.id] {
        let j = wait_final(&mut c, id, Duration::from_secs(300)).await;
        assert_eq!(j.state, pb::JobState::Done as i32, "{j:?}");
    }
    let high_times = record_times(&mut c, "matmul(16,8,16)", &pool).await;
    let low_times = record_times(&mut c, "matmul(8,16,16)", &pool).await;
    assert!(!high_times.is_empty() && !low_times.is_empty());
    assert!(
        high_times.iter().max() <= low_times.iter().min(),
        "the priority-5 job ran first: {high_times:?} before {low_times:?}"
    );
}
