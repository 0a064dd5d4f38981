//! tunehub's learned cost model. [`features`] turns a lowered program into Ansor-style feature
//! vectors, one per buffer store; [`xgb_model`] ranks programs with XGBoost (Ansor's pack-sum
//! objective, or XGBoost's own ranking objectives); [`linear`] is the linear baseline;
//! [`dataset`] and [`eval`] hold the measured records and the ranking metrics the models are
//! judged by.

pub mod dataset;
pub mod eval;
pub mod features;
pub mod linear;
pub mod predictor;
pub mod samples;
pub mod xgb_model;

pub use xgb_model::{HeadParams, Objective, XgbModel, XgbParams};
