//! The network benchmark's model as `tunehub build` compiles it, run and timed: the files from
//! the service (`Query.BuildModel`: every task's best kernel), the library built here and
//! checked against tract, then the median and 90th percentile of its latency over many runs
//! after a warm-up; and ONNX Runtime's on the same file and thread count (`bench/ort_latency.py`)
//! in the same run.
//!
//! Both are timed in processes of their own (`tunehub run DIR --json`, as a user runs it, and
//! the Python script), never in the benchmark's: timed beside the embedded service's threads
//! and XGBoost's OpenMP pool, the same GPT-2 build ran at 2.76 ms in-process against 0.78-0.90
//! ms from `tunehub run` right after.

use crate::procs::sibling_bin;
use anyhow::{Context, Result, bail};
use std::path::Path;
use std::process::Command;
use tunehub::client::Clients;
use tunehub_compiler::check;
use tunehub_onnx::InputShapes;
use tunehub_proto::v1 as pb;

/// A built model's files, checked against tract.
pub struct BuiltFiles {
    pub arena_bytes: u64,
    pub intermediate_bytes: u64,
    pub weights_bytes: u64,
    pub zero_shot: usize,
    /// What the build chose (the manifest's layout choice, else its layout).
    pub layout: String,
    /// The sum over its kernels of calls x tuned time: the estimate of what it runs, which a
    /// per-convolution choice of forms makes lower than the job's (`Estimate`).
    pub estimate_ms: f64,
}

/// Its latency and where the time goes, from `tunehub run`.
pub struct Timed {
    pub median_ms: f64,
    pub p90_ms: f64,
    /// Medians over profiled runs.
    pub profile: tunehub_compiler::Profile,
}

/// Builds `model` into `dir` with the service's best kernels and checks it against tract.
pub async fn build(
    clients: &mut Clients,
    model: &Path,
    shapes: &InputShapes,
    dir: &Path,
) -> Result<BuiltFiles> {
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
    let (lib, _) = tunehub_compiler::build_checked(dir, None, &reference, 0)
        .context("the built model against tract")?;
    let m = &lib.manifest;
    Ok(BuiltFiles {
        arena_bytes: m.arena_bytes,
        intermediate_bytes: m.intermediate_bytes,
        weights_bytes: m.weights_bytes,
        zero_shot: summary.zero_shot_tasks as usize,
        layout: match m.layout_choice.as_str() {
            "" => m.layout.clone(),
            c => c.to_string(),
        },
        estimate_ms: m
            .tasks
            .iter()
            .filter(|t| t.gflops > 0.0)
            .map(|t| f64::from(t.calls) * t.flops as f64 / (t.gflops * 1e6))
            .sum(),
    })
}

/// Times the model built in `dir` on `threads` threads with `tunehub run` (a warm-up, then
/// `runs` timed runs, then as many profiled ones).
pub fn time(dir: &Path, threads: u32, runs: u32) -> Result<Timed> {
    let bin = sibling_bin("tunehub")?;
    let out = Command::new(&bin)
        .arg("run")
        .arg(dir)
        .args([
            "--repeat",
            &runs.to_string(),
            "--threads",
            &threads.to_string(),
        ])
        .args(["--profile", "--json"])
        .env_remove("TUNEHUB_CONFIG")
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    if !out.status.success() {
        bail!("tunehub run: {}", String::from_utf8_lossy(&out.stderr));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let num = |v: &serde_json::Value, k: &str| {
        v[k].as_f64()
            .with_context(|| format!("tunehub run printed no {k}"))
    };
    let p = &v["profile"];
    Ok(Timed {
        median_ms: num(&v, "median_ms")?,
        p90_ms: num(&v, "p90_ms")?,
        profile: tunehub_compiler::Profile {
            kernels_ms: num(p, "kernels_ms")?,
            kernels_alone_ms: num(p, "kernels_alone_ms")?,
            kernels_cold_ms: p["kernels_cold_ms"].as_f64(),
            glue_ms: num(p, "glue_ms")?,
            layout_ms: num(p, "layout_ms")?,
            io_ms: num(p, "io_ms")?,
            steps_ms: serde_json::from_value(p["steps_ms"].clone())
                .context("tunehub run's steps_ms")?,
        },
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
