//! Measured records as a dataset file: one JSON object per line with the workload (an op spec),
//! the schedule's steps, the timed costs and the error. The evaluation reloads such a file,
//! replays and lowers every schedule, and turns it into per-task training samples.
//!
//! The file keeps schedules rather than features so that it stays valid when the features
//! change: features are always recomputed from the current extractor.

use crate::features::extract_values;
use crate::samples::{Sample, TaskSamples};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use tunehub_engine::lower::lower_with;
use tunehub_engine::measure::{ErrorCode, MeasureResult};
use tunehub_engine::ops::OpSpec;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::search::evolve::program_hash;
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;

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
    /// The operator spec, e.g. `matmul(128,128,128,layout_free=B)` (see `ops::OpSpec`); no
    /// `layout_free=` means no packed input, as the datasets were written.
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

    /// The measurement again, as [`DatasetRecord::new`] took it (build and run times are not
    /// kept: zero).
    pub fn result(&self) -> MeasureResult {
        MeasureResult {
            costs: self.costs.clone(),
            noisy: self.noisy,
            ..MeasureResult::error(self.error, self.error_msg.clone())
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
/// schedule. A kernel measured more than once counts once, with its best cost: copies on both
/// sides of a train/test split would flatter the model, and two readings of one kernel as two
/// samples teach it noise. "One kernel" is one generated C source: distinct step lists can
/// lower to the same program (an auto-unroll step that unrolls nothing more), and in datasets
/// of searches that measured such twins they read up to 25% apart.
pub fn to_task_samples(records: &[DatasetRecord]) -> Result<Vec<TaskSamples>, DatasetError> {
    let mut tasks: Vec<TaskSamples> = vec![];
    let mut defs: Vec<Task> = vec![];
    // The C of a program is the same on every target of an architecture's family; any target
    // names kernels consistently within one dataset.
    let target = Target::detect();
    // (task, kernel) -> sample of the first copy.
    let mut seen: HashMap<(usize, u64), usize> = HashMap::new();
    for (i, r) in records.iter().enumerate() {
        if r.noisy {
            continue;
        }
        let err = |msg: String| DatasetError::Line { line: i + 1, msg };
        let t = match tasks.iter().position(|t| t.key == r.workload) {
            Some(t) => t,
            None => {
                let task = OpSpec::parse(&r.workload)
                    .and_then(|s| s.unpacked_by_default().task())
                    .map_err(|e| err(e.to_string()))?;
                defs.push(task);
                tasks.push(TaskSamples::new(r.workload.clone()));
                tasks.len() - 1
            }
        };
        let sched = Schedule::from_json_value(&r.steps).map_err(|e| err(e.to_string()))?;
        let state = sched.replay(&defs[t].dag).map_err(|e| err(e.to_string()))?;
        let func = lower_with(&state, &defs[t].lower_options()).map_err(|e| err(e.to_string()))?;
        let key = (t, program_hash(&func, &target));
        if let Some(&k) = seen.get(&key) {
            let s = &mut tasks[t].samples[k];
            s.cost = s.cost.min(r.cost());
            continue;
        }
        let stores = extract_values(&func);
        seen.insert(key, tasks[t].samples.len());
        tasks[t].samples.push(Sample {
            stores,
            cost: r.cost(),
        });
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(steps: &Schedule, cost: f64, noisy: bool) -> DatasetRecord {
        DatasetRecord {
            workload: "matmul(16,16,16)".into(),
            steps: steps.to_json_value(),
            costs: vec![cost, cost * 1.1],
            error: ErrorCode::NoError,
            error_msg: String::new(),
            noisy,
        }
    }

    #[test]
    fn a_record_gives_back_its_measurement() {
        let naive = Schedule::new(vec![]);
        let ok = record(&naive, 2e-3, true).result();
        assert_eq!(
            (ok.costs, ok.error, ok.noisy),
            (vec![2e-3, 2.2e-3], ErrorCode::NoError, true)
        );
        let failed = MeasureResult::error(ErrorCode::WrongAnswer, "element 3 differs");
        let back = DatasetRecord::new("matmul(16,16,16)", &naive, &failed).result();
        assert_eq!(back, failed);
    }

    #[test]
    fn repeats_count_once_with_their_best_cost_and_noisy_records_are_left_out() {
        let naive = Schedule::new(vec![]);
        let dag = OpSpec::parse("matmul(16,16,16)").unwrap().dag().unwrap();
        let target = tunehub_engine::target::Target::detect();
        let other = tunehub_engine::sample::RandomSampler::new(&dag, &target, 3).sample();
        assert_ne!(other, naive);
        // Other steps, the same kernel: a reorder into the order the loops already have.
        let twin = Schedule::from_json_value(&serde_json::json!([["RE", 2, [0, 1, 2]]])).unwrap();
        assert_ne!(twin, naive);
        let records = [
            record(&naive, 3e-3, false),
            record(&other, 1e-3, false),
            record(&naive, 2e-3, false),
            record(&other, 0.5e-3, true),
            record(&twin, 1.5e-3, false),
        ];
        // Through the file format, as the evaluation reads it.
        let mut buf = vec![];
        write_records(&mut buf, &records).unwrap();
        let back = read_records(&buf[..]).unwrap();
        assert_eq!(back, records);
        let tasks = to_task_samples(&back).unwrap();
        assert_eq!(tasks.len(), 1);
        let costs: Vec<f64> = tasks[0].samples.iter().map(|s| s.cost).collect();
        assert_eq!(costs, vec![1.5e-3, 1e-3]);
    }
}
