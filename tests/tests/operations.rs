//! Operations end to end, on a real `tunehub server` process (and a real `tunehub-worker`):
//! the Prometheus endpoint scraped over loopback, JSON logs, and graceful shutdown checked in the
//! SQLite database it leaves behind.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;
use tokio_stream::StreamExt;
use tonic::Code;
use tunehub::client::Clients;
use tunehub_proto::v1 as pb;
use tunehub_server::jobs::store::{JobRow, JobState, JobStore};
use tunehub_server::records::SqlStore;
use tunehub_tests::{Server, Worker, get, quick, scrape_raw, submit, task, wait, wait_final};

/// Each test compiles and times kernels: one at a time on a small machine.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A server with `extra` flags (and a small search population), its log in `log`.
fn start_server(db: &str, instance: &str, extra: &[&str], log: &Path) -> Server {
    Server::on(db, instance)
        .args(&["--population", "64"])
        .args(extra)
        .log(log)
        .start()
}

/// A scrape checked line by line against the text format: `# HELP`/`# TYPE`/`# UNIT` lines, samples
/// `name{label="value",...} number`, and `# EOF` last. Samples by `name{labels}`.
fn scrape(addr: &str) -> BTreeMap<String, f64> {
    let (status, headers, body) = scrape_raw(addr, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK", "{headers}\n{body}");
    assert!(
        headers.contains("content-type: application/openmetrics-text; version=1.0.0"),
        "{headers}"
    );
    let lines: Vec<&str> = body.lines().collect();
    assert_eq!(lines.last(), Some(&"# EOF"), "{body}");
    let name_ok = |n: &str| {
        !n.is_empty()
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
            && !n.starts_with(|c: char| c.is_ascii_digit())
    };
    let mut typed = BTreeSet::new();
    let mut samples = BTreeMap::new();
    for line in &lines[..lines.len() - 1] {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (kind, name, text) = (parts.next(), parts.next(), parts.next());
            assert!(
                matches!(kind, Some("HELP" | "TYPE" | "UNIT")) && name.is_some_and(name_ok),
                "bad comment line {line:?}"
            );
            if kind == Some("TYPE") {
                assert!(
                    matches!(
                        text,
                        Some("counter" | "gauge" | "histogram" | "info" | "unknown")
                    ),
                    "{line:?}"
                );
                typed.insert(name.unwrap().to_string());
            }
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("a sample has a value");
        let name = series.split('{').next().unwrap();
        assert!(name_ok(name), "bad metric name in {line:?}");
        assert!(name.starts_with("tunehub_"), "{line:?}");
        if let Some(labels) = series.strip_prefix(name)
            && !labels.is_empty()
        {
            let inner = labels
                .strip_prefix('{')
                .and_then(|l| l.strip_suffix('}'))
                .unwrap_or_else(|| panic!("bad labels in {line:?}"));
            for pair in inner.split("\",") {
                let (k, v) = pair.split_once("=\"").expect("label=\"value\"");
                assert!(name_ok(k), "{line:?}");
                assert!(!v.contains('\n'), "{line:?}");
            }
        }
        let v: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value in {line:?}"));
        // Every sample belongs to a family declared by a TYPE line.
        assert!(
            typed.iter().any(|t| name.starts_with(t.as_str())),
            "{line:?} has no TYPE"
        );
        samples.insert(series.to_string(), v);
    }
    samples
}

fn sample(m: &BTreeMap<String, f64>, series: &str) -> f64 {
    *m.get(series)
        .unwrap_or_else(|| panic!("no sample {series} in {m:#?}"))
}

/// The first worker's target key and status, once one has registered.
async fn first_worker(c: &mut Clients) -> Option<(String, String)> {
    let l = c
        .workers
        .list(pb::ListWorkersRequest {})
        .await
        .unwrap()
        .into_inner();
    l.workers
        .first()
        .map(|w| (w.target_key.clone(), w.status.clone()))
}

/// Waits until a worker has registered; its target key.
async fn wait_worker(c: &mut Clients) -> String {
    wait::until("a worker registers", Duration::from_secs(60), async || {
        first_worker(c).await.map(|(k, _)| k)
    })
    .await
}

/// Waits until the server, signalled, says it is draining (health NOT_SERVING).
async fn wait_draining(server: &Server) {
    use tonic_health::pb::health_check_response::ServingStatus;
    wait::until("the server drains", Duration::from_secs(30), async || {
        (server.health("").await == ServingStatus::NotServing).then_some(())
    })
    .await
}

/// JSON log lines of a file (every line must be one object).
fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect()
}

/// The value of `field` in any of a JSON line's spans.
fn span_field<'a>(line: &'a serde_json::Value, field: &str) -> Option<&'a str> {
    line.get("spans")?
        .as_array()?
        .iter()
        .find_map(|s| s.get(field).and_then(|v| v.as_str()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_endpoint_serves_the_text_format_and_moves_with_a_job() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = tunehub_tests::sqlite_path(dir.path(), "m.db");
    let log = dir.path().join("server.log");
    let server = start_server(
        &db,
        "m1",
        &[
            "--metrics-addr",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "-v",
        ],
        &log,
    );
    let maddr = server.metrics_addr.clone().unwrap();
    let mut c = server.client().await;

    let (status, _, _) = scrape_raw(&maddr, "/other");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    let m0 = scrape(&maddr);
    for s in ["queued", "running", "done", "failed", "cancelled"] {
        assert_eq!(sample(&m0, &format!("tunehub_jobs{{state=\"{s}\"}}")), 0.0);
    }

    // A worker for a target of its own (same machine, one harmless define more).
    let wlog = dir.path().join("worker.log");
    let _worker = Worker::start_logging(
        &server.url(),
        "ops-dev",
        &["--cflags=-DTUNEHUB_OPS_TEST", "--log-format", "json"],
        &wlog,
    );
    let wkey = wait_worker(&mut c).await;
    let m1 = scrape(&maddr);
    assert_eq!(
        sample(
            &m1,
            &format!("tunehub_workers{{target=\"{wkey}\",state=\"idle\"}}")
        ),
        1.0
    );
    assert_eq!(
        sample(
            &m1,
            &format!("tunehub_workers{{target=\"{wkey}\",state=\"offline\"}}")
        ),
        0.0
    );

    // A refused submit is counted under its code.
    let bad = c
        .jobs
        .submit(tunehub_tests::submit_req(
            vec![task("matmul(16,16,16)", 0)],
            4,
        ))
        .await;
    assert_eq!(bad.unwrap_err().code(), Code::InvalidArgument);

    // A local job and a job for the worker's target.
    let spec = "matmul(32,32,32)";
    let local = submit(&mut c, tunehub_tests::submit_req(vec![task(spec, 8)], 4)).await;
    let mut req = tunehub_tests::submit_req(vec![task(spec, 4)], 4);
    req.target = wkey.clone();
    let remote = submit(&mut c, req).await;
    let local = wait_final(&mut c, &local.id, Duration::from_secs(300)).await;
    let remote = wait_final(&mut c, &remote.id, Duration::from_secs(300)).await;
    assert_eq!(local.state, pb::JobState::Done as i32, "{local:?}");
    assert_eq!(remote.state, pb::JobState::Done as i32, "{remote:?}");
    let lkey = local.target_key.clone();
    // Two Jobs.Get calls of our own (the waits above use Watch), counted by the gRPC layer.
    for id in [&local.id, &remote.id] {
        get(&mut c, id).await;
    }
    for _ in 0..3 {
        c.query
            .best(pb::BestRequest {
                workload: Some(tunehub_tests::op(spec)),
                target: "local".into(),
                with_source: false,
                allow_transfer: false,
                ..Default::default()
            })
            .await
            .unwrap();
    }
    // A call the token check refuses is counted too, its method unknown.
    let mut stranger = server.client_with(Some("not-a-token")).await;
    let refused = stranger
        .jobs
        .get(pb::GetJobRequest { id: "x".into() })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);

    let m2 = scrape(&maddr);
    assert_eq!(sample(&m2, "tunehub_jobs{state=\"done\"}"), 2.0);
    assert_eq!(sample(&m2, "tunehub_jobs{state=\"queued\"}"), 0.0);
    assert_eq!(
        sample(
            &m2,
            &format!("tunehub_measurements_total{{target=\"{lkey}\"}}")
        ),
        8.0
    );
    assert_eq!(
        sample(
            &m2,
            &format!("tunehub_measurements_total{{target=\"{wkey}\"}}")
        ),
        4.0
    );
    for key in [&lkey, &wkey] {
        assert_eq!(
            sample(
                &m2,
                &format!("tunehub_measure_queue_depth{{target=\"{key}\"}}")
            ),
            0.0,
            "nothing waits once the jobs are done"
        );
    }
    let calls = |m: &BTreeMap<String, f64>, method: &str, code: &str| {
        m.get(&format!(
            "tunehub_grpc_requests_total{{service=\"tunehub.v1.Jobs\",method=\"{method}\",code=\"{code}\"}}"
        ))
        .copied()
        .unwrap_or(0.0)
    };
    assert_eq!(calls(&m2, "Submit", "OK"), 2.0);
    assert_eq!(calls(&m2, "Submit", "INVALID_ARGUMENT"), 1.0);
    assert_eq!(calls(&m2, "unknown", "UNAUTHENTICATED"), 1.0);
    assert!(calls(&m2, "Get", "OK") >= 2.0);
    assert_eq!(
        sample(&m2, "tunehub_query_duration_seconds_count{method=\"Best\"}"),
        3.0
    );
    assert!(
        sample(
            &m2,
            "tunehub_query_duration_seconds_bucket{le=\"+Inf\",method=\"Best\"}"
        ) == 3.0
            || sample(
                &m2,
                "tunehub_query_duration_seconds_bucket{method=\"Best\",le=\"+Inf\"}"
            ) == 3.0
    );
    // Three lookups in a row within the cache's lifetime: the first reads the database.
    assert!(
        sample(&m2, "tunehub_best_cache_hits_total") >= 2.0,
        "{m2:#?}"
    );
    assert!(sample(&m2, "tunehub_best_cache_misses_total") >= 1.0);
    let ratio = sample(&m2, "tunehub_best_cache_hit_ratio");
    assert!(ratio > 0.0 && ratio < 1.0, "{ratio}");
    assert_eq!(
        sample(&m2, "tunehub_best_cache_hit_ratio"),
        sample(&m2, "tunehub_best_cache_hits_total")
            / (sample(&m2, "tunehub_best_cache_hits_total")
                + sample(&m2, "tunehub_best_cache_misses_total"))
    );

    // JSON logs: every line of a job's driver names the job; the worker's lines name the
    // worker once registered, and the job of the piece it measures.
    let lines = json_lines(&log);
    let driver: Vec<_> = lines
        .iter()
        .filter(|l| {
            l["target"]
                .as_str()
                .is_some_and(|t| t.starts_with("tunehub_server::jobs::driver"))
        })
        .collect();
    assert!(
        driver.iter().any(|l| l["message"] == "batch stored"),
        "{driver:?}"
    );
    for l in &driver {
        let job = span_field(l, "job_id");
        assert!(
            job == Some(local.id.as_str()) || job == Some(remote.id.as_str()),
            "a driver line without its job: {l}"
        );
    }
    let wlines = json_lines(&wlog);
    let pieces: Vec<_> = wlines
        .iter()
        .filter(|l| l["message"] == "piece reported")
        .collect();
    assert!(!pieces.is_empty(), "{wlines:?}");
    for l in &pieces {
        assert_eq!(span_field(l, "job_id"), Some(remote.id.as_str()), "{l}");
        assert!(
            span_field(l, "worker_id").is_some_and(|w| w.starts_with("w-")),
            "{l}"
        );
    }
    let registered = wlines
        .iter()
        .position(|l| l["message"] == "registered")
        .expect("the worker registered");
    for l in &wlines[registered + 1..] {
        if l["message"] != "stopping: the piece in hand is finished first" {
            assert!(span_field(l, "worker_id").is_some(), "{l}");
        }
    }
}

/// The job's row and, per job record, its record id (from the database file, the server
/// stopped).
async fn job_in_db(db: &str, id: &str) -> (JobRow, Vec<String>) {
    let store = SqlStore::open(db).await.unwrap();
    let jobs = JobStore::new(store.clone());
    let job = jobs.get(id).await.unwrap().expect("the job is stored");
    let rows: Vec<String> =
        sqlx::query_scalar("SELECT record_id FROM job_records WHERE job_id = $1")
            .bind(id)
            .fetch_all(store.pool())
            .await
            .unwrap();
    store.close().await;
    (job, rows)
}

/// Records of a workload stored in the database, and how many distinct schedules they have.
async fn records_in_db(db: &str) -> (i64, i64) {
    let store = SqlStore::open(db).await.unwrap();
    let n: (i64, i64) =
        sqlx::query_as("SELECT COUNT(*), COUNT(DISTINCT schedule_hash) FROM records")
            .fetch_one(store.pool())
            .await
            .unwrap();
    store.close().await;
    n
}

/// Waits until a batch of `target` is being measured (the server's queue-depth gauge).
async fn wait_measuring(maddr: &str, target: &str) {
    let series = format!("tunehub_measure_queue_depth{{target=\"{target}\"}}");
    wait::until(
        "a batch is being measured",
        Duration::from_secs(120),
        async || (scrape(maddr).get(&series).copied().unwrap_or(0.0) >= 1.0).then_some(()),
    )
    .await
}

/// Slow candidates (each timed for at least `ms`): a batch of 4 takes seconds, so a signal
/// lands in the middle of one.
fn slow(spec: &str, trials: u32, ms: u32) -> pb::SubmitRequest {
    let mut req = tunehub_tests::submit_req(vec![task(spec, trials)], 4);
    req.measure = Some(pb::MeasureOptions {
        min_repeat_ms: Some(ms),
        ..quick()
    });
    req
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stores_the_batch_in_hand_hands_the_lease_back_and_a_restart_finishes() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = tunehub_tests::sqlite_path(dir.path(), "g.db");
    let log = dir.path().join("g1.log");
    let mut server = start_server(&db, "g1", &["-v", "--metrics-addr", "127.0.0.1:0"], &log);
    let maddr = server.metrics_addr.clone().unwrap();
    let mut c = server.client().await;
    let job = submit(&mut c, slow("matmul(48,48,48)", 12, 300)).await;

    // Follow the job; signal once its first batch is stored and the second is being measured.
    let mut events = c
        .jobs
        .watch(pb::WatchRequest { id: job.id.clone() })
        .await
        .unwrap()
        .into_inner();
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(120), events.next())
            .await
            .expect("progress within 2 minutes")
            .expect("the stream goes on")
            .expect("an event");
        if let Some(pb::job_event::Event::Round(t)) = ev.event
            && t.trials_done >= 4
        {
            break;
        }
    }
    wait_measuring(&maddr, &job.target_key).await;
    // What is stored when the signal lands (a batch takes over a second: 4 x 300 ms).
    let before = get(&mut c, &job.id).await.tasks[0].trials_done;
    server.sigterm();
    wait_draining(&server).await;

    // Draining: no new jobs, health says so, the watch stream ends; queries are still answered.
    let refused = c.jobs.submit(slow("matmul(16,16,16)", 4, 1)).await;
    let e = refused.expect_err("a submit while shutting down is refused");
    assert_eq!(e.code(), Code::Unavailable, "{e:?}");
    assert!(e.message().contains("shutting down"), "{e:?}");
    // The liveness probe's service (deploy/k8s) is served until the end.
    assert_eq!(
        server.health("tunehub.v1.Query").await,
        tonic_health::pb::health_check_response::ServingStatus::Serving
    );
    assert_eq!(get(&mut c, &job.id).await.id, job.id);
    let end = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            match events.next().await {
                Some(Ok(_)) => continue,
                Some(Err(s)) => return Some(s),
                None => return None,
            }
        }
    })
    .await
    .expect("the watch stream ends");
    assert_eq!(end.map(|s| s.code()), Some(Code::Unavailable));

    let status = server.wait_exit(Duration::from_secs(120)).await;
    assert!(status.success(), "a graceful stop exits 0: {status:?}");
    let (row, recs) = job_in_db(&db, &job.id).await;
    assert_eq!(row.state, JobState::Running, "{row:?}");
    assert_eq!(row.lease_until, None, "the lease was handed back: {row:?}");
    let after = recs.len() as u32;
    // The batch in hand was stored whole, and no new one was started.
    assert!(after > before, "{after} records after, {before} before");
    assert_eq!(after % 4, 0, "{after}");
    assert!(
        after <= before + 4,
        "{after} records after, {before} before"
    );
    let distinct: BTreeSet<&String> = recs.iter().collect();
    assert_eq!(distinct.len(), recs.len(), "a record twice in the job");
    let (n, schedules) = records_in_db(&db).await;
    assert_eq!((n, schedules), (i64::from(after), i64::from(after)));
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("job loop stopped"), "{logged}");

    // A restarted server takes the job over at once (no lease to wait for) and finishes it.
    let mut server2 = start_server(&db, "g2", &[], &dir.path().join("g2.log"));
    let mut c2 = server2.client().await;
    let done = wait_final(&mut c2, &job.id, Duration::from_secs(300)).await;
    assert_eq!(done.state, pb::JobState::Done as i32, "{done:?}");
    assert_eq!(done.tasks[0].trials_done, 12, "{done:?}");
    drop(c2);
    server2.stop(Duration::from_secs(60)).await;
    let (_, recs2) = job_in_db(&db, &job.id).await;
    let all: BTreeSet<&String> = recs2.iter().collect();
    assert_eq!(all.len(), 12);
    assert!(
        distinct.is_subset(&all),
        "a record stored before the stop is gone"
    );
    assert_eq!(records_in_db(&db).await, (12, 12));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sigterm_exits_at_once() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = tunehub_tests::sqlite_path(dir.path(), "x.db");
    let mut server = start_server(
        &db,
        "x1",
        &["--metrics-addr", "127.0.0.1:0"],
        &dir.path().join("x.log"),
    );
    let maddr = server.metrics_addr.clone().unwrap();
    let mut c = server.client().await;
    // Candidates of 2 s each: the batch in hand takes 8 s or more to drain.
    let job = submit(&mut c, slow("matmul(32,32,32)", 4, 2000)).await;
    wait_measuring(&maddr, &job.target_key).await;
    server.sigterm();
    wait_draining(&server).await;
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the first signal drains"
    );
    // The second signal exits at once: the status of a process killed by it, not the 0 of a
    // drain that finished.
    server.sigterm();
    let status = server.wait_exit(Duration::from_secs(60)).await;
    assert_eq!(status.code(), Some(143), "128 + SIGTERM: {status:?}");
    // Like a crash: nothing half-stored.
    let (_, recs) = job_in_db(&db, &job.id).await;
    let (n, schedules) = records_in_db(&db).await;
    assert_eq!((n, schedules), (recs.len() as i64, recs.len() as i64));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_hands_a_workers_lease_back_and_the_restarted_server_finishes_the_job() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = tunehub_tests::sqlite_path(dir.path(), "f.db");
    let mut server = start_server(&db, "f1", &["-v"], &dir.path().join("f1.log"));
    let url = server.url();
    let _worker = Worker::start(&url, "drain-dev", &["--cflags=-DTUNEHUB_DRAIN_TEST"]);
    let mut c = server.client().await;
    let key = wait_worker(&mut c).await;
    // Candidates of 1.5 s each: the worker holds its piece for 6 s or more.
    let mut req = slow("matmul(32,32,32)", 4, 1500);
    req.target = key;
    let job = submit(&mut c, req).await;
    wait::until("the piece is leased", Duration::from_secs(60), async || {
        let status = first_worker(&mut c).await.map(|(_, s)| s);
        (status.as_deref() == Some("busy")).then_some(())
    })
    .await;

    // The server does not wait for the worker: it hands the lease back and stops (had it
    // waited, the piece's results would be stored).
    let status = server.stop(Duration::from_secs(60)).await;
    assert!(status.success(), "{status:?}");
    let (row, recs) = job_in_db(&db, &job.id).await;
    assert_eq!(row.state, JobState::Running, "{row:?}");
    assert_eq!(row.lease_until, None, "{row:?}");
    assert!(
        recs.is_empty(),
        "nothing of the abandoned batch is stored: {recs:?}"
    );

    // Restarted on the same address: the worker comes back, the job is measured again, once.
    let mut server2 = Server::on(&db, "f2")
        .args(&["--population", "64"])
        .listen(&server.addr)
        .log(&dir.path().join("f2.log"))
        .start();
    let mut c2 = server2.client().await;
    let done = wait_final(&mut c2, &job.id, Duration::from_secs(300)).await;
    assert_eq!(done.state, pb::JobState::Done as i32, "{done:?}");
    assert_eq!(done.tasks[0].trials_done, 4, "{done:?}");
    drop(c2);
    server2.stop(Duration::from_secs(60)).await;
    let (_, recs) = job_in_db(&db, &job.id).await;
    assert_eq!(recs.len(), 4);
    assert_eq!(records_in_db(&db).await, (4, 4));
}
