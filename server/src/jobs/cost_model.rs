//! Which cost model a job ranks candidates with: the learned one, or none (a baseline). A
//! property of the job, stored with it (`jobs.cost_model`); `start_model` makes the model.

/// The cost model a job's search ranks candidates with (`SubmitRequest.cost_model`, stored in
/// `jobs.cost_model`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CostModelChoice {
    /// XGBoost (Ansor's pack-sum objective), started from the target's saved model
    /// (`start_model`), learning from every batch, saved at the job's end.
    #[default]
    Learned,
    /// No model: uniform random scores (Ansor's `RandomModel`), so the evolutionary search
    /// keeps what it samples at random; a baseline for the learned model. Nothing is saved.
    Random,
}

impl CostModelChoice {
    /// The names a submission may give.
    pub const NAMES: &str = "\"\" or \"xgb\" (the learned model), \"random\" (none)";

    /// A submission's (or a stored row's) name: "" and "xgb" are the learned model.
    pub fn parse(name: &str) -> Result<CostModelChoice, String> {
        match name {
            "" | "xgb" => Ok(CostModelChoice::Learned),
            "random" => Ok(CostModelChoice::Random),
            // A long name is not echoed back whole.
            _ if name.len() > 64 => Err(format!(
                "unknown cost_model ({} bytes): {}",
                name.len(),
                Self::NAMES
            )),
            _ => Err(format!("unknown cost_model '{name}': {}", Self::NAMES)),
        }
    }

    /// As stored and shown (`Job.cost_model`).
    pub fn as_str(self) -> &'static str {
        match self {
            CostModelChoice::Learned => "xgb",
            CostModelChoice::Random => "random",
        }
    }
}
