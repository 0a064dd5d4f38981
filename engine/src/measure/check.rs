//! Output check: a kernel's output against the reference interpreter's.
//!
//! Element `i` passes when `|got - ref| <= RTOL * max(|ref|, rms(ref)) + ATOL`. The relative
//! term is floored at the tensor's RMS because a reduction's elements near zero carry the
//! rounding error of the large terms that cancelled there, not of their own size. RTOL = 1e-3
//! sits far above f32 accumulation error over the reductions we tune (K * eps ~ 1e-4 at
//! K = 1024, and in practice ~sqrt(K) * eps) and far below a missing or doubled term (an error
//! of order rms(ref) / sqrt(K) or more).

use crate::ir::DType;

/// Relative tolerance.
pub const RTOL: f64 = 1e-3;
/// Absolute tolerance.
pub const ATOL: f64 = 1e-6;

/// Compares with the default tolerances; the error names the first mismatch and the count.
pub fn compare(got: &[f32], expected: &[f32]) -> Result<(), String> {
    compare_with(got, expected, RTOL, ATOL)
}

/// Compares an output of type `dtype` with its reference: i32 exactly, f32 with [`compare`]'s
/// tolerances, 8-bit (requantized) within one unit in at most [`TIES_PER`]'s share of the
/// elements and exactly in the rest.
///
/// An 8-bit output is rounded from a value the kernel computes in f32 and the reference in
/// f64: where the two straddle a half they round to neighbours, as ONNX Runtime's kernels and
/// ONNX's reference do. That takes a value within f32's rounding (2^-24 relative) of a half,
/// about one element in 10^5 on the check data; a kernel that truncates, saturates one short
/// or adds its zero point before rounding is one unit off in a large share of them.
pub fn compare_typed(got: &[f64], expected: &[f64], dtype: DType) -> Result<(), String> {
    if !dtype.is_int() {
        let f = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
        return compare(&f(got), &f(expected));
    }
    if got.len() != expected.len() {
        return Err(format!(
            "length mismatch: got {} elements, expected {}",
            got.len(),
            expected.len()
        ));
    }
    let units = if dtype.is_8bit() { 1.0 } else { 0.0 };
    let off = |i: &usize| got[*i] != expected[*i];
    let wrong: Vec<usize> = (0..got.len())
        // NaN (never written by an integer store) is as wrong as any value out of range.
        .filter(|&i| {
            let d = (got[i] - expected[i]).abs();
            d.is_nan() || d > units
        })
        .collect();
    let ties = match dtype.is_8bit() {
        true => (0..got.len()).filter(off).collect(),
        false => vec![],
    };
    let allowed = got.len() / TIES_PER + 1;
    match (wrong.first(), ties.len() > allowed) {
        (Some(&i), _) => Err(format!(
            "{} of {} elements differ; first at flat index {i}: got {}, expected {} ({})",
            wrong.len(),
            got.len(),
            got[i],
            expected[i],
            if dtype.is_8bit() {
                "requantized outputs compare within one unit"
            } else {
                "integers compare exactly"
            }
        )),
        (None, true) => Err(format!(
            "{} of {} requantized elements are one unit off (at most {allowed} may round a \
             tie the other way); first at flat index {}: got {}, expected {}",
            ties.len(),
            got.len(),
            ties[0],
            got[ties[0]],
            expected[ties[0]]
        )),
        (None, false) => Ok(()),
    }
}

/// A requantized output may be one unit off in one element per this many, and one more.
pub const TIES_PER: usize = 256;

/// Compares elementwise. NaN matches only NaN; an infinity only the same infinity.
pub fn compare_with(got: &[f32], expected: &[f32], rtol: f64, atol: f64) -> Result<(), String> {
    if got.len() != expected.len() {
        return Err(format!(
            "length mismatch: got {} elements, expected {}",
            got.len(),
            expected.len()
        ));
    }
    let rms = rms(expected);
    let tol = |e: f64| rtol * e.abs().max(rms) + atol;
    let ok = |g: f32, e: f32| {
        if e.is_nan() || g.is_nan() {
            e.is_nan() && g.is_nan()
        } else if e.is_infinite() || g.is_infinite() {
            g == e
        } else {
            ((g as f64) - (e as f64)).abs() <= tol(e as f64)
        }
    };
    let mut first = None;
    let mut count = 0usize;
    for (i, (&g, &e)) in got.iter().zip(expected).enumerate() {
        if !ok(g, e) {
            count += 1;
            first.get_or_insert((i, g, e));
        }
    }
    match first {
        None => Ok(()),
        Some((i, g, e)) => Err(format!(
            "{count} of {} elements differ; first at flat index {i}: got {g:e}, expected {e:e} (tolerance {:.3e})",
            got.len(),
            tol(e as f64)
        )),
    }
}

/// Root mean square of the finite elements (0 when there are none).
fn rms(v: &[f32]) -> f64 {
    let (sum, n) = v
        .iter()
        .filter(|x| x.is_finite())
        .fold((0.0f64, 0usize), |(s, n), &x| {
            (s + (x as f64).powi(2), n + 1)
        });
    if n == 0 { 0.0 } else { (sum / n as f64).sqrt() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_and_within_tolerance_pass() {
        assert_eq!(compare(&[], &[]), Ok(()));
        assert_eq!(compare(&[1.0, -2.0, 3.5], &[1.0, -2.0, 3.5]), Ok(()));
        // 5e-4 relative is inside 1e-3.
        assert_eq!(compare(&[1000.5, 1.0], &[1000.0, 1.0]), Ok(()));
        // Near zero the RMS floor applies: 1e-4 off on a tensor of RMS ~1 passes.
        assert_eq!(compare(&[1e-4, 1.0, -1.0], &[0.0, 1.0, -1.0]), Ok(()));
        // All-zero reference: only atol.
        assert_eq!(compare(&[5e-7], &[0.0]), Ok(()));
        assert!(compare(&[5e-6], &[0.0]).is_err());
    }

    #[test]
    fn mismatches_are_reported_with_index_and_count() {
        let exp = vec![1.0f32; 100];
        let mut got = exp.clone();
        got[7] = 2.0;
        got[42] = 0.0;
        let msg = compare(&got, &exp).unwrap_err();
        assert!(msg.contains("2 of 100"), "{msg}");
        assert!(msg.contains("flat index 7"), "{msg}");
        assert!(msg.contains("got 2e0"), "{msg}");
        // A missing term in a sum of 3 is far outside.
        assert!(compare(&[2.0], &[3.0]).is_err());
        // 2e-3 relative is outside.
        assert!(compare(&[1002.0], &[1000.0]).is_err());
    }

    #[test]
    fn nan_and_infinity_match_only_themselves() {
        assert_eq!(compare(&[f32::NAN], &[f32::NAN]), Ok(()));
        let msg = compare(&[1.0, f32::NAN], &[1.0, 1.0]).unwrap_err();
        assert!(msg.contains("index 1") && msg.contains("NaN"), "{msg}");
        assert!(compare(&[1.0], &[f32::NAN]).is_err());
        assert_eq!(compare(&[f32::INFINITY], &[f32::INFINITY]), Ok(()));
        assert!(compare(&[f32::NEG_INFINITY], &[f32::INFINITY]).is_err());
        assert!(compare(&[f32::INFINITY], &[1e30]).is_err());
        assert!(compare(&[1e30], &[f32::INFINITY]).is_err());
    }

    #[test]
    fn integers_compare_exactly() {
        assert_eq!(
            compare_typed(&[3.0, -7.0], &[3.0, -7.0], DType::I32),
            Ok(())
        );
        // One unit off a large sum is inside f32's tolerance, never an integer's.
        let msg = compare_typed(&[1_000_001.0], &[1_000_000.0], DType::I32).unwrap_err();
        assert!(msg.contains("1 of 1") && msg.contains("exactly"), "{msg}");
        assert_eq!(
            compare_typed(&[1_000_001.0], &[1_000_000.0], DType::F32),
            Ok(())
        );
        assert!(compare_typed(&[1.0], &[1.0, 2.0], DType::I32).is_err());
    }

    /// A requantized output may round a tie the other way, in few elements, never further.
    #[test]
    fn requantized_outputs_compare_within_one_unit() {
        let want = [0.0, 17.0, 255.0];
        assert_eq!(compare_typed(&[0.0, 16.0, 255.0], &want, DType::U8), Ok(()));
        let msg = compare_typed(&[0.0, 19.0, 255.0], &want, DType::U8).unwrap_err();
        assert!(msg.contains("1 of 3") && msg.contains("one unit"), "{msg}");
        // Two of three one unit off: truncation or a saturation one short, not ties.
        let msg = compare_typed(&[1.0, 16.0, 255.0], &want, DType::U8).unwrap_err();
        assert!(msg.contains("2 of 3") && msg.contains("tie"), "{msg}");
        let many: Vec<f64> = (0..600).map(|i| f64::from(i % 200)).collect();
        let mut near = many.clone();
        near[7] += 1.0;
        near[300] -= 1.0;
        near[400] -= 1.0;
        // 600 / 256 + 1 = 3 may.
        assert_eq!(compare_typed(&near, &many, DType::U8), Ok(()));
        near[500] += 1.0;
        assert!(compare_typed(&near, &many, DType::U8).is_err());
        assert!(compare_typed(&[-126.0], &[-128.0], DType::I8).is_err());
        assert!(compare_typed(&[f64::NAN], &[0.0], DType::I8).is_err());
    }

    #[test]
    fn length_mismatch_is_an_error() {
        let msg = compare(&[1.0, 2.0], &[1.0]).unwrap_err();
        assert!(
            msg.contains("length mismatch: got 2 elements, expected 1"),
            "{msg}"
        );
    }
}
