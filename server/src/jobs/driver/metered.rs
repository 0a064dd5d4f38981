//! The job's measurer, counted in the metrics' queue gauge while it measures.

use crate::metrics::Metrics;
use std::sync::Arc;
use tunehub_engine::measure::{MeasureBatch, MeasureResult, OnBuilt, OnResult};
use tunehub_engine::schedule::Schedule;
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;

pub(super) struct Metered {
    pub inner: Box<dyn MeasureBatch>,
    pub metrics: Arc<Metrics>,
}

impl MeasureBatch for Metered {
    fn target(&self) -> &Target {
        self.inner.target()
    }

    fn measure(&mut self, task: &Task, schedules: &[Schedule]) -> Vec<MeasureResult> {
        let _queued = self
            .metrics
            .queued(&self.inner.target().key(), schedules.len());
        self.inner.measure(task, schedules)
    }

    fn measure_elsewhere(
        &mut self,
        task: &Task,
        schedule: &Schedule,
        not_on: &[&str],
    ) -> Option<(MeasureResult, Option<String>)> {
        let _queued = self.metrics.queued(&self.inner.target().key(), 1);
        self.inner.measure_elsewhere(task, schedule, not_on)
    }

    fn disagreed(&mut self, device: &str, why: &str) {
        self.inner.disagreed(device, why);
    }

    fn agreed(&mut self, device: &str) {
        self.inner.agreed(device);
    }

    fn devices(&self) -> Vec<Option<String>> {
        self.inner.devices()
    }

    fn set_abort(&mut self, abort: Arc<dyn Fn() -> bool + Send + Sync>) {
        self.inner.set_abort(abort);
    }

    fn set_on_result(&mut self, on_result: OnResult) {
        self.inner.set_on_result(on_result);
    }

    fn set_on_built(&mut self, on_built: OnBuilt) {
        self.inner.set_on_built(on_built);
    }
}
