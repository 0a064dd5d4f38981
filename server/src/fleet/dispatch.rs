//! The fleet as the job driver's measure backend: a batch is cut into pieces, one per ready
//! worker of the job's target, queued, and waited for; every candidate's result comes back
//! with the worker that measured it.

use super::registry::{BatchSlot, Fleet, Payload, Piece};
use crate::jobs::{LocalBackend, MeasureBackend};
use std::sync::Arc;
use std::time::Duration;
use tunehub_engine::measure::{MeasureBatch, MeasureOptions, MeasureResult, OnResult};
use tunehub_engine::schedule::Schedule;
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;

/// This server's own machine for "local" jobs, the fleet's pools for every other target.
pub struct FleetBackend {
    local: LocalBackend,
    fleet: Arc<Fleet>,
}

impl FleetBackend {
    pub fn new(local: Target, fleet: Arc<Fleet>) -> Self {
        FleetBackend {
            local: LocalBackend::new(local),
            fleet,
        }
    }
}

impl MeasureBackend for FleetBackend {
    fn target(&self) -> &Target {
        self.local.target()
    }

    fn target_for(&self, key: &str) -> Option<Target> {
        if key == self.local.target().key() {
            return Some(self.local.target().clone());
        }
        self.fleet.target(key)
    }

    fn ready_keys(&self) -> Vec<String> {
        let mut keys = vec![self.local.target().key()];
        keys.extend(self.fleet.ready_keys());
        keys
    }

    fn waits_for_devices(&self) -> bool {
        true
    }

    fn serves(&self, key: &str) -> bool {
        key == self.local.target().key() || self.fleet.owns(key)
    }

    fn waiting(&self, key: &str) -> Option<String> {
        if key == self.local.target().key() {
            return None;
        }
        self.fleet.waiting(key)
    }

    fn measurer(
        &self,
        target: &Target,
        options: MeasureOptions,
        job_id: &str,
    ) -> Box<dyn MeasureBatch> {
        self.job_measurer(target, options, job_id, 0)
    }

    fn job_measurer(
        &self,
        target: &Target,
        options: MeasureOptions,
        job_id: &str,
        priority: i32,
    ) -> Box<dyn MeasureBatch> {
        if target.key() == self.local.target().key() {
            return self.local.measurer(target, options, job_id);
        }
        Box::new(FleetMeasurer {
            job_id: job_id.to_string(),
            priority,
            target: target.clone(),
            key: target.key(),
            options,
            fleet: Arc::clone(&self.fleet),
            devices: vec![],
            abort: None,
            on_result: None,
        })
    }
}

/// Measures one job's batches on its target's pool.
pub struct FleetMeasurer {
    job_id: String,
    /// The job's share of the pool among the jobs it runs at once.
    priority: i32,
    target: Target,
    key: String,
    options: MeasureOptions,
    fleet: Arc<Fleet>,
    devices: Vec<Option<String>>,
    /// The job was cancelled or lost: stop waiting.
    abort: Option<Arc<dyn Fn() -> bool + Send + Sync>>,
    /// Told of each result as its piece is reported.
    on_result: Option<OnResult>,
}

impl MeasureBatch for FleetMeasurer {
    fn target(&self) -> &Target {
        &self.target
    }

    /// Blocks until every piece is measured: a piece whose worker dies is leased again to
    /// another, so the batch waits for devices rather than failing. Returns nothing when the
    /// server stops, the job is cancelled or lost, or another replica owns the pool now (the
    /// driver then stores nothing of it).
    fn measure(&mut self, task: &Task, schedules: &[Schedule]) -> Vec<MeasureResult> {
        self.run(task, schedules, &[])
    }

    /// A new best's second run, or a dispute's tie-break: one piece, for another worker than
    /// `not_on`'s (`Piece::avoiding`: its first only when no other online, unquarantined
    /// worker of the pool could take it).
    fn measure_elsewhere(
        &mut self,
        task: &Task,
        schedule: &Schedule,
        not_on: &[&str],
    ) -> Option<(MeasureResult, Option<String>)> {
        let r = self
            .run(task, std::slice::from_ref(schedule), not_on)
            .pop()?;
        Some((r, self.devices.first().cloned().flatten()))
    }

    /// Counted against `device` only when the job's noise guard is on: without it a slower
    /// side's time may be its machine's load (on one machine shared by several workers, 2-thread
    /// kernels of 1.5 us were timed at 8-12 ms on every repeat), and an honest device would be
    /// charged for another's neighbour.
    fn disagreed(&mut self, device: &str, why: &str) {
        if self.options.noise_threshold <= 0.0 {
            tracing::info!(worker_id = %device, "not counted against it: the job's noise guard is off ({why})");
            return;
        }
        self.fleet.disagreed(device, why);
    }

    fn agreed(&mut self, device: &str) {
        self.fleet.agreed(device);
    }

    fn devices(&self) -> Vec<Option<String>> {
        self.devices.clone()
    }

    fn set_abort(&mut self, abort: Arc<dyn Fn() -> bool + Send + Sync>) {
        self.abort = Some(abort);
    }

    fn set_on_result(&mut self, on_result: OnResult) {
        self.on_result = Some(on_result);
    }
}

impl FleetMeasurer {
    /// `measure`, its pieces for other workers than `avoid`'s first (`Piece::avoiding`).
    fn run(&mut self, task: &Task, schedules: &[Schedule], avoid: &[&str]) -> Vec<MeasureResult> {
        self.devices.clear();
        if schedules.is_empty() || !self.fleet.owns(&self.key) {
            return vec![];
        }
        let payload = Arc::new(Payload {
            job_id: self.job_id.clone(),
            priority: self.priority,
            workload_key: task.key.clone(),
            dag_json: serde_json::to_string(&task.dag).expect("a DAG serializes"),
            description: task.desc.clone(),
            workload_options: task.options(),
            steps_json: schedules.iter().map(Schedule::to_json).collect(),
            flops: task.flops,
            options_json: serde_json::to_string(&self.options).expect("options serialize"),
        });
        let n = schedules.len();
        let batch = BatchSlot::new(n);
        let parts = self.fleet.ready_workers(&self.key).clamp(1, n);
        let pieces = split(n, parts)
            .into_iter()
            .map(|indices| {
                Piece::new(
                    self.key.clone(),
                    Arc::clone(&payload),
                    indices,
                    Arc::clone(&batch),
                )
                .avoiding(avoid)
            })
            .collect();
        self.fleet.enqueue(pieces);
        tracing::debug!(target_key = %self.key, candidates = n, pieces = parts, "batch queued for the fleet");
        let mut told = vec![false; n];
        loop {
            let all = batch.wait(Duration::from_millis(200));
            if let Some(f) = &self.on_result {
                for (i, r) in batch.newly_filled(&mut told) {
                    f(i, &r);
                }
            }
            if let Some(all) = all {
                let (results, devices): (Vec<_>, Vec<_>) = all.into_iter().unzip();
                self.devices = devices.into_iter().map(Some).collect();
                return results;
            }
            if self.fleet.shutting_down()
                || self.abort.as_ref().is_some_and(|a| a())
                || !self.fleet.owns(&self.key)
            {
                self.fleet.abandon(&batch);
                return vec![];
            }
        }
    }
}

/// `0..n` cut into `parts` contiguous runs of nearly equal length.
fn split(n: usize, parts: usize) -> Vec<Vec<usize>> {
    let parts = parts.clamp(1, n.max(1));
    (0..parts)
        .map(|p| (p * n / parts..(p + 1) * n / parts).collect())
        .filter(|v: &Vec<usize>| !v.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn split_covers_every_index_once() {
        for n in 1..10 {
            for parts in 1..5 {
                let s = split(n, parts);
                let flat: Vec<usize> = s.concat();
                assert_eq!(flat, (0..n).collect::<Vec<_>>());
                assert!(s.len() <= parts);
            }
        }
    }
}
