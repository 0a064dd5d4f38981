//! `tunehub run DIR`: runs a model `tunehub build` compiled, on inputs from `.npy` files (random
//! ones where none is given), prints each output's shape and checksums, writes them as `.npy`
//! files with `--out-dir`, and times the model: the median and 90th percentile of `--repeat`
//! runs after a warm-up.

use crate::usage::{UsageError, emit};
use anyhow::{Context, Result};
use clap::{Args, value_parser};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tunehub_compiler::{Library, check};
use tunehub_onnx::reference::Array;

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The directory `tunehub build` wrote.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// An input's values from a float32 .npy file of its shape (repeatable; inputs not given
    /// are random, uniform in [-1, 1)).
    #[arg(long = "input", value_name = "NAME=FILE.npy")]
    pub inputs: Vec<String>,

    /// Write each output as OUT_DIR/NAME.npy.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,

    /// Timed runs, after a warm-up of a tenth as many (at least one).
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = value_parser!(u32).range(1..=1_000_000))]
    pub repeat: u32,

    /// OpenMP threads of the kernels [default: as they were tuned].
    #[arg(long, value_name = "N", value_parser = value_parser!(u32).range(1..=4096))]
    pub threads: Option<u32>,

    /// Also time each step (medians over the runs): kernels against their times measured alone,
    /// glue (copies), inputs and outputs; the slowest steps.
    #[arg(long)]
    pub profile: bool,

    /// Seed of the random inputs.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,

    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

fn read_npy(path: &Path) -> Result<Array> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let npy = npyz::NpyFile::new(&bytes[..])
        .map_err(|e| UsageError(format!("{}: not a .npy file: {e}", path.display())))?;
    if npy.order() != npyz::Order::C {
        return Err(UsageError(format!(
            "{}: Fortran order; save it in C order",
            path.display()
        ))
        .into());
    }
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let data: Vec<f32> = npy
        .into_vec::<f32>()
        .map_err(|e| UsageError(format!("{}: not float32: {e}", path.display())))?;
    Ok(Array { shape, data })
}

fn write_npy(path: &Path, a: &Array) -> Result<()> {
    let mut out = vec![];
    {
        let shape: Vec<u64> = a.shape.iter().map(|&d| d as u64).collect();
        use npyz::WriterBuilder;
        let mut w = npyz::WriteOptions::<f32>::new()
            .default_dtype()
            .shape(&shape)
            .writer(&mut out)
            .begin_nd()?;
        w.extend(a.data.iter().copied())?;
        w.finish()?;
    }
    std::fs::write(path, out).with_context(|| format!("writing {}", path.display()))
}

pub fn run(args: RunArgs) -> Result<ExitCode> {
    let mut lib = Library::open(&args.dir).map_err(|e| UsageError(e.to_string()))?;
    let mut given: HashMap<String, Array> = HashMap::new();
    for spec in &args.inputs {
        let (name, file) = spec
            .split_once('=')
            .ok_or_else(|| UsageError(format!("--input '{spec}': expected NAME=FILE.npy")))?;
        if !lib.manifest.inputs.iter().any(|i| i.name == name) {
            let names: Vec<&str> = lib
                .manifest
                .inputs
                .iter()
                .map(|i| i.name.as_str())
                .collect();
            return Err(UsageError(format!(
                "--input '{name}': the model has no such input (inputs: {})",
                names.join(", ")
            ))
            .into());
        }
        given.insert(name.to_string(), read_npy(Path::new(file))?);
    }
    let random = check::random_inputs(&lib, args.seed);
    let inputs: Vec<Array> = lib
        .manifest
        .inputs
        .iter()
        .zip(random)
        .map(|(io, r)| given.remove(&io.name).unwrap_or(r))
        .collect();
    for (a, io) in inputs.iter().zip(&lib.manifest.inputs) {
        let want: Vec<usize> = io.shape.iter().map(|&d| d as usize).collect();
        if a.shape != want {
            return Err(UsageError(format!(
                "--input {}: shape {:?}, the model takes {:?}",
                io.name, a.shape, want
            ))
            .into());
        }
    }
    if let Some(t) = args.threads {
        lib.set_num_threads(t);
    }
    let outputs = lib.run(&inputs)?;
    let t = lib.time(&inputs, (args.repeat / 10).max(1), args.repeat)?;
    let (median, p90) = (t.median_ms, t.p90_ms);
    let profile = match args.profile {
        true => Some(lib.profile(&inputs, args.repeat)?),
        false => None,
    };
    if let Some(d) = &args.out_dir {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        for (a, io) in outputs.iter().zip(&lib.manifest.outputs) {
            let file: String = io
                .name
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            write_npy(&d.join(format!("{file}.npy")), a)?;
        }
    }
    let sums: Vec<(f64, f64)> = outputs
        .iter()
        .map(|a| {
            let s: f64 = a.data.iter().map(|&x| f64::from(x)).sum();
            let abs: f64 = a.data.iter().map(|&x| f64::from(x).abs()).sum();
            (s, abs)
        })
        .collect();
    if args.json {
        let outs: Vec<_> = lib
            .manifest
            .outputs
            .iter()
            .zip(&sums)
            .map(|(io, (s, abs))| serde_json::json!({"name": io.name, "shape": io.shape, "sum": s, "abs_sum": abs}))
            .collect();
        let j = serde_json::json!({
            "model": lib.manifest.name, "outputs": outs, "runs": args.repeat,
            "threads": args.threads.unwrap_or(lib.manifest.threads),
            "median_ms": median, "p90_ms": p90,
            "profile": profile.as_ref().map(|p| serde_json::json!({
                "kernels_ms": p.kernels_ms, "kernels_alone_ms": p.kernels_alone_ms,
                "kernels_cold_ms": p.kernels_cold_ms, "glue_ms": p.glue_ms, "layout_ms": p.layout_ms, "io_ms": p.io_ms, "steps_ms": p.steps_ms,
            })),
        });
        emit(&format!("{j}\n"))?;
    } else {
        let mut t = String::new();
        for (io, (s, abs)) in lib.manifest.outputs.iter().zip(&sums) {
            let dims: Vec<String> = io.shape.iter().map(i64::to_string).collect();
            t += &format!(
                "output  {}  [{}]  sum {s:.6e}  abs sum {abs:.6e}\n",
                io.name,
                dims.join("x")
            );
        }
        t += &format!(
            "latency median {median:.4} ms, p90 {p90:.4} ms over {} runs\n",
            args.repeat
        );
        if let Some(p) = &profile {
            let cold = p
                .kernels_cold_ms
                .map(|c| format!("; each from a cold cache in this run {c:.4} ms"))
                .unwrap_or_default();
            t += &format!(
                "profile kernels {:.4} ms (measured alone when tuned {:.4} ms{cold}), glue {:.4} ms, layout conversions {:.4} ms, inputs and outputs {:.4} ms\n",
                p.kernels_ms, p.kernels_alone_ms, p.glue_ms, p.layout_ms, p.io_ms
            );
            let mut order: Vec<usize> = (0..p.steps_ms.len()).collect();
            order.sort_by(|&a, &b| p.steps_ms[b].total_cmp(&p.steps_ms[a]));
            for &i in order.iter().take(5) {
                let s = &lib.manifest.steps[i];
                t += &format!(
                    "  step {i:<4} {:>9.4} ms  {} {}\n",
                    p.steps_ms[i],
                    s.how,
                    s.nodes.join(", ")
                );
            }
        }
        emit(&t)?;
    }
    Ok(ExitCode::SUCCESS)
}
