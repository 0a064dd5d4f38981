//! Compiled models through the `tunehub` binary: `build` tunes what has no record, writes the
//! library and checks it against tract; its header compiles as C and C++ with -Wall -Werror and
//! clang builds it as gcc does; `run` runs it on given or random inputs and times it; a model
//! never tuned builds from zero-shot answers; a model with tasks nothing can serve, or an
//! operator a compiled model cannot run, exits 2 naming them.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use tunehub_onnx::builder::{ModelBuilder, int, ints};
use tunehub_onnx::nets;
use tunehub_tests::cli::{QUICK, bad_input, stdout_ok as ok, tunehub};

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A float32 .npy file (format 1.0) of `shape` holding `data`.
fn npy(path: &Path, shape: &[usize], data: &[f32]) {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let mut header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}",
        dims.join(", ")
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    for x in data {
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn build_tunes_checks_and_runs_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let model = write(
        dir.path(),
        "tiny.onnx",
        &nets::tiny_in(ModelBuilder::seeded(11)),
    );
    let (db, out) = (dir.path().join("t.db"), dir.path().join("built"));
    let text = build_tuned(&model, &out, &db, "2");
    assert!(text.contains("(12 tuned, 0 zero-shot)"), "{text}");
    assert!(text.contains("match tract"), "{text}");
    for f in [
        "tiny.c",
        "tiny.h",
        "tiny.weights",
        "manifest.json",
        "libtiny.so",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    let arena = manifest["arena_bytes"].as_u64().unwrap();
    assert!(
        arena > 0 && arena < manifest["intermediate_bytes"].as_u64().unwrap(),
        "{manifest}"
    );
    let tasks = manifest["tasks"].as_array().unwrap();
    assert!(
        tasks
            .iter()
            .all(|t| !t["record_id"].as_str().unwrap().is_empty()),
        "{manifest}"
    );

    // The header as C and as C++, warnings as errors.
    for (cc, lang) in [("gcc", "c"), ("g++", "c++")] {
        let o = Command::new(cc)
            .current_dir(&out)
            .args([
                "-Wall",
                "-Wextra",
                "-Werror",
                "-fsyntax-only",
                "-x",
                lang,
                "tiny.h",
            ])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{cc}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // clang builds the library as gcc did (the records are there now: no tuning).
    let clang_out = dir.path().join("clang");
    let text = ok(&tunehub(&[
        "build",
        s(&model),
        "--out",
        s(&clang_out),
        "--db",
        s(&db),
        "--cc",
        "clang",
    ]));
    assert!(text.contains("match tract"), "{text}");

    // Run on random inputs, then on a given one: outputs written, latency timed.
    let outs = dir.path().join("outs");
    let v: Value = serde_json::from_str(&ok(&tunehub(&[
        "run",
        s(&out),
        "--json",
        "--repeat",
        "3",
        "--threads",
        "1",
        "--out-dir",
        s(&outs),
        "--profile",
    ])))
    .unwrap();
    let (median, p90) = (
        v["median_ms"].as_f64().unwrap(),
        v["p90_ms"].as_f64().unwrap(),
    );
    assert!(median > 0.0 && p90 >= median, "{v}");
    // The profile times every step, and the kernels again each from a cold cache.
    let profile = &v["profile"];
    assert_eq!(
        profile["steps_ms"].as_array().unwrap().len(),
        manifest["steps"].as_array().unwrap().len(),
        "{v}"
    );
    assert!(profile["kernels_cold_ms"].as_f64().unwrap() > 0.0, "{v}");
    // Every step is a kernel, glue or a layout conversion.
    let steps: f64 = profile["steps_ms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_f64().unwrap())
        .sum();
    let parts: f64 = ["kernels_ms", "glue_ms", "layout_ms"]
        .iter()
        .map(|k| profile[k].as_f64().unwrap())
        .sum();
    assert!((parts - steps).abs() <= 1e-6 * steps, "{v}");
    let name = v["outputs"][0]["name"].as_str().unwrap().to_string();
    assert_eq!(
        v["outputs"][0]["shape"],
        serde_json::json!([1, 2, 2]),
        "{v}"
    );
    assert!(outs.join(format!("{name}.npy")).is_file());
    let input = dir.path().join("x.npy");
    npy(&input, &[1, 4, 10, 10], &vec![0.25; 400]);
    let given: Value = serde_json::from_str(&ok(&tunehub(&[
        "run",
        s(&out),
        "--json",
        "--repeat",
        "1",
        "--input",
        &format!("input={}", s(&input)),
    ])))
    .unwrap();
    assert_ne!(
        given["outputs"][0]["sum"], v["outputs"][0]["sum"],
        "the given input was used"
    );
    bad_input(
        &tunehub(&["run", s(&out), "--input", &format!("nope={}", s(&input))]),
        &["'nope'", "inputs: input"],
    );
    npy(&input, &[1, 4], &[0.0; 4]);
    bad_input(
        &tunehub(&["run", s(&out), "--input", &format!("input={}", s(&input))]),
        &["[1, 4]"],
    );
}

/// `x[1,4,h,h]` through a 3x3 convolution with bias and relu.
fn conv_model(h: i64, seed: u64) -> Vec<u8> {
    let mut b = ModelBuilder::seeded(seed);
    let x = b.input_fixed("x", &[1, 4, h, h]);
    let w = b.weight(&[8, 4, 3, 3]);
    let bias = b.weight(&[8]);
    let y = b.node(
        "Conv",
        &[&x, &w, &bias],
        vec![
            ints("kernel_shape", &[3, 3]),
            ints("pads", &[1, 1, 1, 1]),
            int("group", 1),
        ],
    );
    let y = b.node("Relu", &[&y], vec![]);
    b.output(&y);
    b.encode()
}

#[test]
fn a_model_never_tuned_builds_from_zero_shot_answers_and_one_without_any_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let tuned = write(dir.path(), "a.onnx", &conv_model(8, 1));
    let never = write(dir.path(), "b.onnx", &conv_model(12, 2));
    let db = dir.path().join("t.db");
    let provenance = |out: &Path| -> String {
        let m: Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap())
                .unwrap();
        assert_eq!(m["tasks"][0]["record_id"], "", "{m}");
        m["tasks"][0]["provenance"].as_str().unwrap().to_string()
    };

    // A database with neither records nor a cost model: nothing serves the model's task.
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let bare = dir.path().join("bare.db");
    ok(&tunehub(&[
        "records",
        "import",
        s(&empty),
        "--db",
        s(&bare),
    ]));
    let out = dir.path().join("b");
    bad_input(
        &tunehub(&["build", s(&never), "--out", s(&out), "--db", s(&bare)]),
        &[
            "no record and no tuned neighbour",
            "no saved cost model",
            "task 0 (Conv+Relu",
            "--tune",
        ],
    );
    assert!(!out.exists(), "nothing written");

    // Records of another structure only, enough of them to rank: the cost model that tuning
    // them saved, or that importing them taught a database of its own, searches a schedule for
    // the task. Built without a trial.
    let mut args = vec!["tune", "matmul(8,8,8)", "--db", s(&db), "--trials", "12"];
    args.extend_from_slice(&QUICK);
    ok(&tunehub(&args));
    let lines = dir.path().join("records.jsonl");
    ok(&tunehub(&[
        "records",
        "export",
        "--db",
        s(&db),
        "--out",
        s(&lines),
    ]));
    let imported = dir.path().join("imported.db");
    ok(&tunehub(&[
        "records",
        "import",
        s(&lines),
        "--db",
        s(&imported),
    ]));
    let build = |db: &Path| {
        ok(&tunehub(&[
            "build",
            s(&never),
            "--out",
            s(&out),
            "--db",
            s(db),
        ]))
    };
    for from in [&db, &imported] {
        let text = build(from);
        assert!(
            text.contains("(0 tuned, 1 zero-shot, 1 of them with no tuned neighbour"),
            "{from:?}: {text}"
        );
        assert!(text.contains("match tract"), "{text}");
        assert!(
            provenance(&out).contains("searched"),
            "{}",
            provenance(&out)
        );
    }

    // Its neighbour of another shape tuned: its schedule, adapted.
    let mut args = vec!["tune", s(&tuned), "--db", s(&db), "--trials", "2"];
    args.extend_from_slice(&QUICK);
    ok(&tunehub(&args));
    let text = build(&db);
    assert!(text.contains("(0 tuned, 1 zero-shot)"), "{text}");
    assert!(text.contains("match tract"), "{text}");
    assert!(
        provenance(&out).contains("transferred"),
        "{}",
        provenance(&out)
    );
}

#[test]
fn an_operator_a_compiled_model_cannot_run_and_tune_without_a_db_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = ModelBuilder::seeded(3);
    let x = b.input_fixed("x", &[1, 4]);
    let y = b.node("Hardmax", &[&x], vec![]);
    b.output(&y);
    let model = write(dir.path(), "m.onnx", &b.encode());
    let out = dir.path().join("o");
    let db = dir.path().join("t.db");
    bad_input(
        &tunehub(&["build", s(&model), "--out", s(&out), "--db", s(&db)]),
        &["node 'Hardmax_1' (Hardmax)", "unsupported"],
    );
    bad_input(
        &tunehub(&[
            "build",
            s(&model),
            "--out",
            s(&out),
            "--tune",
            "2",
            "--server",
            "http://127.0.0.1:1",
        ]),
        &["--tune", "--db"],
    );
    assert!(!out.exists(), "nothing written");
}

/// The C program docs/compiled-models.md shows, compiled against a model built as `net` and run.
#[test]
fn the_documented_c_example_builds_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/compiled-models.md"),
    )
    .unwrap();
    let start = doc.find("```c\n").expect("a C block") + 5;
    let code = &doc[start..start + doc[start..].find("```").unwrap()];
    let example = write(dir.path(), "example.c", code.as_bytes());
    let model = write(dir.path(), "m.onnx", &conv_model(6, 4));
    let (db, out) = (dir.path().join("t.db"), dir.path().join("net"));
    let mut args = vec![
        "build",
        s(&model),
        "--name",
        "net",
        "--out",
        s(&out),
        "--db",
        s(&db),
        "--tune",
        "2",
    ];
    args.extend_from_slice(&QUICK);
    ok(&tunehub(&args));
    let exe = dir.path().join("example");
    let rpath = format!("-Wl,-rpath,{}", s(&out));
    let o = Command::new("cc")
        .args([
            "-Wall",
            "-Werror",
            "-I",
            s(&out),
            s(&example),
            "-L",
            s(&out),
            "-lnet",
            &rpath,
            "-o",
            s(&exe),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run = Command::new(&exe).current_dir(&out).output().unwrap();
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && text.starts_with("t"),
        "{text}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // Its first value as `tunehub run` computes it on the same input.
    let input = dir.path().join("x.npy");
    npy(&input, &[1, 4, 6, 6], &[0.5; 144]);
    let outs = dir.path().join("outs");
    ok(&tunehub(&[
        "run",
        s(&out),
        "--repeat",
        "1",
        "--input",
        &format!("x={}", s(&input)),
        "--out-dir",
        s(&outs),
    ]));
    let name = text.split('[').next().unwrap();
    let bytes = std::fs::read(outs.join(format!("{name}.npy"))).unwrap();
    let at = 10 + usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
    let first = f32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let printed: f32 = text.trim().rsplit(' ').next().unwrap().parse().unwrap();
    assert!(
        (first - printed).abs() <= 1e-5 * first.abs().max(1.0),
        "{first} vs {text}"
    );
}

/// A model larger than a server's default message limit (16 MiB) builds through `--db`: the
/// embedded service takes a model of any size a model file may have, as the file is read.
#[test]
fn a_model_past_the_message_limit_builds_on_a_db() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = ModelBuilder::seeded(4);
    let x = b.input_fixed("x", &[1, 64]);
    // 64 x 70000 float32 weights: 17.9 MB.
    let y = b.linear(&x, 64, 70_000);
    b.output(&y);
    let bytes = b.encode();
    assert!(bytes.len() > 16 << 20, "{}", bytes.len());
    let model = write(dir.path(), "big.onnx", &bytes);
    let out = dir.path().join("big");
    let db = dir.path().join("t.db");
    let text = build_tuned(&model, &out, &db, "1");
    assert!(text.contains("match tract"), "{text}");
}

/// `tunehub build MODEL --out OUT --db DB --tune TRIALS` with quick measurements: its stdout.
fn build_tuned(model: &Path, out: &Path, db: &Path, trials: &str) -> String {
    let mut args = vec![
        "build",
        s(model),
        "--out",
        s(out),
        "--db",
        s(db),
        "--tune",
        trials,
    ];
    args.extend_from_slice(&QUICK);
    ok(&tunehub(&args))
}

/// A QDQ model (quantized as onnxruntime.quantization writes one) builds as any other: its
/// integer tasks tuned, its conversions run between the kernels, its output within the check's
/// quanta of tract's.
#[test]
fn a_quantized_model_tunes_builds_and_matches_tract() {
    let dir = tempfile::tempdir().unwrap();
    let model = write(dir.path(), "qdq.onnx", &nets::qdq_block());
    let out = dir.path().join("qdq");
    let text = build_tuned(&model, &out, &dir.path().join("t.db"), "1");
    assert!(text.contains("match tract"), "{text}");
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    let tuned = manifest["tasks"].as_array().unwrap();
    assert!(
        tuned
            .iter()
            .all(|t| !t["record_id"].as_str().unwrap().is_empty()),
        "{tuned:#?}"
    );
}

/// Issue 60: a model left to choose (`auto`) tunes each 3x3 convolution direct and by Winograd,
/// and builds it in the form whose tuned kernels take least: the per-convolution option never
/// takes more than either form alone, and the manifest says which form was built.
#[test]
fn a_convolution_left_to_choose_builds_in_its_faster_tuned_form() {
    let dir = tempfile::tempdir().unwrap();
    let model = write(dir.path(), "m.onnx", &conv_model(8, 3));
    let db = dir.path().join("c.db");
    let mut args = vec!["tune", s(&model), "--trials", "2", "--db", s(&db)];
    args.extend_from_slice(&QUICK);
    ok(&tunehub(&args));
    let out = dir.path().join("out");
    let text = ok(&tunehub(&[
        "build",
        s(&model),
        "--out",
        s(&out),
        "--db",
        s(&db),
    ]));
    assert!(text.contains("match tract"), "{text}");
    let line = text.lines().find(|l| l.starts_with("layout")).unwrap();
    let times = &line[line.find("; ").unwrap() + 2..];
    let time = |label: &str| -> f64 {
        let at = times.find(&format!("{label} ")).unwrap() + label.len() + 1;
        times[at..].split(' ').next().unwrap().parse().unwrap()
    };
    let by_winograd = line.starts_with("layout    per convolution (1 of 1 by Winograd)");
    assert!(
        by_winograd || line.starts_with("layout    per convolution (0 of 1 by Winograd)"),
        "{line}"
    );
    let mixed = time("Winograd)");
    assert!(mixed <= time("nhwc") && mixed <= time("winograd"), "{line}");
    // The times are printed to the microsecond: equal ones say nothing of which is less.
    let (winograd, nhwc) = (time("winograd"), time("nhwc"));
    if winograd != nhwc {
        assert_eq!(by_winograd, winograd < nhwc, "{line}");
    }
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    let built = if by_winograd { "winograd" } else { "nhwc" };
    assert_eq!(manifest["layout"], built, "{line}");
}

/// Issue 60: a model tuned in both layouts builds in the one whose tuned kernels take least,
/// and says each layout's time; `--layout` forces one; a model tuned in one layout only
/// builds in that one; an unknown layout exits 2.
#[test]
fn a_build_takes_the_tuned_layout_that_takes_least() {
    let dir = tempfile::tempdir().unwrap();
    let model = write(dir.path(), "m.onnx", &conv_model(9, 3));
    let db = dir.path().join("l.db");
    let tune = |layout: &str| {
        let mut args = vec!["tune", s(&model), "--layout", layout, "--trials", "2"];
        args.extend_from_slice(&["--db", s(&db)]);
        args.extend_from_slice(&QUICK);
        ok(&tunehub(&args));
    };
    let build = |out: &str, layout: &[&str]| {
        let out = dir.path().join(out);
        let mut args = vec!["build", s(&model), "--out", s(&out), "--db", s(&db)];
        args.extend_from_slice(layout);
        let text = ok(&tunehub(&args));
        let manifest: Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap())
                .unwrap();
        (text, manifest["layout"].as_str().unwrap().to_string())
    };
    tune("nhwc");
    let (text, layout) = build("one", &[]);
    assert_eq!(layout, "nhwc", "{text}");
    assert!(text.contains("nchw 1 of 1 tasks untuned"), "{text}");

    tune("nchw");
    let (text, layout) = build("both", &[]);
    let line = text.lines().find(|l| l.starts_with("layout")).unwrap();
    let times = &line[line.find("; ").unwrap() + 2..];
    let time = |l: &str| -> f64 {
        let at = times.find(&format!("{l} ")).unwrap() + l.len() + 1;
        times[at..].split(' ').next().unwrap().parse().unwrap()
    };
    let least = if time("nhwc") < time("nchw") {
        "nhwc"
    } else {
        "nchw"
    };
    assert_eq!(layout, least, "{text}");
    assert!(
        line.starts_with(&format!("layout    {least} (least tuned time")),
        "{line}"
    );

    let other = if least == "nchw" { "nhwc" } else { "nchw" };
    let (text, layout) = build("forced", &["--layout", other]);
    assert_eq!(layout, other, "{text}");
    assert!(text.contains(&format!("layout    {other}\n")), "{text}");

    let out = dir.path().join("bad");
    let bad = tunehub(&["build", s(&model), "--out", s(&out), "--layout", "nchw16c"]);
    bad_input(&bad, &["--layout", "nchw, nhwc, winograd, auto"]);
}
