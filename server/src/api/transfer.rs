//! Zero-shot answers (`allow_transfer` in Best and BestBatch): a workload with no record on a
//! target answered from the nearest tuned workloads of its structure, their best schedule
//! adapted to its extents (`tunehub_engine::transfer`). Predicted, never measured: the answer
//! is marked `transfer`, its record id is empty and its time is the source's GFLOP/s applied to
//! this workload's FLOPs.

use super::{Api, gflops, internal};
use tonic::Status;
use tunehub_engine::task::Task;
use tunehub_proto::v1 as pb;

/// Neighbours tried, nearest first: the first whose best schedule adapts is the answer.
const NEIGHBOURS: usize = 4;

/// A transferred answer: the adapted record and where it came from.
pub(super) struct Transferred {
    pub record: pb::ScheduleRecord,
    pub transfer: pb::Transfer,
}

impl Api {
    /// The adapted best schedule of the nearest tuned workload of `task`'s structure on
    /// `target_key`; `None` when no neighbour's schedule adapts (or there is no neighbour).
    pub(super) async fn transferred(
        &self,
        task: &Task,
        target_key: &str,
    ) -> Result<Option<Transferred>, Status> {
        let near = self
            .store()
            .nearest(task, target_key, NEIGHBOURS)
            .await
            .map_err(internal)?;
        for n in near {
            let Some(adapted) = n.adapted_to(task) else {
                continue;
            };
            let Some(source_seconds) = n.best.mean_cost else {
                continue;
            };
            let predicted = source_seconds * task.flops as f64 / n.workload.flops.max(1) as f64;
            return Ok(Some(Transferred {
                record: pb::ScheduleRecord {
                    record_id: String::new(),
                    workload_key: task.key.clone(),
                    target_key: target_key.to_string(),
                    steps_json: adapted.schedule.to_json(),
                    seconds: predicted,
                    costs: vec![],
                    gflops: gflops(task.flops, predicted),
                    worker: String::new(),
                    created_at_ms: 0,
                },
                transfer: pb::Transfer {
                    source_record_id: n.best.id.clone(),
                    source_workload_key: n.workload.key.clone(),
                    source_description: n.workload.description.clone().unwrap_or_default(),
                    distance: n.distance,
                    predicted_seconds: predicted,
                    dropped: adapted
                        .dropped
                        .iter()
                        .map(|(i, why)| format!("step {i}: {why}"))
                        .collect(),
                },
            }));
        }
        Ok(None)
    }
}
