//! Zero-shot answers through a real `tunehub server`: a shape never tuned is answered, when
//! asked to, from the nearest tuned workload of its structure, marked as transferred, with
//! steps that replay on it; nothing is stored; other structures stay NOT_FOUND. A target with
//! no saved cost model starts from the nearest other target's.

use std::time::Duration;
use tonic::Code;
use tunehub_engine::ops::OpSpec;
use tunehub_engine::schedule::Schedule;
use tunehub_proto::v1 as pb;
use tunehub_tests::{
    Server, TOKEN, binaries, op, sqlite_path, submit, submit_req, task, tune_done, wait_final,
};

fn best(spec: &str, transfer: bool) -> pb::BestRequest {
    pb::BestRequest {
        workload: Some(op(spec)),
        target: "local".into(),
        with_source: true,
        allow_transfer: transfer,
        ..Default::default()
    }
}

#[tokio::test]
async fn a_shape_never_tuned_is_answered_from_its_nearest_tuned_neighbour() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_path(dir.path(), "transfer.db");
    let server = Server::start(&db, "s1", &[]);
    let mut c = server.client().await;
    tune_done(&mut c, "matmul(16,16,16)", 3).await;
    let source_key = OpSpec::parse("matmul(16,16,16)")
        .unwrap()
        .task()
        .unwrap()
        .key;
    let asked = OpSpec::parse("matmul(24,16,16)").unwrap().task().unwrap();

    // Not asked for: NOT_FOUND, as before.
    let e = c
        .query
        .best(best("matmul(24,16,16)", false))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);

    let r = c
        .query
        .best(best("matmul(24,16,16)", true))
        .await
        .unwrap()
        .into_inner();
    assert!(r.found);
    let t = r.transfer.as_ref().expect("marked as transferred");
    assert_eq!(t.source_workload_key, source_key);
    assert!(!t.source_record_id.is_empty() && t.distance > 0.0 && t.predicted_seconds > 0.0);
    // The job saved a cost model for the target: it ranked the adapted candidates.
    assert_eq!(t.ranked_by, "cost model");
    let rec = r.record.as_ref().unwrap();
    assert!(rec.record_id.is_empty() && rec.costs.is_empty(), "{rec:?}");
    assert_eq!(rec.workload_key, asked.key);
    assert_eq!(rec.seconds, t.predicted_seconds);
    // The steps are this workload's: they replay on its DAG, and its kernel is generated.
    Schedule::from_json(&rec.steps_json)
        .unwrap()
        .replay(&asked.dag)
        .unwrap();
    assert!(r.source.contains("void tunehub_matmul_"), "{}", r.source);
    // Nothing was stored for it.
    assert_eq!((r.records_total, r.records_ok), (0, 0));

    // Another structure has nothing to transfer from: NOT_FOUND that says so.
    let e = c
        .query
        .best(best("batch_matmul(2,16,16,16)", true))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("structure"), "{}", e.message());

    // In a batch: the untuned shape answered by transfer, the tuned one by its record.
    let batch = c
        .query
        .best_batch(pb::BestBatchRequest {
            workloads: vec![op("matmul(24,16,16)"), op("matmul(16,16,16)")],
            target: String::new(),
            with_source: false,
            allow_transfer: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .results;
    assert!(batch[0].found && batch[0].transfer.is_some());
    assert!(batch[1].found && batch[1].transfer.is_none());

    // The command line, asking as the API was asked (one default layout for every client):
    // `--transfer` prints the transfer; without it, exit 2.
    let cli = |extra: &[&str]| {
        std::process::Command::new(binaries::tunehub())
            .args(["query", "matmul(24,16,16)", "--server", &server.url()])
            .args(extra)
            .env("TUNEHUB_TOKEN", TOKEN)
            .output()
            .unwrap()
    };
    let out = cli(&["--transfer", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["transfer"]["source_workload_key"], source_key.as_str());
    assert_eq!(cli(&[]).status.code(), Some(2));

    // A warm start: tuning the new shape measures the transferred schedule among its first
    // candidates (the neighbour's best, adapted), and it is stored as a record of its own.
    tune_done(&mut c, "matmul(24,16,16)", 2).await;
    let top = c
        .query
        .top_k(pb::TopKRequest {
            workload: Some(op("matmul(24,16,16)")),
            target: String::new(),
            k: 10,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .records;
    // The seed: the neighbour's best record adapted (the zero-shot answer above may be another
    // candidate, the one the cost model ranked first).
    let source_best = c
        .query
        .best(pb::BestRequest {
            workload: Some(op("matmul(16,16,16)")),
            omit_kernel: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .record
        .unwrap();
    let seeded = tunehub_engine::transfer::adapt(
        &Schedule::from_json(&source_best.steps_json).unwrap(),
        &tunehub_engine::ops::matmul(16, 16, 16).unwrap(),
        &asked.dag,
    )
    .unwrap()
    .schedule
    .to_json();
    assert!(
        top.iter().any(|r| r.steps_json == seeded),
        "the warm-start seed {seeded} is not among {top:?}"
    );

    // A pre-tuned pack: the export distilled to the best record of each pair imports into a
    // fresh server, which then answers both shapes with the same best records.
    let run = |args: &[&str]| {
        let out = std::process::Command::new(binaries::tunehub())
            .args(args)
            .env("TUNEHUB_TOKEN", TOKEN)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };
    let all = dir.path().join("all.jsonl");
    let pack = dir.path().join("pack.jsonl");
    run(&[
        "records",
        "export",
        "-o",
        all.to_str().unwrap(),
        "--server",
        &server.url(),
    ]);
    let out = run(&[
        "records",
        "distill",
        all.to_str().unwrap(),
        "--top",
        "1",
        "-o",
        pack.to_str().unwrap(),
    ]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("2 workload-target pairs"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Kept answers live an hour there: only an invalidation can make one go.
    let fresh = Server::start(
        &sqlite_path(dir.path(), "fresh.db"),
        "s2",
        &["--cache-ttl-ms=3600000"],
    );
    let out = run(&[
        "records",
        "import",
        pack.to_str().unwrap(),
        "--server",
        &fresh.url(),
    ]);
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("imported 2 new records"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let mut f = fresh.client().await;
    // Records but no saved model there: a zero-shot answer is the nearest neighbour's.
    let r = f
        .query
        .best(best("matmul(32,16,16)", true))
        .await
        .unwrap()
        .into_inner();
    let t = r.transfer.unwrap();
    assert_eq!(t.ranked_by, "distance");
    assert_eq!(t.source_workload_key, asked.key, "the nearest of the two");
    // Asked again, the same answer (kept in memory). A nearer neighbour tuned on this server
    // shows at once: storing its records forgets the target's kept answers, and the answer is
    // made again, from it by distance or ranked by the cost model its job saved.
    let again = f
        .query
        .best(best("matmul(32,16,16)", true))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.record, r.record);
    tune_done(&mut f, "matmul(32,16,14)", 2).await;
    let nearer = f
        .query
        .best(best("matmul(32,16,16)", true))
        .await
        .unwrap()
        .into_inner();
    let t = nearer.transfer.unwrap();
    let near_key = OpSpec::parse("matmul(32,16,14)")
        .unwrap()
        .task()
        .unwrap()
        .key;
    assert!(
        t.source_workload_key == near_key || t.ranked_by == "cost model",
        "the kept answer was given: {t:?}"
    );
    for spec in ["matmul(16,16,16)", "matmul(24,16,16)"] {
        let there = c.query.best(best(spec, false)).await.unwrap().into_inner();
        let here = f.query.best(best(spec, false)).await.unwrap().into_inner();
        assert_eq!(
            here.record.unwrap().record_id,
            there.record.unwrap().record_id,
            "{spec}"
        );
    }
}

/// Part 6, models across targets: a target with no saved cost model starts from the nearest
/// other target's (here the same machine under other compiler flags: another target key), says
/// so in the job (`Job.model`, `tunehub jobs --json`), and then saves its own.
#[tokio::test]
async fn a_target_without_a_model_starts_from_the_nearest_targets() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_path(dir.path(), "models.db");
    let first = Server::start(&db, "s1", &[]);
    let mut c = first.client().await;
    let done = tune_done(&mut c, "matmul(16,16,16)", 3).await;
    assert_eq!(
        done.model, "cold",
        "the first job of a database starts cold"
    );
    let first_key = done.target_key.clone();

    // The same database, another target: its first job starts from the first target's model.
    let second = Server::start(&db, "s2", &["--cflags=-DTUNEHUB_MODEL_TEST"]);
    let mut c2 = second.client().await;
    let job = submit(&mut c2, submit_req(vec![task("matmul(16,16,32)", 3)], 3)).await;
    let done = wait_final(&mut c2, &job.id, Duration::from_secs(300)).await;
    assert_eq!(done.state, pb::JobState::Done as i32, "{done:?}");
    assert_ne!(done.target_key, first_key);
    assert_eq!(done.model, format!("transferred from {first_key}"));
    // What a user sees.
    let out = std::process::Command::new(binaries::tunehub())
        .args(["jobs", "--json", "--server", &second.url()])
        .env("TUNEHUB_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert!(out.status.success());
    let line = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.contains(&job.id))
        .map(str::to_string)
        .expect("the job is listed");
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["model"], format!("transferred from {first_key}").as_str());

    // Having trained, the second target saved its own model: its next job starts from it.
    let job = submit(&mut c2, submit_req(vec![task("matmul(16,16,32)", 2)], 2)).await;
    let done = wait_final(&mut c2, &job.id, Duration::from_secs(300)).await;
    assert_eq!(done.state, pb::JobState::Done as i32, "{done:?}");
    assert_eq!(done.model, "saved");
}

/// `tune_transferred`: a workload answered by transfer gets one background tuning job (however
/// often it is asked for), which runs and stores records of its own.
#[tokio::test]
async fn a_transferred_answer_queues_one_tuning_of_its_workload() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_path(dir.path(), "tune.db");
    let server = Server::start(
        &db,
        "s1",
        &["--tune-transferred", "--tune-transferred-trials", "2"],
    );
    let mut c = server.client().await;
    tune_done(&mut c, "matmul(16,16,16)", 3).await;
    // Not answered by transfer: nothing queued.
    c.query.best(best("matmul(16,16,16)", true)).await.unwrap();
    for _ in 0..3 {
        let r = c
            .query
            .best(best("matmul(24,16,16)", true))
            .await
            .unwrap()
            .into_inner();
        assert!(r.transfer.is_some());
    }
    let asked = OpSpec::parse("matmul(24,16,16)")
        .unwrap()
        .task()
        .unwrap()
        .key;
    let jobs = c
        .jobs
        .list(pb::ListJobsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .jobs;
    let queued: Vec<&pb::Job> = jobs
        .iter()
        .filter(|j| j.owner == "tune_transferred")
        .collect();
    assert_eq!(queued.len(), 1, "{jobs:?}");
    assert_eq!(queued[0].tasks.len(), 1);
    assert_eq!(queued[0].tasks[0].workload_key, asked);
    assert_eq!(queued[0].tasks[0].trials, 2);
    let done = wait_final(&mut c, &queued[0].id, Duration::from_secs(300)).await;
    assert_eq!(done.state, pb::JobState::Done as i32, "{done:?}");
    assert_eq!(done.tasks[0].trials_done, 2, "{done:?}");
}

/// `measure_transfer`: the transferred candidates of a shape never tuned are measured on the
/// server's machine and stored as records; the answer is then a measured record (or, when none
/// measured as a trusted success, still the transferred one). Another target, or no
/// `allow_transfer`, is refused with a message that says why.
#[tokio::test]
async fn measure_transfer_stores_the_candidates_it_measures() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_path(dir.path(), "measure.db");
    let server = Server::start(&db, "s1", &[]);
    let mut c = server.client().await;
    let done = tune_done(&mut c, "matmul(16,16,16)", 3).await;
    let measured = |spec: &str, target: &str, transfer: bool| pb::BestRequest {
        target: target.into(),
        measure_transfer: true,
        ..best(spec, transfer)
    };

    let e = c
        .query
        .best(measured("matmul(24,16,16)", "", false))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("allow_transfer"), "{}", e.message());

    let r = c
        .query
        .best(measured("matmul(24,16,16)", "", true))
        .await
        .unwrap()
        .into_inner();
    assert!(r.found);
    assert!(
        (1..=3).contains(&r.records_total),
        "the candidates measured are stored: {r:?}"
    );
    let top = c
        .query
        .top_k(pb::TopKRequest {
            workload: Some(op("matmul(24,16,16)")),
            k: 10,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .records;
    let rec = r.record.unwrap();
    if top.is_empty() {
        // No trusted success (a busy machine can make every timing noisy): the fastest noisy
        // one, flagged, or still the transfer when none succeeded.
        assert!(
            (rec.noisy && r.transfer.is_none()) || r.transfer.is_some(),
            "{rec:?}"
        );
    } else {
        assert!(
            r.transfer.is_none() && !rec.noisy,
            "a measured answer is not a transfer"
        );
        assert_eq!(rec.record_id, top[0].record_id);
    }

    // Another target (the same database seen from a server with other flags): refused.
    let other = Server::start(&db, "s2", &["--cflags=-DTUNEHUB_MEASURE_TEST"]);
    let mut c2 = other.client().await;
    let e = c2
        .query
        .best(measured("matmul(32,16,16)", &done.target_key, true))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("own machine"), "{}", e.message());
}
