//! What a measurement must be before it is stored: the one rule the fleet's report check and
//! the driver's commit both apply (the records table refuses a NaN cost, and a NaN time is a
//! NULL in a NOT NULL column: either would fail the whole batch, and with it the job).

use tunehub_engine::measure::{ErrorCode, MeasureResult};
use tunehub_engine::target::Target;

/// The most timed repeats a job may ask for (`MeasureOptions.repeat`), so the most costs a
/// candidate has.
pub const MAX_COSTS: usize = 1000;

/// Why `r` cannot be stored, if it cannot: a success has 1 to `MAX_COSTS` costs, each a finite
/// number of seconds above zero (a zero time is no measurement: it would be an infinite
/// GFLOP/s best); a failure has none; build and run times are finite and not negative.
pub fn check_result(r: &MeasureResult) -> Result<(), String> {
    if r.error == ErrorCode::NoError {
        if r.costs.is_empty() {
            return Err("a success (error code 0) without costs".into());
        }
        if r.costs.len() > MAX_COSTS {
            return Err(format!(
                "{} costs: more than the {MAX_COSTS} repeats a job may ask for",
                r.costs.len()
            ));
        }
        if let Some((i, c)) = r
            .costs
            .iter()
            .enumerate()
            .find(|(_, c)| !c.is_finite() || **c <= 0.0)
        {
            return Err(format!(
                "cost {i} is {c}: not a finite number of seconds above zero"
            ));
        }
    } else if !r.costs.is_empty() {
        return Err(format!(
            "{} costs with error code {} ({}): a failed candidate has no time",
            r.costs.len(),
            r.error.code(),
            r.error.name()
        ));
    }
    for (name, v) in [("build_s", r.build_s), ("run_s", r.run_s)] {
        if !v.is_finite() || v < 0.0 {
            return Err(format!(
                "{name} is {v}: not a finite, non-negative number of seconds"
            ));
        }
    }
    Ok(())
}

/// The clock assumed for a target's peak: the target does not record its frequency, and no
/// CPU core runs much above 6 GHz.
pub const ASSUMED_MAX_HZ: f64 = 6.0e9;
/// f32 vector operations per core and cycle assumed for a peak: two FMA pipes, doubled so
/// that operations counted as one flop each (max, add on further pipes) stay under it.
pub const VECTOR_OPS_PER_CYCLE: f64 = 4.0;

/// The fastest a target could compute, in FLOP/s: every core issuing
/// [`VECTOR_OPS_PER_CYCLE`] full-width FMAs (2 flops per lane) at [`ASSUMED_MAX_HZ`]. A
/// generous bound: real kernels reach a fraction of it.
pub fn peak_flops(target: &Target) -> f64 {
    target.cores.max(1) as f64
        * f64::from(target.vector_lanes_f32())
        * 2.0
        * VECTOR_OPS_PER_CYCLE
        * ASSUMED_MAX_HZ
}

/// Why the costs of a success cannot be real: one beats the time `target` needs for the
/// workload's `flops` at its peak ([`peak_flops`]). A worker or a file reporting such a time
/// would otherwise make an impossible kernel the best.
pub fn check_speed(costs: &[f64], flops: u64, target: &Target) -> Result<(), String> {
    let peak = peak_flops(target);
    let fastest = flops as f64 / peak;
    match costs.iter().find(|&&c| c < fastest) {
        None => Ok(()),
        Some(c) => Err(format!(
            "cost {c:e} s is faster than target {} can compute the workload's {flops} FLOPs \
             (at least {fastest:e} s at a peak of {:.0} GFLOP/s: {} cores x {} f32 lanes x \
             {} FMA x 2 flops x {} GHz)",
            target.key(),
            peak / 1e9,
            target.cores,
            target.vector_lanes_f32(),
            VECTOR_OPS_PER_CYCLE,
            ASSUMED_MAX_HZ / 1e9
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(costs: Vec<f64>) -> MeasureResult {
        MeasureResult {
            costs,
            ..MeasureResult::error(ErrorCode::NoError, "")
        }
    }

    #[test]
    fn a_real_measurement_passes_and_each_bad_field_is_named() {
        assert!(check_result(&ok(vec![1e-3, 2e-3])).is_ok());
        assert!(check_result(&MeasureResult::error(ErrorCode::CompileError, "cc")).is_ok());
        let cases: Vec<(MeasureResult, &str)> = vec![
            (ok(vec![]), "without costs"),
            (ok(vec![f64::NAN]), "cost 0 is NaN"),
            (ok(vec![1e-3, -1.0]), "cost 1 is -1"),
            (ok(vec![0.0]), "cost 0 is 0"),
            (ok(vec![f64::INFINITY]), "cost 0 is inf"),
            (ok(vec![1e-3; MAX_COSTS + 1]), "1001 costs"),
            (
                MeasureResult {
                    costs: vec![1e-3],
                    ..MeasureResult::error(ErrorCode::WrongAnswer, "")
                },
                "a failed candidate has no time",
            ),
            (
                MeasureResult {
                    build_s: f64::NAN,
                    ..ok(vec![1e-3])
                },
                "build_s is NaN",
            ),
            (
                MeasureResult {
                    run_s: -2.0,
                    ..ok(vec![1e-3])
                },
                "run_s is -2",
            ),
        ];
        for (r, want) in cases {
            let e = check_result(&r).expect_err(want);
            assert!(e.contains(want), "{e:?} should say {want:?}");
        }
    }
}
