//! A worker's report checked at the door: a device is less trusted than the server, so every
//! field of every candidate is checked before anything of it reaches a batch, the search or
//! the database. A refused report is INVALID_ARGUMENT to the worker, counts against it like a
//! piece that failed entirely, and its candidates are measured elsewhere (`registry`).

use crate::checks::limits::MAX_BATCH;
use crate::jobs::result_check::check_result;
use tunehub_engine::measure::{ErrorCode, MeasureResult};
use tunehub_proto::v1 as pb;

/// The longest error message kept per candidate, in bytes. Longer ones are cut, not refused: a
/// compiler that pours out pages of errors is a broken device, not a lying one, and its report
/// is what tells the operator so (the engine itself keeps 4 KiB of a compiler's output).
pub const MAX_ERROR_MSG: usize = 8192;

/// The report's candidates as measurements, or why it is refused (naming the candidate and the
/// field). That the count matches the piece is checked against the lease (`Fleet::report`).
pub fn check_report(results: Vec<pb::MeasuredCandidate>) -> Result<Vec<MeasureResult>, String> {
    if results.len() > MAX_BATCH as usize {
        return Err(format!(
            "{} results: more than a batch holds ({MAX_BATCH})",
            results.len()
        ));
    }
    results
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            let error = ErrorCode::from_code(m.error_code)
                .ok_or_else(|| format!("candidate {i}: unknown error code {}", m.error_code))?;
            let r = MeasureResult {
                costs: m.costs,
                error,
                error_msg: cut(m.error_msg),
                build_s: m.build_s,
                run_s: m.run_s,
                noisy: m.noisy,
            };
            check_result(&r).map_err(|e| format!("candidate {i}: {e}"))?;
            Ok(r)
        })
        .collect()
}

/// `msg` cut to `MAX_ERROR_MSG` bytes at a character boundary, saying so.
fn cut(mut msg: String) -> String {
    if msg.len() > MAX_ERROR_MSG {
        let mut end = MAX_ERROR_MSG;
        while !msg.is_char_boundary(end) {
            end -= 1;
        }
        msg.truncate(end);
        msg.push_str(" [cut by the server]");
    }
    msg
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ok() -> pb::MeasuredCandidate {
        pb::MeasuredCandidate {
            costs: vec![1e-3],
            error_code: 0,
            error_msg: String::new(),
            build_s: 0.5,
            run_s: 0.1,
            noisy: false,
        }
    }

    #[test]
    fn each_bad_field_is_refused_naming_the_candidate() {
        let bad: Vec<(pb::MeasuredCandidate, &str)> = vec![
            (
                pb::MeasuredCandidate {
                    costs: vec![f64::NAN],
                    ..ok()
                },
                "candidate 1: cost 0 is NaN",
            ),
            (
                pb::MeasuredCandidate {
                    costs: vec![-1e-3],
                    ..ok()
                },
                "candidate 1: cost 0 is -0.001",
            ),
            (
                pb::MeasuredCandidate {
                    build_s: f64::NAN,
                    run_s: -1.0,
                    ..ok()
                },
                "candidate 1: build_s is NaN",
            ),
            (
                pb::MeasuredCandidate {
                    error_code: 42,
                    ..ok()
                },
                "candidate 1: unknown error code 42",
            ),
            (
                pb::MeasuredCandidate {
                    costs: vec![],
                    ..ok()
                },
                "candidate 1: a success (error code 0) without costs",
            ),
        ];
        for (c, want) in bad {
            let e = check_report(vec![ok(), c]).expect_err(want);
            assert!(e.starts_with(want), "{e:?} should start with {want:?}");
        }
        let e = check_report(vec![ok(); MAX_BATCH as usize + 1]).unwrap_err();
        assert!(e.contains("more than a batch"), "{e}");
    }

    #[test]
    fn a_long_message_is_cut_at_a_character_boundary() {
        let c = pb::MeasuredCandidate {
            costs: vec![],
            error_code: ErrorCode::CompileError.code(),
            error_msg: "é".repeat(MAX_ERROR_MSG),
            ..ok()
        };
        let r = check_report(vec![c]).unwrap();
        assert!(r[0].error_msg.len() <= MAX_ERROR_MSG + 32);
        assert!(r[0].error_msg.ends_with("[cut by the server]"));
    }

    fn any_f64() -> impl Strategy<Value = f64> {
        prop_oneof![
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(0.0),
            Just(-0.0),
            -1.0..1.0f64,
            any::<f64>(),
        ]
    }

    prop_compose! {
        pub(crate) fn any_candidate()(
            costs in prop::collection::vec(any_f64(), 0..4),
            error_code in prop_oneof![0..8i32, any::<i32>()],
            error_msg in ".{0,40}",
            build_s in any_f64(),
            run_s in any_f64(),
            noisy: bool,
        ) -> pb::MeasuredCandidate {
            pb::MeasuredCandidate { costs, error_code, error_msg, build_s, run_s, noisy }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        /// Any report is either a list of storable measurements or one clear refusal naming
        /// the candidate; never a panic.
        #[test]
        fn any_report_is_checked_or_clearly_refused(
            cands in prop::collection::vec(any_candidate(), 0..6)
        ) {
            let n = cands.len();
            match check_report(cands) {
                Ok(rs) => {
                    prop_assert_eq!(rs.len(), n);
                    for r in &rs {
                        prop_assert!(check_result(r).is_ok());
                    }
                }
                Err(e) => prop_assert!(e.starts_with("candidate "), "{}", e),
            }
        }
    }
}
