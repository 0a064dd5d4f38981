//! A schedule for a task nothing of its structure was tuned for, as `Query.BuildModel` needs
//! one for every task: the target's saved cost model (trained on every record of the target,
//! whatever the workload) guides one round of the evolutionary search, as a job's first round
//! would, and the best predicted candidate is the answer. No random share and nothing
//! measured: the answer is a prediction, and the build says so per task.
//!
//! Without a saved model there is no answer (an untrained model would pick at random).

use super::Api;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use tonic::Status;
use tunehub_engine::search::{SearchParams, TaskSearch};
use tunehub_engine::task::Task;

impl Api {
    /// The steps (JSON) of the best predicted schedule of `task` on `target_key`; `None` without
    /// a saved cost model for the target.
    pub(super) async fn searched(
        &self,
        task: &Arc<Task>,
        target_key: &str,
    ) -> Result<Option<String>, Status> {
        let Some(model) = self.models.get(&self.ctx.jobs, target_key).await else {
            return Ok(None);
        };
        let target = self.target_of(target_key).await?;
        let task = Arc::clone(task);
        // The same model and task give the same answer: the search's seed is the task's.
        let mut h = DefaultHasher::new();
        task.key.hash(&mut h);
        let seed = h.finish();
        // A round of search is seconds of CPU: off the async threads. The model is held for it
        // (prediction needs it mutable); other answers ranking with it wait.
        tokio::task::spawn_blocking(move || {
            let params = SearchParams {
                eps_greedy: 0.0,
                first_batch_random: 0.0,
                ..SearchParams::default()
            };
            let mut search = TaskSearch::new(task, &target, params, seed);
            let mut m = model.lock().unwrap_or_else(|p| p.into_inner());
            search
                .next_batch(&mut *m, 1)
                .map(|b| b.first().map(|s| s.to_json()))
        })
        .await
        .map_err(|e| Status::internal(format!("searching a schedule failed: {e}")))?
        .map_err(|e| Status::internal(format!("the cost model failed: {e}")))
    }
}
