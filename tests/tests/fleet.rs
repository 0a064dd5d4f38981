//! The worker fleet end to end: a real `tunehub server` and real `tunehub-worker` processes on
//! loopback, the real compiler (and the aarch64 cross compiler under qemu), SQLite.
//!
//! Worker processes register, take leases and go silent on their own schedule: what no Watch
//! event reports is awaited by looking at `Workers.List` until it holds (`wait::until`).

use std::process::Command;
use std::time::Duration;
use tunehub::client::Clients;
use tunehub_proto::v1 as pb;
use tunehub_tests::faulty_worker::{self, measured_ok};
use tunehub_tests::{
    FaultyWorker, Server, TOKEN, Worker, binaries, broken_compiler, get, quick, submit, task,
    tools, wait, wait_final, wait_trials,
};

/// These tests start many processes that compile kernels: one at a time on a small machine.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Keeps the workers' target apart from the server's own ("local") one, which the server
/// measures itself: the same compiler and machine, one harmless define more.
const FLEET_CFLAGS: &str = "--cflags=-DTUNEHUB_FLEET_TEST";

async fn workers(c: &mut Clients) -> pb::ListWorkersResponse {
    c.workers
        .list(pb::ListWorkersRequest {})
        .await
        .expect("list workers")
        .into_inner()
}

/// Waits until `n` workers are registered and not offline; their target key.
async fn wait_workers(c: &mut Clients, n: usize) -> String {
    wait::until(
        &format!("{n} workers registered"),
        Duration::from_secs(60),
        async || {
            let l = workers(c).await;
            let up: Vec<_> = l.workers.iter().filter(|w| w.status != "offline").collect();
            (up.len() >= n).then(|| up[0].target_key.clone())
        },
    )
    .await
}

/// Waits until a worker holds a lease; which one.
async fn wait_busy(c: &mut Clients) -> pb::WorkerInfo {
    wait::until(
        "a worker holds a lease",
        Duration::from_secs(60),
        async || {
            workers(c)
                .await
                .workers
                .into_iter()
                .find(|w| w.status == "busy")
        },
    )
    .await
}

fn job_req(spec: &str, trials: u32, batch: u32, target: &str) -> pb::SubmitRequest {
    pb::SubmitRequest {
        tasks: vec![task(spec, trials)],
        target: target.into(),
        measure: Some(quick()),
        batch_size: batch,
        seed: 11,
        scheduler: 0,
        name: "fleet".into(),
        priority: 0,
        targets: vec![],
        range: None,
        cost_model: String::new(),
    }
}

/// Records of the job's workload on `target`, and who measured them.
/// Query.Best for an op spec on a target.
async fn best_of(
    c: &mut Clients,
    spec: &str,
    target: &str,
) -> Result<pb::BestResponse, tonic::Status> {
    let r = c
        .query
        .best(pb::BestRequest {
            workload: Some(tunehub_tests::op(spec)),
            target: target.into(),
            ..Default::default()
        })
        .await?;
    Ok(r.into_inner())
}

async fn records(c: &mut Clients, spec: &str, target: &str) -> (u64, Vec<String>) {
    let tuned = c
        .query
        .list_tuned(pb::ListTunedRequest {})
        .await
        .unwrap()
        .into_inner();
    let trials = tuned
        .workloads
        .iter()
        .filter(|w| w.target_key == target)
        .map(|w| w.trials)
        .sum();
    let top = c
        .query
        .top_k(pb::TopKRequest {
            workload: Some(tunehub_tests::op(spec)),
            target: target.into(),
            k: 1000,
            ..Default::default()
        })
        .await
        .map(|r| r.into_inner().records)
        .unwrap_or_default();
    (trials, top.into_iter().map(|r| r.worker).collect())
}

/// Waits until the job says why it waits, and that `what` is in it.
async fn wait_waiting(c: &mut Clients, id: &str, what: &str) -> pb::Job {
    wait::until(
        &format!("job {id} waits: {what}"),
        Duration::from_secs(60),
        async || Some(get(c, id).await).filter(|j| j.waiting.contains(what)),
    )
    .await
}

fn assert_done(j: &pb::Job, trials: u32) {
    assert_eq!(j.state, pb::JobState::Done as i32, "{j:?}");
    assert_eq!(j.tasks[0].trials_done, trials, "{j:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_tune_a_job_and_a_killed_worker_costs_nothing() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = tunehub_tests::sqlite_path(dir.path(), "fleet.db");
    let server = Server::start(&db, "s1", &[]);
    let mut ws: Vec<Worker> = ["a", "b", "c"]
        .iter()
        .map(|d| Worker::start(&server.url(), d, &[FLEET_CFLAGS]))
        .collect();
    let mut c = server.client().await;
    let key = wait_workers(&mut c, 3).await;

    let spec = "matmul(32,32,32)";
    let trials = 18;
    let job = submit(&mut c, job_req(spec, trials, 6, &key)).await;
    assert_eq!(job.target_key, key);

    // Kill -9 the first worker seen holding a lease.
    let busy = wait_busy(&mut c).await;
    let i = ["a", "b", "c"]
        .iter()
        .position(|d| *d == busy.device_id)
        .unwrap();
    ws[i].kill();
    let killed = busy.id;

    let j = wait_final(&mut c, &job.id, Duration::from_secs(180)).await;
    assert_done(&j, trials);
    // Every candidate stored once, and taken once from the workers, but for at most one second
    // run of a new best per round of 6 and, when the two runs disagree (a loaded machine), one
    // tie-break (`search::confirm`).
    let (stored, by) = records(&mut c, spec, &key).await;
    assert_eq!(stored, u64::from(trials));
    let l = workers(&mut c).await;
    let measured: u64 = l.workers.iter().map(|w| w.measured).sum();
    let reruns = 2 * u64::from(trials.div_ceil(6));
    assert!(
        (u64::from(trials)..=u64::from(trials) + reruns).contains(&measured),
        "{l:?}"
    );
    let dead = l.workers.iter().find(|w| w.id == killed).unwrap();
    assert_eq!(dead.status, "offline", "{l:?}");
    // The records name the devices that measured them, more than one of them.
    let mut devices = by.clone();
    devices.sort();
    devices.dedup();
    assert!(devices.iter().all(|d| d.starts_with("w-")), "{by:?}");
    assert!(devices.len() >= 2, "{by:?}");

    // With no worker online, a job for the target waits (and says so) until one comes.
    for w in &mut ws {
        w.kill();
    }
    wait::until(
        "every worker offline",
        Duration::from_secs(30),
        async || {
            let l = workers(&mut c).await;
            l.workers
                .iter()
                .all(|w| w.status == "offline")
                .then_some(())
        },
    )
    .await;
    let job = submit(&mut c, job_req("matmul(16,16,16)", 2, 2, &key)).await;
    let j = wait::until(
        "the job says it waits for a worker",
        Duration::from_secs(30),
        async || Some(get(&mut c, &job.id).await).filter(|j| !j.waiting.is_empty()),
    )
    .await;
    assert_eq!(j.state, pb::JobState::Queued as i32, "{j:?}");
    assert!(j.waiting.contains("no worker"), "{j:?}");
    let d = Worker::start(&server.url(), "d", &[FLEET_CFLAGS]);
    let j = wait_final(&mut c, &job.id, Duration::from_secs(120)).await;
    assert_done(&j, 2);
    assert!(j.waiting.is_empty(), "{j:?}");

    // A running job whose every worker died can still be cancelled at once.
    let job = submit(&mut c, job_req("matmul(16,16,8)", 40, 8, &key)).await;
    wait_trials(&mut c, &job.id, 1, Duration::from_secs(60)).await;
    drop(d);
    let j = get(&mut c, &job.id).await;
    assert_eq!(j.state, pb::JobState::Running as i32, "{j:?}");
    c.jobs
        .cancel(pb::CancelJobRequest { id: job.id.clone() })
        .await
        .unwrap();
    let j = wait_final(&mut c, &job.id, Duration::from_secs(20)).await;
    assert_eq!(j.state, pb::JobState::Cancelled as i32, "{j:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_compiler_fails_is_quarantined_and_the_job_completes() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let broken = broken_compiler(dir.path());
    let db = tunehub_tests::sqlite_path(dir.path(), "fleet.db");
    let server = Server::start(&db, "s1", &[]);
    let cc = format!("--compiler={}", broken.display());
    let _bad = Worker::start(&server.url(), "bad", &[FLEET_CFLAGS, &cc]);
    let mut c = server.client().await;
    let key = wait_workers(&mut c, 1).await;
    let _good: Vec<Worker> = ["g1", "g2"]
        .iter()
        .map(|d| Worker::start(&server.url(), d, &[FLEET_CFLAGS]))
        .collect();
    assert_eq!(wait_workers(&mut c, 3).await, key, "one pool");

    let spec = "matmul(16,32,16)";
    let trials = 12;
    let job = submit(&mut c, job_req(spec, trials, 3, &key)).await;
    let j = wait_final(&mut c, &job.id, Duration::from_secs(180)).await;
    assert_done(&j, trials);
    // The broken device's failures were not recorded against the candidates.
    assert_eq!(j.tasks[0].errors, 0, "{j:?}");
    let l = workers(&mut c).await;
    let bad = l.workers.iter().find(|w| w.device_id == "bad").unwrap();
    assert_eq!(bad.status, "quarantined", "{l:?}");
    assert!(bad.quarantine_reason.contains("compile_error"), "{l:?}");

    // `tunehub workers` shows it, with the reason.
    let out = Command::new(binaries::tunehub())
        .args(["workers", "--server", &server.url(), "--token", TOKEN])
        .env_remove("TUNEHUB_CONFIG")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("quarantined: ") && text.contains(&bad.id),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_reconnect_to_a_restarted_server_and_the_job_finishes() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = tunehub_tests::sqlite_path(dir.path(), "fleet.db");
    let mut server = Server::start(&db, "s1", &[]);
    let addr = server.addr.clone();
    let url = server.url();
    let _ws: Vec<Worker> = ["r1", "r2"]
        .iter()
        .map(|d| Worker::start(&url, d, &[FLEET_CFLAGS]))
        .collect();
    let mut c = server.client().await;
    let key = wait_workers(&mut c, 2).await;
    let spec = "matmul(32,16,32)";
    let trials = 16;
    let job = submit(&mut c, job_req(spec, trials, 4, &key)).await;
    wait_trials(&mut c, &job.id, 4, Duration::from_secs(120)).await;
    server.kill();
    drop(c);

    let server = Server::on(&db, "s1").listen(&addr).start();
    let mut c = server.client().await;
    wait_workers(&mut c, 2).await;
    let j = wait_final(&mut c, &job.id, Duration::from_secs(180)).await;
    assert_done(&j, trials);
    assert!(j.claims >= 2, "{j:?}");
    let (stored, _) = records(&mut c, spec, &key).await;
    assert_eq!(stored, u64::from(trials));
}

/// A layout-free task measured on the fleet: the piece carries the workload's options, so the
/// worker builds the same task (and key) the server did, measures the packed kernels, and no
/// healthy worker is quarantined for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_measure_a_layout_free_task_under_its_own_key() {
    use tunehub::workload;
    use tunehub_engine::{ops, task::Task};
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = tunehub_tests::sqlite_path(dir.path(), "fleet.db");
    let server = Server::start(&db, "s1", &[]);
    let _ws: Vec<Worker> = ["l1", "l2"]
        .iter()
        .map(|d| Worker::start(&server.url(), d, &[FLEET_CFLAGS]))
        .collect();
    let mut c = server.client().await;
    let key = wait_workers(&mut c, 2).await;

    let lf = workload::from_op_spec("matmul(16,32,16,layout_free=B)").unwrap();
    let wkey = Task::new(ops::matmul(16, 32, 16).unwrap(), "")
        .with_layout_free(&["B"])
        .unwrap()
        .key;
    let trials = 8;
    let mut req = job_req("matmul(16,32,16)", trials, 4, &key);
    req.tasks[0].workload = Some(lf.clone());
    let job = submit(&mut c, req).await;
    assert_eq!(job.tasks[0].workload_key, wkey);
    let j = wait_final(&mut c, &job.id, Duration::from_secs(180)).await;
    assert_done(&j, trials);
    assert_eq!(
        j.tasks[0].errors, 0,
        "every piece measured and verified: {j:?}"
    );
    let l = workers(&mut c).await;
    assert!(
        l.workers
            .iter()
            .all(|w| w.status != "quarantined" && w.errors == 0),
        "{l:?}"
    );
    assert!(l.workers.iter().map(|w| w.measured).sum::<u64>() >= u64::from(trials));
    // Stored under the layout-free key, by the workers; nothing under the plain matmul's.
    let top = c
        .query
        .top_k(pb::TopKRequest {
            workload: Some(lf),
            target: key.clone(),
            k: 100,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .records;
    // Its trusted records: a time two workers disputed, or one held unconfirmed, is flagged
    // noisy (docs/validation.md) and not among them.
    let t = &j.tasks[0];
    assert_eq!(top.len() as u32, t.ok - t.noisy, "{top:?}");
    assert!(
        top.iter()
            .all(|r| r.workload_key == wkey && r.worker.starts_with("w-")),
        "{top:?}"
    );
    let (_, plain) = records(&mut c, "matmul(16,32,16,layout_free=none)", &key).await;
    assert!(plain.is_empty(), "{plain:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aarch64_worker_cross_compiles_runs_under_qemu_and_stops_cleanly() {
    // .ci/run installs both; a developer machine may lack them.
    if !tools::require(
        "an_aarch64_worker_cross_compiles_runs_under_qemu_and_stops_cleanly",
        &["aarch64-linux-gnu-gcc", "qemu-aarch64"],
    ) {
        return;
    }
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = tunehub_tests::sqlite_path(dir.path(), "fleet.db");
    let server = Server::start(&db, "s1", &[]);
    let arm_args = [
        "--arch",
        "aarch64",
        "--compiler",
        "aarch64-linux-gnu-gcc",
        "--run-prefix",
        "qemu-aarch64 -L /usr/aarch64-linux-gnu",
    ];
    let mut arm = Worker::start(&server.url(), "arm", &arm_args);
    let mut c = server.client().await;
    let key = wait_workers(&mut c, 1).await;
    assert!(key.starts_with("aarch64-neon-c"), "{key}");

    let spec = "matmul(16,16,16)";
    let trials = 8;
    let job = submit(&mut c, job_req(spec, trials, 4, &key)).await;
    // SIGTERM while it measures: it finishes and reports its piece, then exits.
    wait_busy(&mut c).await;
    arm.sigterm();
    let status = arm.wait_exit(Duration::from_secs(60)).await;
    assert!(status.success(), "{status:?}");
    let l = workers(&mut c).await;
    assert_eq!(
        l.workers[0].measured, 4,
        "the piece in hand was finished: {l:?}"
    );
    // The same device comes back as the same worker and finishes the job.
    let _arm = Worker::start(&server.url(), "arm", &arm_args);
    let j = wait_final(&mut c, &job.id, Duration::from_secs(180)).await;
    assert_done(&j, trials);
    assert!(j.tasks[0].ok >= 1, "verified kernels under qemu: {j:?}");
    let (stored, by) = records(&mut c, spec, &key).await;
    assert_eq!(stored, u64::from(trials));
    let l = workers(&mut c).await;
    assert_eq!(l.workers.len(), 1, "{l:?}");
    assert!(by.iter().all(|w| *w == l.workers[0].id), "{by:?}");
    // Nothing of it under any other target (the server's own x86 one).
    let tuned = c
        .query
        .list_tuned(pb::ListTunedRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(
        tuned.workloads.iter().all(|w| w.target_key == key),
        "{tuned:?}"
    );
}

/// Issue 26, item 1: reports a worker must never send (a NaN or missing cost with error code
/// 0, a NaN build time with a negative run time, a wrong count, an unknown error code, a time
/// faster than the target's peak allows) are refused with INVALID_ARGUMENT naming the
/// candidate and the field, count against their workers (quarantined: nothing vouches for
/// them), and their candidates are measured by a real worker: the job ends done, with no error
/// recorded and nothing of the fakes stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_reports_are_refused_and_measured_elsewhere_and_never_fail_the_job() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = tunehub_tests::sqlite_path(dir.path(), "fleet.db");
    let server = Server::start(&db, "s1", &[]);
    let json = faulty_worker::target_json(&[FLEET_CFLAGS]);
    let spoiled: Vec<(Vec<pb::MeasuredCandidate>, &str)> = vec![
        (
            vec![pb::MeasuredCandidate {
                costs: vec![f64::NAN],
                ..measured_ok()
            }],
            "candidate 0: cost 0 is NaN",
        ),
        (
            vec![pb::MeasuredCandidate {
                build_s: f64::NAN,
                run_s: -1.0,
                ..measured_ok()
            }],
            "candidate 0: build_s is NaN",
        ),
        (
            vec![measured_ok(), measured_ok()],
            "2 results for a piece of 1",
        ),
        (
            vec![pb::MeasuredCandidate {
                error_code: 99,
                ..measured_ok()
            }],
            "candidate 0: unknown error code 99",
        ),
        (
            // 8192 FLOPs in a femtosecond: beyond any device's peak, it would be the best.
            vec![pb::MeasuredCandidate {
                costs: vec![1e-15],
                ..measured_ok()
            }],
            "candidate 0: cost 1e-15 s is faster than target",
        ),
    ];
    let mut fakes = vec![];
    for i in 0..spoiled.len() {
        fakes.push(FaultyWorker::register(&server, &format!("fake-{i}"), &json).await);
    }
    let key = fakes[0].target_key.clone();
    let mut c = server.client().await;
    let spec = "matmul(16,16,16)";
    let trials = 4;
    // Batches of 2 over 4 ready workers: pieces of one candidate.
    let job = submit(&mut c, job_req(spec, trials, 2, &key)).await;
    for (fake, (results, want)) in fakes.iter_mut().zip(spoiled) {
        let piece = fake.pull(Duration::from_secs(60)).await;
        assert_eq!(piece.steps_json.len(), 1);
        let e = fake
            .report(&piece.lease_id, results)
            .await
            .expect_err("a bad report is refused");
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
        assert!(e.message().contains(want), "{e:?} should say {want:?}");
    }
    let l = workers(&mut c).await;
    for f in &fakes {
        let w = l.workers.iter().find(|w| w.id == f.id).unwrap();
        assert_eq!(w.status, "quarantined", "{l:?}");
        assert!(w.quarantine_reason.contains("report refused"), "{l:?}");
        assert!(w.errors >= 1, "counted against it: {l:?}");
    }
    // Every fake is quarantined: the job says so, and has stored nothing.
    let j = wait_waiting(&mut c, &job.id, "quarantined").await;
    assert_ne!(j.state, pb::JobState::Failed as i32, "{j:?}");
    assert_eq!(j.tasks[0].trials_done, 0, "{j:?}");

    let good = Worker::start(&server.url(), "good", &[FLEET_CFLAGS]);
    let j = wait_final(&mut c, &job.id, Duration::from_secs(180)).await;
    assert_done(&j, trials);
    assert_eq!(j.tasks[0].errors, 0, "{j:?}");
    assert!(j.tasks[0].ok >= 1, "{j:?}");
    let l = workers(&mut c).await;
    let good_id = &l.workers.iter().find(|w| w.device_id == "good").unwrap().id;
    let (stored, by) = records(&mut c, spec, &key).await;
    assert_eq!(stored, u64::from(trials));
    assert!(by.iter().all(|w| w == good_id), "{by:?}");
    drop(good);
}

/// Issue 26, items 3 and 4: a worker whose compiler is broken, alone in its pool, is
/// quarantined at its first failed piece; its failures are not the job's trials, the job
/// says it waits on a quarantined worker, and `tunehub workers` counts the failures. The
/// device restarted with a working compiler (a changed description) gets its probation piece at
/// once, whose success lifts the quarantine, and finishes the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_worker_alone_is_quarantined_and_once_mended_finishes_the_job() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let broken = broken_compiler(dir.path());
    let db = tunehub_tests::sqlite_path(dir.path(), "fleet.db");
    let server = Server::start(&db, "s1", &[]);
    let cc = format!("--compiler={}", broken.display());
    let mut bad = Worker::start(&server.url(), "dev", &[FLEET_CFLAGS, &cc]);
    let mut c = server.client().await;
    let key = wait_workers(&mut c, 1).await;

    let spec = "matmul(16,16,8)";
    let trials = 4;
    let job = submit(&mut c, job_req(spec, trials, 2, &key)).await;
    let j = wait_waiting(&mut c, &job.id, "quarantined").await;
    assert!(j.waiting.contains("compile_error"), "{j:?}");
    assert_eq!(
        j.tasks[0].trials_done, 0,
        "no compile error taken as a trial: {j:?}"
    );
    assert_eq!(j.tasks[0].errors, 0, "{j:?}");
    let l = workers(&mut c).await;
    let w = &l.workers[0];
    assert_eq!(w.status, "quarantined", "{l:?}");
    // The failed piece of 2 (and, on a slow machine, a failed probation piece after it).
    assert!(w.errors >= 2, "its failures counted: {l:?}");

    // `tunehub workers` shows the failures (WORKER TARGET STATUS HEARTBEAT ago MEASURED ERRORS).
    let out = Command::new(binaries::tunehub())
        .args(["workers", "--server", &server.url(), "--token", TOKEN])
        .env_remove("TUNEHUB_CONFIG")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with(&w.id))
        .unwrap_or_else(|| panic!("{text}"))
        .split_whitespace()
        .collect();
    assert_eq!(row[2], "quarantined", "{text}");
    assert!(row[6].parse::<u64>().unwrap() >= 2, "{text}");

    // The same device, restarted with a working compiler.
    bad.kill();
    let _mended = Worker::start(&server.url(), "dev", &[FLEET_CFLAGS]);
    let j = wait_final(&mut c, &job.id, Duration::from_secs(180)).await;
    assert_done(&j, trials);
    assert_eq!(j.tasks[0].errors, 0, "{j:?}");
    let l = workers(&mut c).await;
    assert_eq!(l.workers.len(), 1, "the same worker: {l:?}");
    assert_ne!(l.workers[0].status, "quarantined", "{l:?}");
}

/// Issue 26, item 6: a worker whose token the server refuses exits at once with one clear line
/// and a failed status, rather than retrying forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_with_a_wrong_token_exits_with_a_clear_message() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = tunehub_tests::sqlite_path(dir.path(), "fleet.db");
    let server = Server::start(&db, "s1", &[]);
    let log = dir.path().join("worker.log");
    let mut w = Worker::start_with_token(&server.url(), "dev", "wrong-token", &[], &log);
    let status = w.wait_exit(Duration::from_secs(60)).await;
    assert!(!status.success(), "{status:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    let last = text.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: ") && last.contains("refused the token (UNAUTHENTICATED"),
        "{text}"
    );
    assert!(workers(&mut server.client().await).await.workers.is_empty());
}

/// Issue 26: what a device registers is stored and shown to every user, so it is bounded at
/// the door like a client's strings: an oversized device id or description, or a description
/// with an impossible core count, is INVALID_ARGUMENT and registers nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_with_oversized_or_impossible_fields_is_refused() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = tunehub_tests::sqlite_path(dir.path(), "fleet.db");
    let server = Server::start(&db, "s1", &[]);
    let json = faulty_worker::target_json(&[FLEET_CFLAGS]);
    let mut huge: serde_json::Value = serde_json::from_str(&json).unwrap();
    huge["cores"] = serde_json::json!(1u64 << 40);
    let padded = format!("{json}{}", " ".repeat(70 << 10));
    let mut c = server.client().await;
    for (device, target, want) in [
        ("x".repeat(5000), json.clone(), "device_id is 5000 bytes"),
        ("dev".to_string(), padded, "target_json is"),
        ("dev".to_string(), huge.to_string(), "cores"),
    ] {
        let e = c
            .workers
            .register(pb::RegisterWorkerRequest {
                device_id: device,
                target_json: target,
            })
            .await
            .expect_err("refused");
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
        assert!(e.message().contains(want), "{e:?} should say {want:?}");
    }
    assert!(workers(&mut c).await.workers.is_empty());
}

/// Issue 64, item 10: a registration's strings are shown to every user (`tunehub workers`), so
/// one holding a control character (`ESC[2J` clears the screen of whoever lists the fleet) is
/// INVALID_ARGUMENT naming the field, in the device id or in any field of the description, and
/// registers nothing; the same device with a printable id registers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_with_control_characters_is_refused() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = tunehub_tests::sqlite_path(dir.path(), "fleet.db");
    let server = Server::start(&db, "s1", &[]);
    let json = faulty_worker::target_json(&[FLEET_CFLAGS]);
    let mut model: serde_json::Value = serde_json::from_str(&json).unwrap();
    model["cpu_model"] = serde_json::json!("fast\u{1b}[2J");
    let mut flags = model.clone();
    flags["cpu_model"] = serde_json::json!("cpu");
    flags["cflags"] = serde_json::json!(["-O2", "-DX\u{7}"]);
    let mut c = server.client().await;
    for (device, target, want) in [
        (
            "dev\u{1b}[2J",
            json.clone(),
            "device_id holds the control character",
        ),
        ("dev", model.to_string(), "target_json.cpu_model holds"),
        ("dev", flags.to_string(), "target_json.cflags[1] holds"),
    ] {
        let e = c
            .workers
            .register(pb::RegisterWorkerRequest {
                device_id: device.into(),
                target_json: target,
            })
            .await
            .expect_err("refused");
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
        assert!(e.message().contains(want), "{e:?} should say {want:?}");
    }
    assert!(workers(&mut c).await.workers.is_empty());
    c.workers
        .register(pb::RegisterWorkerRequest {
            device_id: "dev [2J".into(),
            target_json: json,
        })
        .await
        .expect("a printable id registers");
    assert_eq!(workers(&mut c).await.workers.len(), 1);
}

/// Issue 64, item 2: a device that pulls and never reports (fault injection: a pull-only client
/// on the real gRPC API) no longer stalls a job. Each pull drops the piece it held; that piece
/// goes to the honest real worker first, and after `LAPSES_TO_QUARANTINE` (3) lapsed leases in
/// a row the pull-only device is quarantined, the reason in its listing and the server's log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_pulls_and_never_reports_is_quarantined_and_the_job_finishes() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = tunehub_tests::sqlite_path(dir.path(), "fleet.db");
    let log = dir.path().join("server.log");
    let server = Server::on(&db, "s1").log(&log).start();
    let json = faulty_worker::target_json(&[FLEET_CFLAGS]);
    let mut pull_only = FaultyWorker::register(&server, "pull-only", &json).await;
    let key = pull_only.target_key.clone();
    let _honest = Worker::start(&server.url(), "honest", &[FLEET_CFLAGS]);
    let mut c = server.client().await;
    wait_workers(&mut c, 2).await;

    // Five rounds of two pieces: the pull-only device takes one or two pieces of each.
    let spec = "matmul(16,16,16)";
    let trials = 10;
    let job = submit(&mut c, job_req(spec, trials, 2, &key)).await;
    let quarantined = wait::until(
        "the pull-only worker quarantined",
        Duration::from_secs(180),
        async || {
            pull_only.try_pull(Duration::from_millis(200)).await;
            let l = workers(&mut c).await;
            let w = l.workers.into_iter().find(|w| w.id == pull_only.id)?;
            (w.status == "quarantined").then_some(w)
        },
    )
    .await;
    assert!(
        quarantined
            .quarantine_reason
            .contains("3 leases in a row lapsed without a report"),
        "{quarantined:?}"
    );
    assert!(
        quarantined.quarantine_reason.contains("pulled again"),
        "{quarantined:?}"
    );

    let j = wait_final(&mut c, &job.id, Duration::from_secs(180)).await;
    assert_done(&j, trials);
    let l = workers(&mut c).await;
    let honest_id = &l
        .workers
        .iter()
        .find(|w| w.device_id == "honest")
        .unwrap()
        .id;
    let (stored, by) = records(&mut c, spec, &key).await;
    assert_eq!(stored, u64::from(trials));
    assert!(by.iter().all(|w| w == honest_id), "{by:?}");
    let w = l.workers.iter().find(|w| w.id == pull_only.id).unwrap();
    assert_eq!((w.status.as_str(), w.measured), ("quarantined", 0), "{l:?}");
    // Logged, with why.
    let text = std::fs::read_to_string(&log).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("worker quarantined") && l.contains(&pull_only.id))
        .unwrap_or_else(|| panic!("no quarantine logged:\n{text}"));
    assert!(line.contains("lapsed"), "{line}");
}

/// Issue 64, item 1: the plausible liar (fault injection: a device that reports every kernel
/// at 1.2 times the fastest the target's peak allows: under the peak bound, so accepted at the
/// door, but several times faster than the honest real worker beside it measures). Its new
/// bests are measured again on the honest worker, which contradicts them: the slower time is
/// kept, never a best, and after two such disagreements the liar is quarantined for good, the
/// reason in its listing and the server's log. The workload's Best is the honest worker's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plausible_liar_is_never_a_best_and_is_quarantined() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = tunehub_tests::sqlite_path(dir.path(), "fleet.db");
    let log = dir.path().join("server.log");
    let server = Server::on(&db, "s1").log(&log).start();
    let json = faulty_worker::target_json(&[FLEET_CFLAGS]);
    let target: tunehub_engine::target::Target = serde_json::from_str(&json).unwrap();
    let mut liar = FaultyWorker::register(&server, "liar", &json).await;
    let (key, liar_id) = (liar.target_key.clone(), liar.id.clone());
    let _honest = Worker::start(&server.url(), "honest", &[FLEET_CFLAGS]);
    let mut c = server.client().await;
    wait_workers(&mut c, 2).await;

    let spec = "matmul(64,64,64)";
    let flops = 2.0 * 64.0 * 64.0 * 64.0;
    let lie = 1.2 * flops / tunehub_server::jobs::result_check::peak_flops(&target);
    let lying = tokio::spawn(async move {
        loop {
            if let Some(p) = liar.try_pull(Duration::from_millis(500)).await {
                let told = pb::MeasuredCandidate {
                    costs: vec![lie],
                    ..measured_ok()
                };
                // Refused or ignored once it is distrusted: it keeps trying, as a liar would.
                let _ = liar
                    .report(&p.lease_id, vec![told; p.steps_json.len()])
                    .await;
            }
        }
    });
    // The noise guard on (a device is charged only then), lenient: the honest worker's runs
    // are flagged only when its machine is slowed past 3x, so that a loaded test machine still
    // upholds disputes; 32 trials, 8 rounds, each one's new best a lie until it is distrusted.
    let trials = 32;
    let mut req = job_req(spec, trials, 4, &key);
    req.measure.as_mut().unwrap().noise_threshold = Some(0.3);
    let job = submit(&mut c, req).await;
    let j = wait_final(&mut c, &job.id, Duration::from_secs(300)).await;
    lying.abort();
    assert_done(&j, trials);

    let l = workers(&mut c).await;
    let honest_id = l
        .workers
        .iter()
        .find(|w| w.device_id == "honest")
        .unwrap()
        .id
        .clone();
    let w = l.workers.iter().find(|w| w.id == liar_id).unwrap();
    assert_eq!(w.status, "quarantined", "{l:?}");
    assert!(
        w.quarantine_reason.contains("disagreed with its pool's"),
        "{l:?}"
    );
    let best = best_of(&mut c, spec, &key)
        .await
        .expect("the workload has a best");
    let record = best.record.expect("a record");
    assert_eq!(record.worker, honest_id, "{record:?}");
    assert!(record.seconds > 2.0 * lie, "{record:?} (the lie: {lie} s)");
    assert_eq!(j.tasks[0].best_seconds, Some(record.seconds), "{j:?}");
    // No time of the liar's is trusted: each was contradicted, or held unconfirmed.
    let top = c
        .query
        .top_k(pb::TopKRequest {
            workload: Some(tunehub_tests::op(spec)),
            target: key.clone(),
            k: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .records;
    assert!(
        !top.is_empty() && top.iter().all(|r| r.worker != liar_id),
        "{top:?}"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("worker quarantined") && l.contains(&liar_id))
        .unwrap_or_else(|| panic!("no quarantine logged:\n{text}"));
    assert!(line.contains("disagreed"), "{line}");
}

/// Issue 64, items 2 and 6: a report over the server's message limit (16 MiB) is refused,
/// logged with its size, and counts against the device; and the quarantine follows the device
/// (its token and device id): registering again with a changed description and then the
/// original one leaves it quarantined, with its reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_report_quarantines_and_registering_again_does_not_lift_it() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = tunehub_tests::sqlite_path(dir.path(), "fleet.db");
    let log = dir.path().join("server.log");
    let server = Server::on(&db, "s1").log(&log).start();
    let json = faulty_worker::target_json(&[FLEET_CFLAGS]);
    let mut fake = FaultyWorker::register(&server, "flaky", &json).await;
    let key = fake.target_key.clone();
    let mut c = server.client().await;
    let job = submit(&mut c, job_req("matmul(16,16,16)", 2, 1, &key)).await;
    let piece = fake.pull(Duration::from_secs(60)).await;
    let huge = pb::MeasuredCandidate {
        error_code: 1,
        error_msg: "x".repeat(17 << 20),
        costs: vec![],
        ..measured_ok()
    };
    let e = fake
        .report(&piece.lease_id, vec![huge])
        .await
        .expect_err("an oversized report is refused");
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("over the server's limit"), "{e:?}");
    let l = workers(&mut c).await;
    let before = l.workers.iter().find(|w| w.id == fake.id).unwrap().clone();
    assert_eq!(before.status, "quarantined", "{l:?}");
    assert!(
        before
            .quarantine_reason
            .contains("report refused: the report is"),
        "{before:?}"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.lines().any(|l| l.contains("report refused")
            && l.contains(&fake.id)
            && l.contains("bytes=")
            && l.contains(&format!("limit={}", 16 << 20))),
        "{text}"
    );

    // Another description (the server's own, without the test's define), then the original.
    let other = faulty_worker::target_json(&[]);
    assert_ne!(other, json);
    assert_eq!(fake.register_again("flaky", &other).await, fake.id);
    assert_eq!(fake.register_again("flaky", &json).await, fake.id);
    let l = workers(&mut c).await;
    let after = l.workers.iter().find(|w| w.id == fake.id).unwrap();
    assert_eq!(after.status, "quarantined", "{l:?}");
    assert_eq!(after.quarantine_reason, before.quarantine_reason, "{l:?}");
    assert_eq!(l.workers.len(), 1, "the same worker: {l:?}");
    let j = get(&mut c, &job.id).await;
    assert_eq!(j.tasks[0].trials_done, 0, "nothing of it stored: {j:?}");

    // Past four times the limit gRPC's decoder refuses it before the service: logged still.
    let mut huger = FaultyWorker::register(&server, "huger", &json).await;
    let piece = huger.pull(Duration::from_secs(60)).await;
    let e = huger
        .report(
            &piece.lease_id,
            vec![pb::MeasuredCandidate {
                error_code: 1,
                error_msg: "x".repeat(65 << 20),
                costs: vec![],
                ..measured_ok()
            }],
        )
        .await
        .expect_err("refused");
    assert_ne!(e.code(), tonic::Code::Ok);
    wait::until(
        "the decoder's refusal logged",
        Duration::from_secs(10),
        async || {
            let text = std::fs::read_to_string(&log).unwrap();
            text.lines()
                .find(|l| l.contains("report refused by gRPC's decoder") && l.contains("found"))
                .map(drop)
        },
    )
    .await;
}

/// Issue 63: a job whose every time was taken on a slowed machine (a device reporting each
/// candidate noisy: the noise injection) shows its noisy count apart from ok and errors, in
/// Watch (each candidate, then the round), in `jobs --json` and in the metric; `jobs` and the
/// summary say why there is no best and name `--noise-threshold` and a quieter machine; Best
/// answers the fastest noisy record, flagged, rather than no kernel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_noisy_run_shows_its_noisy_count_in_watch_jobs_and_metrics() {
    use tokio_stream::StreamExt;
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = tunehub_tests::sqlite_path(dir.path(), "fleet.db");
    let server = Server::start(&db, "s1", &["--metrics-addr", "127.0.0.1:0"]);
    let json = faulty_worker::target_json(&[FLEET_CFLAGS]);
    let mut fake = FaultyWorker::register(&server, "noisy", &json).await;
    let key = fake.target_key.clone();
    let mut c = server.client().await;
    let job = submit(&mut c, job_req("matmul(16,16,16)", 4, 4, &key)).await;
    // Watching before the piece is reported: nothing is measured until the fake reports.
    let mut events = c
        .jobs
        .watch(pb::WatchRequest { id: job.id.clone() })
        .await
        .unwrap()
        .into_inner();
    let piece = fake.pull(Duration::from_secs(60)).await;
    assert_eq!(piece.steps_json.len(), 4);
    let noisy = pb::MeasuredCandidate {
        noisy: true,
        ..measured_ok()
    };
    fake.report(&piece.lease_id, vec![noisy.clone(); 4])
        .await
        .expect("a noisy report is accepted");
    // No trusted time: the fastest noisy ones are measured again, one at a time, each noisy
    // again here.
    for _ in 0..3 {
        let again = fake.pull(Duration::from_secs(60)).await;
        assert_eq!(again.steps_json.len(), 1);
        fake.report(&again.lease_id, vec![noisy.clone()])
            .await
            .expect("accepted");
    }

    let mut candidates = vec![];
    let mut rounds = vec![];
    let mut done = None;
    let watching = async {
        while let Some(ev) = events.next().await {
            use pb::job_event::Event;
            match ev.unwrap().event.unwrap() {
                Event::Candidate(p) => candidates.push(p),
                Event::Round(t) => rounds.push(t),
                Event::Done(j) => {
                    done = Some(j);
                    break;
                }
                _ => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(120), watching)
        .await
        .expect("the job finishes");
    let done = done.expect("a done event");
    assert_done(&done, 4);
    let counts: Vec<u32> = candidates.iter().map(|p| p.job_done).collect();
    assert_eq!(counts, vec![1, 2, 3, 4], "{candidates:?}");
    assert!(candidates.iter().all(|p| p.ok && p.noisy), "{candidates:?}");
    let round = rounds.last().expect("a round event");
    assert_eq!(
        (round.ok, round.noisy, round.errors),
        (4, 4, 0),
        "{round:?}"
    );
    let t = &done.tasks[0];
    assert_eq!((t.ok, t.noisy, t.errors), (4, 4, 0), "{t:?}");
    assert_eq!(
        t.best_seconds, None,
        "a noisy time is never the best: {t:?}"
    );

    let cli = |args: &[&str]| {
        let out = Command::new(binaries::tunehub())
            .args(args)
            .args(["--server", &server.url(), "--token", TOKEN])
            .env_remove("TUNEHUB_CONFIG")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let out = cli(&["jobs", "--json"]);
    let j: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    let task = &j["tasks"][0];
    assert_eq!(
        (&task["ok"], &task["noisy"], &task["errors"]),
        (&4.into(), &4.into(), &0.into()),
        "{j}"
    );
    let out = cli(&["jobs"]);
    assert!(out.contains("0/4/0"), "ok/noisy/errors apart: {out}");
    assert!(
        out.contains("--noise-threshold") && out.contains("quieter machine"),
        "{out}"
    );
    let out = cli(&["watch", &job.id]);
    assert!(out.contains("(0 ok, 4 noisy, 0 failed)"), "{out}");
    assert!(out.contains("--noise-threshold"), "{out}");
    let out = cli(&["query", "--list"]);
    assert!(out.contains("NOISY"), "{out}");

    let (_, _, body) = tunehub_tests::scrape_raw(server.metrics_addr.as_ref().unwrap(), "/metrics");
    let line = body
        .lines()
        .find(|l| l.starts_with("tunehub_measurements_noisy_total{"))
        .unwrap_or_else(|| panic!("no noisy counter: {body}"));
    assert!(line.contains(&key) && line.ends_with(" 4"), "{line}");

    // No trusted time, yet the tuned workload is not left without a kernel: Best answers its
    // fastest noisy record, flagged (not a transfer), and the CLI says what the flag means.
    let best = best_of(&mut c, "matmul(16,16,16)", &key)
        .await
        .expect("an answer, flagged");
    let r = best.record.as_ref().expect("a record");
    assert!(
        best.found && r.noisy && !r.record_id.is_empty() && best.transfer.is_none(),
        "{best:?}"
    );
    let out = cli(&["query", "matmul(16,16,16)", "--target", &key]);
    assert!(out.contains("noisy: "), "{out}");

    // The same, but a time measured again comes back clean: the task has its kernel, the
    // three other noisy times counted as such.
    let spec = "matmul(16,16,8)";
    let job = submit(&mut c, job_req(spec, 4, 4, &key)).await;
    let piece = fake.pull(Duration::from_secs(60)).await;
    fake.report(&piece.lease_id, vec![noisy; 4])
        .await
        .expect("accepted");
    let again = fake.pull(Duration::from_secs(60)).await;
    assert_eq!(again.steps_json.len(), 1);
    fake.report(&again.lease_id, vec![measured_ok()])
        .await
        .expect("accepted");
    let done = wait_final(&mut c, &job.id, Duration::from_secs(120)).await;
    assert_done(&done, 4);
    let t = &done.tasks[0];
    assert_eq!((t.ok, t.noisy, t.errors), (4, 3, 0), "{t:?}");
    assert!(
        t.best_seconds.is_some(),
        "a kernel despite the noise: {t:?}"
    );
    let best = best_of(&mut c, spec, &key).await.unwrap();
    assert!(!best.record.unwrap().noisy, "the clean time is the answer");
    let out = cli(&["watch", &job.id]);
    assert!(out.contains("(1 ok, 3 noisy, 0 failed)"), "{out}");
    assert!(!out.contains("--noise-threshold"), "{out}");
}
