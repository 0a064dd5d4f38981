//! The network benchmark's model as `tunehub build` compiles it, run and timed: the files from
//! the service (`Query.BuildModel`: every task's best kernel), the library built here and
//! checked against tract, then the median and 90th percentile of its latency over many runs
//! after a warm-up; and ONNX Runtime's on the same file and thread count (`bench/ort_latency.py`)
//! in the same run.

use anyhow::{Context, Result, bail};
use std::path::Path;
use std::process::Command;
use tunehub::client::Clients;
use tunehub_compiler::check;
use tunehub_onnx::InputShapes;
use tunehub_proto::v1 as pb;

pub struct Built {
    pub median_ms: f64,
    pub p90_ms: f64,
    /// Where the time goes (medians over profiled runs).
    pub profile: tunehub_compiler::Profile,
    pub arena_bytes: u64,
    pub intermediate_bytes: u64,
    pub weights_bytes: u64,
    pub zero_shot: usize,
}

/// Builds `model` into `dir` with the service's best kernels and times it on `threads` threads.
pub async fn build_and_time(
    clients: &mut Clients,
    model: &Path,
    shapes: &InputShapes,
    dir: &Path,
    threads: u32,
    runs: u32,
) -> Result<Built> {
    let bytes = tunehub_onnx::read_model(model)?;
    let req = pb::BuildModelRequest {
        model: Some(tunehub::model_files::source(bytes.clone(), shapes)),
        target: "local".into(),
        name: "net".into(),
        ..Default::default()
    };
    let summary = tunehub::model_files::receive(clients, req, dir).await?;
    let reference = check::Reference {
        model: &bytes,
        shapes,
        dir: model.parent().and_then(Path::to_str),
    };
    let (mut lib, _) = tunehub_compiler::build_checked(dir, None, &reference, 0)
        .context("the built model against tract")?;
    let manifest = lib.manifest.clone();
    lib.set_num_threads(threads);
    let inputs = check::random_inputs(&lib, 0);
    let t = lib.time(&inputs, 20, runs)?;
    let profile = lib.profile(&inputs, runs)?;
    Ok(Built {
        profile,
        median_ms: t.median_ms,
        p90_ms: t.p90_ms,
        arena_bytes: manifest.arena_bytes,
        intermediate_bytes: manifest.intermediate_bytes,
        weights_bytes: manifest.weights_bytes,
        zero_shot: summary.zero_shot_tasks as usize,
    })
}

/// ONNX Runtime's median latency in ms on `model` (`python` has onnxruntime and numpy).
pub fn ort_median_ms(python: &Path, model: &Path, threads: u32, runs: u32) -> Result<f64> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("ort_latency.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(model)
        .args([
            "--threads",
            &threads.to_string(),
            "--runs",
            &runs.to_string(),
        ])
        .output()
        .with_context(|| format!("running {}", python.display()))?;
    if !out.status.success() {
        bail!(
            "{}: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    v["median_ms"]
        .as_f64()
        .context("ort_latency.py printed no median_ms")
}
