//! Measured records as a dataset file: one JSON object per line with the workload (an op spec),
//! the schedule's steps, the timed costs and the error. The evaluation reloads such a file,
//! replays and lowers every schedule, and turns it into per-task training samples.
//!
//! The file keeps schedules rather than features so that it stays valid when the features
//! change: features are always recomputed from the current extractor.

use crate::features::extract_values;
use crate::samples::{Sample, TaskSamples};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use tunehub_engine::lower::lower_with;
use tunehub_engine::measure::{ErrorCode, MeasureResult};
use tunehub_engine::ops;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::task::{Task, split_layout_free};

#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error("reading or writing the dataset: {0}")]
    Io(#[from] std::io::Error),
    #[error("line {line}: {msg}")]
    Line { line: usize, msg: String },
}

/// One measured candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetRecord {
    /// The operator spec, e.g. `matmul(128,128,128)` (see `ops::build_op`).
    pub workload: String,
    /// The schedule's steps in their JSON form.
    pub steps: serde_json::Value,
    /// Seconds per run, one per repeat; empty on error.
    pub costs: Vec<f64>,
    pub error: ErrorCode,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error_msg: String,
    #[serde(default)]
    pub noisy: bool,
}

impl DatasetRecord {
    pub fn new(workload: &str, schedule: &Schedule, r: &MeasureResult) -> Self {
        DatasetRecord {
            workload: workload.into(),
            steps: schedule.to_json_value(),
            costs: r.costs.clone(),
            error: r.error,
            error_msg: r.error_msg.clone(),
            noisy: r.noisy,
        }
    }

    /// The best repeat, or infinity for a failed measurement.
    pub fn cost(&self) -> f64 {
        if self.error == ErrorCode::NoError && !self.costs.is_empty() {
            self.costs.iter().cloned().fold(f64::INFINITY, f64::min)
        } else {
            f64::INFINITY
        }
    }
}

pub fn write_records(mut w: impl Write, records: &[DatasetRecord]) -> Result<(), DatasetError> {
    for r in records {
        serde_json::to_writer(&mut w, r).map_err(std::io::Error::other)?;
        w.write_all(b"\n")?;
    }
    Ok(())
}

pub fn read_records(r: impl BufRead) -> Result<Vec<DatasetRecord>, DatasetError> {
    let mut out = vec![];
    for (i, line) in r.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        out.push(serde_json::from_str(&line).map_err(|e| DatasetError::Line {
            line: i + 1,
            msg: e.to_string(),
        })?);
    }
    Ok(out)
}

/// Groups records by workload (in order of first appearance) and extracts the features of
/// each schedule, lowered as its task lowers it (a `layout_free=` workload with its weights
/// packed). A record whose schedule no longer replays is an error: the dataset and the engine
/// disagree, and silently dropping it would bias the evaluation. Records flagged noisy (timed
/// while a neighbour slowed the machine) are left out: their costs rank the machine, not the
/// schedule.
pub fn to_task_samples(records: &[DatasetRecord]) -> Result<Vec<TaskSamples>, DatasetError> {
    let mut tasks: Vec<TaskSamples> = vec![];
    let mut defs: Vec<Task> = vec![];
    for (i, r) in records.iter().enumerate() {
        if r.noisy {
            continue;
        }
        let err = |msg: String| DatasetError::Line { line: i + 1, msg };
        let t = match tasks.iter().position(|t| t.key == r.workload) {
            Some(t) => t,
            None => {
                let dag = ops::build_op(&split_layout_free(&r.workload).0)
                    .map_err(|e| err(e.to_string()))?;
                defs.push(Task::from_desc(dag, r.workload.clone()).map_err(err)?);
                tasks.push(TaskSamples::new(r.workload.clone()));
                tasks.len() - 1
            }
        };
        let sched = Schedule::from_json_value(&r.steps).map_err(|e| err(e.to_string()))?;
        let state = sched.replay(&defs[t].dag).map_err(|e| err(e.to_string()))?;
        let func = lower_with(&state, &defs[t].lower_options()).map_err(|e| err(e.to_string()))?;
        let stores = extract_values(&func);
        tasks[t].samples.push(Sample {
            stores,
            cost: r.cost(),
        });
    }
    Ok(tasks)
}
