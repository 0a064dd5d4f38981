//! What an imported line must satisfy: the bounds of its fields, and for a record what only
//! its workload and target can tell: its steps replay on the workload, and its times are
//! possible on the target. An imported record may become a best (and a kernel handed to
//! compilers), so it is trusted no more than a report from an unknown machine.
//! `docs/validation.md` explains the bounds.

use super::text::check_json_printable;
use crate::jobs::result_check::check_speed;
use crate::records::NewRecord;
use tunehub_engine::ir::ComputeDag;
use tunehub_engine::measure::ErrorCode;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::target::Target;

/// Longest line (a workload line holds its DAG).
pub const MAX_LINE_BYTES: usize = 1 << 20;
/// Most costs of one record: the API's largest `repeat`.
pub const MAX_COSTS: usize = 1000;
/// Longest cost of one run, in seconds: the API's largest run timeout.
pub const MAX_COST_S: f64 = 86_400.0;
/// Longest build or run phase of one candidate, in seconds (retries and repeats included).
pub const MAX_PHASE_S: f64 = 1e6;
/// Longest error message (the engine keeps 4 KiB of a compiler's output).
pub const MAX_ERROR_MSG: usize = 16 << 10;
/// Longest worker name.
pub const MAX_WORKER: usize = 256;
/// Most steps in one schedule (the search's have tens).
pub const MAX_STEPS: usize = 10_000;
/// Most cores a target may claim.
pub const MAX_CORES: usize = 1 << 16;
/// A timestamp may be ahead of this server's clock by this much (clock skew), not more.
pub const MAX_CLOCK_AHEAD_MS: i64 = 86_400_000;

/// A target description's own checks beyond its key, `what` naming it in the message (an
/// import's `target.target`, a registration's `target_json`): its core count, and no control
/// character in any of its strings (stored and shown to every user, `checks::text`).
pub fn check_target(what: &str, t: &Target) -> Result<(), String> {
    if !(1..=MAX_CORES).contains(&t.cores) {
        return Err(format!("{what}.cores is {}; 1 to {MAX_CORES}", t.cores));
    }
    let json = serde_json::to_value(t).expect("a target serializes");
    check_json_printable(what, &json)
}

/// A record against its workload's DAG and FLOPs and its target: the steps replay, and no
/// time of a success beats the target's peak.
pub fn check_record(
    r: &NewRecord,
    dag: &ComputeDag,
    flops: u64,
    target: &Target,
) -> Result<(), String> {
    let schedule = Schedule::from_json(&r.steps_json).map_err(|e| format!("steps: {e}"))?;
    if schedule.steps.len() > MAX_STEPS {
        return Err(format!(
            "{} steps; at most {MAX_STEPS}",
            schedule.steps.len()
        ));
    }
    let replayed = schedule.replay(dag);
    // A record of an invalid schedule says so itself; it is kept (the search then never
    // proposes it again) and can never be a best.
    if r.error_code == ErrorCode::InvalidSchedule.code() {
        return Ok(());
    }
    replayed.map_err(|e| format!("steps do not replay on workload {}: {e}", r.workload_key))?;
    if r.error_code != ErrorCode::NoError.code() {
        return Ok(());
    }
    check_speed(&r.costs, flops, target)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::result_check::peak_flops;
    use tunehub_engine::ops;

    fn record(steps: &str, costs: Vec<f64>) -> NewRecord {
        NewRecord {
            workload_key: "w".into(),
            target_key: "t".into(),
            steps_json: steps.into(),
            costs,
            error_code: 0,
            error_msg: String::new(),
            noisy: false,
            build_s: 0.0,
            run_s: 0.0,
            worker: None,
            created_at: None,
        }
    }

    fn target(cores: usize, features: &[&str]) -> Target {
        Target {
            cores,
            features: features.iter().map(|f| f.to_string()).collect(),
            ..Target::detect()
        }
    }

    #[test]
    fn the_peak_follows_cores_and_vector_width() {
        // 2 cores x 16 lanes x 4 x 2 x 6 GHz.
        assert_eq!(peak_flops(&target(2, &["avx512f"])), 1536e9);
        assert_eq!(peak_flops(&target(1, &[])), 4.0 * 8.0 * 6e9);
    }

    #[test]
    fn unreplayable_steps_and_impossible_times_are_refused() {
        let dag = ops::matmul(64, 64, 64).unwrap();
        let flops = dag.flop_count();
        let t = target(2, &["avx512f"]);
        let ok = record("[]", vec![1e-3]);
        assert_eq!(check_record(&ok, &dag, flops, &t), Ok(()));
        for (steps, want) in [
            (r#"[["SP",2,7,64,[8],1]]"#, "do not replay"),
            (r#"[["SP",99,0,64,[8],1]]"#, "do not replay"),
        ] {
            let e = check_record(&record(steps, vec![1e-3]), &dag, flops, &t).unwrap_err();
            assert!(e.contains(want), "{steps}: {e}");
        }
        // 524288 FLOPs in 2e-9 s is 262 TFLOP/s; the peak is 1.5.
        let e = check_record(&record("[]", vec![1e-3, 2e-9]), &dag, flops, &t).unwrap_err();
        assert!(
            e.contains("faster than") && e.contains("1536 GFLOP/s"),
            "{e}"
        );
        // An error's costs are not times.
        let err = NewRecord {
            error_code: ErrorCode::RunTimeout.code(),
            ..record("[]", vec![0.0])
        };
        assert_eq!(check_record(&err, &dag, flops, &t), Ok(()));
        let invalid = NewRecord {
            error_code: ErrorCode::InvalidSchedule.code(),
            ..record(r#"[["SP",99,0,64,[8],1]]"#, vec![])
        };
        assert_eq!(check_record(&invalid, &dag, flops, &t), Ok(()));
        assert!(check_target("t", &target(0, &[])).is_err());
        let mut shown = target(2, &[]);
        shown.cpu_model = "fast\x1b[2J".into();
        let e = check_target("target_json", &shown).unwrap_err();
        assert!(e.starts_with("target_json.cpu_model holds"), "{e}");
    }
}
