//! Whole networks through the `tunehub` binary: `tasks` on models built in code (no download),
//! bad models exiting 2 with one line naming the node and operator, and a tiny model tuned as
//! one job (embedded, then submitted to a server and watched) that ends with an end-to-end
//! estimate.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use tunehub_onnx::builder::ModelBuilder;
use tunehub_onnx::nets;
use tunehub_tests::binaries;
use tunehub_tests::cli::{QUICK, bad_input, stdout_ok, tunehub};
use tunehub_tests::server::{Server, TOKEN, sqlite_path};

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn tasks_lists_a_resnet18_and_bad_models_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let resnet = write(dir.path(), "resnet18.onnx", &nets::resnet18(None, 224));
    let resnet = resnet.to_str().unwrap();

    // The batch dimension is dynamic: it needs a value.
    bad_input(
        &tunehub(&["tasks", resnet]),
        &["input 'input' dimension 0 is dynamic", "--batch"],
    );
    let nchw = ["--layout", "nchw"];
    let out = stdout_ok(&tunehub(
        &[&["tasks", resnet, "--batch", "1", "--json"][..], &nchw].concat(),
    ));
    let v: Value = serde_json::from_str(&out).unwrap();
    let tasks = v["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 18);
    let weights: u64 = tasks.iter().map(|t| t["weight"].as_u64().unwrap()).sum();
    assert_eq!(weights, 23);
    assert_eq!(
        tasks[0]["label"],
        "Conv+BatchNormalization+Relu -> [1,64,112,112]"
    );
    assert_eq!(tasks[0]["nodes"].as_array().unwrap().len(), 3);
    // Each library task's op spec is canonical, says its layout, and pasted back is the same
    // workload.
    let spec = tasks[0]["op_spec"].as_str().unwrap();
    assert!(spec.ends_with(",layout_free=kernel)"), "{spec}");
    let pasted = tunehub_engine::ops::OpSpec::parse(spec)
        .unwrap()
        .task()
        .unwrap();
    assert_eq!(pasted.key, tasks[0]["workload_key"].as_str().unwrap());
    let shape = ["tasks", resnet, "--shape", "input=1x3x224x224"];
    let text = stdout_ok(&tunehub(&[&shape[..], &nchw].concat()));
    assert!(text.contains("18 tasks, 23 operators"), "{text}");
    assert!(text.contains(spec), "the printed op spec: {text}");
    // By default the same tasks in NHWC, the convolutions in the text form, and the Winograd
    // forms of the 3x3 stride-1 ones as alternatives, marked and not counted.
    let text = stdout_ok(&tunehub(&shape));
    assert!(text.contains("18 tasks, 23 operators"), "{text}");
    assert!(!text.contains("conv2d_nchw"), "{text}");
    assert!(
        text.contains(" alt ") && text.contains("alternative tasks (alt)"),
        "{text}"
    );
    let nhwc = stdout_ok(&tunehub(&[&shape[..], &["--layout", "nhwc"]].concat()));
    assert!(!nhwc.contains("alternative"), "{nhwc}");
    assert!(
        text.contains("Conv+BatchNormalization+Add+Relu -> [1,64,56,56]"),
        "{text}"
    );

    // Truncated: one line, status 2.
    let bytes = std::fs::read(resnet).unwrap();
    let cut = write(dir.path(), "cut.onnx", &bytes[..bytes.len() / 3]);
    bad_input(
        &tunehub(&["tasks", cut.to_str().unwrap()]),
        &["truncated or malformed"],
    );

    // An unsupported operator: skipped and listed, or with --strict an error naming it.
    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[1, 8, 4, 4]);
    let y = b.node("Relu", &[&x], vec![]);
    let s = b.node("Sin", &[&y], vec![]);
    let sin = b.last_node().to_string();
    b.output(&s);
    let m = write(dir.path(), "sin.onnx", &b.encode());
    let m = m.to_str().unwrap();
    let text = stdout_ok(&tunehub(&["tasks", m]));
    assert!(text.contains(&format!("skipped {sin} (Sin)")), "{text}");
    bad_input(
        &tunehub(&["tasks", m, "--strict"]),
        &[&format!("node '{sin}' (Sin): unsupported operator")],
    );
    bad_input(
        &tunehub(&[
            "tune",
            m,
            "--strict",
            "--db",
            dir.path().join("x.db").to_str().unwrap(),
        ]),
        &["(Sin)"],
    );
    assert!(
        !dir.path().join("x.db").exists(),
        "bad input stores nothing"
    );
}

#[test]
fn tune_a_tiny_model_as_one_job_with_an_end_to_end_estimate() {
    let dir = tempfile::tempdir().unwrap();
    let model = write(dir.path(), "tiny.onnx", &nets::tiny());
    let db = dir.path().join("t.db");
    let mut args = vec![
        "tune",
        model.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
        "--trials",
        "2",
        "--population",
        "32",
        "--seed",
        "3",
        "--json",
    ];
    args.extend_from_slice(&QUICK);
    let v: Value = serde_json::from_str(&stdout_ok(&tunehub(&args))).unwrap();
    let tasks = v["tasks"].as_array().unwrap();
    // The network's 12 tasks, and its one 3x3 stride-1 convolution's Winograd form (3 tasks):
    // alternatives, tuned but not in the estimate.
    let (alternatives, network): (Vec<&Value>, Vec<&Value>) =
        tasks.iter().partition(|t| t["alternative"] == true);
    assert_eq!((network.len(), alternatives.len()), (12, 3), "{v}");
    let mut sum = 0.0;
    // 2 trials per task on average: one pool of 30, a first round of 1 each.
    let taken: Vec<u64> = tasks
        .iter()
        .map(|t| t["trials_done"].as_u64().unwrap())
        .collect();
    assert_eq!(taken.iter().sum::<u64>(), 30, "{v}");
    for t in tasks {
        assert!(t["trials_done"].as_u64().unwrap() >= 1, "{t}");
        assert!(t["ok"].as_u64().unwrap() > 0, "{t}");
    }
    for t in &network {
        sum += t["weight"].as_f64().unwrap() * t["best_seconds"].as_f64().unwrap();
    }
    let e = &v["estimate"];
    assert_eq!(e["missing"], 0, "{v}");
    assert!(
        (e["seconds"].as_f64().unwrap() - sum).abs() <= 1e-12 * sum,
        "{v}"
    );
    let shares: f64 = network.iter().map(|t| t["share"].as_f64().unwrap()).sum();
    assert!((shares - 1.0).abs() < 1e-9, "{shares}");
    assert!(alternatives.iter().all(|t| t["share"].is_null()), "{v}");
}

#[tokio::test]
async fn a_submitted_model_is_watched_to_its_estimate() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[1, 4, 6, 6]);
    let y = b.conv_bn(&x, 4, 4, 3, 1, 1, 1, true);
    let y = b.conv_bn(&y, 4, 4, 3, 1, 1, 1, true);
    let g = b.node("GlobalAveragePool", &[&y], vec![]);
    b.output(&g);
    let model = write(dir.path(), "small.onnx", &b.encode());
    let server = Server::start(
        &sqlite_path(dir.path(), "s.db"),
        "s1",
        &["--population", "32"],
    );
    let url = server.url();
    let run = |args: &[&str]| {
        Command::new(binaries::tunehub())
            .args(args)
            .env("TUNEHUB_SERVER", &url)
            .env("TUNEHUB_TOKEN", TOKEN)
            .env_remove("TUNEHUB_CONFIG")
            .output()
            .unwrap()
    };
    let mut args = vec!["submit", model.to_str().unwrap(), "--trials", "2"];
    args.extend_from_slice(&QUICK);
    let id = stdout_ok(&run(&args)).lines().next().unwrap().to_string();
    assert!(id.starts_with("j-"), "{id}");

    // The two convolutions are one task of weight 2.
    let out = stdout_ok(&run(&["watch", &id, "--json"]));
    let events: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let estimates: Vec<&Value> = events.iter().filter(|e| e["event"] == "estimate").collect();
    assert!(!estimates.is_empty(), "{out}");
    let done = events.last().unwrap();
    assert_eq!(done["event"], "done", "{out}");
    let job = &done["data"];
    // Then their Winograd form: an input transform, a product, an output transform.
    let tasks = job["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 5);
    assert_eq!(tasks[0]["weight"], 2.0);
    let alternative: Vec<bool> = tasks.iter().map(|t| t["alternative"] == true).collect();
    assert_eq!(alternative, [false, false, true, true, true], "{job}");
    let sum: f64 = tasks[..2]
        .iter()
        .map(|t| t["weight"].as_f64().unwrap() * t["best_seconds"].as_f64().unwrap())
        .sum();
    assert_eq!(job["estimate"]["seconds"].as_f64(), Some(sum), "{job}");

    let jobs = stdout_ok(&run(&["jobs", "--json"]));
    let j: Value = serde_json::from_str(jobs.lines().next().unwrap()).unwrap();
    assert_eq!(j["estimate"]["seconds"].as_f64(), Some(sum));
    assert!(j["tasks"][0]["share"].as_f64().unwrap() > 0.0);
    let text = stdout_ok(&run(&["watch", &id]));
    assert!(
        text.contains("estimate") && text.contains("end to end"),
        "{text}"
    );
}

/// Issue 64: a model file past protobuf's 2 GiB is refused from its length, before a byte is
/// read (a sparse file: nothing written); a MatMul whose operands do not multiply is named with
/// its shapes, not "no task"; an input dimension of 0 is called 0, not dynamic. Each exits 2
/// with one line saying what to do.
#[test]
fn an_oversized_file_a_broken_product_and_a_zero_dimension_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let huge = dir.path().join("huge.onnx");
    let f = std::fs::File::create(&huge).unwrap();
    f.set_len(tunehub_onnx::MAX_MODEL_BYTES + 1).unwrap();
    drop(f);
    bad_input(
        &tunehub(&["tasks", huge.to_str().unwrap()]),
        &[
            &format!("is {} bytes", tunehub_onnx::MAX_MODEL_BYTES + 1),
            &format!("at most {} bytes", tunehub_onnx::MAX_MODEL_BYTES),
            "external data",
        ],
    );

    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[2, 3]);
    let w = b.weight(&[4, 5]);
    let y = b.node("MatMul", &[&x, &w], vec![]);
    let mm = b.last_node().to_string();
    let r = b.node("Relu", &[&y], vec![]);
    b.output(&r);
    let m = write(dir.path(), "mismatch.onnx", &b.encode());
    bad_input(
        &tunehub(&["tasks", m.to_str().unwrap()]),
        &[
            &format!("node '{mm}' (MatMul)"),
            "'x' [2,3]",
            "[4,5] do not multiply",
            "last dimension (3) differs from the second's second-to-last (4)",
        ],
    );

    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[1, 0]);
    let r = b.node("Relu", &[&x], vec![]);
    b.output(&r);
    let m = write(dir.path(), "zero.onnx", &b.encode());
    bad_input(
        &tunehub(&["tasks", m.to_str().unwrap()]),
        &["input 'x' dimension 1 is 0, not a size", "--shape x="],
    );
}
