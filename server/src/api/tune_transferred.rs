//! The `tune_transferred` setting: a workload answered by transfer gets a background tuning job
//! of its own (a small budget, at a low priority), so that the next answer for it is measured.
//! At most once per (workload, target): not when any job, this server's or a user's, already
//! has a task for the pair; and a server remembers what it queued, so answers arriving at once
//! do not race. Only on targets this server measures; a failure to queue is logged, never the
//! answer's failure.

use super::Api;
use tunehub_engine::task::Task;
use tunehub_proto::v1 as pb;

/// Below a user's default 0: a user's job of the same pool starts first.
const PRIORITY: i32 = -5;

/// The owner such jobs are listed under.
pub const OWNER: &str = "tune_transferred";

impl Api {
    /// Queues the background job for `task` (asked for as `workload`) on `target_key` when the
    /// setting is on and none was queued yet.
    pub(super) async fn tune_transferred(
        &self,
        task: &Task,
        workload: Option<&pb::Workload>,
        target_key: &str,
    ) {
        let (Some(trials), Some(workload)) = (self.tune_transferred, workload) else {
            return;
        };
        if self.ctx.backend.target_for(target_key).is_none() {
            return;
        }
        // Its job would be refused at the door (too large to measure): the answer stands alone.
        if crate::checks::memory::check_workload_bytes(task).is_err() {
            return;
        }
        let pair = (task.key.clone(), target_key.to_string());
        {
            let mut queued = self
                .queued_transfers
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if !queued.insert(pair.clone()) {
                return;
            }
        }
        match self.ctx.jobs.has_task_for(&task.key, target_key).await {
            Ok(false) => {}
            Ok(true) => return,
            Err(e) => {
                tracing::warn!("looking for a job of a transferred workload: {e}");
                return;
            }
        }
        let req = pb::SubmitRequest {
            tasks: vec![pb::TaskSpec {
                workload: Some(workload.clone()),
                trials,
                weight: 1.0,
                alternative: false,
            }],
            target: target_key.to_string(),
            name: format!(
                "tune transferred: {}",
                task.desc.lines().next().unwrap_or("")
            ),
            priority: PRIORITY,
            ..Default::default()
        };
        match self.submit_job(&req, OWNER).await {
            Ok(jobs) => tracing::info!(
                job_id = %jobs.first().map_or("", |j| j.id.as_str()),
                workload = %task.key,
                trials,
                "queued a tuning of a workload answered by transfer"
            ),
            Err(e) => {
                tracing::warn!(workload = %task.key, "queueing the tuning of a transferred answer: {e}");
                // Not queued: a later answer may try again.
                self.queued_transfers
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&pair);
            }
        }
    }
}
