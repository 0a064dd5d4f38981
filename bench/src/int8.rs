//! `tunehub-bench int8`: the integer kernels (issue 62) against the machine's int8 roof, the
//! same shapes in f32 (the speed-up int8 brings), and Ansor's int8 in the same run.
//!
//! Per shape and form (`f32`, `dtype=u8i8`, `dtype=i8i8`): `tunehub tune SPEC --trials N` for
//! each of `--tune-seeds` on a fresh database, the worst best reported. The roofs come from one
//! probe compiled as the kernels are (`dotroof`): the f32 FMA rate and the dot-product
//! instruction's. With `--ansor-python`, `bench/peers/ansor_int8.py` tunes the u8i8 form with
//! the same trials (TVM writes the int32 sum of int8 products; Ansor packs the weight).
//!
//! `tunehub-bench int8 [--trials 200] [--tune-seeds 1,2,3] [--shape SPEC]... [--dtypes u8i8,u8i8:u8]
//! [--ansor-python PY]`

use crate::dotroof::DotRoof;
use crate::procs;
use crate::sweep::{append_line, last_json, tunehub_best_ms};
use anyhow::{Context, Result};
use serde_json::json;
use std::path::PathBuf;
use std::process::Command;
use tunehub_engine::ops::OpSpec;
use tunehub_engine::target::Target;

#[derive(clap::Args)]
pub struct Int8Args {
    /// Trials per shape and form, for tunehub and Ansor.
    #[arg(long, default_value_t = 200)]
    trials: u32,
    /// tunehub's search seeds; the worst is reported.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    tune_seeds: Vec<u64>,
    /// Shapes in f32 (the integer forms add `dtype=`); default: matmul 512 and a 3x3 conv.
    #[arg(long = "shape")]
    shapes: Vec<String>,
    /// The integer forms measured beside f32; `u8i8:u8` requantizes to u8 (`out_dtype=u8`).
    #[arg(long, value_delimiter = ',', default_value = "u8i8,i8i8")]
    dtypes: Vec<String>,
    /// The peers' Python (`/tmp/peer/bin/python`): Ansor tunes the u8i8 form too.
    #[arg(long)]
    ansor_python: Option<PathBuf>,
    /// Threads for Ansor (TVM_NUM_THREADS; tunehub's target uses the machine's cores).
    #[arg(long, default_value_t = 2)]
    threads: u32,
    /// One JSON line per shape and form is appended here.
    #[arg(long)]
    results: Option<PathBuf>,
}

const SHAPES: &[&str] = &[
    "matmul(512,512,512)",
    "conv2d_nhwc(n=1,h=56,w=56,c=64,f=64,kh=3,kw=3,pad=1)",
];

/// `spec` with `dtype=` added (`f32`: as it is), and `out_dtype=` after a colon (`u8i8:u8`).
fn with_dtype(spec: &str, dtype: &str) -> String {
    let head = spec.trim_end_matches(')');
    match dtype.split_once(':') {
        _ if dtype == "f32" => spec.to_string(),
        Some((inputs, out)) => format!("{head},dtype={inputs},out_dtype={out})"),
        None => format!("{head},dtype={dtype})"),
    }
}

pub fn run(a: Int8Args) -> Result<()> {
    let tunehub = procs::sibling_bin("tunehub")?;
    let roof = DotRoof::measure(&Target::detect())?;
    println!(
        "roofs: f32 FMA {:.1} GFLOP/s, int8 dot product {:.1} GOP/s ({:.2}x)",
        roof.fma / 1e9,
        roof.dot / 1e9,
        roof.dot / roof.fma
    );
    let shapes: Vec<String> = if a.shapes.is_empty() {
        SHAPES.iter().map(|s| s.to_string()).collect()
    } else {
        a.shapes.clone()
    };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/ansor_int8.py");
    for shape in &shapes {
        let mut f32_ms = None;
        for dtype in std::iter::once("f32").chain(a.dtypes.iter().map(String::as_str)) {
            let spec = with_dtype(shape, dtype);
            let task = OpSpec::parse(&spec)
                .and_then(|o| o.task())
                .with_context(|| spec.clone())?;
            let mut worst: f64 = 0.0;
            for &seed in &a.tune_seeds {
                worst = worst.max(tunehub_best_ms(&tunehub, &spec, a.trials, seed)?);
            }
            let ops = task.flops as f64 / (worst * 1e-3);
            let peak = if dtype == "f32" { roof.fma } else { roof.dot };
            let mut row = json!({
                "spec": spec, "trials": a.trials, "seeds": a.tune_seeds, "tunehub_ms": worst,
                "gops": ops / 1e9, "roof_share": ops / peak,
            });
            let mut line = format!(
                "{spec}: {worst:.4} ms, {:.1} GOP/s, {:.0}% of the {} roof",
                ops / 1e9,
                100.0 * ops / peak,
                if dtype == "f32" { "FMA" } else { "int8" }
            );
            match f32_ms {
                None => f32_ms = Some(worst),
                Some(f) => {
                    row["speedup_over_f32"] = json!(f / worst);
                    line.push_str(&format!(", {:.2}x f32", f / worst));
                }
            }
            if let (Some(py), "u8i8") = (&a.ansor_python, dtype) {
                let out = Command::new(py)
                    .arg(&script)
                    .arg(&spec)
                    .args(["--trials", &a.trials.to_string()])
                    .env("TVM_NUM_THREADS", a.threads.to_string())
                    .output()
                    .with_context(|| format!("running {}", script.display()))?;
                let v = last_json(&out).with_context(|| format!("Ansor on {spec}"))?;
                let ms = v["best_ms"].as_f64().context("no best_ms")?;
                row["ansor_ms"] = json!(ms);
                row["ansor_max_abs_err"] = v["max_abs_err"].clone();
                line.push_str(&format!(", Ansor {ms:.4} ms ({:.2}x)", ms / worst));
            }
            println!("{line}");
            if let Some(p) = &a.results {
                append_line(p, &row)?;
            }
        }
    }
    Ok(())
}
