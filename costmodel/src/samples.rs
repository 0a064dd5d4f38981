//! Training samples and labels shared by every model: the stores' features of a measured
//! program, its cost, and Ansor's label (the task's best cost over this cost: normalised
//! throughput in (0, 1], 0 for a failed measurement).

use crate::features::N_FEATURES;

/// One measured program: the features of each of its stores, and its best cost in seconds
/// (infinity when the measurement failed).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub stores: Vec<[f32; N_FEATURES]>,
    pub cost: f64,
}

/// The samples of one task (one workload on one target).
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSamples {
    pub key: String,
    pub samples: Vec<Sample>,
}

impl TaskSamples {
    pub fn new(key: impl Into<String>) -> Self {
        TaskSamples {
            key: key.into(),
            samples: vec![],
        }
    }

    /// Normalised throughput per sample: best / cost, in (0, 1]; 0 for failures (the worst),
    /// all 0 when nothing in the task succeeded.
    pub fn labels(&self) -> Vec<f32> {
        labels(self.samples.iter().map(|s| s.cost))
    }
}

pub fn labels(costs: impl Iterator<Item = f64> + Clone) -> Vec<f32> {
    let best = costs
        .clone()
        .filter(|c| c.is_finite() && *c > 0.0)
        .fold(f64::INFINITY, f64::min);
    costs
        .map(|c| {
            if best.is_finite() && c.is_finite() && c > 0.0 {
                (best / c) as f32
            } else {
                0.0
            }
        })
        .collect()
}

/// Width of a per-program vector (see [`program_vector`]).
pub const PROGRAM_FEATURES: usize = 2 * N_FEATURES + 1;

/// One vector per program for the models that need one (XGBoost's ranking objectives, the
/// linear baseline): the per-feature maximum and sum over the stores (the features are already
/// `log2(1 + x)` for counts, so the max picks the dominant store and the sum keeps the rest),
/// and the number of stores.
pub fn program_vector(stores: &[[f32; N_FEATURES]], out: &mut Vec<f32>) {
    let base = out.len();
    out.resize(base + PROGRAM_FEATURES, 0.0);
    let (max, rest) = out[base..].split_at_mut(N_FEATURES);
    let (sum, count) = rest.split_at_mut(N_FEATURES);
    max.fill(f32::NEG_INFINITY);
    for s in stores {
        for i in 0..N_FEATURES {
            max[i] = max[i].max(s[i]);
            sum[i] += s[i];
        }
    }
    if stores.is_empty() {
        max.fill(0.0);
    }
    count[0] = stores.len() as f32;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_normalised_throughput_and_failures_are_zero() {
        let l = labels([2.0, 1.0, f64::INFINITY, 4.0].into_iter());
        assert_eq!(l, vec![0.5, 1.0, 0.0, 0.25]);
        assert_eq!(labels([f64::INFINITY].into_iter()), vec![0.0]);
    }

    #[test]
    fn program_vector_is_max_sum_and_count() {
        let mut a = [0.0f32; N_FEATURES];
        let mut b = [0.0f32; N_FEATURES];
        a[3] = 2.0;
        b[3] = 5.0;
        b[7] = 1.0;
        let mut v = vec![];
        program_vector(&[a, b], &mut v);
        assert_eq!(v.len(), PROGRAM_FEATURES);
        assert_eq!(v[3], 5.0);
        assert_eq!(v[N_FEATURES + 3], 7.0);
        assert_eq!(v[7], 1.0);
        assert_eq!(v[2 * N_FEATURES], 2.0);
    }
}
