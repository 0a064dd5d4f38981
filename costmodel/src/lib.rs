//! tunehub's learned cost model: Ansor-style program features and the models that rank
//! programs by them.
//!
//! # Layout
//!
//! - [`features`]: a lowered program to feature vectors, one per buffer store.
//! - [`samples`]: training samples and labels shared by every model.
//! - [`xgb_model`]: XGBoost ranking (Ansor's pack-sum objective, or XGBoost's own).
//! - [`predictor`]: prediction from a dense matrix through XGBoost's C API.
//! - [`linear`]: the linear baseline.
//! - [`dataset`]: measured records as a JSON-lines file, replayed into samples.
//! - [`eval`]: the ranking metrics and cross-validation the models are judged by.
//! - [`error`]: the models' error.

pub mod dataset;
pub mod error;
pub mod eval;
pub mod features;
pub mod linear;
pub mod predictor;
pub mod samples;
pub mod xgb_model;

pub use error::ModelError;
pub use xgb_model::{HeadParams, Objective, XgbModel, XgbParams};
