//! End to end through the `tunehub` binary: a real compiler, real processes, a real SQLite file.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use tunehub_server::records::{RecordStore, SqlStore};
use tunehub_tests::cli::MEASURE as QUICK;

fn tunehub(args: &[&str]) -> Output {
    Command::new(tunehub_tests::binaries::tunehub())
        .args(args)
        .output()
        .expect("tunehub runs")
}

fn tune_json(db: &Path, spec: &str, extra: &[&str]) -> Value {
    let mut args = vec!["tune", spec, "--db", db.to_str().unwrap(), "--json"];
    args.extend_from_slice(&QUICK);
    args.extend_from_slice(extra);
    let out = tunehub(&args);
    assert!(
        out.status.success(),
        "tune failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("--json prints one JSON object")
}

#[tokio::test]
async fn tune_stores_every_record_and_reports_the_best() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    // Unpacked (`layout_free=none`), so that the text form below is the same workload.
    let first = tune_json(
        &db,
        "matmul(32,48,16,layout_free=none)",
        &["--trials", "6", "--batch", "3", "--seed", "1"],
    );
    assert_eq!(first["trials"], 6);
    assert_eq!(first["new_records"], 6);
    let wk = first["workload_key"].as_str().unwrap().to_string();
    let tk = first["target_key"].as_str().unwrap().to_string();

    let store = SqlStore::open(db.to_str().unwrap()).await.unwrap();
    let counts = store.count(&wk, &tk).await.unwrap();
    assert_eq!(counts.total, 6, "every candidate is a record");
    let best = store.best(&wk, &tk).await.unwrap().expect("a best record");
    assert_eq!(best.id, first["best"]["record_id"].as_str().unwrap());
    // The best is the fastest successful record, and its GFLOP/s is the workload's FLOPs over it.
    let all = store.records(&wk, &tk).await.unwrap();
    let min = all
        .iter()
        .filter(|r| !r.noisy)
        .filter_map(|r| r.mean_cost)
        .fold(f64::INFINITY, f64::min);
    assert_eq!(best.mean_cost, Some(min));
    let gflops = first["best"]["gflops"].as_f64().unwrap();
    let flops = first["flops"].as_f64().unwrap();
    assert!((gflops - flops / min / 1e9).abs() < 1e-6 * gflops);
    store.close().await;

    // A second run goes on from the stored records: nothing is measured twice.
    let second = tune_json(
        &db,
        "matmul(32,48,16,layout_free=none)",
        &["--trials", "4", "--seed", "1"],
    );
    assert_eq!(second["new_records"], 4);
    let store = SqlStore::open(db.to_str().unwrap()).await.unwrap();
    assert_eq!(store.count(&wk, &tk).await.unwrap().total, 10);
    store.close().await;

    // `query --db` reads back the same record, offline; the text form of the same operator
    // shares it.
    let out = tunehub(&[
        "query",
        "--expr",
        "C[i,j] += A[i,k] * B[k,j] where i<32, j<48, k<16",
        "--db",
        db.to_str().unwrap(),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let b: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(b["workload_key"], wk.as_str());

    // By default the library operator's weight is packed: another workload.
    let packed = tune_json(&db, "matmul(32,48,16)", &["--trials", "2", "--seed", "1"]);
    assert_eq!(packed["layout_free"], serde_json::json!(["B"]));
    assert_ne!(packed["workload_key"], wk.as_str());
}

#[test]
fn the_best_kernel_source_is_written_and_compiles() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let c = dir.path().join("best.c");
    tune_json(
        &db,
        "softmax(4,40)",
        &["--trials", "3", "--out-c", c.to_str().unwrap()],
    );
    let src = std::fs::read_to_string(&c).unwrap();
    assert!(src.contains("void tunehub_softmax_"), "{src}");
    let st = Command::new("cc")
        .args(["-O2", "-fopenmp", "-c", "-o"])
        .arg(dir.path().join("best.o"))
        .arg(&c)
        .status()
        .unwrap();
    assert!(st.success(), "the written kernel does not compile");

    // `query --db` writes the same kernel from the stored record.
    let again = dir.path().join("again.c");
    let out = tunehub(&[
        "query",
        "softmax(4,40)",
        "--db",
        db.to_str().unwrap(),
        "--out-c",
        again.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&again).unwrap(), src);
}

#[test]
fn bad_input_exits_2_with_one_line_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("never.db");
    let d = db.to_str().unwrap();
    let cases: [&[&str]; 6] = [
        &["tune", "nosuchop(1,2)", "--db", d],
        &["tune", "matmul(512,512)", "--db", d],
        &["tune", "matmul(0,4,4)", "--db", d],
        &[
            "tune",
            "--expr",
            "C[i,j] += A[i,k] * B[k,j] where i<4, j<4",
            "--db",
            d,
        ],
        &["tune", "matmul(4,4,4)", "--trials", "0", "--db", d],
        &[
            "tune",
            "matmul(4,4,4)",
            "--expr",
            "C[i] = A[i] where i<4",
            "--db",
            d,
        ],
    ];
    for args in cases {
        let out = tunehub(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{args:?}: not one line: {err}"
        );
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(!db.exists(), "{args:?} created the database");
    }
}

/// Issue 64, item 7: `tune` of a workload too large to measure (a 4 TiB output, inside the
/// DAG's size limit) is the embedded service's INVALID_ARGUMENT: exit 2, one line with the size
/// and the limit, no workload or job stored. It used to run a job to 0 trials and exit 1 with
/// "found no candidate that is not already recorded".
#[tokio::test]
async fn a_workload_too_large_to_measure_exits_2_with_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("large.db");
    let out = tunehub(&[
        "tune",
        "matmul(1048576,1048576,1)",
        "--db",
        db.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(
        err.starts_with("error: invalid argument: ")
            && err.contains("4.0 TiB")
            && err.contains("4.0 GiB"),
        "{err}"
    );
    if db.exists() {
        let store = SqlStore::open(db.to_str().unwrap()).await.unwrap();
        for table in ["workloads", "jobs"] {
            let n: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
                .fetch_one(store.pool())
                .await
                .unwrap();
            assert_eq!(n, 0, "{table}");
        }
        store.close().await;
    }
}

/// `tunehub report`: a tuned model's job drawn as SVG (it parses, and names the job and each
/// task) and as an HTML page (a row per task, the peer's line, the SVG inline), with the model
/// built from its records measured beside the estimate; an unknown job, a directory with no
/// built model and a file type it cannot write exit 2.
#[test]
fn report_draws_a_jobs_curves() {
    use tunehub_onnx::builder::ModelBuilder;
    use tunehub_tests::cli::{bad_input, stdout_ok};
    let dir = tempfile::tempdir().unwrap();
    let mut b = ModelBuilder::seeded(5);
    let x = b.input_fixed("x", &[1, 4, 8, 8]);
    let y = b.conv_bn(&x, 4, 8, 3, 1, 1, 1, true);
    let g = b.node("GlobalAveragePool", &[&y], vec![]);
    b.output(&g);
    let model = dir.path().join("m.onnx");
    std::fs::write(&model, b.encode()).unwrap();
    let db = dir.path().join("t.db");
    let (model, db) = (model.to_str().unwrap(), db.to_str().unwrap());
    // NHWC alone: the convolution and the pool, without the Winograd form's alternatives.
    let mut args = vec![
        "tune", model, "--db", db, "--trials", "2", "--layout", "nhwc",
    ];
    args.extend_from_slice(&QUICK);
    let text = stdout_ok(&tunehub(&args));
    let job = text
        .lines()
        .find_map(|l| l.strip_prefix("job "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no job line in:\n{text}"))
        .to_string();

    let svg = dir.path().join("c.svg");
    let out = stdout_ok(&tunehub(&[
        "report",
        &job,
        "--db",
        db,
        "--out",
        svg.to_str().unwrap(),
    ]));
    assert!(out.contains("2 tasks"), "{out}");
    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("the SVG parses");
    let words: String = doc
        .descendants()
        .filter_map(|n| n.text())
        .collect::<Vec<_>>()
        .join("\n");
    for want in [job.as_str(), "task 0:", "task 1:"] {
        assert!(
            words.contains(want),
            "{want} not in the SVG's text:\n{words}"
        );
    }

    let html = dir.path().join("c.html");
    stdout_ok(&tunehub(&[
        "report",
        &job,
        "--db",
        db,
        "--out",
        html.to_str().unwrap(),
        "--peer-ms",
        "1.5",
    ]));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<tr><td>0</td>") && page.contains("<tr><td>1</td>"));
    assert!(page.contains("peer 1.5 ms"), "the peer's line is drawn");
    let (start, end) = (page.find("<svg").unwrap(), page.rfind("</svg>").unwrap());
    roxmltree::Document::parse(&page[start..end + "</svg>".len()]).expect("its SVG parses");

    // The model built from the job's records, run and drawn beside the estimate; a directory
    // with no built model is a usage error.
    let built = dir.path().join("built");
    stdout_ok(&tunehub(&[
        "build",
        model,
        "--db",
        db,
        "--out",
        built.to_str().unwrap(),
    ]));
    stdout_ok(&tunehub(&[
        "report",
        &job,
        "--db",
        db,
        "--out",
        svg.to_str().unwrap(),
        "--built",
        built.to_str().unwrap(),
        "--repeat",
        "3",
    ]));
    let text = std::fs::read_to_string(&svg).unwrap();
    roxmltree::Document::parse(&text).expect("the SVG parses");
    assert!(text.contains("built, measured "), "the built model's mark");
    bad_input(
        &tunehub(&[
            "report",
            &job,
            "--db",
            db,
            "--out",
            svg.to_str().unwrap(),
            "--built",
            dir.path().to_str().unwrap(),
        ]),
        &["--built"],
    );

    bad_input(
        &tunehub(&[
            "report",
            "j-none",
            "--db",
            db,
            "--out",
            svg.to_str().unwrap(),
        ]),
        &["not found", "j-none"],
    );
    bad_input(
        &tunehub(&["report", &job, "--db", db, "--out", "c.png"]),
        &["--out c.png", ".svg or .html"],
    );
}
