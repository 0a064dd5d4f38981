//! What an import teaches: each target of the imported records gets its cost model trained on
//! their measurements, as a job's model learns from its own. Without it a database filled by
//! imports (records carried from another server, or from a fleet's export) had records and no
//! model, so a build could not search a schedule for a task no tuned neighbour serves, however
//! many records it held.
//!
//! Only workloads with enough measurements teach (`MIN_PER_WORKLOAD`). A target's saved model
//! learns on (it keeps what its jobs taught it); a target with none gets a fresh one. Teaching
//! is a ranking aid, never part of the import's contract: a failure is logged and the records
//! stay imported.

use crate::jobs::start_model::MODEL_KIND;
use crate::jobs::store::JobStore;
use crate::records::NewRecord;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use tunehub_costmodel::samples::Sample;
use tunehub_costmodel::xgb_model::program_features;
use tunehub_costmodel::{ModelError, XgbModel, XgbParams};
use tunehub_engine::lower::lower_with;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::task::Task;

/// A record's best cost and its steps (JSON).
type Measured = (f64, String);

/// A workload and its records to teach.
type Lesson = (Arc<Task>, Vec<Measured>);

/// Fewest successes of one (workload, target) that teach anything: a model learns to rank the
/// schedules of one workload against each other, and a pack of each workload's best record or
/// two (`records distill`) holds nothing to rank. Such a model would order zero-shot answers
/// worse than their distance does.
const MIN_PER_WORKLOAD: usize = 8;

/// Most records of one (workload, target) taught, spread over their range of costs: the model
/// must see slow schedules as well as fast ones, and lowering every record of a large import
/// would hold the import for minutes.
const PER_WORKLOAD: usize = 512;

/// Most records one target is taught by one import (fewer per workload when it has many; a
/// job retrains on at most 5000 samples anyway).
const PER_TARGET: usize = 20_000;

/// Teaches the imported `records` to their targets' models and saves them; `tasks` holds every
/// workload they name.
pub(super) async fn teach(
    jobs: &JobStore,
    tasks: HashMap<String, Arc<Task>>,
    records: &[NewRecord],
) {
    let mut by_target: BTreeMap<String, BTreeMap<String, Vec<Measured>>> = BTreeMap::new();
    for r in records {
        // Failures and noisy times say nothing about a schedule's speed.
        let Some(cost) = r.costs.iter().copied().reduce(f64::min) else {
            continue;
        };
        if r.error_code != 0 || r.noisy || !cost.is_finite() || cost <= 0.0 {
            continue;
        }
        by_target
            .entry(r.target_key.clone())
            .or_default()
            .entry(r.workload_key.clone())
            .or_default()
            .push((cost, r.steps_json.clone()));
    }
    for (target, workloads) in by_target {
        let saved = match jobs.cost_model(&target).await {
            Ok(Some((kind, bytes, trained_on))) if kind == MODEL_KIND => {
                XgbModel::load(&bytes).ok().map(|m| (m, trained_on))
            }
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(target, "reading the saved cost model: {e}");
                continue;
            }
        };
        let teaching = workloads
            .values()
            .filter(|rs| rs.len() >= MIN_PER_WORKLOAD)
            .count();
        let each = (PER_TARGET / teaching.max(1)).clamp(MIN_PER_WORKLOAD, PER_WORKLOAD);
        let tasks: Vec<Lesson> = workloads
            .into_iter()
            .filter(|(_, rs)| rs.len() >= MIN_PER_WORKLOAD)
            .filter_map(|(key, rs)| Some((Arc::clone(tasks.get(&key)?), spread(rs, each))))
            .collect();
        let trained = tokio::task::spawn_blocking(move || learn(saved, &tasks)).await;
        match trained {
            Ok(Ok(Some((bytes, n, trained_on)))) => {
                match jobs
                    .save_cost_model(&target, MODEL_KIND, &bytes, trained_on)
                    .await
                {
                    Ok(()) => {
                        tracing::info!(target, samples = n, "the cost model learned the import")
                    }
                    Err(e) => tracing::warn!(target, "saving the taught cost model: {e}"),
                }
            }
            Ok(Ok(None)) => {}
            Ok(Err(e)) => tracing::warn!(target, "teaching the cost model the import: {e}"),
            Err(e) => tracing::warn!(target, "teaching the cost model the import: {e}"),
        }
    }
}

/// At most `most` of `rs`, evenly spaced in order of cost.
fn spread(mut rs: Vec<Measured>, most: usize) -> Vec<Measured> {
    rs.sort_by(|a, b| a.0.total_cmp(&b.0));
    if rs.len() <= most {
        return rs;
    }
    let n = rs.len();
    (0..most).map(|i| rs[i * n / most].clone()).collect()
}

/// The model (`saved`, or a fresh one) trained on every record that still replays and lowers:
/// its bytes, the samples it learned and its total count; `None` when nothing was learned.
fn learn(
    saved: Option<(XgbModel, u64)>,
    tasks: &[Lesson],
) -> Result<Option<(Vec<u8>, usize, u64)>, ModelError> {
    let (mut model, before) = saved.unwrap_or_else(|| (XgbModel::new(XgbParams::default()), 0));
    let mut n = 0;
    for (task, rs) in tasks {
        let opts = task.lower_options();
        let mut samples = vec![];
        for (cost, steps) in rs {
            // A record the engine no longer replays (an older schedule language) is skipped: it
            // was checked when imported and stays a record; it only teaches nothing.
            let Some(func) = Schedule::from_json(steps)
                .ok()
                .and_then(|s| s.replay(&task.dag).ok())
                .and_then(|state| lower_with(&state, &opts).ok())
            else {
                continue;
            };
            let stores = program_features(&[&func]).pop().unwrap_or_default();
            samples.push(Sample {
                stores,
                cost: *cost,
            });
        }
        n += samples.len();
        model.add_samples(&task.key, samples);
    }
    if n == 0 {
        return Ok(None);
    }
    model.retrain()?;
    Ok(Some((model.save()?, n, before + n as u64)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A long list is cut to evenly spaced costs from the cheapest on; a short one is kept.
    #[test]
    fn spread_keeps_the_range_of_costs() {
        let rs: Vec<Measured> = (0..100).rev().map(|i| (i as f64, i.to_string())).collect();
        let kept: Vec<f64> = spread(rs.clone(), 4).iter().map(|r| r.0).collect();
        assert_eq!(kept, vec![0.0, 25.0, 50.0, 75.0]);
        assert_eq!(spread(rs[..3].to_vec(), 4).len(), 3);
    }
}
