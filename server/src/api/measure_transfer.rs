//! `measure_transfer` in Best: on the server's own machine, a workload with no record has its
//! best transferred candidates (ranked as a zero-shot answer ranks them) measured now and
//! stored as records through the same checks as a job's measurements; the answer is then the
//! measured best, a normal record. Refused for other targets (their devices are the fleet's,
//! measured through jobs) and while a job measures here: kernels are never timed two at once.

use super::transfer::{BY_DISTANCE, BY_MODEL};
use super::{Api, store_status};
use crate::jobs::result_check::{check_result, check_speed};
use crate::records::{self, NewRecord, RecordStore};
use std::sync::Arc;
use tonic::Status;
use tunehub_engine::measure::MeasureOptions;
use tunehub_engine::task::Task;

/// Candidates measured per request.
pub const MEASURED: usize = 3;

impl Api {
    /// Measures and stores the top transferred candidates of `task` on the local target; the
    /// number stored. The caller has checked that the target is the local one.
    pub(super) async fn measure_transferred(&self, task: &Arc<Task>) -> Result<usize, Status> {
        let target = self.local_target().clone();
        let target_key = target.key();
        if let Some(job) = self
            .ctx
            .jobs
            .running_on(&target_key, "")
            .await
            .map_err(store_status)?
        {
            return Err(Status::failed_precondition(format!(
                "job {job} is measuring on this machine (kernels are never timed two at once): \
                 ask again later, or without measure_transfer"
            )));
        }
        let (_, cands) = self.transfer_candidates(task, &target_key).await?;
        let (order, ranked_by) = match self.rank_by_model(task, &target_key, &cands).await {
            Some(order) => (order, BY_MODEL),
            None => ((0..cands.len()).collect(), BY_DISTANCE),
        };
        let schedules: Vec<_> = order
            .iter()
            .take(MEASURED)
            .map(|&i| cands[i].adapted.schedule.clone())
            .collect();
        if schedules.is_empty() {
            return Ok(0);
        }
        tracing::info!(
            workload = %task.key,
            candidates = schedules.len(),
            ranked_by,
            "measuring transferred candidates"
        );
        let mut measurer =
            self.ctx
                .backend
                .measurer(&target, MeasureOptions::default(), "measure_transfer");
        let (t, s) = (Arc::clone(task), schedules.clone());
        let results = tokio::task::spawn_blocking(move || measurer.measure(&t, &s))
            .await
            .map_err(|e| Status::internal(format!("the measurer panicked: {e}")))?;
        let store = self.store();
        let target_json = serde_json::to_string(&target).expect("a target serializes");
        store
            .put_target(&target_key, &target_json)
            .await
            .map_err(store_status)?;
        let dag_json = serde_json::to_string(&task.dag).expect("a DAG serializes");
        store
            .put_workload(
                &task.key,
                &task.desc,
                &dag_json,
                task.flops,
                &task.options(),
            )
            .await
            .map_err(store_status)?;
        let mut stored = 0;
        for (s, r) in schedules.iter().zip(&results) {
            if let Err(why) =
                check_result(r).and_then(|()| check_speed(&r.costs, task.flops, &target))
            {
                tracing::warn!("measurement dropped, not stored: {why}");
                continue;
            }
            let steps = records::canonical_steps(&s.to_json()).map_err(store_status)?;
            let rec = NewRecord::from_measure(
                &task.key,
                &target_key,
                steps,
                r,
                Some(self.ctx.instance.as_str()),
            );
            store.commit(&rec).await.map_err(store_status)?;
            stored += 1;
        }
        self.ctx.cache.invalidate(&task.key, &target_key);
        Ok(stored)
    }
}
