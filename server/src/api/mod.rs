//! The gRPC API (`proto/tunehub/v1/tunehub.proto`): request checking, conversions between the
//! proto messages and the store's rows, and one module per service; `records` also holds the
//! records file format, `distill` cuts such a file to the fastest records of each pair, and
//! `ansor` converts such a file to and from TVM auto_scheduler logs; `kernel` makes the
//! linkable kernel of an answer, `pack` many of them into one pack; `import_teaches`: the cost model an import trains; `range`: shape ranges
//! (dynamic shapes): their jobs, their answers, their dispatch table and their line in record
//! files; `model`: an ONNX model submitted whole, its tasks extracted here; `build`: a model compiled
//! as a C library (`tunehub-compiler`).
//!
//! Every request is checked in full before anything is stored: a bad input is a status that
//! says what was wrong (INVALID_ARGUMENT, NOT_FOUND), and the database is untouched.

pub mod build;
mod import_teaches;
pub mod job_feed;
pub mod jobs;
pub mod kernel;
mod measure_transfer;
pub mod model;
mod pack;
pub mod query;
pub mod range;
pub mod ranking_model;
pub mod records;
mod searched;
mod transfer;
pub mod tune_transferred;
pub mod watch_slots;

use crate::checks::limits::{
    MAX_EXPR, MAX_INPUT_NAME, MAX_KEY, MAX_LAYOUT_FREE, MAX_OP_SPEC, check_len,
};
use crate::config::Limits;
use crate::fleet::OwnerStore;
use crate::jobs::JobContext;
use crate::jobs::store::{JobRow, JobState, TaskStats};
use crate::jobs::waiting::{PoolView, pool_waiting};
use crate::records::{Record, RecordStore, SqlStore, now_ms};
pub(crate) use crate::status::store_status;
use crate::workload;
use std::collections::BTreeMap;
use tonic::Status;
use tunehub_engine::measure::ErrorCode;
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;
use tunehub_proto::v1 as pb;

/// What every service holds.
#[derive(Clone)]
pub struct Api {
    pub ctx: JobContext,
    pub limits: Limits,
    /// Generated kernels of answers (`kernel`).
    pub kernels: std::sync::Arc<kernel::KernelCache>,
    /// Saved cost models that rank zero-shot candidates (`transfer`).
    pub models: std::sync::Arc<ranking_model::ModelCache>,
    /// Trials of the background job queued for a workload answered by transfer (`None`: off).
    pub tune_transferred: Option<u32>,
    /// (workload, target) pairs this server queued such a job for.
    pub queued_transfers:
        std::sync::Arc<std::sync::Mutex<std::collections::HashSet<(String, String)>>>,
    /// One reader per watched job, shared by its watchers (`job_feed`).
    pub feeds: std::sync::Arc<job_feed::JobFeeds>,
    /// Open Watch streams per token (`watch_slots`).
    pub watch_slots: std::sync::Arc<watch_slots::WatchSlots>,
}

pub(crate) fn gflops(flops: u64, seconds: f64) -> f64 {
    if seconds > 0.0 && seconds.is_finite() {
        flops as f64 / seconds / 1e9
    } else {
        0.0
    }
}

impl Api {
    pub fn store(&self) -> &SqlStore {
        self.ctx.jobs.records()
    }

    /// The best record and record counts of (workload, target), through the answer cache.
    pub async fn cached(
        &self,
        workload_key: &str,
        target_key: &str,
    ) -> Result<std::sync::Arc<crate::cache::BestEntry>, Status> {
        self.ctx
            .cache
            .entry(self.store(), workload_key, target_key)
            .await
            .map_err(store_status)
    }

    /// The best record of (workload, target), through the answer cache.
    pub async fn cached_best(
        &self,
        workload_key: &str,
        target_key: &str,
    ) -> Result<Option<Record>, Status> {
        Ok(self.cached(workload_key, target_key).await?.best.clone())
    }

    pub fn local_target(&self) -> &Target {
        self.ctx.backend.target()
    }

    /// The task of a request's workload: its DAG with its options, and how it was written.
    /// Bad input is INVALID_ARGUMENT (or NOT_FOUND for an unknown workload key).
    pub async fn resolve_workload(&self, w: Option<&pb::Workload>) -> Result<Task, Status> {
        use pb::workload::Kind;
        let Some(w) = w.filter(|w| w.kind.is_some()) else {
            return Err(Status::invalid_argument(
                "no workload: give op_spec, expr or workload_key",
            ));
        };
        match &w.kind {
            Some(Kind::OpSpec(s)) => check_len("op_spec", s, MAX_OP_SPEC)?,
            Some(Kind::Expr(s)) => check_len("expr", s, MAX_EXPR)?,
            Some(Kind::WorkloadKey(s)) => check_len("workload_key", s, MAX_KEY)?,
            None => {}
        }
        if let Some(o) = &w.options {
            if o.layout_free.len() > MAX_LAYOUT_FREE {
                return Err(Status::invalid_argument(format!(
                    "options.layout_free names {} inputs; at most {MAX_LAYOUT_FREE}",
                    o.layout_free.len()
                )));
            }
            for n in &o.layout_free {
                check_len("a layout_free name", n, MAX_INPUT_NAME)?;
            }
        }
        if let Some(task) = workload::task_of(w) {
            return task.map_err(Status::invalid_argument);
        }
        let Some(Kind::WorkloadKey(key)) = &w.kind else {
            unreachable!("task_of builds every other kind")
        };
        let stored = self
            .store()
            .workload(key)
            .await
            .map_err(store_status)?
            .ok_or_else(|| Status::not_found(format!("unknown workload key '{key}'")))?;
        // The key names the options already; others given beside it are a contradiction.
        let mut asked = workload::options_from_pb(w.options.as_ref()).layout_free;
        let mut has = stored.options.layout_free.clone();
        asked.sort();
        has.sort();
        if !asked.is_empty() && asked != has {
            return Err(Status::invalid_argument(format!(
                "workload {key} has layout_free {has:?}, not {asked:?} (leave options unset \
                 with a workload_key)"
            )));
        }
        stored.to_task().map_err(Status::internal)
    }

    /// The target a job is to be measured on: this server's machine ("" or "local", or its
    /// key). A known target this server cannot measure on is FAILED_PRECONDITION, an unknown
    /// one NOT_FOUND.
    pub async fn measure_target(&self, t: &str) -> Result<Target, Status> {
        check_len("target", t, MAX_KEY)?;
        let local = self.local_target();
        if t.is_empty() || t == "local" || t == local.key() {
            return Ok(local.clone());
        }
        if let Some(target) = self.ctx.backend.target_for(t) {
            return Ok(target);
        }
        let known = self.store().target_json(t).await.map_err(store_status)?;
        // A fleet's target with no device online now: the job waits for one.
        if let Some(json) = known
            .as_deref()
            .filter(|_| self.ctx.backend.waits_for_devices())
            && let Ok(target) = serde_json::from_str::<Target>(json)
        {
            return Ok(target);
        }
        if known.is_some() {
            return Err(Status::failed_precondition(format!(
                "target '{t}' has records but this server measures only on {} (no runner for it)",
                local.key()
            )));
        }
        Err(Status::not_found(format!(
            "unknown target '{t}': this server measures on \"local\" ({})",
            local.key()
        )))
    }

    /// The target key of a query: "" or "local" is this server's machine; any other key must be
    /// in the database.
    pub async fn query_target(&self, t: &str) -> Result<String, Status> {
        check_len("target", t, MAX_KEY)?;
        let local = self.local_target().key();
        if t.is_empty() || t == "local" || t == local {
            return Ok(local);
        }
        if self
            .ctx
            .cache
            .target_known(self.store(), t)
            .await
            .map_err(store_status)?
        {
            Ok(t.to_string())
        } else {
            Err(Status::not_found(format!("unknown target '{t}'")))
        }
    }

    /// Why a job that has not ended is not measuring, or not alone: no device of its target
    /// ready; (queued) its pool full; (running) other jobs sharing its pool
    /// (`jobs::waiting::pool_waiting`).
    async fn waiting(&self, job: &JobRow) -> Result<String, Status> {
        if job.state.is_final() {
            return Ok(String::new());
        }
        if let Some(why) = self.ctx.backend.waiting(&job.target_key) {
            return self
                .served_elsewhere(&job.target_key)
                .await
                .map(|o| o.unwrap_or(why));
        }
        let others = self
            .ctx
            .jobs
            .running_jobs(&job.target_key, &job.id)
            .await
            .map_err(store_status)?;
        Ok(pool_waiting(&PoolView {
            target_key: &job.target_key,
            running: job.state == JobState::Running,
            priority: job.priority,
            others: &others,
            limit: self.ctx.pool_limit(&job.target_key),
            exclusive: self.ctx.backend.exclusive(&job.target_key),
        }))
    }

    /// For a pool this replica does not serve (its workers are sent to the replica that owns
    /// it, `fleet::owners`), which replica does: its jobs are measured there, so "no worker
    /// online" here would mislead.
    async fn served_elsewhere(&self, key: &str) -> Result<Option<String>, Status> {
        if self.ctx.backend.serves(key) {
            return Ok(None);
        }
        let owner = OwnerStore::new(self.store().clone())
            .live_owner(key, now_ms())
            .await
            .map_err(store_status)?;
        Ok(owner.map(|(owner, address)| {
            format!(
                "the workers of target {key} are served by server replica {owner} ({address}), \
                 which owns their pool: its jobs are measured there"
            )
        }))
    }

    /// A job as the API shows it, with each task's progress and best record.
    pub async fn job_proto(&self, job: &JobRow) -> Result<pb::Job, Status> {
        let jobs = &self.ctx.jobs;
        let tasks = jobs.tasks(&job.id).await.map_err(store_status)?;
        let stats = jobs.task_stats(&job.id).await.map_err(store_status)?;
        let mut out = vec![];
        for t in tasks {
            let w = self
                .store()
                .workload(&t.workload_key)
                .await
                .map_err(store_status)?;
            let (desc, flops, options) = w.map_or((String::new(), 0, None), |w| {
                let options = workload::options_to_pb(&w.options);
                (w.description.unwrap_or_default(), w.flops, options)
            });
            let s = stats.get(&t.idx).cloned().unwrap_or_default();
            let best = self.cached_best(&t.workload_key, &job.target_key).await?;
            let mut progress = task_progress(&t, &s, desc, flops, best.as_ref());
            progress.options = options;
            out.push(progress);
        }
        let estimate = estimate(&mut out);
        Ok(pb::Job {
            estimate,
            id: job.id.clone(),
            name: job.name.clone(),
            state: job_state(job.state) as i32,
            target_key: job.target_key.clone(),
            seed: job.seed,
            batch_size: job.batch_size,
            scheduler: scheduler_kind(&job.scheduler) as i32,
            tasks: out,
            created_at_ms: job.created_at,
            updated_at_ms: job.updated_at,
            error: job.error.clone(),
            claimed_by: job.claimed_by.clone().unwrap_or_default(),
            claims: job.claims,
            owner: job.owner.clone(),
            priority: job.priority,
            model: job.model_start.clone(),
            cost_model: job.cost_model.as_str().to_string(),
            group: job.group.clone(),
            range: self
                .store()
                .range_of_job(&job.id)
                .await
                .map_err(store_status)?
                .as_ref()
                .map(range::range_ref),
            waiting: self.waiting(job).await?,
        })
    }
}

/// The job's end-to-end estimate (the sum over its tasks but the alternatives of weight x best
/// time), each such task's share of it filled in; `None` while none of them has a best.
pub fn estimate(tasks: &mut [pb::TaskProgress]) -> Option<pb::Estimate> {
    let network = || tasks.iter().filter(|t| !t.alternative);
    let seconds: f64 = network()
        .filter_map(|t| t.best_seconds.map(|b| t.weight * b))
        .sum();
    let missing = network().filter(|t| t.best_seconds.is_none()).count() as u32;
    if missing as usize == network().count() {
        return None;
    }
    for t in tasks.iter_mut().filter(|t| !t.alternative) {
        t.share = t.best_seconds.map(|b| {
            if seconds > 0.0 {
                t.weight * b / seconds
            } else {
                0.0
            }
        });
    }
    Some(pb::Estimate { seconds, missing })
}

fn task_progress(
    t: &crate::jobs::store::TaskRow,
    s: &TaskStats,
    description: String,
    flops: u64,
    best: Option<&Record>,
) -> pb::TaskProgress {
    let errors: BTreeMap<String, u32> = s
        .errors
        .iter()
        .map(|(code, n)| {
            let name = ErrorCode::from_code(*code)
                .map_or_else(|| format!("error_{code}"), |e| e.name().to_string());
            (name, *n)
        })
        .collect();
    let best_seconds = best.and_then(|b| b.mean_cost);
    pb::TaskProgress {
        index: t.idx,
        workload_key: t.workload_key.clone(),
        description,
        options: None,
        flops,
        weight: t.weight,
        trials: t.trials,
        trials_done: s.trials_done,
        ok: s.ok,
        noisy: s.noisy,
        errors: s.trials_done - s.ok,
        new_records: s.new_records,
        best_seconds,
        best_gflops: best_seconds.map(|c| gflops(flops, c)),
        best_record_id: best.map(|b| b.id.clone()).unwrap_or_default(),
        last_error: t.last_error.clone(),
        exhausted: t.exhausted,
        error_counts: errors.into_iter().collect(),
        dropped: t.dropped,
        share: None,
        alternative: t.alternative,
        rounds: t.times.rounds,
        search_s: t.times.search_s,
        model_s: t.times.model_s,
        measure_s: t.times.measure_s,
        build_s: t.times.build_s,
        run_s: t.times.run_s,
    }
}

pub fn job_state(s: JobState) -> pb::JobState {
    match s {
        JobState::Queued => pb::JobState::Queued,
        JobState::Running => pb::JobState::Running,
        JobState::Done => pb::JobState::Done,
        JobState::Failed => pb::JobState::Failed,
        JobState::Cancelled => pb::JobState::Cancelled,
    }
}

pub fn scheduler_kind(s: &str) -> pb::SchedulerKind {
    match s {
        "gradient" => pb::SchedulerKind::Gradient,
        _ => pb::SchedulerKind::RoundRobin,
    }
}

/// A record as the API shows it.
pub fn schedule_record(r: &Record, flops: u64) -> pb::ScheduleRecord {
    let seconds = r.mean_cost.unwrap_or(f64::NAN);
    pb::ScheduleRecord {
        record_id: r.id.clone(),
        workload_key: r.workload_key.clone(),
        target_key: r.target_key.clone(),
        steps_json: r.steps_json.clone(),
        seconds,
        costs: r.costs.clone(),
        gflops: gflops(flops, seconds),
        worker: r.worker.clone().unwrap_or_default(),
        created_at_ms: r.created_at,
        noisy: r.noisy,
    }
}
