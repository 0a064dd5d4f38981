//! `compare`: the trials several `search` runs needed to reach one common level, the cost
//! model's figure of merit when runs differ in how good a kernel they end with.
//!
//! A run's "trials to reach 90% of its own final best" (printed by `search`) flatters a weak
//! search: a random model that stops at 140 GFLOP/s on conv2d reaches 90% of 140 early, and
//! reads as fast as XGBoost reaching 90% of 171. Here every run is held to the same level,
//! `frac` of the best final among the runs compared, per workload: a run that never gets
//! there within its trials says so.

use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct CompareArgs {
    /// Output directories of `search` runs (each holds a `results.json` with `trial_curve`).
    #[arg(required = true, num_args = 2..)]
    runs: Vec<PathBuf>,
    /// The common level, as a fraction of the best final among the runs.
    #[arg(long, default_value_t = 0.9)]
    frac: f64,
}

/// One run's best-so-far curve (in-run readings, one entry per trial) for one workload.
struct Curve {
    run: String,
    curve: Vec<f64>,
    remeasured: f64,
}

/// The first trial (1-based) whose best-so-far reaches `level`, if any.
fn trials_to(curve: &[f64], level: f64) -> Option<usize> {
    curve.iter().position(|&g| g >= level).map(|i| i + 1)
}

/// The common level of a workload's curves: `frac` of the highest final reading. Curves are
/// in-run readings on both sides, so the level and the crossings share an estimator.
fn common_level(curves: &[Curve], frac: f64) -> f64 {
    frac * curves
        .iter()
        .filter_map(|c| c.curve.last())
        .fold(0.0, |a, &b| f64::max(a, b))
}

fn read_run(dir: &Path) -> Result<Vec<(String, Curve)>> {
    let path = dir.join("results.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let v: Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let mut out = vec![];
    for w in v["workloads"].as_array().into_iter().flatten() {
        let name = w["workload"].as_str().unwrap_or_default().to_string();
        let Some(curve) = w["trial_curve"].as_array() else {
            bail!(
                "{}: workload {name} has no trial_curve (written by an older search)",
                path.display()
            );
        };
        out.push((
            name,
            Curve {
                run: dir.display().to_string(),
                curve: curve.iter().filter_map(Value::as_f64).collect(),
                remeasured: w["best_gflops"].as_f64().unwrap_or(0.0),
            },
        ));
    }
    Ok(out)
}

pub fn run(a: CompareArgs) -> Result<()> {
    let mut by_workload: BTreeMap<String, Vec<Curve>> = BTreeMap::new();
    for dir in &a.runs {
        for (name, c) in read_run(dir)? {
            by_workload.entry(name).or_default().push(c);
        }
    }
    for (name, curves) in &by_workload {
        let level = common_level(curves, a.frac);
        println!(
            "== {name}: level {level:.1} GFLOP/s ({:.0}% of the best final reading)",
            a.frac * 100.0
        );
        for c in curves {
            let reached = match trials_to(&c.curve, level) {
                Some(n) => format!("{n:>4}"),
                None => format!("not in {}", c.curve.len()),
            };
            println!(
                "  {:<40} trials to the level {reached}; final reading {:.1}, re-measured {:.1}",
                c.run,
                c.curve.last().copied().unwrap_or(0.0),
                c.remeasured
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(v: &[f64]) -> Curve {
        Curve {
            run: String::new(),
            curve: v.to_vec(),
            remeasured: 0.0,
        }
    }

    #[test]
    fn every_run_is_held_to_the_best_runs_level() {
        let strong = curve(&[50.0, 120.0, 160.0, 170.0]);
        let weak = curve(&[60.0, 100.0, 130.0, 140.0]);
        let level = common_level(&[strong, weak], 0.9);
        assert!((level - 153.0).abs() < 1e-9);
        assert_eq!(trials_to(&[50.0, 120.0, 160.0, 170.0], level), Some(3));
        // 90% of its own final (126) it reaches at trial 3 too; the common level it never does.
        assert_eq!(
            trials_to(&[60.0, 100.0, 130.0, 140.0], 0.9 * 140.0),
            Some(3)
        );
        assert_eq!(trials_to(&[60.0, 100.0, 130.0, 140.0], level), None);
    }
}
