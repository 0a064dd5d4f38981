//! The cost model's error: bad input, or XGBoost's own failure.

use tunehub_engine::search::CostModelError;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("invalid input: {0}")]
    Invalid(String),
    #[error("xgboost: {0}")]
    Xgb(String),
}

impl From<xgb::XGBError> for ModelError {
    fn from(e: xgb::XGBError) -> Self {
        ModelError::Xgb(e.to_string())
    }
}

impl From<ModelError> for CostModelError {
    fn from(e: ModelError) -> Self {
        match e {
            ModelError::Invalid(m) => CostModelError::Invalid(m),
            ModelError::Xgb(m) => CostModelError::Backend(m),
        }
    }
}
