//! The cost model a job starts from: its target's saved model; for a target with none, the
//! saved model of the nearest other target (`tunehub_engine::transfer::nearest_target`: same
//! architecture first, then vector width, then cores), which then learns online from this
//! target's measurements and is saved under it; otherwise a fresh one. A saved model that does
//! not load (another feature layout, a damaged row) is passed over, never fatal: a model is
//! only a ranking aid. A job submitted with `cost_model = "random"` ranks with no model at all
//! (`CostModelChoice::Random`, `job_model`): a baseline.

use super::cost_model::CostModelChoice;
use super::store::{JobRow, JobStore};
use crate::records::RecordStore;
use tunehub_costmodel::{XgbModel, XgbParams};
use tunehub_engine::search::{CostModel, RandomModel};
use tunehub_engine::target::Target;
use tunehub_engine::transfer::target_distance;

/// The kind under which the job driver saves its cost model per target.
pub const MODEL_KIND: &str = "xgb-packsum";

/// Where a job's model came from, as `Job.model` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelStart {
    Saved,
    Transferred {
        from: String,
    },
    Cold,
    /// The job asked for no model (`CostModelChoice::Random`).
    Random,
}

impl std::fmt::Display for ModelStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelStart::Saved => f.write_str("saved"),
            ModelStart::Transferred { from } => write!(f, "transferred from {from}"),
            ModelStart::Cold => f.write_str("cold"),
            ModelStart::Random => f.write_str("random"),
        }
    }
}

/// The model job `job` ranks with and where it came from: none for a random-model job, else
/// `start_model`'s.
pub async fn job_model(
    jobs: &JobStore,
    target: &Target,
    job: &JobRow,
) -> (Box<dyn CostModel>, ModelStart) {
    match job.cost_model {
        CostModelChoice::Random => (Box::new(RandomModel::new(job.seed)), ModelStart::Random),
        CostModelChoice::Learned => {
            let (m, start) = start_model(jobs, target, job.seed).await;
            (Box::new(m), start)
        }
    }
}

/// A saved model of `target_key` that loads, if any.
async fn load_saved(jobs: &JobStore, target_key: &str) -> Option<XgbModel> {
    match jobs.cost_model(target_key).await {
        Ok(Some((kind, bytes, _))) if kind == MODEL_KIND => XgbModel::load(&bytes)
            .inspect_err(|e| tracing::warn!(target_key, "saved cost model ignored: {e}"))
            .ok(),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(target_key, "reading the saved cost model: {e}");
            None
        }
    }
}

/// Other targets with a saved model, nearest to `target` first (ties: the most trained first).
async fn others_nearest_first(jobs: &JobStore, target: &Target) -> Vec<String> {
    let own = target.key();
    let saved = match jobs.cost_model_targets(MODEL_KIND).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("listing the saved cost models: {e}");
            return vec![];
        }
    };
    let mut known = vec![];
    for (key, _) in saved.into_iter().filter(|(k, _)| *k != own) {
        // A target whose description does not parse cannot be placed: left out.
        let json = jobs.records().target_json(&key).await.ok().flatten();
        if let Some(t) = json.and_then(|j| serde_json::from_str::<Target>(&j).ok()) {
            known.push((target_distance(target, &t), known.len(), key));
        }
    }
    known.sort();
    known.into_iter().map(|(_, _, k)| k).collect()
}

/// The job's model and where it came from.
pub async fn start_model(jobs: &JobStore, target: &Target, seed: u64) -> (XgbModel, ModelStart) {
    if let Some(m) = load_saved(jobs, &target.key()).await {
        return (m, ModelStart::Saved);
    }
    for key in others_nearest_first(jobs, target).await {
        if let Some(m) = load_saved(jobs, &key).await {
            tracing::info!(
                from = %key,
                "no saved cost model for this target: starting from the nearest target's"
            );
            return (m, ModelStart::Transferred { from: key });
        }
    }
    let fresh = XgbModel::new(XgbParams {
        seed,
        ..XgbParams::default()
    });
    (fresh, ModelStart::Cold)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A submission names the learned model ("" by default), or none; anything else is
    /// refused, a long name without echoing it whole.
    #[test]
    fn cost_model_names() {
        for (name, want) in [
            ("", CostModelChoice::Learned),
            ("xgb", CostModelChoice::Learned),
            ("random", CostModelChoice::Random),
        ] {
            assert_eq!(CostModelChoice::parse(name), Ok(want), "{name:?}");
            assert_eq!(CostModelChoice::parse(want.as_str()), Ok(want));
        }
        let e = CostModelChoice::parse("XGB").unwrap_err();
        assert!(e.contains("unknown cost_model 'XGB'"), "{e}");
        let long = "x".repeat(10_000);
        let e = CostModelChoice::parse(&long).unwrap_err();
        assert!(e.len() < 200 && e.contains("10000 bytes"), "{e}");
    }
}
