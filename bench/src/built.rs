//! The network benchmark's model as `tunehub build` compiles it, run and timed: every task's
//! kernel from the service (`tunehub::kernels`, one `BestBatch` call), the library built and
//! checked against tract, then the median and 90th percentile of its latency over many runs
//! after a warm-up; and ONNX Runtime's on the same file and thread count (`bench/ort_latency.py`)
//! in the same run.

use anyhow::{Context, Result, bail};
use std::path::Path;
use std::process::Command;
use tunehub::client::Clients;
use tunehub_compiler::{Options, check, compile};
use tunehub_onnx::InputShapes;
use tunehub_onnx::graph::Graph;

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
    let model_dir = model.parent().and_then(Path::to_str);
    let g = Graph::load(&bytes, shapes, model_dir)?;
    let list = tunehub_onnx::tasks::extract(&g, true)?;
    let kernels = tunehub::kernels::best_kernels(clients, &list, "local", "net_").await?;
    let compiled = compile(
        &g,
        &list,
        &kernels,
        "net",
        &model.display().to_string(),
        &Options::default(),
    )?;
    let reference = check::Reference {
        model: &bytes,
        shapes,
        dir: model_dir,
    };
    let (mut lib, _) = compiled
        .build_checked(dir, None, &reference, 0)
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
        zero_shot: kernels
            .iter()
            .filter(|k| k.provenance.record_id.is_empty())
            .count(),
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
