//! The whole path from schedules to verified timings for one task: generate each candidate's
//! C, build them in parallel, run them one at a time, check them against the task's reference.

use super::{
    BuildInput, Builder, ErrorCode, LocalBuilder, LocalRunner, MeasureOptions, MeasureResult,
    Runner, measure_batch_each,
};
use crate::codegen::{self, GeneratedKernel};
use crate::schedule::Schedule;
use crate::target::Target;
use crate::task::Task;
use std::sync::Arc;

/// Told of each candidate of a batch as its result is known (its index in the batch, in any
/// order): progress per candidate for whoever waits on a batch of 64 (the service's Watch).
pub type OnResult = Arc<dyn Fn(usize, &MeasureResult) + Send + Sync>;

/// Told of each candidate of a batch as its build ends (compiled, or failed to), its run still
/// to come: progress while a batch builds.
pub type OnBuilt = Arc<dyn Fn(usize) + Send + Sync>;

/// Measures batches of one task's schedules: the job driver's seam. [`Measurer`] does it on
/// this machine; the server's fleet backend hands the batch to remote workers.
pub trait MeasureBatch: Send {
    fn target(&self) -> &Target;
    /// One result per schedule, in order.
    fn measure(&mut self, task: &Task, schedules: &[Schedule]) -> Vec<MeasureResult>;
    /// The device that measured each result of the last batch, where it was not this machine.
    fn devices(&self) -> Vec<Option<String>> {
        vec![]
    }
    /// A check the measurer may poll while it waits on others (remote devices): when it says
    /// true, the batch is abandoned and fewer results (none) come back.
    fn set_abort(&mut self, _abort: std::sync::Arc<dyn Fn() -> bool + Send + Sync>) {}
    /// Where to tell each result of every later batch as it is known. A measurer that does
    /// not call it tells nothing before its batch returns.
    fn set_on_result(&mut self, _on_result: OnResult) {}
    /// Where to tell each build of every later batch as it ends; a remote measurer tells none.
    fn set_on_built(&mut self, _on_built: OnBuilt) {}
    /// Measures `schedule` once more, on another device than those in `not_on` when there is
    /// one, the first of them only when no other could (a new best's confirmation, a dispute's
    /// tie-break: a device's time is not trusted on its own word); the result and the device
    /// that measured it (`None`: this machine).
    fn measure_elsewhere(
        &mut self,
        task: &Task,
        schedule: &Schedule,
        _not_on: &[&str],
    ) -> Option<(MeasureResult, Option<String>)> {
        let r = self.measure(task, std::slice::from_ref(schedule)).pop()?;
        Some((r, self.devices().first().cloned().flatten()))
    }
    /// `device` timed a candidate faster than another device did, beyond the noise bound
    /// (`why`): a sign of a lying device, for the measurer to count against it.
    fn disagreed(&mut self, _device: &str, _why: &str) {}
    /// `device`'s time of a candidate agreed with another device's.
    fn agreed(&mut self, _device: &str) {}
}

impl MeasureBatch for Measurer {
    fn target(&self) -> &Target {
        &self.target
    }

    fn measure(&mut self, task: &Task, schedules: &[Schedule]) -> Vec<MeasureResult> {
        Measurer::measure(self, task, schedules)
    }

    fn set_on_result(&mut self, on_result: OnResult) {
        self.on_result = Some(on_result);
    }

    fn set_on_built(&mut self, on_built: OnBuilt) {
        self.on_built = Some(on_built);
    }
}

pub struct Measurer {
    target: Target,
    builder: Box<dyn Builder>,
    runner: Box<dyn Runner>,
    on_result: Option<OnResult>,
    on_built: Option<OnBuilt>,
}

impl Measurer {
    /// Local build with the target's compiler, local isolated runs.
    pub fn new(target: &Target, opts: MeasureOptions) -> Self {
        let builder = LocalBuilder::new(target, &opts);
        let runner = LocalRunner::new(target, opts);
        Measurer::with_parts(target, Box::new(builder), Box::new(runner))
    }

    /// Any builder and runner (remote ones, fault-injecting ones in tests).
    pub fn with_parts(target: &Target, builder: Box<dyn Builder>, runner: Box<dyn Runner>) -> Self {
        Measurer {
            target: target.clone(),
            builder,
            runner,
            on_result: None,
            on_built: None,
        }
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    /// One result per schedule, in order. A schedule that does not replay or lower is an
    /// `InvalidSchedule` result, not an error of the call.
    pub fn measure(&mut self, task: &Task, schedules: &[Schedule]) -> Vec<MeasureResult> {
        let opts = task.lower_options();
        let kernels: Vec<Result<GeneratedKernel, MeasureResult>> = schedules
            .iter()
            .map(|s| {
                codegen::generate_with(&task.dag, s, &self.target, &opts)
                    .map_err(|e| MeasureResult::error(ErrorCode::InvalidSchedule, e.to_string()))
            })
            .collect();
        self.measure_kernels(task, kernels)
    }

    /// Measures already generated kernels (or carries their generation errors through).
    pub fn measure_kernels(
        &mut self,
        task: &Task,
        kernels: Vec<Result<GeneratedKernel, MeasureResult>>,
    ) -> Vec<MeasureResult> {
        let expected = task.reference();
        let threads = self.target.cores.max(1);
        let mut results: Vec<Option<MeasureResult>> = vec![None; kernels.len()];
        let mut inputs = vec![];
        let mut idx = vec![];
        for (i, k) in kernels.into_iter().enumerate() {
            match k {
                Ok(k) => {
                    idx.push(i);
                    inputs.push((
                        BuildInput {
                            kernel_source: k.source,
                            args: k.args,
                            threads,
                        },
                        expected.as_slice(),
                    ));
                }
                Err(e) => {
                    if let Some(f) = &self.on_result {
                        f(i, &e);
                    }
                    results[i] = Some(e);
                }
            }
        }
        let on_result = self.on_result.clone();
        let on_built = self.on_built.clone();
        let measured = measure_batch_each(
            self.builder.as_ref(),
            self.runner.as_mut(),
            &inputs,
            &|k| {
                if let Some(f) = &on_built {
                    f(idx[k]);
                }
            },
            &mut |k, r| {
                if let Some(f) = &on_result {
                    f(idx[k], r);
                }
            },
        );
        for (i, r) in idx.iter().zip(measured) {
            results[*i] = Some(r);
        }
        results
            .into_iter()
            .map(|r| r.expect("every input has a result"))
            .collect()
    }
}
