//! A measured candidate: as reported (`NewRecord`, what `commit` takes) and as stored
//! (`Record`).

use serde::Serialize;
use tunehub_engine::measure::{ErrorCode, MeasureResult};

/// A candidate's measurement, as reported: what `commit` takes. The store derives the schedule
/// hash, the id, the mean cost and the time.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRecord {
    pub workload_key: String,
    pub target_key: String,
    /// The schedule's steps as JSON (the engine's `Schedule::to_json`); stored canonicalised.
    pub steps_json: String,
    /// Seconds per run, one per repeat; empty on error.
    pub costs: Vec<f64>,
    /// The engine's `ErrorCode::code()`; 0 = ok.
    pub error_code: i32,
    pub error_msg: String,
    pub noisy: bool,
    pub build_s: f64,
    pub run_s: f64,
    pub worker: Option<String>,
    /// When it was measured (Unix ms); `None`: now. Set by imports, which keep the original time.
    pub created_at: Option<i64>,
}

impl NewRecord {
    /// The record of one engine measurement.
    pub fn from_measure(
        workload_key: &str,
        target_key: &str,
        steps_json: String,
        result: &MeasureResult,
        worker: Option<&str>,
    ) -> Self {
        NewRecord {
            workload_key: workload_key.into(),
            target_key: target_key.into(),
            steps_json,
            costs: result.costs.clone(),
            error_code: result.error.code(),
            error_msg: result.error_msg.clone(),
            noisy: result.noisy,
            build_s: result.build_s,
            run_s: result.run_s,
            worker: worker.map(Into::into),
            created_at: None,
        }
    }

    /// The mean cost, when the candidate succeeded and has timings.
    pub fn mean_cost(&self) -> Option<f64> {
        (self.error_code == ErrorCode::NoError.code() && !self.costs.is_empty())
            .then(|| self.costs.iter().sum::<f64>() / self.costs.len() as f64)
    }

    /// Whether this record may become the best: a success whose time can be trusted.
    pub fn qualifies_for_best(&self) -> bool {
        self.mean_cost().is_some() && !self.noisy
    }
}

/// A stored record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Record {
    pub id: String,
    pub workload_key: String,
    pub target_key: String,
    pub schedule_hash: String,
    pub steps_json: String,
    pub costs: Vec<f64>,
    pub mean_cost: Option<f64>,
    pub error_code: i32,
    pub error_msg: String,
    pub noisy: bool,
    pub build_s: f64,
    pub run_s: f64,
    pub worker: Option<String>,
    /// Unix milliseconds.
    pub created_at: i64,
}

impl Record {
    /// The record as reported, to store it elsewhere (an import) with its original time.
    pub fn to_new(&self) -> NewRecord {
        NewRecord {
            workload_key: self.workload_key.clone(),
            target_key: self.target_key.clone(),
            steps_json: self.steps_json.clone(),
            costs: self.costs.clone(),
            error_code: self.error_code,
            error_msg: self.error_msg.clone(),
            noisy: self.noisy,
            build_s: self.build_s,
            run_s: self.run_s,
            worker: self.worker.clone(),
            created_at: Some(self.created_at),
        }
    }

    pub fn is_ok(&self) -> bool {
        self.error_code == ErrorCode::NoError.code() && self.mean_cost.is_some()
    }

    /// The engine's error code, if this build knows it.
    pub fn error(&self) -> Option<ErrorCode> {
        ErrorCode::from_code(self.error_code)
    }
}
