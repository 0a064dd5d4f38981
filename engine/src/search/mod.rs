//! Ansor-style search: sketches of a DAG, random annotation into complete schedules, mutation,
//! an evolutionary strategy ranked by a cost model, and a task scheduler that shares a job's
//! trials among its tasks.

pub mod cost_model;

pub use cost_model::{CostModel, CostModelError, RandomModel};
