//! `Query.BuildModel` on a real server over gRPC: a model whose tasks were tuned through
//! SubmitModel comes back as files; with `compile` the library was built and checked on the
//! server, and the files written as they came run here and match tract again. Bad requests are
//! refused with a status naming what was wrong.

use std::path::Path;
use tonic::Code;
use tunehub::client::Clients;
use tunehub_compiler::{Library, check};
use tunehub_onnx::InputShapes;
use tunehub_onnx::builder::{ModelBuilder, ints};
use tunehub_proto::v1 as pb;
use tunehub_tests::{Server, code_of, quick, sqlite_path, wait_final};

/// A ResNet-like stem: conv + BN + ReLU, a max pool, global pool, Gemm.
fn model() -> Vec<u8> {
    let mut b = ModelBuilder::seeded(11);
    let x = b.input_fixed("x", &[1, 3, 10, 10]);
    let y = b.conv_bn(&x, 3, 8, 3, 1, 1, 1, true);
    let p = b.node(
        "MaxPool",
        &[&y],
        vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
    );
    let g = b.node("GlobalAveragePool", &[&p], vec![]);
    let f = b.node("Flatten", &[&g], vec![]);
    let o = b.linear(&f, 8, 5);
    b.output(&o);
    b.encode()
}

fn source(onnx: Vec<u8>) -> pb::ModelSource {
    pb::ModelSource {
        onnx,
        trials_per_task: 2,
        ..Default::default()
    }
}

fn request(onnx: Vec<u8>, name: &str, compile: bool) -> pb::BuildModelRequest {
    pb::BuildModelRequest {
        model: Some(source(onnx)),
        target: "local".into(),
        name: name.into(),
        embed_weights: false,
        compile,
    }
}

/// The answer's files in order, and its summary.
async fn build(
    c: &mut Clients,
    req: pb::BuildModelRequest,
) -> Result<(Vec<(String, Vec<u8>)>, pb::BuildModelSummary), tonic::Status> {
    let mut stream = c.query.build_model(req).await?.into_inner();
    let mut files: Vec<(String, Vec<u8>)> = vec![];
    while let Some(p) = stream.message().await? {
        if let Some(s) = p.summary {
            assert!(stream.message().await?.is_none(), "the summary is last");
            return Ok((files, s));
        }
        match files.last_mut() {
            Some((f, bytes)) if *f == p.file => bytes.extend(p.data),
            _ => files.push((p.file, p.data)),
        }
    }
    panic!("no summary")
}

#[tokio::test]
async fn a_tuned_model_comes_back_built_checked_and_runs_here() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&sqlite_path(dir.path(), "t.db"), "build", &[]);
    let mut c = server.client().await;
    let onnx = model();

    // Nothing tuned yet: every task is listed, nothing built.
    let (code, msg) = code_of(build(&mut c, request(onnx.clone(), "m", true)).await);
    assert_eq!(code, Code::NotFound, "{msg}");
    assert!(msg.contains("task 0 (") && msg.contains("--tune"), "{msg}");

    let job = c
        .jobs
        .submit_model(pb::SubmitModelRequest {
            model: Some(source(onnx.clone())),
            job: Some(pb::SubmitRequest {
                target: "local".into(),
                measure: Some(quick()),
                name: "m".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap()
        .into_inner()
        .job
        .unwrap();
    let job = wait_final(&mut c, &job.id, std::time::Duration::from_secs(600)).await;
    assert_eq!(job.state, pb::JobState::Done as i32, "{job:?}");
    // The job tuned every form of the convolutions (auto); the build runs one per convolution.
    let tasks = job.tasks.len() as u32;

    // Compiled on the server: the library among the files, the manifest last.
    let (files, summary) = build(&mut c, request(onnx.clone(), "m", true))
        .await
        .unwrap();
    let names: Vec<&str> = files.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        names,
        ["m.c", "m.h", "m.weights", "libm.so", "manifest.json"]
    );
    assert_eq!((summary.name.as_str(), summary.zero_shot_tasks), ("m", 0));
    assert!(0 < summary.tasks && summary.tasks <= tasks, "{summary:?}");
    assert_eq!(summary.checked_outputs.len(), 1, "{summary:?}");
    let out = dir.path().join("m");
    std::fs::create_dir_all(&out).unwrap();
    for (f, bytes) in &files {
        std::fs::write(out.join(f), bytes).unwrap();
    }
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["library"], "libm.so");
    assert_eq!(manifest.to_string(), {
        let v: serde_json::Value = serde_json::from_str(&summary.manifest_json).unwrap();
        v.to_string()
    });
    let mut lib = Library::open(&out).unwrap();
    let shapes = InputShapes::default();
    let matched = check::against_reference(&mut lib, &onnx, &shapes, None, 5).unwrap();
    assert_eq!(matched, summary.checked_outputs);

    // Without compile: the sources only, for the caller to build.
    let (files, summary) = build(&mut c, request(onnx.clone(), "", false))
        .await
        .unwrap();
    let names: Vec<&str> = files.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        names,
        ["model.c", "model.h", "model.weights", "manifest.json"]
    );
    assert!(summary.checked_outputs.is_empty());
    assert!(!Path::new(&summary.manifest_json).exists());
    let m: serde_json::Value = serde_json::from_str(&summary.manifest_json).unwrap();
    assert!(m["library"].is_null(), "{m}");
}

#[tokio::test]
async fn bad_builds_are_refused_naming_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&sqlite_path(dir.path(), "t.db"), "bad", &[]);
    let mut c = server.client().await;

    let (code, msg) = code_of(build(&mut c, request(model(), "9lives", false)).await);
    assert_eq!(code, Code::InvalidArgument, "{msg}");
    assert!(msg.contains("name"), "{msg}");

    let (code, msg) = code_of(build(&mut c, request(vec![], "m", false)).await);
    assert_eq!(code, Code::InvalidArgument, "{msg}");
    assert!(msg.contains("model.onnx is empty"), "{msg}");

    let (code, msg) = code_of(build(&mut c, request(b"not a model".to_vec(), "m", false)).await);
    assert_eq!(code, Code::InvalidArgument, "{msg}");

    // A node no compiled model runs, named.
    let mut b = ModelBuilder::seeded(3);
    let x = b.input_fixed("x", &[1, 4]);
    let y = b.node("Hardmax", &[&x], vec![]);
    b.output(&y);
    let (code, msg) = code_of(build(&mut c, request(b.encode(), "m", false)).await);
    assert_eq!(code, Code::InvalidArgument, "{msg}");
    assert!(msg.contains("Hardmax"), "{msg}");
}
