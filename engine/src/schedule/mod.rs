//! Schedules as replayable step lists, and the loop state they build.

pub mod hand;
pub mod state;
pub mod step;

pub use state::{Attach, IterKind, IterNode, Relation, ScheduleError, StageState, State};
pub use step::{Annotation, Step};

use crate::ir::ComputeDag;
use serde_json::Value;

/// A complete schedule: the steps that, replayed on a DAG's naive state, give the program.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Schedule {
    pub steps: Vec<Step>,
}

impl Schedule {
    pub fn new(steps: Vec<Step>) -> Self {
        Schedule { steps }
    }

    pub fn to_json_value(&self) -> Value {
        Value::Array(self.steps.iter().map(Step::to_json).collect())
    }

    /// The canonical text of the schedule: compact JSON, one form per step list, so it also
    /// serves to deduplicate candidates.
    pub fn to_json(&self) -> String {
        self.to_json_value().to_string()
    }

    pub fn from_json_value(v: &Value) -> Result<Schedule, ScheduleError> {
        let arr = v
            .as_array()
            .ok_or_else(|| ScheduleError::Json("a schedule is a JSON array of steps".into()))?;
        let steps = arr
            .iter()
            .enumerate()
            .map(|(i, s)| Step::from_json(s, i))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ScheduleError::Json(e.to_string()))?;
        Ok(Schedule { steps })
    }

    pub fn from_json(text: &str) -> Result<Schedule, ScheduleError> {
        let v: Value =
            serde_json::from_str(text).map_err(|e| ScheduleError::Json(e.to_string()))?;
        Schedule::from_json_value(&v)
    }

    /// Replays the steps on `dag`.
    pub fn replay(&self, dag: &ComputeDag) -> Result<State, ScheduleError> {
        State::replay(dag, &self.steps)
    }
}
