//! Records TVM users carry: `tunehub records export --format ansor` and `records import
//! --format ansor` through the real binary and real servers on loopback. Tuned records go out
//! as Ansor lines and come back into a fresh database with the same steps and costs; a line as
//! TVM 0.19 writes it (follow-splits, cache write) imports and replays; lines that do not map
//! are each named, and nothing is stored. TVM itself is not needed (bench/ansor_apply.py runs
//! the exported file through TVM).

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;
use std::time::Duration;
use tunehub_engine::interchange::ansor::{AnsorWorkload, from_ansor};
use tunehub_engine::schedule::Schedule;
use tunehub_proto::v1 as pb;
use tunehub_server::records::SqlStore;
use tunehub_tests::{Server, TOKEN, binaries, sqlite_path, submit, submit_req, task, wait_final};

fn run(args: &[&str]) -> Output {
    std::process::Command::new(binaries::tunehub())
        .args(args)
        .env("TUNEHUB_TOKEN", TOKEN)
        .output()
        .unwrap()
}

fn ok(out: Output) -> (String, String) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// Every record of a database: (workload, target, steps, costs of a success, error code).
async fn records_of(db: &str) -> BTreeSet<(String, String, String, String, i32)> {
    let store = SqlStore::open(db).await.unwrap();
    let all = store.export_records(None, None).await.unwrap();
    store.close().await;
    all.into_iter()
        .map(|r| {
            let costs = if r.error_code == 0 {
                format!("{:?}", r.costs)
            } else {
                String::new()
            };
            (
                r.workload_key,
                r.target_key,
                r.steps_json,
                costs,
                r.error_code,
            )
        })
        .collect()
}

const CONV: &str = "conv2d_nchw(n=1,c=4,h=8,w=8,f=4,pad=1)";

#[tokio::test]
async fn tuned_records_go_out_as_ansor_lines_and_come_back_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_path(dir.path(), "a.db");
    let server = Server::start(&db, "s1", &[]);
    let mut c = server.client().await;
    let job = submit(
        &mut c,
        submit_req(vec![task("matmul(16,16,16)", 3), task(CONV, 3)], 3),
    )
    .await;
    let done = wait_final(&mut c, &job.id, Duration::from_secs(600)).await;
    assert_eq!(done.state, pb::JobState::Done as i32, "{done:?}");

    let file = dir.path().join("ansor.json");
    let (_, err) = ok(run(&[
        "records",
        "export",
        "--format",
        "ansor",
        "--tvm-target",
        "llvm -mcpu=x86-64 -num-cores 2",
        "-o",
        file.to_str().unwrap(),
        "--server",
        &server.url(),
    ]));
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        err.contains(&format!("{} of 6 records written", lines.len())),
        "{err}"
    );
    // Ansor's reader takes `i`, `r` and `v` only; keys name the registered TE definitions.
    let mut funcs = BTreeSet::new();
    for l in &lines {
        let keys: Vec<&str> = l.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["i", "r", "v"], "{l}");
        assert_eq!(l["v"], "v0.6");
        assert_eq!(l["i"][0][1], "llvm -mcpu=x86-64 -num-cores 2");
        let key = l["i"][0][0].as_str().unwrap();
        funcs.insert(serde_json::from_str::<Value>(key).unwrap()[0].to_string());
    }
    assert_eq!(
        funcs,
        BTreeSet::from([
            "\"tunehub.conv2d_nchw\"".to_string(),
            "\"tunehub.matmul\"".to_string()
        ])
    );

    let fresh_db = sqlite_path(dir.path(), "b.db");
    let fresh = Server::start(&fresh_db, "s2", &[]);
    let (out, _) = ok(run(&[
        "records",
        "import",
        "--format",
        "ansor",
        file.to_str().unwrap(),
        "--server",
        &fresh.url(),
    ]));
    assert!(
        out.starts_with(&format!("imported {} new records", lines.len())),
        "{out}"
    );
    // Same workloads, target, steps, costs and outcomes as the originals.
    let there = records_of(&db).await;
    let here = records_of(&fresh_db).await;
    assert_eq!(here.len(), lines.len());
    assert!(here.is_subset(&there), "{here:?}\nnot in\n{there:?}");
    assert_eq!(lines.len(), 6, "{err}");
}

/// Lines TVM 0.19's auto_scheduler wrote tuning `tunehub.conv2d_nchw` (`bench/ansor_apply.py
/// --tune`): cache write, splits, follow-splits, compute-at, fuse, parallel, unroll pragma,
/// vectorize.
const TVM_LOG: &str =
    include_str!("../../engine/src/interchange/ansor/testdata/tvm_conv2d_nchw.json");

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

#[tokio::test]
async fn a_tvm_log_line_imports_and_replays_and_bad_lines_store_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_path(dir.path(), "c.db");
    let server = Server::start(&db, "s1", &[]);
    let line = TVM_LOG.lines().next().unwrap();
    let v: Value = serde_json::from_str(line).unwrap();
    let codes: BTreeSet<&str> = v["i"][1][1]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s[0].as_str().unwrap())
        .collect();
    assert!(codes.contains("FSP") && codes.contains("CHW"), "{codes:?}");

    // Lines that do not map, each named with its reason; the good line beside them is not
    // stored either.
    let bad = [
        line.to_string(),
        "not json".into(),
        line.replace("tunehub.conv2d_nchw", "conv2d_layer"),
        line.replace("[\"CHW\", 3, \"local\"]", "[\"CHR\", 0, \"shared\", [3]]"),
        line.replace("\"v0.6\"", "1"),
    ]
    .join("\n");
    let f = write(dir.path(), "bad.json", &bad);
    let out = run(&[
        "records",
        "import",
        "--format",
        "ansor",
        &f,
        "--server",
        &server.url(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    for want in [
        "4 bad lines, nothing stored",
        "line 2: not JSON",
        "line 3: workload key [\"conv2d_layer\"",
        "unknown function 'conv2d_layer'",
        "line 4: step 0 (\"CHR\"): cache read",
        "line 5: not an Ansor record",
    ] {
        assert!(err.contains(want), "{want:?} not in {err}");
    }
    assert!(!err.contains("line 1:"), "{err}");
    assert!(records_of(&db).await.is_empty());

    // The log alone imports; its steps are ours, renumbered, and replay on the workload.
    let f = write(dir.path(), "good.json", TVM_LOG);
    let (out, _) = ok(run(&[
        "records",
        "import",
        "--format",
        "ansor",
        &f,
        "--server",
        &server.url(),
    ]));
    let n = TVM_LOG.lines().count();
    assert!(
        out.starts_with(&format!("imported {n} new records")),
        "{out}"
    );
    let stored = records_of(&db).await;
    let aw = AnsorWorkload::parse_key(v["i"][0][0].as_str().unwrap()).unwrap();
    let t = aw.task().unwrap();
    let mut want = BTreeSet::new();
    for l in TVM_LOG.lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        let steps = from_ansor(v["i"][1][1].as_array().unwrap(), &t.dag).unwrap();
        want.insert((
            Schedule::new(steps).to_json(),
            format!("{:?}", [v["r"][0][0].as_f64().unwrap()]),
        ));
    }
    let got: BTreeSet<(String, String)> = stored
        .iter()
        .map(|(wk, _, steps, costs, code)| {
            assert_eq!((wk, *code), (&t.key, 0));
            Schedule::from_json(steps).unwrap().replay(&t.dag).unwrap();
            (steps.clone(), costs.clone())
        })
        .collect();
    assert_eq!(got, want);

    // Export needs the TVM target.
    let out = run(&[
        "records",
        "export",
        "--format",
        "ansor",
        "--server",
        &server.url(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tvm-target"));
}
