//! Shape ranges (dynamic shapes) through a real `tunehub server`: a range job tunes its
//! representative shapes; a held-out shape of the range is then answered from the
//! representative serving it (adapted, marked as transferred, the range named) without
//! `allow_transfer`, and its kernel passes the reference check when measured; the dispatch
//! table is listed (gRPC and the command line); an export carries the range into a fresh
//! server; bad ranges are refused with nothing stored. The same flow runs on PostgreSQL.

use std::time::Duration;
use tonic::Code;
use tunehub::client::Clients;
use tunehub_engine::measure::{ErrorCode, MeasureOptions, Measurer};
use tunehub_engine::ops;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;
use tunehub_proto::v1 as pb;
use tunehub_tests::{
    Server, TOKEN, binaries, code_of, fresh_db, op, sqlite_path, submit_req, task, wait_final,
};

/// Three representatives (8, 16, 64), a few trials each: the test checks behaviour, not speed.
const SPEC: &str = "matmul(m=8..64,n=16,k=16)";
const TRIALS: u32 = 2;

fn range_req(spec: &str, trials: u32) -> pb::SubmitRequest {
    pb::SubmitRequest {
        range: Some(pb::ShapeRange {
            spec: spec.into(),
            options: None,
            trials,
        }),
        ..submit_req(vec![], trials)
    }
}

fn table_req(spec: &str) -> pb::RangeRequest {
    pb::RangeRequest {
        spec: spec.into(),
        options: None,
        target: String::new(),
    }
}

async fn best(c: &mut Clients, spec: &str) -> Result<pb::BestResponse, tonic::Status> {
    c.query
        .best(pb::BestRequest {
            workload: Some(op(spec)),
            ..Default::default()
        })
        .await
        .map(|r| r.into_inner())
}

/// Submits the range job, waits for it, and checks what it tuned and what it answers; returns
/// the dispatch table.
async fn tune_and_answer(c: &mut Clients) -> pb::RangeResponse {
    let job = c
        .jobs
        .submit(range_req(SPEC, TRIALS))
        .await
        .unwrap()
        .into_inner()
        .job
        .unwrap();
    let named = job.range.clone().expect("the job names its range");
    assert_eq!(named.spec, SPEC);
    let descs: Vec<&str> = job.tasks.iter().map(|t| t.description.as_str()).collect();
    assert_eq!(
        descs,
        [
            "matmul(m=8,n=16,k=16,layout_free=B)",
            "matmul(m=16,n=16,k=16,layout_free=B)",
            "matmul(m=64,n=16,k=16,layout_free=B)"
        ]
    );
    let done = wait_final(c, &job.id, Duration::from_secs(300)).await;
    assert_eq!(done.state, pb::JobState::Done as i32, "{done:?}");
    assert!(
        done.tasks.iter().all(|t| t.trials_done == TRIALS),
        "{done:?}"
    );

    // The dispatch table: three cells tiling 8..64, each with its representative's record.
    let table = c.query.range(table_req(SPEC)).await.unwrap().into_inner();
    assert_eq!(table.range.as_ref().unwrap().id, named.id);
    assert_eq!(table.job_ids, std::slice::from_ref(&job.id));
    let cells: Vec<(i64, i64)> = table
        .entries
        .iter()
        .map(|e| (e.intervals[0].lo, e.intervals[0].hi))
        .collect();
    assert_eq!(cells, [(8, 11), (12, 32), (33, 64)]);
    for e in &table.entries {
        assert_eq!(e.intervals[0].extent, "m");
        assert!(!e.record_id.is_empty() && e.gflops > 0.0, "{e:?}");
        assert_eq!(e.records_total, u64::from(TRIALS));
    }

    // A held-out shape of the range, never tuned: answered without allow_transfer, from the
    // representative serving it (m = 40 is in 64's cell), its steps adapted to it.
    let r = best(c, "matmul(40,16,16)").await.unwrap();
    assert!(r.found);
    assert_eq!(r.range.as_ref(), Some(&named));
    let t = r.transfer.as_ref().expect("marked as transferred");
    assert_eq!(t.ranked_by, "range");
    assert_eq!(t.source_workload_key, table.entries[2].workload_key);
    assert_eq!(t.source_record_id, table.entries[2].record_id);
    let rec = r.record.as_ref().unwrap();
    assert!(rec.record_id.is_empty(), "predicted, not a record: {rec:?}");
    assert_eq!((r.records_total, r.records_ok), (0, 0), "nothing stored");
    let held_out = Task::new(ops::matmul(40, 16, 16).unwrap(), "held out");
    let schedule = Schedule::from_json(&rec.steps_json).unwrap();
    // Measured here, the adapted kernel is correct: checked against the f64 reference.
    let options = MeasureOptions {
        number: 1,
        repeat: 1,
        min_repeat_ms: 1,
        noise_threshold: 0.0,
        ..MeasureOptions::default()
    };
    let measured = Measurer::new(&Target::detect(), options).measure(&held_out, &[schedule]);
    assert_eq!(measured[0].error, ErrorCode::NoError, "{:?}", measured[0]);

    // Outside the range, or another fixed extent: no answer unless asked to transfer.
    for other in ["matmul(100,16,16)", "matmul(40,16,32)"] {
        assert_eq!(best(c, other).await.unwrap_err().code(), Code::NotFound);
    }
    // A representative answers with its own record.
    let own = best(c, "matmul(16,16,16)").await.unwrap();
    assert!(own.range.is_none() && own.transfer.is_none());
    table
}

#[tokio::test]
async fn a_range_is_tuned_answered_listed_and_carried_by_export() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&sqlite_path(dir.path(), "ranges.db"), "r1", &[]);
    let mut c = server.client().await;
    let table = tune_and_answer(&mut c).await;

    // The command line's dispatch table: the same range (its weight packed by the API's
    // default, whichever client asks), and the unpacked one is another, never tuned.
    let tunehub = |args: &[&str]| {
        std::process::Command::new(binaries::tunehub())
            .args(args)
            .env("TUNEHUB_TOKEN", TOKEN)
            .output()
            .unwrap()
    };
    let unpacked = "matmul(m=8..64,n=16,k=16,layout_free=none)";
    let out = tunehub(&["query", "--range", unpacked, "--server", &server.url()]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "not found is the caller's: {out:?}"
    );
    let spec_cli = "matmul(m=8..64,n=16,k=16)";
    let out = tunehub(&[
        "query",
        "--range",
        spec_cli,
        "--json",
        "--server",
        &server.url(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["entries"].as_array().unwrap().len(), 3);
    assert_eq!(v["entries"][1]["intervals"][0]["lo"], 12);
    let out = tunehub(&["query", "--range", spec_cli, "--server", &server.url()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("SERVED BY") && text.contains("33..64"),
        "{text}"
    );
    // `tunehub tune` of a range: its own embedded server, then the table.
    let tuned_db = sqlite_path(dir.path(), "tuned.db");
    let mut args = vec!["tune", "matmul(m=16..64,n=16,k=16)", "--trials", "2"];
    args.extend(["--batch", "2", "--db", &tuned_db, "--repeat", "1"]);
    args.extend(["--min-repeat-ms", "1", "--noise-threshold", "0"]);
    let out = tunehub(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("16..32") && text.contains("33..64"), "{text}");

    // Export, then import into a fresh server: the range comes along, and answers there.
    let file = dir.path().join("all.jsonl");
    let out = tunehub(&[
        "records",
        "export",
        "-o",
        file.to_str().unwrap(),
        "--server",
        &server.url(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = std::fs::read_to_string(&file).unwrap();
    assert_eq!(lines.matches("{\"range\":").count(), 1, "{lines}");
    let fresh = Server::start(&sqlite_path(dir.path(), "fresh.db"), "r2", &[]);
    let mut f = fresh.client().await;
    // A tampered range line refuses the whole file: nothing stored.
    let tampered = lines.replace(&table.entries[0].workload_key, "0123456789abcdef01234567");
    let refused = f
        .records
        .import(tokio_stream::iter(vec![pb::RecordLines {
            lines: tampered.lines().map(String::from).collect(),
        }]))
        .await;
    let (code, msg) = code_of(refused);
    assert_eq!(code, Code::InvalidArgument);
    assert!(msg.contains("range.representatives"), "{msg}");
    assert_eq!(
        f.query.range(table_req(SPEC)).await.unwrap_err().code(),
        Code::NotFound
    );
    let imported = f
        .records
        .import(tokio_stream::iter(vec![pb::RecordLines {
            lines: lines.lines().map(String::from).collect(),
        }]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(imported.records_new, u64::from(3 * TRIALS));
    let there = f.query.range(table_req(SPEC)).await.unwrap().into_inner();
    assert_eq!(there.range, table.range);
    assert!(there.job_ids.is_empty(), "imported, not tuned there");
    let ids = |t: &pb::RangeResponse| -> Vec<String> {
        t.entries.iter().map(|e| e.record_id.clone()).collect()
    };
    assert_eq!(ids(&there), ids(&table));
    let r = best(&mut f, "matmul(40,16,16)").await.unwrap();
    assert_eq!(r.range, table.range.clone());
}

#[tokio::test]
async fn bad_ranges_are_refused_and_store_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_path(dir.path(), "bad.db");
    let server = Server::start(&db, "r3", &[]);
    let mut c = server.client().await;
    for (spec, want) in [
        ("matmul(m=512..1,n=16,k=16)", "is empty"),
        ("matmul(m=..8,n=16,k=16)", "integer"),
        ("matmul(b=1..4,m=8,n=8,k=8)", "not one of its extents"),
        ("dense(m=8,n=8,k=8,relu=0..1)", "not one of its extents"),
        ("batch_matmul(b=1..2,m=1..4,n=1..4,k=8)", "3 ranged extents"),
        (
            "C[i,j] += A[i,k] * B[k,j] where i<1..8, j<8, k<8",
            "text form",
        ),
        ("matmul(m=8,n=16,k=16)", "no range"),
    ] {
        let (code, msg) = code_of(c.jobs.submit(range_req(spec, 2)).await);
        assert_eq!(code, Code::InvalidArgument, "{spec}: {msg}");
        assert!(msg.contains(want), "{spec}: {msg}");
        let (code, _) = code_of(c.query.range(table_req(spec)).await);
        assert_eq!(code, Code::InvalidArgument, "{spec}");
    }
    // A range beside tasks, or with no trials.
    let mut both = range_req(SPEC, 2);
    both.tasks = vec![task("matmul(8,8,8)", 1)];
    assert_eq!(code_of(c.jobs.submit(both).await).0, Code::InvalidArgument);
    assert_eq!(
        code_of(c.jobs.submit(range_req(SPEC, 0)).await).0,
        Code::InvalidArgument
    );
    // Valid, but never tuned: NOT_FOUND.
    assert_eq!(
        code_of(c.query.range(table_req(SPEC)).await).0,
        Code::NotFound
    );
    let jobs = c
        .jobs
        .list(pb::ListJobsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .jobs;
    assert!(jobs.is_empty(), "{jobs:?}");

    // The command line: exit 2, one line, nothing stored (`tune` never opens its database).
    let tunehub = |args: &[&str]| {
        std::process::Command::new(binaries::tunehub())
            .args(args)
            .env("TUNEHUB_TOKEN", TOKEN)
            .output()
            .unwrap()
    };
    let tune_db = sqlite_path(dir.path(), "tune.db");
    for args in [
        vec![
            "submit",
            "matmul(m=512..1,n=16,k=16)",
            "--server",
            &server.url(),
        ],
        vec!["submit", SPEC, "matmul(8,8,8)", "--server", &server.url()],
        vec![
            "query",
            "--range",
            "matmul(b=1..4,m=8,n=8,k=8)",
            "--server",
            &server.url(),
        ],
        vec!["tune", "matmul(m=1..2,n=1..2,k=1..2)", "--db", &tune_db],
        vec![
            "tune",
            "--expr",
            "C[i,j] += A[i,k] * B[k,j] where i<1..8, j<8, k<8",
            "--db",
            &tune_db,
        ],
    ] {
        let out = tunehub(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
    assert!(!std::path::Path::new(&tune_db).exists());
    let jobs = c
        .jobs
        .list(pb::ListJobsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .jobs;
    assert!(jobs.is_empty(), "{jobs:?}");
}

#[tokio::test]
async fn a_range_is_tuned_and_answered_on_postgres() {
    let Some(url) = fresh_db("ranges").await else {
        return;
    };
    let server = Server::start(&url, "rpg", &[]);
    let mut c = server.client().await;
    tune_and_answer(&mut c).await;
}
