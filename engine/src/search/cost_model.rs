//! The cost model seam: the search asks a model to rank lowered candidates and tells it what
//! measurement found. Implementations: [`RandomModel`] here (the baseline every learned model is
//! compared against), the XGBoost model in the `tunehub-costmodel` crate.

use crate::lower::LoweredFunc;
use crate::measure::MeasureResult;
use crate::task::Task;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Debug, thiserror::Error)]
pub enum CostModelError {
    /// A call the model cannot serve (an empty batch, mismatched lengths, a corrupt file).
    #[error("invalid input: {0}")]
    Invalid(String),
    /// The model's library failed.
    #[error("model backend: {0}")]
    Backend(String),
}

/// Ranks candidate programs of one task. Scores are only compared within a task and within one
/// call: higher means predicted faster.
pub trait CostModel: Send {
    /// One score per program, in order. An empty batch is an `Invalid` error.
    fn predict(
        &mut self,
        task: &Task,
        programs: &[&LoweredFunc],
    ) -> Result<Vec<f32>, CostModelError>;

    /// Learn from measured programs. Failed measurements are passed too (a model may treat them
    /// as the worst of the task); `programs` and `results` have the same length.
    fn update(
        &mut self,
        task: &Task,
        programs: &[&LoweredFunc],
        results: &[MeasureResult],
    ) -> Result<(), CostModelError>;

    /// A short name for logs and benchmark tables.
    fn name(&self) -> &str;

    /// The model's own serialisation, for a model worth keeping (per target) and reloading
    /// later; `None` for a model with nothing learned to keep.
    fn save_bytes(&self) -> Option<Vec<u8>> {
        None
    }
}

/// Uniform random scores: the search without a model.
pub struct RandomModel {
    rng: ChaCha8Rng,
}

impl RandomModel {
    pub fn new(seed: u64) -> Self {
        RandomModel {
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }
}

impl CostModel for RandomModel {
    fn predict(
        &mut self,
        _task: &Task,
        programs: &[&LoweredFunc],
    ) -> Result<Vec<f32>, CostModelError> {
        if programs.is_empty() {
            return Err(CostModelError::Invalid("empty batch".into()));
        }
        Ok(programs.iter().map(|_| self.rng.r#gen::<f32>()).collect())
    }

    fn update(
        &mut self,
        _task: &Task,
        programs: &[&LoweredFunc],
        results: &[MeasureResult],
    ) -> Result<(), CostModelError> {
        if programs.len() != results.len() {
            return Err(CostModelError::Invalid(format!(
                "{} programs but {} results",
                programs.len(),
                results.len()
            )));
        }
        Ok(())
    }

    fn name(&self) -> &str {
        "random"
    }
}
