//! A workload's structure: its canonical form (`ComputeDag::canonical`) with every extent taken
//! out, so that a matmul 512x512x512 and a matmul 1x768x3072 share it while a matmul and a
//! batch matmul, or a conv of stride 1 and one of stride 2, do not.
//!
//! Taken out: each stage's shape and reduction extents (their ranks stay), the bounds and
//! offsets that conditions compare indices with (a padding guard's `y - 1 < 56` depends on the
//! extent), and the values of float constants (a mean's `1/768`). Kept: the operations, the
//! access coefficients (strides, dilations) and the load offsets (padding).

use crate::ir::ComputeDag;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The extent-free canonical form.
pub fn structure(dag: &ComputeDag) -> String {
    let mut v: Value = serde_json::from_str(&dag.canonical()).expect("the canonical form is JSON");
    if let Value::Array(stages) = &mut v {
        for s in stages {
            let Value::Object(m) = s else { continue };
            for (key, rank) in [("shape", "rank"), ("reduce_extents", "reduce_rank")] {
                if let Some(Value::Array(a)) = m.remove(key) {
                    m.insert(rank.into(), a.len().into());
                }
            }
            if let Some(body) = m.get_mut("body") {
                strip(body);
            }
        }
    }
    v.to_string()
}

/// A value expression with its extent-dependent numbers zeroed (see the module doc).
fn strip(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                match (k.as_str(), &mut *x) {
                    ("const", x) => *x = Value::from(0),
                    // A condition on indices, `["lt", a, b]`: only which indices it compares.
                    ("index", Value::Array(parts)) => {
                        for p in parts.iter_mut() {
                            if let Value::Object(a) = p {
                                a.insert("offset".into(), Value::from(0));
                            }
                        }
                    }
                    (_, x) => strip(x),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(strip),
        _ => {}
    }
}

/// A short stable key of the structure and the layout-free inputs (which change the kernel as
/// they change the workload key).
pub fn structure_key(dag: &ComputeDag, layout_free: &[usize]) -> String {
    let text = format!("{} layout_free={layout_free:?}", structure(dag));
    Sha256::digest(text.as_bytes())[..12]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every extent of the workload, in canonical order (each stage's shape, then its reduction
/// extents): two workloads of one structure have vectors of the same length.
pub fn extents(dag: &ComputeDag) -> Vec<i64> {
    dag.stages
        .iter()
        .flat_map(|s| {
            s.shape
                .iter()
                .copied()
                .chain(s.reduce_axes().iter().map(|a| a.extent))
        })
        .collect()
}

/// How far apart two workloads of one structure are: the sum of the absolute log-ratios of
/// their extents (0 for the same shapes; doubling one extent adds ln 2). `None` when the
/// vectors differ in length (not one structure).
pub fn distance(a: &[i64], b: &[i64]) -> Option<f64> {
    log_distance(&log_extents(a), &log_extents(b))
}

/// The natural logarithms of extents (each at least 1), what `log_distance` compares: a
/// lookup among thousands of tuned workloads keeps theirs instead of taking a logarithm of
/// every extent of every workload for every question.
pub fn log_extents(extents: &[i64]) -> Vec<f64> {
    extents.iter().map(|&x| (x.max(1) as f64).ln()).collect()
}

/// `distance` of two workloads given their `log_extents`, rounded to 1e-9: differences of
/// logarithms that are equal in exact arithmetic (64 against 32 and against 128) may differ
/// in the last bit, and equal distances must compare equal (a lookup breaks ties by key).
pub fn log_distance(a: &[f64], b: &[f64]) -> Option<f64> {
    (a.len() == b.len()).then(|| {
        let d: f64 = a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum();
        (d * 1e9).round() / 1e9
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{self, Window};

    fn key(dag: &ComputeDag) -> String {
        structure_key(dag, &[])
    }

    fn conv(c: i64, h: i64, f: i64, stride: i64, pad: i64) -> ComputeDag {
        let w = Window {
            kh: 3,
            kw: 3,
            stride,
            pad,
            dilation: 1,
        };
        ops::conv2d_nchw(1, c, h, h, f, w, true, true).unwrap()
    }

    #[test]
    fn one_operator_at_other_extents_shares_its_structure() {
        let a = ops::matmul(512, 512, 512).unwrap();
        let b = ops::matmul(1, 768, 3072).unwrap();
        assert_eq!(key(&a), key(&b));
        assert_ne!(a.workload_key(), b.workload_key());
        assert_eq!(key(&conv(64, 56, 64, 1, 1)), key(&conv(128, 28, 256, 1, 1)));
        assert_eq!(
            key(&ops::softmax(128, 1000).unwrap()),
            key(&ops::softmax(1536, 128).unwrap())
        );
    }

    #[test]
    fn other_operators_strides_padding_or_options_do_not() {
        let mm = ops::matmul(64, 64, 64).unwrap();
        let keys = [
            key(&mm),
            key(&ops::batch_matmul(2, 64, 64, 64).unwrap()),
            key(&ops::dense(64, 64, 64, true, false).unwrap()),
            key(&ops::dense(64, 64, 64, true, true).unwrap()),
            key(&conv(64, 56, 64, 1, 1)),
            key(&conv(64, 56, 64, 2, 1)),
            key(&conv(64, 56, 64, 1, 0)),
            structure_key(&mm, &[1]),
        ];
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b, "{keys:?}");
            }
        }
    }

    #[test]
    fn distance_is_the_sum_of_log_ratios() {
        let a = extents(&ops::matmul(64, 64, 64).unwrap());
        let b = extents(&ops::matmul(128, 64, 64).unwrap());
        assert_eq!(distance(&a, &a), Some(0.0));
        let d = distance(&a, &b).unwrap();
        assert!(d > 0.0 && distance(&b, &a) == Some(d));
        let c = extents(&ops::matmul(256, 64, 64).unwrap());
        assert!(distance(&a, &c).unwrap() > d);
        assert_eq!(distance(&a, &extents(&ops::softmax(4, 4).unwrap())), None);
        // Zero and negative extents count as 1, as before the logarithms were kept.
        assert_eq!(distance(&[0, -3], &[1, 1]), Some(0.0));
        assert!((distance(&[8], &[2]).unwrap() - 4f64.ln()).abs() < 1e-9);
        // Equal ratios are equal distances, whichever way they go.
        assert_eq!(distance(&[64], &[32]), distance(&[64], &[128]));
        assert_eq!(distance(&[3, 64], &[6, 64]), distance(&[12, 64], &[6, 64]));
    }
}
