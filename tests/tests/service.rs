//! The gRPC service end to end on SQLite: a real `tunehub server` process on loopback, real
//! compiler and kernels, a real database file. Tiny shapes and budgets keep it quick.

use sqlx::Row;
use std::time::Duration;
use tokio_stream::StreamExt;
use tonic::Code;
use tunehub_proto::v1 as pb;
use tunehub_server::records::SqlStore;
use tunehub_tests::*;

async fn count(db: &str, sql: &str) -> i64 {
    let store = SqlStore::open(db).await.unwrap();
    let n = sqlx::query(sql)
        .fetch_one(store_pool(&store))
        .await
        .unwrap()
        .try_get::<i64, _>(0)
        .unwrap();
    store.close().await;
    n
}

fn store_pool(s: &SqlStore) -> &sqlx::AnyPool {
    s.pool()
}

#[tokio::test]
async fn submit_watch_and_query_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_path(dir.path(), "e2e.db");
    let server = Server::start(&db, "s1", &[]);
    let mut c = server.client().await;

    let mut req = submit_req(
        vec![task("matmul(32,32,32)", 4), task("matmul(16,24,8)", 3)],
        2,
    );
    req.tasks[1].weight = 2.0;
    let job = submit(&mut c, req).await;
    assert!(job.id.starts_with("j-"));
    assert_eq!(job.tasks.len(), 2);

    // Watch: a snapshot first, rounds and a new best on the way, `done` last.
    let mut events = c
        .jobs
        .watch(pb::WatchRequest { id: job.id.clone() })
        .await
        .unwrap()
        .into_inner();
    let mut kinds = vec![];
    let mut done = None;
    let watching = async {
        while let Some(ev) = events.next().await {
            use pb::job_event::Event;
            match ev.unwrap().event.unwrap() {
                Event::Snapshot(_) => kinds.push("snapshot"),
                Event::Round(_) => kinds.push("round"),
                Event::NewBest(b) => {
                    assert!(b.gflops > 0.0 && b.seconds > 0.0);
                    kinds.push("new_best")
                }
                Event::Error(_) => kinds.push("error"),
                Event::Candidate(_) => kinds.push("candidate"),
                Event::Estimate(e) => {
                    assert!(e.seconds > 0.0, "{e:?}");
                    kinds.push("estimate")
                }
                Event::Done(j) => {
                    done = Some(j);
                    break;
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(300), watching)
        .await
        .expect("the job finishes");
    let done = done.expect("a done event");
    assert_eq!(kinds.first(), Some(&"snapshot"), "{kinds:?}");
    assert!(
        kinds.contains(&"round") && kinds.contains(&"new_best") && kinds.contains(&"estimate"),
        "{kinds:?}"
    );
    assert_eq!(done.state, pb::JobState::Done as i32, "{done:?}");
    // The default scheduler is Ansor's gradient one: the tasks' 4 + 3 trials are one pool, each
    // task's first round half its own (2 of 4, 2 of 3), the rest where the scheduler says.
    assert_eq!(done.scheduler, pb::SchedulerKind::Gradient as i32);
    let taken: Vec<u32> = done.tasks.iter().map(|t| t.trials_done).collect();
    assert_eq!(taken.iter().sum::<u32>(), 7, "{done:?}");
    for t in &done.tasks {
        assert!(t.trials_done >= 2, "{t:?}");
        assert_eq!(t.new_records, t.trials_done);
        assert!(t.ok > 0 && t.best_gflops.unwrap() > 0.0, "{t:?}");
    }
    // The end-to-end estimate: the sum of weight x best time, each task's share of it.
    let e = done.estimate.expect("an estimate");
    let sum: f64 = done
        .tasks
        .iter()
        .map(|t| t.weight * t.best_seconds.unwrap())
        .sum();
    assert_eq!((e.seconds, e.missing), (sum, 0));
    let shares: f64 = done.tasks.iter().map(|t| t.share.unwrap()).sum();
    assert!((shares - 1.0).abs() < 1e-9, "{shares}");
    assert_eq!(
        done.tasks[1].share,
        Some(2.0 * done.tasks[1].best_seconds.unwrap() / sum)
    );

    // The best schedule, with its C source; GFLOP/s is the workload's FLOPs over its time.
    let best = c
        .query
        .best(pb::BestRequest {
            workload: Some(op("matmul(32,32,32)")),
            target: "local".into(),
            with_source: true,
            allow_transfer: false,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let rec = best.record.unwrap();
    // The answer's kernel: named for the pair, generated from the best record, its source the
    // one `with_source` asked for.
    let k = best.kernel.as_ref().expect("a kernel with the answer");
    assert!(
        best.found && k.symbol.starts_with("tunehub_matmul_"),
        "{}",
        k.symbol
    );
    assert!(k.source.contains(&format!("void {}(", k.symbol)));
    assert_eq!(best.source, k.source);
    assert_eq!(
        (k.record_id.as_str(), k.gflops),
        (rec.record_id.as_str(), rec.gflops)
    );
    assert_eq!(best.flops, 2 * 32 * 32 * 32);
    assert!((rec.gflops - best.flops as f64 / rec.seconds / 1e9).abs() < 1e-6 * rec.gflops);
    assert_eq!(rec.record_id, done.tasks[0].best_record_id);
    assert_eq!(rec.worker, "s1");
    assert_eq!(best.records_total, u64::from(done.tasks[0].trials_done));

    // The text form of the same operator names the same workload; batch answers per workload.
    let batch = c
        .query
        .best_batch(pb::BestBatchRequest {
            workloads: vec![
                // The op spec's constant weight is packed by default: the text form says so.
                pb::Workload {
                    kind: Some(pb::workload::Kind::Expr(
                        "C[i,j] += A[i,k] * B[k,j] where i<32, j<32, k<32".into(),
                    )),
                    options: Some(pb::WorkloadOptions {
                        layout_free: vec!["B".into()],
                    }),
                },
                op("matmul(8,8,8)"),
            ],
            target: String::new(),
            with_source: false,
            allow_transfer: false,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .results;
    assert!(batch[0].found && !batch[1].found);
    assert_eq!(batch[0].record.as_ref().unwrap().record_id, rec.record_id);
    // The same kernel as Best's (text form or op spec: one workload), none for the miss.
    assert_eq!(batch[0].kernel.as_ref().map(|k| &k.source), Some(&k.source));
    assert!(batch[1].kernel.is_none());

    let top_k = c
        .query
        .top_k(pb::TopKRequest {
            workload: Some(op("matmul(32,32,32)")),
            target: String::new(),
            k: 10,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let top = &top_k.records;
    assert_eq!(top[0].record_id, rec.record_id);
    assert!(top.windows(2).all(|p| p[0].seconds <= p[1].seconds));
    // A kernel per record, in order, each from its own record under the pair's one symbol.
    assert_eq!(top_k.kernels.len(), top.len());
    for (r, tk) in top.iter().zip(&top_k.kernels) {
        assert_eq!(
            (tk.record_id.as_str(), tk.symbol.as_str()),
            (r.record_id.as_str(), k.symbol.as_str())
        );
    }

    // A prefix that is not a C identifier: INVALID_ARGUMENT; a lean answer has no kernel.
    let bad = c
        .query
        .best(pb::BestRequest {
            workload: Some(op("matmul(32,32,32)")),
            symbol_prefix: "no-pe".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), tonic::Code::InvalidArgument, "{bad:?}");
    let lean = c
        .query
        .best(pb::BestRequest {
            workload: Some(op("matmul(32,32,32)")),
            omit_kernel: true,
            symbol_prefix: "mine_".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(lean.found && lean.kernel.is_none() && lean.source.is_empty());

    let tuned = c
        .query
        .list_tuned(pb::ListTunedRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(tuned.targets.len(), 1);
    assert_eq!(tuned.targets[0].trials, 7);
    let mut trials: Vec<u64> = tuned.workloads.iter().map(|w| w.trials).collect();
    trials.sort_unstable();
    let mut taken: Vec<u64> = done
        .tasks
        .iter()
        .map(|t| u64::from(t.trials_done))
        .collect();
    taken.sort_unstable();
    assert_eq!(trials, taken);

    let jobs = c
        .jobs
        .list(pb::ListJobsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .jobs;
    assert_eq!(jobs.len(), 1);
    assert_eq!((jobs[0].claims, jobs[0].claimed_by.as_str()), (1, "s1"));
    drop(c);
    drop(server);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM job_records").await, 7);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM records").await, 7);
}

/// Issue 63: a job of one round (16 trials, batches of 64) shows each candidate as it is built
/// and measured, not only the round's end: builds, then at least 16 measured candidates, their
/// counts rising one by one to the total, with a rate and the time left, and the round after
/// them.
#[tokio::test]
async fn watch_shows_each_candidate_as_it_is_measured() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_path(dir.path(), "candidates.db");
    let server = Server::start(&db, "s1", &[]);
    let mut c = server.client().await;
    let job = submit(&mut c, submit_req(vec![task("matmul(8,8,8)", 16)], 64)).await;
    let mut events = c
        .jobs
        .watch(pb::WatchRequest { id: job.id.clone() })
        .await
        .unwrap()
        .into_inner();
    let mut candidates = vec![];
    let mut after_last_candidate = vec![];
    let mut done = None;
    let watching = async {
        while let Some(ev) = events.next().await {
            use pb::job_event::Event;
            match ev.unwrap().event.unwrap() {
                Event::Candidate(p) => {
                    after_last_candidate.clear();
                    candidates.push(p);
                }
                Event::Done(j) => {
                    done = Some(j);
                    break;
                }
                Event::Round(t) => after_last_candidate.push(t.trials_done),
                _ => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(300), watching)
        .await
        .expect("the job finishes");
    let done = done.expect("a done event");
    assert_eq!(done.state, pb::JobState::Done as i32, "{done:?}");
    assert_eq!(done.tasks[0].trials_done, 16);
    assert!(
        candidates.len() >= 16,
        "{} candidate events",
        candidates.len()
    );
    let counts: Vec<u32> = candidates.iter().map(|p| p.job_done).collect();
    assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{counts:?}");
    assert_eq!(counts.last(), Some(&16), "{counts:?}");
    let (built, measured): (Vec<_>, Vec<_>) = candidates
        .iter()
        .partition(|p| p.stage() == pb::CandidateStage::Built);
    let built: Vec<u32> = built.iter().map(|p| p.round_built).collect();
    assert!(!built.is_empty(), "builds are told");
    assert!(
        built.windows(2).all(|w| w[0] < w[1]) && built.iter().all(|&b| b <= 16),
        "{built:?}"
    );
    let counts: Vec<u32> = measured.iter().map(|p| p.job_done).collect();
    assert_eq!(counts, (1..=16).collect::<Vec<_>>());
    for p in measured {
        assert_eq!(p.stage(), pb::CandidateStage::Measured);
        assert_eq!(p.round_size, 16);
        assert_eq!(
            (p.task_index, p.task_trials, p.job_trials),
            (0, 16, 16),
            "{p:?}"
        );
        assert_eq!(p.task_done, p.job_done);
        assert!(p.ok || !p.error.is_empty(), "{p:?}");
        assert!(p.trials_per_s > 0.0 && p.eta_s.is_some(), "{p:?}");
    }
    assert_eq!(candidates.last().unwrap().eta_s, Some(0.0));
    // The round's stored counts follow its candidates.
    assert_eq!(after_last_candidate, vec![16], "{after_last_candidate:?}");
}

#[tokio::test]
async fn bad_input_gives_the_right_status_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_path(dir.path(), "bad.db");
    let server = Server::start(
        &db,
        "s1",
        &["--max-trials-per-job", "50", "--max-tasks-per-job", "2"],
    );
    let mut c = server.client().await;
    let expr = |s: &str| pb::TaskSpec {
        workload: Some(pb::Workload {
            kind: Some(pb::workload::Kind::Expr(s.into())),
            options: None,
        }),
        trials: 2,
        weight: 1.0,
        alternative: false,
    };
    let cases: Vec<(pb::SubmitRequest, Code, &str)> = vec![
        (
            submit_req(vec![task("nosuchop(1,2)", 2)], 0),
            Code::InvalidArgument,
            "nosuchop",
        ),
        (
            submit_req(vec![task("matmul(512,512)", 2)], 0),
            Code::InvalidArgument,
            "matmul",
        ),
        (
            submit_req(vec![task("matmul(0,4,4)", 2)], 0),
            Code::InvalidArgument,
            "task 0",
        ),
        (
            submit_req(vec![task("matmul(4,4,4)", 0)], 0),
            Code::InvalidArgument,
            "at least 1",
        ),
        (
            submit_req(vec![task("matmul(4,4,4)", 51)], 0),
            Code::InvalidArgument,
            "limit",
        ),
        (
            submit_req(
                vec![task("matmul(4,4,4)", 30), task("matmul(8,4,4)", 30)],
                0,
            ),
            Code::InvalidArgument,
            "60 trials",
        ),
        (
            submit_req(vec![task("matmul(4,4,4)", 1); 3], 0),
            Code::InvalidArgument,
            "at most 2",
        ),
        (
            pb::SubmitRequest {
                cost_model: "gbdt".into(),
                ..submit_req(vec![task("matmul(4,4,4)", 1)], 0)
            },
            Code::InvalidArgument,
            "unknown cost_model 'gbdt'",
        ),
        (
            submit_req(vec![], 0),
            Code::InvalidArgument,
            "at least one task",
        ),
        (
            submit_req(
                vec![pb::TaskSpec {
                    alternative: true,
                    ..task("matmul(4,4,4)", 2)
                }],
                0,
            ),
            Code::InvalidArgument,
            "every task is an alternative",
        ),
        (
            submit_req(vec![expr("C[i,j] += A[i,k] * B[k,j] where i<4, j<4")], 0),
            Code::InvalidArgument,
            "expr",
        ),
        (
            submit_req(vec![task("matmul(4,4,4)", 2), task("matmul(4,4,", 2)], 0),
            Code::InvalidArgument,
            "task 1",
        ),
        (
            submit_req(vec![task("matmul(4,4,4)", 2)], 5000),
            Code::InvalidArgument,
            "batch_size",
        ),
        (
            pb::SubmitRequest {
                target: "x86_64-nosuch-c9-00000000".into(),
                ..submit_req(vec![task("matmul(4,4,4)", 2)], 0)
            },
            Code::NotFound,
            "unknown target",
        ),
        (
            pb::SubmitRequest {
                measure: Some(pb::MeasureOptions {
                    timeout_s: Some(-1.0),
                    ..quick()
                }),
                ..submit_req(vec![task("matmul(4,4,4)", 2)], 0)
            },
            Code::InvalidArgument,
            "timeout_s",
        ),
        (
            submit_req(
                vec![pb::TaskSpec {
                    workload: Some(pb::Workload {
                        kind: Some(pb::workload::Kind::WorkloadKey("nope".into())),
                        options: None,
                    }),
                    trials: 1,
                    weight: 1.0,
                    alternative: false,
                }],
                0,
            ),
            Code::NotFound,
            "unknown workload key",
        ),
    ];
    for (req, code, needle) in cases {
        let (got, msg) = code_of(c.jobs.submit(req.clone()).await);
        assert_eq!(got, code, "{req:?}: {msg}");
        assert!(msg.contains(needle), "{needle:?} not in {msg:?}");
    }
    // Queries: bad workload, unknown target, unknown job.
    let (got, _) = code_of(
        c.query
            .best(pb::BestRequest {
                workload: Some(op("matmul(1,2)")),
                target: String::new(),
                with_source: false,
                allow_transfer: false,
                ..Default::default()
            })
            .await,
    );
    assert_eq!(got, Code::InvalidArgument);
    let (got, msg) = code_of(
        c.query
            .best(pb::BestRequest {
                workload: Some(op("matmul(4,4,4)")),
                target: "nosuch".into(),
                with_source: false,
                allow_transfer: false,
                ..Default::default()
            })
            .await,
    );
    assert_eq!(got, Code::NotFound, "{msg}");
    let (got, _) = code_of(c.jobs.get(pb::GetJobRequest { id: "j-0".into() }).await);
    assert_eq!(got, Code::NotFound);
    // A malformed import line refuses the whole import, the good lines before it included.
    let lines = vec![
        r#"{"target": {"key": "k", "target": {}}}"#.to_string(),
        "not json".to_string(),
    ];
    let (got, msg) = code_of(
        c.records
            .import(tokio_stream::iter(vec![pb::RecordLines { lines }]))
            .await,
    );
    assert_eq!(got, Code::InvalidArgument);
    assert!(msg.contains("line 1"), "{msg}");
    let (got, msg) = code_of(
        c.records
            .import(tokio_stream::iter(vec![pb::RecordLines {
                lines: vec!["{\"i\": 1}".into()],
            }]))
            .await,
    );
    assert_eq!(got, Code::InvalidArgument);
    assert!(msg.contains("line 1"), "{msg}");

    drop(c);
    drop(server);
    for table in ["jobs", "tasks", "workloads", "targets", "records"] {
        assert_eq!(
            count(&db, &format!("SELECT COUNT(*) FROM {table}")).await,
            0,
            "{table}"
        );
    }
}

#[tokio::test]
async fn unauthenticated_calls_are_refused_except_health() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_path(dir.path(), "auth.db");
    let server = Server::start(&db, "s1", &[]);
    for token in [None, Some("wrong")] {
        let mut c = server.client_with(token).await;
        let (code, _) = code_of(c.jobs.list(pb::ListJobsRequest::default()).await);
        assert_eq!(code, Code::Unauthenticated);
        let (code, _) = code_of(
            c.jobs
                .submit(submit_req(vec![task("matmul(4,4,4)", 1)], 0))
                .await,
        );
        assert_eq!(code, Code::Unauthenticated);
        let (code, _) = code_of(c.query.list_tuned(pb::ListTunedRequest {}).await);
        assert_eq!(code, Code::Unauthenticated);
        let (code, _) = code_of(c.records.export(pb::ExportRequest::default()).await);
        assert_eq!(code, Code::Unauthenticated);
        // Health needs no token.
        let mut health = tonic_health::pb::health_client::HealthClient::new(c.channel.clone());
        let h = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: "tunehub.v1.Jobs".into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            h.status,
            tonic_health::pb::health_check_response::ServingStatus::Serving as i32
        );
    }
    let mut c = server.client().await;
    assert!(c.jobs.list(pb::ListJobsRequest::default()).await.is_ok());

    // A server with no token refuses to start unless told to serve without.
    let out = std::process::Command::new(binaries::tunehub())
        .args(["server", "--db", &db, "--listen", "127.0.0.1:0"])
        .env_remove("TUNEHUB_TOKENS")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allow-unauthenticated"));
}

#[tokio::test]
async fn a_job_survives_a_server_crash_and_finishes_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_path(dir.path(), "restart.db");
    let mut first = Server::start(&db, "first", &[]);
    let mut c = first.client().await;
    let job = submit(&mut c, submit_req(vec![task("matmul(24,16,16)", 8)], 2)).await;
    // Some progress, then a crash mid-job.
    let n = wait_trials(&mut c, &job.id, 2, Duration::from_secs(120)).await;
    assert!(n < 8, "finished before the crash: {n} trials");
    first.kill();

    let second = Server::start(&db, "second", &[]);
    let mut c = second.client().await;
    let j = wait_final(&mut c, &job.id, Duration::from_secs(240)).await;
    assert_eq!(j.state, pb::JobState::Done as i32, "{j:?}");
    assert_eq!(j.tasks[0].trials_done, 8);
    assert_eq!((j.claims, j.claimed_by.as_str()), (2, "second"));
    drop(c);
    drop(second);
    // Every trial is one record, none lost, none twice.
    assert_eq!(count(&db, "SELECT COUNT(*) FROM records").await, 8);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM job_records").await, 8);
    assert_eq!(
        count(&db, "SELECT COUNT(DISTINCT schedule_hash) FROM records").await,
        8
    );
}

#[tokio::test]
async fn records_export_and_import_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let a_db = sqlite_path(dir.path(), "a.db");
    let a = Server::start(&a_db, "a", &[]);
    let mut ca = a.client().await;
    let job = submit(&mut ca, submit_req(vec![task("softmax(4,40)", 3)], 3)).await;
    wait_final(&mut ca, &job.id, Duration::from_secs(240)).await;
    let export = |mut c: tunehub::client::Clients| async move {
        let mut s = c
            .records
            .export(pb::ExportRequest::default())
            .await
            .unwrap()
            .into_inner();
        let mut lines = vec![];
        while let Some(m) = s.next().await {
            lines.extend(m.unwrap().lines);
        }
        lines
    };
    let lines = export(ca.clone()).await;
    assert_eq!(
        lines.len(),
        1 + 1 + 3,
        "a workload, a target, 3 records: {lines:?}"
    );
    assert!(lines[2].contains("\"v\":\"tunehub-v1\""));

    let b = Server::start(&sqlite_path(dir.path(), "b.db"), "b", &[]);
    let mut cb = b.client().await;
    let send = |mut c: tunehub::client::Clients, lines: Vec<String>| async move {
        c.records
            .import(tokio_stream::iter(vec![pb::RecordLines { lines }]))
            .await
            .unwrap()
            .into_inner()
    };
    let r = send(cb.clone(), lines.clone()).await;
    assert_eq!(
        (r.records_new, r.records_known, r.workloads, r.targets),
        (3, 0, 1, 1)
    );
    let r = send(cb.clone(), lines.clone()).await;
    assert_eq!(
        (r.records_new, r.records_known),
        (0, 3),
        "an import again adds nothing"
    );
    assert_eq!(
        export(cb.clone()).await,
        lines,
        "the same lines come back out"
    );

    let best = |mut c: tunehub::client::Clients, target: String| async move {
        c.query
            .best(pb::BestRequest {
                workload: Some(op("softmax(4,40)")),
                target,
                with_source: true,
                allow_transfer: false,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
    };
    let (ba, bb) = (
        best(ca.clone(), String::new()).await,
        best(cb.clone(), String::new()).await,
    );
    assert_eq!(ba.record, bb.record);
    assert_eq!(ba.source, bb.source);
    let _ = cb.jobs.list(pb::ListJobsRequest::default()).await.unwrap();
}

#[tokio::test]
async fn a_cancelled_job_stops() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_path(dir.path(), "cancel.db");
    let log = dir.path().join("server.log");
    let mut server = Server::on(&db, "s1").args(&["-v"]).log(&log).start();
    let mut c = server.client().await;
    let job = submit(&mut c, submit_req(vec![task("matmul(16,16,16)", 2000)], 2)).await;
    let j = c
        .jobs
        .cancel(pb::CancelJobRequest { id: job.id.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(j.state, pb::JobState::Cancelled as i32);
    let claimed = j.claims > 0;
    let j = wait_final(&mut c, &job.id, Duration::from_secs(60)).await;
    assert_eq!(j.state, pb::JobState::Cancelled as i32);
    // A job cancelled before any claim is never claimed; one already claimed has its driver
    // stop (its log says so). A batch already in flight when the cancel landed is still
    // stored (it was measured), nothing after it: cancelled right after submitting, at most
    // the first batch of 2.
    if claimed {
        wait::until(
            "the job's driver ends",
            Duration::from_secs(60),
            async || {
                std::fs::read_to_string(&log)
                    .unwrap()
                    .lines()
                    .any(|l| l.contains("job ended") && l.contains(job.id.as_str()))
                    .then_some(())
            },
        )
        .await;
    }
    let n = get(&mut c, &job.id).await.tasks[0].trials_done;
    assert!(n <= 2, "{n} trials after the cancel");
    // Nothing more once the server is gone: what the API said is all there is.
    drop(c);
    let status = server.stop(Duration::from_secs(60)).await;
    assert!(status.success(), "{status:?}");
    let stored = count(
        &db,
        &format!(
            "SELECT COUNT(*) FROM job_records WHERE job_id = '{}'",
            job.id
        ),
    )
    .await;
    assert_eq!(stored, i64::from(n));
}

/// The client commands against a running server: submit --watch, jobs, query (with the C
/// source), records export and import, bad input exiting 2.
#[tokio::test]
async fn the_cli_commands_are_clients_of_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&sqlite_path(dir.path(), "cli.db"), "s1", &[]);
    let url = server.url();
    let run = |args: &[&str]| {
        std::process::Command::new(binaries::tunehub())
            .args(args)
            .env("TUNEHUB_SERVER", &url)
            .env("TUNEHUB_TOKEN", TOKEN)
            .env_remove("TUNEHUB_CONFIG")
            .output()
            .unwrap()
    };
    let ok = |out: &std::process::Output| {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let quick = tunehub_tests::cli::MEASURE;
    let mut args = vec![
        "submit",
        "matmul(16,16,16)",
        "--trials",
        "3",
        "--batch",
        "3",
        "--watch",
    ];
    args.extend_from_slice(&quick);
    let out = ok(&run(&args));
    let job_id = out.lines().next().unwrap().to_string();
    assert!(job_id.starts_with("j-"), "{out}");
    assert!(out.contains("done") && out.contains("3/3 trials"), "{out}");

    let out = ok(&run(&["jobs", "--json"]));
    let j: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(
        (j["id"].as_str(), j["state"].as_str()),
        (Some(job_id.as_str()), Some("done"))
    );

    let c_file = dir.path().join("best.c");
    let out = ok(&run(&[
        "query",
        "matmul(16,16,16)",
        "--out-c",
        c_file.to_str().unwrap(),
    ]));
    assert!(out.contains("GFLOP/s"), "{out}");
    assert!(
        std::fs::read_to_string(&c_file)
            .unwrap()
            .contains("void tunehub_matmul_")
    );
    // Listed canonically, its layout said: what is printed can be pasted back.
    let out = ok(&run(&["query", "--list"]));
    assert!(
        out.contains("matmul(m=16,n=16,k=16,layout_free=B)"),
        "{out}"
    );

    let file = dir.path().join("records.jsonl");
    ok(&run(&["records", "export", "-o", file.to_str().unwrap()]));
    assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 5);
    let out = ok(&run(&["records", "import", file.to_str().unwrap()]));
    assert!(out.contains("0 new records (3 already known)"), "{out}");

    // Bad input: one line, status 2.
    let out = run(&["submit", "matmul(16,16)", "--trials", "3"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("missing parameter 'k'"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    // A wrong token: refused.
    let out = std::process::Command::new(binaries::tunehub())
        .args(["jobs", "--server", &url, "--token", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unauthenticated"));
}

/// With a certificate and key the server speaks TLS only; a client trusting the CA gets in.
#[tokio::test]
async fn tls_when_configured() {
    let dir = tempfile::tempdir().unwrap();
    let p = |f: &str| dir.path().join(f).to_str().unwrap().to_string();
    let ca = tunehub_tests::certs::Ca::new(dir.path(), "ca");
    let leaf = ca.server("server");
    let (cert, key) = (leaf.cert.to_str().unwrap(), leaf.key.to_str().unwrap());
    let server = Server::start(&p("tls.db"), "tls", &["--tls-cert", cert, "--tls-key", key]);
    let url = format!("https://{}", server.addr);
    let mut c = tunehub::client::connect(&tunehub::client::ClientConfig {
        server: url,
        token: Some(TOKEN.into()),
        ca_cert: Some(ca.cert.clone()),
    })
    .await
    .expect("a TLS connection");
    assert!(c.jobs.list(pb::ListJobsRequest::default()).await.is_ok());
    // Plain HTTP/2 to a TLS server gets nowhere.
    let plain = tunehub::client::connect(&tunehub::client::ClientConfig {
        server: server.url(),
        token: Some(TOKEN.into()),
        ca_cert: None,
    })
    .await;
    if let Ok(mut plain) = plain {
        assert!(
            plain
                .jobs
                .list(pb::ListJobsRequest::default())
                .await
                .is_err()
        );
    }
}

/// The reflection service lists the API (with a token, like every service but health).
#[tokio::test]
async fn reflection_lists_the_services() {
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&sqlite_path(dir.path(), "refl.db"), "s1", &[]);
    let c = server.client().await;
    let token = tunehub::client::BearerToken::new(Some(TOKEN)).unwrap();
    let mut refl = ServerReflectionClient::with_interceptor(c.channel.clone(), token);
    let req = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut resp = refl
        .server_reflection_info(tokio_stream::iter(vec![req]))
        .await
        .unwrap()
        .into_inner();
    let msg = resp.next().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = msg.message_response else {
        panic!("not a service list: {msg:?}");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for want in ["tunehub.v1.Jobs", "tunehub.v1.Query", "tunehub.v1.Records"] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    // Without the token: refused.
    let mut bare = ServerReflectionClient::new(c.channel.clone());
    let req = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let refused = match bare
        .server_reflection_info(tokio_stream::iter(vec![req]))
        .await
    {
        Err(s) => s.code(),
        Ok(r) => r.into_inner().next().await.unwrap().unwrap_err().code(),
    };
    assert_eq!(refused, Code::Unauthenticated);
}

/// Reflection v1alpha, what grpcio-reflection's Python client asks, is served too, and the
/// descriptors it returns carry the proto's comments (so clients see the API's documentation).
#[tokio::test]
async fn reflection_v1alpha_serves_the_documented_descriptors() {
    use tonic_reflection::pb::v1alpha::ServerReflectionRequest;
    use tonic_reflection::pb::v1alpha::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1alpha::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1alpha::server_reflection_response::MessageResponse;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&sqlite_path(dir.path(), "refl-alpha.db"), "s1", &[]);
    let c = server.client().await;
    let token = tunehub::client::BearerToken::new(Some(TOKEN)).unwrap();
    let mut refl = ServerReflectionClient::with_interceptor(c.channel.clone(), token);
    let reqs = vec![
        ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        },
        ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::FileContainingSymbol(
                "tunehub.v1.Jobs".into(),
            )),
        },
    ];
    let mut resp = refl
        .server_reflection_info(tokio_stream::iter(reqs))
        .await
        .unwrap()
        .into_inner();
    let msg = resp.next().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = msg.message_response else {
        panic!("not a service list: {msg:?}");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    assert!(names.iter().any(|n| n == "tunehub.v1.Jobs"), "{names:?}");
    let msg = resp.next().await.unwrap().unwrap();
    let Some(MessageResponse::FileDescriptorResponse(files)) = msg.message_response else {
        panic!("not a file descriptor: {msg:?}");
    };
    // A comment is a string field of the descriptor's source info: its bytes appear verbatim.
    // This one is Jobs.Submit's in proto/tunehub/v1/tunehub.proto.
    let comment = "Validates and queues a job.";
    assert!(
        files
            .file_descriptor_proto
            .iter()
            .any(|f| f.windows(comment.len()).any(|w| w == comment.as_bytes())),
        "the descriptor of tunehub.v1.Jobs lacks Jobs.Submit's comment {comment:?}"
    );
}

/// A layout-free workload (packed weights) is its own workload: tuned under the key its typed
/// options make, and found there by every query, typed or through the CLI's op-spec sugar.
#[tokio::test]
async fn a_layout_free_workload_is_tuned_and_found_under_its_own_key() {
    use tunehub::workload;
    use tunehub_engine::{ops, task::Task};
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_path(dir.path(), "lf.db");
    let server = Server::start(&db, "s1", &[]);
    let mut c = server.client().await;
    let lf = workload::from_op_spec("matmul(16,16,16,layout_free=B)").unwrap();
    let key = Task::new(ops::matmul(16, 16, 16).unwrap(), "")
        .with_layout_free(&["B"])
        .unwrap()
        .key;
    let spec = |w: &pb::Workload| pb::TaskSpec {
        workload: Some(w.clone()),
        trials: 3,
        weight: 1.0,
        alternative: false,
    };
    let job = submit(&mut c, submit_req(vec![spec(&lf)], 3)).await;
    assert_eq!(job.tasks[0].workload_key, key);
    let names = |o: Option<&pb::WorkloadOptions>| o.map(|o| o.layout_free.clone());
    assert_eq!(names(job.tasks[0].options.as_ref()), Some(vec!["B".into()]));
    let j = wait_final(&mut c, &job.id, Duration::from_secs(120)).await;
    assert_eq!(j.state, pb::JobState::Done as i32, "{j:?}");
    assert_eq!((j.tasks[0].trials_done, j.tasks[0].errors), (3, 0), "{j:?}");

    let best = |w: pb::Workload| pb::BestRequest {
        workload: Some(w),
        target: String::new(),
        with_source: true,
        allow_transfer: false,
        ..Default::default()
    };
    let found = c.query.best(best(lf.clone())).await.unwrap().into_inner();
    let rec = found.record.clone().unwrap();
    assert_eq!(
        (rec.workload_key.as_str(), found.records_total),
        (key.as_str(), 3)
    );
    assert_eq!(names(found.options.as_ref()), Some(vec!["B".into()]));
    assert!(found.source.contains("void tunehub_matmul_"));
    // By its key: the same record, with its options.
    let by_key = c
        .query
        .best(best(workload::from_key(&key)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(by_key.record.unwrap().record_id, rec.record_id);
    assert_eq!(names(by_key.options.as_ref()), Some(vec!["B".into()]));
    let top = c
        .query
        .top_k(pb::TopKRequest {
            workload: Some(lf.clone()),
            target: String::new(),
            k: 10,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(top.records.len() as u32, j.tasks[0].ok);
    assert!(top.records.iter().all(|r| r.workload_key == key));
    // The plain matmul is another workload, with no record.
    let (code, msg) = code_of(
        c.query
            .best(best(op("matmul(16,16,16,layout_free=none)")))
            .await,
    );
    assert_eq!(code, Code::NotFound, "{msg}");
    // One default for every client: the API packs the constant weight of a spec that says
    // nothing, and reads the spec's own `layout_free=`.
    for spec in ["matmul(16,16,16)", "matmul(m=16,n=16,k=16,layout_free=B)"] {
        let r = c.query.best(best(op(spec))).await.unwrap().into_inner();
        assert_eq!(r.record.unwrap().record_id, rec.record_id, "{spec}");
    }
    // The spec and the typed options contradicting each other: refused, naming it.
    let mut both = op("matmul(16,16,16,layout_free=none)");
    both.options = Some(pb::WorkloadOptions {
        layout_free: vec!["B".into()],
    });
    let (code, msg) = code_of(c.query.best(best(both)).await);
    assert_eq!(code, Code::InvalidArgument, "{msg}");
    assert!(msg.contains("layout_free"), "{msg}");
    // A key with other options than its own is a contradiction.
    let mut wrong = workload::from_key(&key);
    wrong.options = Some(pb::WorkloadOptions {
        layout_free: vec!["A".into()],
    });
    let (code, msg) = code_of(c.query.best(best(wrong)).await);
    assert_eq!(code, Code::InvalidArgument, "{msg}");

    // The CLI: `query`, of the server or of the database file (`--db`), finds it through the
    // sugar.
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(tunehub_tests::binaries::tunehub())
            .args(args)
            .env("TUNEHUB_SERVER", server.url())
            .env("TUNEHUB_TOKEN", TOKEN)
            .env_remove("TUNEHUB_CONFIG")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v
    };
    let q = cli(&["query", "matmul(16,16,16,layout_free=B)", "--json"]);
    assert_eq!(q["workload_key"], key.as_str());
    assert_eq!(q["layout_free"], serde_json::json!(["B"]));
    assert_eq!(q["best"]["record_id"], rec.record_id.as_str());
    let b = cli(&[
        "query",
        "matmul(16,16,16,layout_free=B)",
        "--db",
        &db,
        "--target",
        &j.target_key,
        "--json",
    ]);
    assert_eq!(b["workload_key"], key.as_str());
    assert_eq!(b["best"]["record_id"], rec.record_id.as_str());
    let listed = c
        .query
        .list_tuned(pb::ListTunedRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.workloads.len(), 1, "{listed:?}");
    assert_eq!(
        names(listed.workloads[0].options.as_ref()),
        Some(vec!["B".into()])
    );
}

/// What arrives from clients and files is checked at the door (issue 26): malformed op specs,
/// an operator past the one size limit, oversized strings and messages, and an import with
/// unreplayable steps or impossible times are refused with the documented status, naming what
/// was wrong, and nothing is stored; a noisy record is kept but never the best; the CLI exits
/// 2 on NOT_FOUND input.
#[tokio::test]
async fn untrusted_input_is_refused_at_the_door() {
    use tunehub_engine::target::Target;
    use tunehub_engine::task::Task;
    use tunehub_server::api::records::{target_line, workload_line};
    use tunehub_server::records::Workload;

    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_path(dir.path(), "door.db");
    let server = Server::start(&db, "s1", &[]);
    let mut c = server.client().await;

    // Client input.
    let long = |n: usize| "x".repeat(n);
    let cases: Vec<(pb::SubmitRequest, Code, &str)> = vec![
        (
            submit_req(vec![task("matmul(64,64,64", 1)], 0),
            Code::InvalidArgument,
            "expected ')'",
        ),
        (
            submit_req(vec![task("matmul(64,64,64,)", 1)], 0),
            Code::InvalidArgument,
            "argument 4 is empty",
        ),
        (
            submit_req(vec![task("matmul(1048576,1048576,1048576)", 1)], 0),
            Code::InvalidArgument,
            "2^40",
        ),
        (
            pb::SubmitRequest {
                name: long(5 << 20),
                ..submit_req(vec![task("matmul(4,4,4)", 1)], 0)
            },
            Code::InvalidArgument,
            "name is 5242880 bytes long",
        ),
        (
            submit_req(vec![task(&long(2000), 1)], 0),
            Code::InvalidArgument,
            "op_spec",
        ),
        // Past the server's message size (16 MiB): gRPC's decoder answers before the service.
        (
            pb::SubmitRequest {
                name: long(20 << 20),
                ..submit_req(vec![task("matmul(4,4,4)", 1)], 0)
            },
            Code::OutOfRange,
            "too large",
        ),
    ];
    for (req, code, needle) in cases {
        let (got, msg) = code_of(c.jobs.submit(req).await);
        assert_eq!(got, code, "{needle}: {msg}");
        assert!(msg.contains(needle), "{needle:?} not in {msg:?}");
    }
    let (got, _) = code_of(c.jobs.get(pb::GetJobRequest { id: long(1000) }).await);
    assert_eq!(got, Code::InvalidArgument);

    // An import: each bad line named, nothing stored.
    let t = Task::new(
        tunehub_engine::ops::matmul(64, 64, 64).unwrap(),
        "matmul(64,64,64)",
    );
    let w = Workload {
        key: t.key.clone(),
        description: Some(t.desc.clone()),
        dag_json: serde_json::to_string(&t.dag).unwrap(),
        options: t.options(),
        flops: t.flops,
        created_at: 0,
    };
    let target = Target::detect();
    let rec = |steps: &str, cost: f64, noisy: bool| {
        serde_json::json!({
            "i": [[t.key, target.key()], [[], serde_json::from_str::<serde_json::Value>(steps).unwrap()]],
            "r": [[cost], 0, 0, 1_700_000_000.0], "v": "tunehub-v1", "noisy": noisy,
        })
        .to_string()
    };
    let head = vec![
        workload_line(&w),
        target_line(&target.key(), &serde_json::to_string(&target).unwrap()),
    ];
    let mut lines = head.clone();
    lines.extend([
        rec("[]", 1e-3, false),
        rec(r#"[["SP",2,7,64,[8],1]]"#, 1e-3, false),
        rec(r#"[["SP",99,0,64,[8],1]]"#, 1e-3, false),
        rec("[]", 2e-9, false),
    ]);
    let import = |mut c: tunehub::client::Clients, msgs: Vec<pb::RecordLines>| async move {
        c.records.import(tokio_stream::iter(msgs)).await
    };
    let (got, msg) = code_of(import(c.clone(), vec![pb::RecordLines { lines }]).await);
    assert_eq!(got, Code::InvalidArgument, "{msg}");
    for want in [
        "3 bad lines",
        "line 4: steps do not replay",
        "line 5: steps do not replay",
        "line 6: cost 2e-9 s is faster than",
    ] {
        assert!(msg.contains(want), "{want:?} not in {msg}");
    }
    // A streamed message past the size limit: RESOURCE_EXHAUSTED, as the API documents.
    let (got, msg) = code_of(
        import(
            c.clone(),
            vec![pb::RecordLines {
                lines: vec![long(20 << 20)],
            }],
        )
        .await,
    );
    assert_eq!(got, Code::ResourceExhausted, "{msg}");
    for table in ["workloads", "targets", "records"] {
        assert_eq!(
            count(&db, &format!("SELECT COUNT(*) FROM {table}")).await,
            0,
            "{table}"
        );
    }

    // A noisy time is kept, never the best.
    let mut lines = head;
    lines.push(rec("[]", 1e-3, true));
    let r = import(c.clone(), vec![pb::RecordLines { lines }])
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.records_new, 1);
    let (got, _) = code_of(
        c.query
            .best(pb::BestRequest {
                workload: Some(op("matmul(64,64,64)")),
                target: target.key(),
                with_source: false,
                allow_transfer: false,
                ..Default::default()
            })
            .await,
    );
    assert_eq!(got, Code::NotFound);
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM records WHERE noisy = 1").await,
        1
    );

    // The CLI: NOT_FOUND input exits 2 with one line.
    let out = std::process::Command::new(binaries::tunehub())
        .args([
            "submit",
            "matmul(4,4,4)",
            "--target",
            "x86_64-nosuch-c9-00000000",
        ])
        .env("TUNEHUB_SERVER", server.url())
        .env("TUNEHUB_TOKEN", TOKEN)
        .env_remove("TUNEHUB_CONFIG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("not found"), "{stderr}");
}

/// Issue 64, item 7: a workload inside the DAG's 2^40-points limit whose tensors could never be
/// allocated (`matmul(1048576,1048576,1)`: a 4 TiB output) is INVALID_ARGUMENT at the door with
/// its size and the limit, as a task, as a range's representative and for a measurement on
/// demand; nothing is stored (it used to become a job "done" at 0 trials, with no reason).
#[tokio::test]
async fn a_workload_too_large_to_measure_is_refused_with_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_path(dir.path(), "large.db");
    let server = Server::start(&db, "s1", &[]);
    let mut c = server.client().await;
    let huge = "matmul(1048576,1048576,1)";

    let (code, msg) = code_of(
        c.jobs
            .submit(submit_req(vec![task("matmul(8,8,8)", 1), task(huge, 1)], 0))
            .await,
    );
    assert_eq!(code, Code::InvalidArgument, "{msg}");
    for want in [
        "task 1 (matmul(m=1048576,n=1048576,k=1",
        "4.0 TiB",
        "4.0 GiB",
    ] {
        assert!(msg.contains(want), "{want:?} not in {msg:?}");
    }

    // A range whose largest shapes are too large: the first such representative is named.
    let range = pb::SubmitRequest {
        range: Some(pb::ShapeRange {
            spec: "matmul(m=1..1048576,n=1048576,k=1)".into(),
            options: None,
            trials: 1,
        }),
        ..submit_req(vec![], 0)
    };
    let (code, msg) = code_of(c.jobs.submit(range).await);
    assert_eq!(code, Code::InvalidArgument, "{msg}");
    assert!(
        msg.contains("n=1048576,k=1") && msg.contains("more than the 4.0 GiB"),
        "{msg}"
    );

    // Measuring on demand is a measurement too.
    let (code, msg) = code_of(
        c.query
            .best(pb::BestRequest {
                workload: Some(op(huge)),
                target: "local".into(),
                allow_transfer: true,
                measure_transfer: true,
                ..Default::default()
            })
            .await,
    );
    assert_eq!(code, Code::InvalidArgument, "{msg}");
    assert!(
        msg.contains("measure_transfer") && msg.contains("4.0 TiB"),
        "{msg}"
    );

    for table in ["workloads", "jobs", "tasks", "shape_ranges", "records"] {
        assert_eq!(
            count(&db, &format!("SELECT COUNT(*) FROM {table}")).await,
            0,
            "{table}"
        );
    }
}

/// Request bytes sent as they are, and the answer's bytes as they come.
struct RawCodec;
struct RawCoder;

impl tonic::codec::Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCoder;
    type Decoder = RawCoder;
    fn encoder(&mut self) -> RawCoder {
        RawCoder
    }
    fn decoder(&mut self) -> RawCoder {
        RawCoder
    }
}

impl tonic::codec::Encoder for RawCoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(
        &mut self,
        item: Vec<u8>,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        bytes::BufMut::put_slice(dst, &item);
        Ok(())
    }
}

impl tonic::codec::Decoder for RawCoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<Vec<u8>>, tonic::Status> {
        let n = bytes::Buf::remaining(src);
        Ok(Some(bytes::Buf::copy_to_bytes(src, n).to_vec()))
    }
}

/// A request whose bytes are not its message is the caller's mistake (INVALID_ARGUMENT, saying
/// so), not the server's (tonic's INTERNAL); nothing is stored.
#[tokio::test]
async fn a_request_that_does_not_decode_is_invalid_argument() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&sqlite_path(dir.path(), "raw.db"), "s1", &[]);
    let mut c = server.client().await;
    let mut grpc = tonic::client::Grpc::new(c.channel.clone());
    // Field 1 (the tasks) as a length-delimited value longer than the message.
    for (method, garbage) in [
        ("/tunehub.v1.Jobs/Submit", vec![0x0a, 0xff, 0x01, 0x00]),
        ("/tunehub.v1.Query/Best", vec![0xff, 0xff, 0xff]),
    ] {
        grpc.ready().await.unwrap();
        let mut req = tonic::Request::new(garbage);
        req.metadata_mut()
            .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
        let path = tonic::codegen::http::uri::PathAndQuery::from_static(method);
        let err = grpc.unary(req, path, RawCodec).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{method}: {err:?}");
        assert!(
            err.message().contains("does not decode"),
            "{method}: {}",
            err.message()
        );
    }
    let jobs = c.jobs.list(pb::ListJobsRequest::default()).await.unwrap();
    assert!(jobs.into_inner().jobs.is_empty());
}

/// Another process holding SQLite's write lock past the server's busy timeout (30 s): an
/// operator's `sqlite3`, a backup. The job's writes meet a locked database, which is an outage
/// (retried until it ends), not a failure: the job stands still while the lock is held and ends
/// done with every trial once it is let go.
#[tokio::test]
async fn a_write_lock_held_past_the_busy_timeout_fails_no_job() {
    use sqlx::{Connection, Executor, SqliteConnection};
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_path(dir.path(), "locked.db");
    let server = Server::start(&db, "s1", &[]);
    let mut c = server.client().await;
    let job = submit(&mut c, submit_req(vec![task("matmul(16,16,16)", 12)], 2)).await;
    wait_trials(&mut c, &job.id, 2, Duration::from_secs(120)).await;

    let mut holder = SqliteConnection::connect(&format!("sqlite://{db}"))
        .await
        .unwrap();
    holder.execute("BEGIN IMMEDIATE").await.unwrap();
    let done = |j: &pb::Job| j.tasks.iter().map(|t| t.trials_done).sum::<u32>();
    let at_lock = done(&get(&mut c, &job.id).await);
    // The fault itself: the lock held for longer than the busy timeout.
    tokio::time::sleep(Duration::from_secs(35)).await;
    let while_held = get(&mut c, &job.id).await;
    assert_eq!(
        done(&while_held),
        at_lock,
        "nothing is stored under the lock"
    );
    assert_ne!(
        while_held.state,
        pb::JobState::Failed as i32,
        "{while_held:?}"
    );
    holder.execute("ROLLBACK").await.unwrap();
    holder.close().await.unwrap();

    let end = wait_final(&mut c, &job.id, Duration::from_secs(300)).await;
    assert_eq!(end.state, pb::JobState::Done as i32, "{end:?}");
    assert_eq!(done(&end), 12, "{end:?}");
}

/// The SQLite file and its `-wal` made unwritable under a running job (`chattr +i`) for longer
/// than the driver's first retry steps, then writable again: the job goes on by itself and ends
/// done with every trial, without a restart (issue 64). Writes failed with SQLite I/O errors;
/// SQLite rolled those transactions back by itself, sqlx still counted them open, and a
/// connection came back from the pool holding SQLite's write lock for good: every later write,
/// this server's and other processes', was "database is locked".
///
/// Not the `-shm`: it is shared memory, not storage. `chattr +i` writes its pages back and
/// write-protects them, and SQLite's next store into the map (a reader's mark, the first after
/// any commit) is a SIGBUS: any SQLite process dies, `sqlite3` too. Immutable with the rest, it
/// killed the server whenever a commit (a lease renewal) fell just before the fault.
#[tokio::test]
async fn a_database_unwritable_for_a_while_then_writable_again_needs_no_restart() {
    let test = "a_database_unwritable_for_a_while_then_writable_again_needs_no_restart";
    let dir = tempfile::tempdir().unwrap();
    if !Immutable::available(test, dir.path()) {
        return;
    }
    let db = sqlite_path(dir.path(), "unwritable.db");
    let log = dir.path().join("server.log");
    let mut server = Server::on(&db, "s1").log(&log).start();
    let mut c = server.client().await;
    // Trials enough that the job is still running when the fault comes, on a fast machine too
    // (with 8 it could end first, and then nothing writes to fail).
    let trials = 40;
    let job = submit(
        &mut c,
        submit_req(vec![task("matmul(16,16,16)", trials)], 2),
    )
    .await;
    wait_trials(&mut c, &job.id, 2, Duration::from_secs(120)).await;

    let files = ["", "-wal"].map(|suffix| format!("{db}{suffix}"));
    let retries = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .matches("the database is unavailable, retrying")
            .count()
    };
    let before = retries();
    let fault = Immutable::set(&files);
    // The fault lasts until the job's writes have failed and been retried several times: past
    // the backoff's first steps (100 ms doubling), well into its 2 s ones.
    // On failure, the server's log says what the job was doing.
    let tail = || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let last = &lines[lines.len().saturating_sub(20)..];
        format!("; the server's log ends:\n{}", last.join("\n"))
    };
    // A server that died under the fault retries nothing: said at once, with how it ended.
    let child = &mut server.child;
    let six = async || {
        if let Some(status) = child.try_wait().expect("the server's status") {
            panic!("the server exited under the fault: {status}{}", tail());
        }
        (retries() >= before + 6).then_some(())
    };
    wait::until_or("six retried writes", Duration::from_secs(60), six, tail).await;
    let while_unwritable = get(&mut c, &job.id).await;
    assert_ne!(
        while_unwritable.state,
        pb::JobState::Failed as i32,
        "{while_unwritable:?}"
    );
    fault.lift();

    let end = wait_final(&mut c, &job.id, Duration::from_secs(180)).await;
    assert_eq!(end.state, pb::JobState::Done as i32, "{end:?}");
    let done: u32 = end.tasks.iter().map(|t| t.trials_done).sum();
    assert_eq!(done, trials, "{end:?}");
}
