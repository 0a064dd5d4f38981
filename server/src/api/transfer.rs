//! Zero-shot answers (`allow_transfer` in Best and BestBatch): a workload with no record on a
//! target answered from the nearest tuned workloads of its structure, their fastest records
//! adapted to its extents (`tunehub_engine::transfer`). With a saved cost model for the target,
//! the adapted candidates of the nearest neighbours are ranked by it and the best predicted is
//! the answer; without one, the nearest neighbour's fastest record that adapts. Predicted,
//! never measured: the answer is marked `transfer` (with `ranked_by`), its record id is empty
//! and its time is the source record's GFLOP/s applied to this workload's FLOPs.

use super::{Api, gflops, store_status};
use crate::records::{Neighbor, Record};
use std::collections::HashSet;
use std::sync::Arc;
use tonic::Status;
use tunehub_engine::par::{cores, par_map};
use tunehub_engine::search::CostModel;
use tunehub_engine::task::Task;
use tunehub_engine::transfer::Adapted;
use tunehub_proto::v1 as pb;

/// Neighbours whose records are adapted, nearest first.
const NEIGHBOURS: usize = 4;

/// Records adapted per neighbour, fastest first.
const TOP_PER_NEIGHBOUR: usize = 3;

/// How the answer was chosen among the candidates (`Transfer.ranked_by`).
pub(super) const BY_MODEL: &str = "cost model";
pub(super) const BY_DISTANCE: &str = "distance";

/// A transferred answer: the adapted record and where it came from.
pub(super) struct Transferred {
    pub record: pb::ScheduleRecord,
    pub transfer: pb::Transfer,
}

/// One adapted record of one neighbour.
pub(super) struct Candidate {
    pub neighbour: usize,
    pub source: Record,
    pub adapted: Adapted,
}

impl Api {
    /// Adapted records of the nearest tuned workloads of `task`'s structure on `target_key`:
    /// nearest neighbour first, each neighbour's fastest first, a schedule met twice kept once;
    /// with the neighbours. Shared: the ranking reads them on a blocking thread, uncopied.
    pub(super) async fn transfer_candidates(
        &self,
        task: &Arc<Task>,
        target_key: &str,
    ) -> Result<(Vec<Neighbor>, Arc<Vec<Candidate>>), Status> {
        let (near, sources): (Vec<Neighbor>, Vec<Vec<Record>>) = self
            .store()
            .nearest_with_records(task, target_key, NEIGHBOURS, TOP_PER_NEIGHBOUR)
            .await
            .map_err(store_status)?
            .into_iter()
            .unzip();
        // Adapting replays and lowers every schedule: off the async threads.
        let (task, neighbours) = (Arc::clone(task), near.clone());
        let cands = tokio::task::spawn_blocking(move || adapt_all(&neighbours, &sources, &task))
            .await
            .map_err(|e| Status::internal(format!("adapting transferred schedules: {e}")))?;
        Ok((near, Arc::new(cands)))
    }

    /// The candidates' predicted order, best first, by the target's saved cost model; `None`
    /// without a model (or when it fails: the order is then by distance).
    pub(super) async fn rank_by_model(
        &self,
        task: &Arc<Task>,
        target_key: &str,
        cands: &Arc<Vec<Candidate>>,
    ) -> Option<Vec<usize>> {
        let model = self.models.get(&self.ctx.jobs, target_key).await?;
        let (task, cands) = (Arc::clone(task), Arc::clone(cands));
        // Prediction: off the async threads.
        let scored = tokio::task::spawn_blocking(move || {
            if cands.is_empty() {
                return None;
            }
            // Adapting lowered each candidate with the task's options: the model ranks those.
            let progs: Vec<_> = cands.iter().map(|c| &c.adapted.lowered).collect();
            let mut m = model.lock().unwrap_or_else(|p| p.into_inner());
            let scores = m
                .predict(&task, &progs)
                .inspect_err(|e| tracing::warn!("ranking transferred candidates: {e}"))
                .ok()?;
            let mut order: Vec<(usize, f32)> = (0..cands.len()).zip(scores).collect();
            // Higher is predicted faster; equals keep the distance order.
            order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            Some(order.into_iter().map(|(i, _)| i).collect::<Vec<_>>())
        })
        .await
        .ok()??;
        Some(scored)
    }

    /// The answer for `task` on `target_key` from the nearest tuned workloads of its structure;
    /// `None` when no neighbour's record adapts (or there is no neighbour).
    pub(super) async fn transferred(
        &self,
        task: &Arc<Task>,
        target_key: &str,
    ) -> Result<Option<Transferred>, Status> {
        let (near, cands) = self.transfer_candidates(task, target_key).await?;
        if cands.is_empty() {
            return Ok(None);
        }
        let (pick, ranked_by) = match self.rank_by_model(task, target_key, &cands).await {
            Some(order) if !order.is_empty() => (order[0], BY_MODEL),
            _ => (0, BY_DISTANCE),
        };
        Ok(Some(answer(
            task,
            target_key,
            &near,
            &cands[pick],
            ranked_by,
        )))
    }
}

/// The records of each neighbour (`sources[i]` of `near[i]`, fastest first) adapted to `task`,
/// in that order; a schedule that two records adapt to is kept at its first place only. The
/// neighbours are adapted on all cores: a compiler waits on the answer, and replaying and
/// lowering a dozen schedules is most of its work.
fn adapt_all(near: &[Neighbor], sources: &[Vec<Record>], task: &Task) -> Vec<Candidate> {
    let per_neighbour = par_map(near.len(), cores(), |i| {
        near[i].records_adapted_to(&sources[i], task)
    });
    let mut seen = HashSet::new();
    let mut out = vec![];
    for (i, adapted) in per_neighbour.into_iter().enumerate() {
        for (source, adapted) in adapted {
            if seen.insert(adapted.schedule.clone()) {
                out.push(Candidate {
                    neighbour: i,
                    source,
                    adapted,
                });
            }
        }
    }
    out
}

/// The answer made of one candidate.
pub(super) fn answer(
    task: &Task,
    target_key: &str,
    near: &[Neighbor],
    c: &Candidate,
    ranked_by: &str,
) -> Transferred {
    let n = &near[c.neighbour];
    let source_seconds = c.source.mean_cost.unwrap_or(f64::NAN);
    let predicted = source_seconds * task.flops as f64 / n.workload.flops.max(1) as f64;
    Transferred {
        record: pb::ScheduleRecord {
            record_id: String::new(),
            workload_key: task.key.clone(),
            target_key: target_key.to_string(),
            steps_json: c.adapted.schedule.to_json(),
            seconds: predicted,
            costs: vec![],
            gflops: gflops(task.flops, predicted),
            worker: String::new(),
            created_at_ms: 0,
            noisy: false,
        },
        transfer: pb::Transfer {
            source_record_id: c.source.id.clone(),
            source_workload_key: n.workload.key.clone(),
            source_description: n.workload.description.clone().unwrap_or_default(),
            distance: n.distance,
            predicted_seconds: predicted,
            dropped: c
                .adapted
                .dropped
                .iter()
                .map(|(i, why)| format!("step {i}: {why}"))
                .collect(),
            ranked_by: ranked_by.to_string(),
        },
    }
}
