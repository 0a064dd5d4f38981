//! The linear baseline of the evaluation: ridge regression of the normalised throughput on the
//! per-program vector ([`program_vector`]), through linfa's least squares.
//!
//! Ridge, not plain least squares: the program vector has constant and collinear columns
//! (one-hots, unused buffer slots), which make the normal equations singular. The penalty is
//! added the textbook way, as `sqrt(lambda) * I` rows with zero targets appended to the
//! standardised data, so linfa's QR solver sees a full-rank problem.

use crate::error::ModelError;
use crate::features::N_FEATURES;
use crate::samples::{PROGRAM_FEATURES, TaskSamples, program_vector};
use crate::xgb_model::validate;
use linfa::prelude::*;
use linfa_linear::LinearRegression;
use ndarray::{Array1, Array2};

pub struct LinearModel {
    lambda: f64,
    /// Per-column mean and scale of the training data, then the weights (none before training).
    fitted: Option<(Vec<f64>, Vec<f64>, Array1<f64>)>,
}

impl LinearModel {
    pub fn new(lambda: f64) -> Self {
        LinearModel {
            lambda,
            fitted: None,
        }
    }

    pub fn fit(&mut self, tasks: &[TaskSamples]) -> Result<(), ModelError> {
        let mut rows = vec![];
        let mut ys = vec![];
        for t in tasks {
            for (s, y) in t.samples.iter().zip(t.labels()) {
                if !s.stores.is_empty() {
                    program_vector(&s.stores, &mut rows);
                    ys.push(f64::from(y));
                }
            }
        }
        let n = ys.len();
        if n == 0 {
            return Err(ModelError::Invalid("no samples".into()));
        }
        let d = PROGRAM_FEATURES;
        let mut mean = vec![0.0; d];
        let mut scale = vec![0.0; d];
        for r in rows.chunks(d) {
            for j in 0..d {
                mean[j] += f64::from(r[j]) / n as f64;
            }
        }
        for r in rows.chunks(d) {
            for j in 0..d {
                scale[j] += (f64::from(r[j]) - mean[j]).powi(2) / n as f64;
            }
        }
        for s in &mut scale {
            // A constant column stays 0 after centring; its weight is then 0 by the penalty.
            *s = if *s > 1e-12 { s.sqrt() } else { 1.0 };
        }
        let ymean = ys.iter().sum::<f64>() / n as f64;
        let mut x = Array2::<f64>::zeros((n + d, d));
        let mut y = Array1::<f64>::zeros(n + d);
        for (i, r) in rows.chunks(d).enumerate() {
            for j in 0..d {
                x[[i, j]] = (f64::from(r[j]) - mean[j]) / scale[j];
            }
            y[i] = ys[i] - ymean;
        }
        for j in 0..d {
            x[[n + j, j]] = self.lambda.sqrt();
        }
        let fitted = LinearRegression::new()
            .with_intercept(false)
            .fit(&Dataset::new(x, y))
            .map_err(|e| ModelError::Invalid(format!("linear fit: {e}")))?;
        self.fitted = Some((mean, scale, fitted.params().clone()));
        Ok(())
    }

    pub fn predict_stores(
        &self,
        programs: &[&[[f32; N_FEATURES]]],
    ) -> Result<Vec<f32>, ModelError> {
        validate(programs)?;
        let (mean, scale, w) = self
            .fitted
            .as_ref()
            .ok_or_else(|| ModelError::Invalid("the linear model is not trained".into()))?;
        let mut v = Vec::with_capacity(PROGRAM_FEATURES);
        Ok(programs
            .iter()
            .map(|p| {
                v.clear();
                program_vector(p, &mut v);
                (0..PROGRAM_FEATURES)
                    .map(|j| (f64::from(v[j]) - mean[j]) / scale[j] * w[j])
                    .sum::<f64>() as f32
            })
            .collect())
    }
}
