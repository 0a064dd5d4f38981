//! Concurrent jobs on one server: jobs of different target pools (the server's own machine and
//! a pool of `tunehub-worker` devices) run at the same time; a pool runs up to its maximum of
//! jobs at once, sharing its workers by priority, and takes its queue by priority; a job says
//! why it waits or whom it shares its pool with; a priority out of range is refused and stores
//! nothing; a worker killed mid-piece while it serves two jobs costs neither anything.

use std::process::Command;
use std::time::Duration;
use tonic::Code;
use tunehub::client::Clients;
use tunehub_proto::v1 as pb;
use tunehub_tests::{
    Server, TOKEN, Worker, binaries, code_of, get, is_final, quick, submit, task, wait, wait_final,
    wait_trials,
};

/// These tests start servers and workers that compile kernels: one at a time on a small machine.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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
        cost_model: String::new(),
    }
}

/// When each record of a job's workload on `target` was stored.
async fn record_times(c: &mut Clients, spec: &str, target: &str) -> Vec<i64> {
    top(c, spec, target)
        .await
        .iter()
        .map(|r| r.created_at_ms)
        .collect()
}

/// The successful records of a workload on `target`.
async fn top(c: &mut Clients, spec: &str, target: &str) -> Vec<pb::ScheduleRecord> {
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
}

/// `tunehub jobs`' listing.
fn jobs_cli(server: &Server) -> String {
    let out = Command::new(binaries::tunehub())
        .args(["jobs", "--server", &server.url(), "--token", TOKEN])
        .env_remove("TUNEHUB_CONFIG")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{text}");
    text
}

async fn workers(c: &mut Clients) -> Vec<pb::WorkerInfo> {
    c.workers
        .list(pb::ListWorkersRequest {})
        .await
        .unwrap()
        .into_inner()
        .workers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_run_jobs_at_once_and_a_full_pool_takes_its_queue_by_priority() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    // One job at a time on the pool: its queue is taken by priority.
    let server = Server::start(
        &tunehub_tests::sqlite_path(dir.path(), "c.db"),
        "s1",
        &["--jobs-per-pool", "1"],
    );
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
        assert!(
            j.waiting
                .contains(&format!("pool {pool} runs its maximum of 1 job at once")),
            "{j:?}"
        );
    }
    let text = jobs_cli(&server);
    assert!(text.contains(&pool), "{text}");
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

/// Issue 31.1: two jobs on a pool of a single worker both make progress, neither waits for the
/// other's end; a third waits for room (the pool's maximum, from the TOML file) and starts when
/// one ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_share_a_single_worker_and_each_progresses_before_the_other_ends() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("server.toml");
    std::fs::write(&config, "[server]\njobs_per_pool = 2\n").unwrap();
    let server = Server::start(
        &tunehub_tests::sqlite_path(dir.path(), "share.db"),
        "s1",
        &["--config", config.to_str().unwrap(), "--population", "64"],
    );
    let _w = Worker::start(&server.url(), "w1", &[FLEET_CFLAGS]);
    let mut c = server.client().await;
    let pool = tunehub_tests::wait_pool(&mut c).await;

    // Two jobs far too long to end within the test: each must progress while the other runs.
    let (spec_a, spec_b) = ("matmul(32,32,32)", "matmul(32,16,32)");
    let a = submit(&mut c, job(spec_a, 5000, &pool, 0)).await;
    let b = submit(&mut c, job(spec_b, 5000, &pool, 0)).await;
    let b_first = wait_trials(&mut c, &b.id, 1, Duration::from_secs(300)).await;
    let a_now = get(&mut c, &a.id).await;
    assert_eq!(
        a_now.state,
        pb::JobState::Running as i32,
        "B measured while A runs: {a_now:?}"
    );
    // Both go on: each gets more measurements while the other is running.
    let a_seen: u32 = a_now.tasks.iter().map(|t| t.trials_done).sum();
    wait_trials(&mut c, &a.id, a_seen + 2, Duration::from_secs(300)).await;
    wait_trials(&mut c, &b.id, b_first + 2, Duration::from_secs(300)).await;
    for id in [&a.id, &b.id] {
        let j = get(&mut c, id).await;
        assert_eq!(j.state, pb::JobState::Running as i32, "{j:?}");
        assert!(
            j.waiting
                .contains(&format!("sharing pool {pool} with 1 other job")),
            "{j:?}"
        );
    }
    // One device measured both jobs' candidates.
    let w = workers(&mut c).await;
    assert_eq!(w.len(), 1, "{w:?}");
    for spec in [spec_a, spec_b] {
        let records = top(&mut c, spec, &pool).await;
        assert!(!records.is_empty(), "{spec}");
        assert!(records.iter().all(|r| r.worker == w[0].id), "{records:?}");
    }

    // The pool is full: a third job waits, and says so, however high its priority.
    let third = submit(&mut c, job("matmul(8,16,8)", 2, &pool, 5)).await;
    let j = get(&mut c, &third.id).await;
    assert_eq!(j.state, pb::JobState::Queued as i32, "{j:?}");
    assert!(
        j.waiting
            .contains(&format!("pool {pool} runs its maximum of 2 jobs at once")),
        "{j:?}"
    );
    let text = jobs_cli(&server);
    assert!(
        text.contains("sharing pool") && text.contains("runs its maximum of 2 jobs"),
        "{text}"
    );

    // A ends: the third starts in its place and ends done while B still runs.
    c.jobs
        .cancel(pb::CancelJobRequest { id: a.id.clone() })
        .await
        .unwrap();
    let j = wait_final(&mut c, &third.id, Duration::from_secs(300)).await;
    assert_eq!(j.state, pb::JobState::Done as i32, "{j:?}");
    let j = get(&mut c, &b.id).await;
    assert!(!is_final(&j), "{j:?}");
    c.jobs
        .cancel(pb::CancelJobRequest { id: b.id.clone() })
        .await
        .unwrap();
    for id in [&a.id, &b.id] {
        let j = wait_final(&mut c, id, Duration::from_secs(300)).await;
        assert_eq!(j.state, pb::JobState::Cancelled as i32, "{j:?}");
    }
}

/// Issue 31.7: a worker that served two jobs is killed (-9) in the middle of a piece; the
/// piece goes to the other worker and both jobs end done with every trial stored exactly once.
///
/// A worker measures one piece at a time (the registry leases it one), so "holding pieces of
/// two jobs" is a worker that took pieces of both jobs and dies holding one of them while the
/// other job's pieces are in the pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_while_serving_two_jobs_loses_nothing_of_either() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &tunehub_tests::sqlite_path(dir.path(), "kill.db"),
        "s1",
        &["--population", "64"],
    );
    // One worker first: it alone serves both jobs.
    let mut first = Worker::start(&server.url(), "w1", &[FLEET_CFLAGS]);
    let mut c = server.client().await;
    let pool = tunehub_tests::wait_pool(&mut c).await;

    let trials = 32;
    let specs = ["matmul(16,16,16)", "matmul(16,8,16)"];
    let mut jobs = vec![];
    for spec in specs {
        let mut req = job(spec, trials, &pool, 0);
        req.batch_size = 4;
        jobs.push(submit(&mut c, req).await);
    }
    for j in &jobs {
        wait_trials(&mut c, &j.id, 1, Duration::from_secs(300)).await;
    }
    let w1 = workers(&mut c).await[0].id.clone();
    for spec in specs {
        let records = top(&mut c, spec, &pool).await;
        assert!(records.iter().any(|r| r.worker == w1), "{records:?}");
    }

    // A second worker of the pool; then the first dies holding a piece.
    let _second = Worker::start(&server.url(), "w2", &[FLEET_CFLAGS]);
    wait::until("two workers online", Duration::from_secs(60), async || {
        let w = workers(&mut c).await;
        (w.iter().filter(|w| w.status != "offline").count() == 2).then_some(())
    })
    .await;
    wait::until(
        "the first worker holds a piece",
        Duration::from_secs(120),
        async || {
            let w = workers(&mut c).await;
            w.iter()
                .any(|w| w.id == w1 && w.status == "busy")
                .then_some(())
        },
    )
    .await;
    first.kill();

    let mut measured = 0;
    for j in &jobs {
        let j = wait_final(&mut c, &j.id, Duration::from_secs(300)).await;
        assert_eq!(j.state, pb::JobState::Done as i32, "{j:?}");
        assert_eq!(j.tasks[0].trials_done, trials, "{j:?}");
        measured += trials;
    }
    // Each job's trials stored once: as many records of its workload as trials, no more.
    let tuned = c
        .query
        .list_tuned(pb::ListTunedRequest {})
        .await
        .unwrap()
        .into_inner();
    for j in &jobs {
        let key = &j.tasks[0].workload_key;
        let stored: u64 = tuned
            .workloads
            .iter()
            .filter(|w| w.workload_key == *key && w.target_key == pool)
            .map(|w| w.trials)
            .sum();
        assert_eq!(stored, u64::from(trials), "{key}: {tuned:?}");
    }
    // The devices reported each candidate once (the piece lost with the first worker was never
    // reported), but for a second run of a new best per round of each job and, when the two
    // runs disagree (a loaded machine), one tie-break (`search::confirm`).
    let w = workers(&mut c).await;
    let taken: u64 = w.iter().map(|w| w.measured).sum();
    let reruns = 2 * jobs.len() as u64 * u64::from(trials.div_ceil(4));
    assert!(
        (u64::from(measured)..=u64::from(measured) + reruns).contains(&taken),
        "{w:?}"
    );
    let dead = w.iter().find(|w| w.id == w1).unwrap();
    assert_eq!(dead.status, "offline", "{w:?}");
}
