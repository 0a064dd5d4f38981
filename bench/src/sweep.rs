//! `tunehub-bench sweep`: layer shapes no benchmark names, drawn with a seed from the families
//! real networks use, each tuned by tunehub and by the peers in the same run (issue 61).
//!
//! The families: convolutions 1x1/3x3/5x5/7x7, stride 1/2, dilation 1/2, dense and depthwise,
//! channel counts that are not multiples of 16 (24, 40, 72, 120, 240, 1000...) on maps of 7 to
//! 112 with odd and prime extents (7, 13, 27, 55); max and average pools; dense, matmul and
//! batched matmul with M in {1, 8, 197}; softmax over odd lengths. Every shape is a library op
//! spec, the string tunehub and both peer scripts take.
//!
//! Per shape: `tunehub tune SPEC --trials N` with the CLI's defaults (a fresh database each),
//! Ansor (`ansor.py SPEC --trials N`, weights layout-free as tunehub's default), and
//! MetaSchedule (`metaschedule.py`, weights not packed: against tunehub's `layout_free=none`
//! form, tuned too where the op has a weight). tunehub's time is its best record's mean over
//! its repeats as tuned; the peers' is the minimum of their re-measurement (number=10,
//! repeat=15): the comparison leans against tunehub. Ratios are peer time / tunehub time (above
//! 1: tunehub faster). With `--fma-peak GFLOPS` (machine-check's figure) each shape's share of
//! its roof is printed: the slower of the FMA peak and the bandwidth probed at its working set.
//!
//! Each shape's figures are appended as one JSON line to `--results` (with each search seed's
//! best beside the worst, which is the figure); a run given the same file skips the shapes it
//! holds (a sweep takes hours: it may be resumed).
//!
//! `tunehub-bench sweep [--seed 1] [--shapes 40] [--trials 200] [--peers ansor,metaschedule|none]
//! [--results FILE] [--list] [--only TEXT]...`

use crate::bandwidth::{Prober, Roofs};
use crate::procs;
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use tunehub_engine::ops::OpSpec;
use tunehub_engine::target::Target;

#[derive(clap::Args)]
pub struct SweepArgs {
    /// The shape set's seed: a second seed gives shapes not tuned against.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Shapes drawn.
    #[arg(long, default_value_t = 40)]
    shapes: usize,
    /// Trials per shape, for tunehub and each peer.
    #[arg(long, default_value_t = 200)]
    trials: u32,
    /// tunehub's search seeds (`tune --seed`); the worst is reported.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    tune_seeds: Vec<u64>,
    /// Peers to run beside tunehub (none: tunehub alone).
    #[arg(long, value_delimiter = ',', default_value = "ansor,metaschedule")]
    peers: Vec<String>,
    /// The peers' Python (the venv of their docstring).
    #[arg(long, default_value = "/tmp/peer/bin/python")]
    peer_python: PathBuf,
    /// Where ansor.py and metaschedule.py are.
    #[arg(long, default_value = "../shared/peers")]
    peers_dir: PathBuf,
    /// Threads for every tool (TVM_NUM_THREADS; tunehub's target uses the machine's cores).
    #[arg(long, default_value_t = 2)]
    threads: u32,
    /// The machine's FMA peak in GFLOP/s (`machine-check`): roof shares are printed with it.
    #[arg(long)]
    fma_peak: Option<f64>,
    /// One JSON line per shape is appended here; shapes already in it are skipped.
    #[arg(long)]
    results: Option<PathBuf>,
    /// Print the drawn shapes and exit.
    #[arg(long)]
    list: bool,
    /// Only the drawn shapes whose spec contains this text (repeatable: any of them): a shape
    /// measured again after a fix, into its own results file.
    #[arg(long)]
    only: Vec<String>,
}

/// Channel counts of real networks, most not multiples of 16.
const CHANNELS: [u64; 14] = [
    16, 24, 32, 40, 64, 72, 96, 120, 144, 240, 256, 320, 480, 1000,
];
/// Feature-map extents, odd and prime ones among them.
const MAPS: [u64; 9] = [7, 13, 14, 27, 28, 55, 56, 57, 112];
/// The most work one shape may take (the peers measure every trial at length).
const MAX_FLOPS: u64 = 1_500_000_000;

/// SplitMix64: a seeded stream with no dependency, stable across versions (a seed names the
/// same shapes forever).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[(self.next() % from.len() as u64) as usize]
    }
}

/// One shape drawn from a family.
fn draw(r: &mut Rng) -> String {
    match r.next() % 10 {
        // Convolutions, dense or depthwise, take half the draws: they are most of a CNN.
        0..=4 => {
            let k = r.pick(&[1, 3, 3, 5, 7]);
            let stride = r.pick(&[1, 1, 2]);
            let dilation = if k == 3 { r.pick(&[1, 1, 1, 2]) } else { 1 };
            let pad = dilation * (k - 1) / 2;
            let (c, hw) = (r.pick(&CHANNELS), r.pick(&MAPS));
            if r.next().is_multiple_of(2) && k > 1 {
                format!(
                    "depthwise_conv2d_nchw(n=1,c={c},h={hw},w={hw},kh={k},kw={k},stride={stride},pad={pad},dilation={dilation})"
                )
            } else {
                let f = r.pick(&CHANNELS);
                format!(
                    "conv2d_nchw(n=1,c={c},h={hw},w={hw},f={f},kh={k},kw={k},stride={stride},pad={pad},dilation={dilation})"
                )
            }
        }
        5 => {
            let op = r.pick(&["max_pool2d", "avg_pool2d"]);
            let (c, hw, k) = (r.pick(&CHANNELS), r.pick(&MAPS), r.pick(&[2, 3]));
            format!("{op}(n=1,c={c},h={hw},w={hw},kh={k},kw={k},stride=2)")
        }
        6 | 7 => {
            let m = r.pick(&[1, 8, 197]);
            let (n, k) = (
                r.pick(&[240, 384, 768, 1000, 1024, 1280, 3072]),
                r.pick(&[240, 384, 768, 1024, 1280, 3072]),
            );
            if r.next().is_multiple_of(2) {
                format!("dense(m={m},n={n},k={k},bias=1,relu={})", r.next() % 2)
            } else {
                format!("matmul(m={m},n={n},k={k})")
            }
        }
        8 => {
            let (b, m) = (r.pick(&[12, 16]), r.pick(&[1, 8, 197]));
            let (n, k) = r.pick(&[(64, 197), (197, 64), (64, 77), (77, 64)]);
            format!("batch_matmul(b={b},m={m},n={n},k={k})")
        }
        _ => {
            let m = r.pick(&[1, 12, 197, 1000]);
            let n = r.pick(&[77, 197, 511, 1000]);
            format!("softmax(m={m},n={n})")
        }
    }
}

/// `n` distinct shapes of seed `seed`, none over [`MAX_FLOPS`].
pub fn shapes(seed: u64, n: usize) -> Result<Vec<String>> {
    let mut r = Rng(seed);
    let mut out: Vec<String> = vec![];
    let mut tries = 0;
    while out.len() < n {
        tries += 1;
        if tries > 100 * n {
            bail!("drew {} distinct shapes of {n} in {tries} tries", out.len());
        }
        let s = draw(&mut r);
        let task = OpSpec::parse(&s)
            .and_then(|o| o.task())
            .map_err(|e| anyhow::anyhow!("{s}: {e}"))?;
        if task.flops <= MAX_FLOPS && !out.contains(&s) {
            out.push(s);
        }
    }
    Ok(out)
}

/// Whether the op has a constant weight (packed by tunehub's default, `--layout-free` for
/// Ansor; MetaSchedule's comparison is then against `layout_free=none`).
fn has_weight(spec: &str) -> bool {
    ["conv2d", "dense", "matmul("]
        .iter()
        .any(|p| spec.contains(p))
        && !spec.starts_with("batch")
}

pub fn run(mut a: SweepArgs) -> Result<()> {
    // `--peers none`: tunehub alone (the roof shares still printed).
    a.peers.retain(|p| p != "none");
    if let Some(p) = a
        .peers
        .iter()
        .find(|p| !["ansor", "metaschedule"].contains(&p.as_str()))
    {
        bail!("unknown peer {p:?} (ansor, metaschedule, or none)");
    }
    let mut list = shapes(a.seed, a.shapes)?;
    if !a.only.is_empty() {
        list.retain(|s| a.only.iter().any(|o| s.contains(o.as_str())));
    }
    if a.list {
        for s in &list {
            println!("{s}");
        }
        return Ok(());
    }
    let tunehub = procs::sibling_bin("tunehub")?;
    let target = Target::detect();
    let roofs = Prober::new(&target).and_then(|p| Ok((Roofs::measure(&target, &p)?, p)));
    if let Ok((r, _)) = &roofs {
        r.print();
    }
    let done: BTreeMap<String, Value> = match &a.results {
        Some(p) if p.exists() => std::fs::read_to_string(p)?
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| Some((v["spec"].as_str()?.to_string(), v)))
            .collect(),
        _ => BTreeMap::new(),
    };
    println!(
        "sweep: seed {}, {} shapes, {} trials, tunehub seeds {:?}, peers {:?}, {} threads ({} done before)",
        a.seed,
        list.len(),
        a.trials,
        a.tune_seeds,
        a.peers,
        a.threads,
        done.len()
    );
    let mut rows = vec![];
    for (i, spec) in list.iter().enumerate() {
        if let Some(v) = done.get(spec) {
            rows.push(v.clone());
            continue;
        }
        let t0 = Instant::now();
        let mut row = json!({ "spec": spec, "seed": a.seed, "trials": a.trials });
        let packed = tunehub_seeds(&tunehub, spec, &a, &mut row, "tunehub")?;
        if has_weight(spec) && a.peers.iter().any(|p| p == "metaschedule") {
            let plain = format!("{},layout_free=none)", spec.trim_end_matches(')'));
            tunehub_seeds(&tunehub, &plain, &a, &mut row, "tunehub_plain")?;
        }
        for peer in &a.peers {
            let ms = run_peer(peer, spec, &a).with_context(|| format!("{peer} on {spec}"))?;
            row[format!("{peer}_ms")] = json!(ms);
        }
        if let (Ok((roofs, prober)), Ok(task)) =
            (&roofs, OpSpec::parse(spec).and_then(|o| o.task()))
        {
            let roof = roofs.roof_for(prober, None, &task.dag)?;
            let memory_s = roof.bytes as f64 / roof.applies().0 / 1e9;
            let compute_s = a.fma_peak.map_or(0.0, |p| task.flops as f64 / p / 1e9);
            row["roof_ms"] = json!(memory_s.max(compute_s) * 1e3);
            row["roof_kind"] = json!(if compute_s > memory_s {
                "fma"
            } else {
                "memory"
            });
            row["gflops"] = json!(task.flops as f64 / packed / 1e6);
        }
        println!(
            "[{}/{}] {spec}: {} ({:.0} s)",
            i + 1,
            list.len(),
            ratios_text(&row),
            t0.elapsed().as_secs_f64()
        );
        if let Some(p) = &a.results {
            append_line(p, &row)?;
        }
        rows.push(row);
    }
    report(&rows, &a.peers);
    Ok(())
}

/// Appends `row` to a results file as one JSON line.
pub(crate) fn append_line(path: &Path, row: &Value) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    writeln!(f, "{row}")?;
    Ok(())
}

/// tunehub's best over each of `--tune-seeds`, in ms, into `row` as `{key}_seeds_ms`; the
/// slowest, the shape's figure, as `{key}_ms` and returned (the others show how far the seeds
/// spread).
fn tunehub_seeds(bin: &Path, spec: &str, a: &SweepArgs, row: &mut Value, key: &str) -> Result<f64> {
    let seeds = a
        .tune_seeds
        .iter()
        .map(|&seed| tunehub_best_ms(bin, spec, a.trials, seed))
        .collect::<Result<Vec<f64>>>()?;
    let worst = seeds.iter().copied().fold(0.0, f64::max);
    row[format!("{key}_ms")] = json!(worst);
    row[format!("{key}_seeds_ms")] = json!(seeds);
    Ok(worst)
}

/// `tunehub tune SPEC --trials N --seed S` with the CLI's defaults on a fresh database: its
/// best record's mean, in ms.
pub(crate) fn tunehub_best_ms(bin: &Path, spec: &str, trials: u32, seed: u64) -> Result<f64> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("sweep.db");
    let out = Command::new(bin)
        .args(["tune", spec, "--trials", &trials.to_string()])
        .args(["--seed", &seed.to_string(), "--json", "--db"])
        .arg(&db)
        .output()
        .with_context(|| format!("tunehub tune {spec}"))?;
    let v = last_json(&out).with_context(|| format!("tunehub tune {spec}"))?;
    v["best"]["mean_ms"]
        .as_f64()
        .with_context(|| format!("tunehub tune {spec}: no best in {v}"))
}

/// A peer's tuned best on `spec`, in ms (the last line of its output is one JSON object).
fn run_peer(peer: &str, spec: &str, a: &SweepArgs) -> Result<f64> {
    let script = a.peers_dir.join(format!("{peer}.py"));
    let mut cmd = Command::new(&a.peer_python);
    cmd.arg(&script)
        .arg(spec)
        .args(["--trials", &a.trials.to_string()])
        .env("TVM_NUM_THREADS", a.threads.to_string());
    if peer == "ansor" && has_weight(spec) {
        cmd.arg("--layout-free");
    }
    let out = cmd
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    let v = last_json(&out).with_context(|| format!("{peer} on {spec}"))?;
    v["best_ms"].as_f64().context("no best_ms")
}

/// The last line of a tool's output that is one JSON object (tunehub's `--json` and the peers
/// both end with their result), or an error with the end of what it wrote on stderr.
pub(crate) fn last_json(out: &std::process::Output) -> Result<Value> {
    let text = String::from_utf8_lossy(&out.stdout);
    if let Some(v) = text
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
    {
        return Ok(v);
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let tail: String = err
        .chars()
        .rev()
        .take(400)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    bail!("no JSON line; stderr ends: {tail}")
}

/// Peer ms / tunehub ms (above 1: tunehub faster); MetaSchedule against the plain form.
fn ratio(row: &Value, peer: &str) -> Option<f64> {
    let ours = if peer == "metaschedule" {
        row["tunehub_plain_ms"]
            .as_f64()
            .or(row["tunehub_ms"].as_f64())?
    } else {
        row["tunehub_ms"].as_f64()?
    };
    Some(row[format!("{peer}_ms")].as_f64()? / ours)
}

fn ratios_text(row: &Value) -> String {
    let mut parts = vec![format!(
        "tunehub {:.4} ms",
        row["tunehub_ms"].as_f64().unwrap_or(f64::NAN)
    )];
    for peer in ["ansor", "metaschedule"] {
        if let Some(r) = ratio(row, peer) {
            parts.push(format!("{peer} {r:.2}x"));
        }
    }
    if let (Some(roof), Some(ms)) = (row["roof_ms"].as_f64(), row["tunehub_ms"].as_f64()) {
        parts.push(format!(
            "{:.0}% of the {} roof",
            100.0 * roof / ms,
            row["roof_kind"].as_str().unwrap_or("?")
        ));
    }
    parts.join(", ")
}

fn report(rows: &[Value], peers: &[String]) {
    println!(
        "\n| shape | tunehub ms | {} roof share |",
        peers
            .iter()
            .map(|p| format!("{p} ms | ratio |"))
            .collect::<String>()
    );
    println!("|---|---|{}---|", "---|---|".repeat(peers.len()));
    let worst = |r: &Value| {
        peers
            .iter()
            .filter_map(|p| ratio(r, p))
            .fold(f64::INFINITY, f64::min)
    };
    let mut sorted: Vec<&Value> = rows.iter().collect();
    sorted.sort_by(|a, b| worst(a).total_cmp(&worst(b)));
    for r in &sorted {
        let mut line = format!(
            "| `{}` | {:.4} |",
            r["spec"].as_str().unwrap_or("?"),
            r["tunehub_ms"].as_f64().unwrap_or(f64::NAN)
        );
        for p in peers {
            line += &format!(
                " {:.4} | {:.2} |",
                r[format!("{p}_ms")].as_f64().unwrap_or(f64::NAN),
                ratio(r, p).unwrap_or(f64::NAN)
            );
        }
        let share = match (r["roof_ms"].as_f64(), r["tunehub_ms"].as_f64()) {
            (Some(roof), Some(ms)) => format!(
                " {:.0}% ({}) |",
                100.0 * roof / ms,
                r["roof_kind"].as_str().unwrap_or("?")
            ),
            _ => " - |".into(),
        };
        println!("{line}{share}");
    }
    for p in peers {
        let rs: Vec<f64> = rows.iter().filter_map(|r| ratio(r, p)).collect();
        if rs.is_empty() {
            continue;
        }
        let geo = (rs.iter().map(|r| r.ln()).sum::<f64>() / rs.len() as f64).exp();
        let mut w = rs.clone();
        w.sort_by(f64::total_cmp);
        let worst5: Vec<String> = w.iter().take(5).map(|r| format!("{r:.2}")).collect();
        println!(
            "{p}: {} shapes, geomean {geo:.2}x, worst 5 {}, shapes below 1.0x: {}",
            rs.len(),
            worst5.join(" "),
            rs.iter().filter(|&&r| r < 1.0).count()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_names_the_same_distinct_parseable_shapes_and_another_seed_others() {
        let a = shapes(1, 40).unwrap();
        assert_eq!(a, shapes(1, 40).unwrap());
        let b = shapes(2, 40).unwrap();
        assert_ne!(a, b);
        let mut d = a.clone();
        d.sort();
        d.dedup();
        assert_eq!(d.len(), 40);
        for family in ["conv2d_nchw", "depthwise", "pool", "softmax"] {
            assert!(a.iter().chain(&b).any(|s| s.contains(family)), "{family}");
        }
    }
}
