//! The Jobs service: submit, get, list, cancel, watch (submitting a model: `model`).

use super::{Api, store_status};
use crate::auth::Principal;
use crate::checks::limits::{MAX_BATCH, MAX_KEY, MAX_NAME, check_len};
use crate::checks::memory::check_workload_bytes;
use crate::jobs::cost_model::CostModelChoice;
use crate::jobs::live::{Candidate, Stage};
use crate::jobs::store::{JobState, NewJob, NewTask};
use crate::records::RecordStore;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::sync::broadcast::error::RecvError;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};
use tunehub_engine::measure::MeasureOptions;
use tunehub_engine::target::Target;
use tunehub_proto::v1 as pb;
use tunehub_proto::v1::jobs_server::Jobs;

pub use crate::jobs::priority::{MAX_PRIORITY, MIN_PRIORITY};
/// Most targets of one submission (`SubmitRequest.targets`).
pub const MAX_TARGETS: usize = 16;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `m`'s fields over `base`'s, every field set: what a job given `m` measures with when what
/// it tunes has defaults of its own (a model's tasks: [`MeasureOptions::cold`]).
pub fn measure_over(base: &MeasureOptions, m: Option<&pb::MeasureOptions>) -> pb::MeasureOptions {
    let m = m.cloned().unwrap_or_default();
    pb::MeasureOptions {
        number: m.number.or(Some(base.number)),
        repeat: m.repeat.or(Some(base.repeat)),
        min_repeat_ms: m.min_repeat_ms.or(Some(base.min_repeat_ms)),
        warmup: m.warmup.or(Some(base.warmup)),
        flush_cache: m.flush_cache.or(Some(base.flush_cache)),
        timeout_s: m.timeout_s.or(Some(base.run_timeout_s)),
        noise_threshold: m.noise_threshold.or(Some(base.noise_threshold)),
    }
}

/// The request's measure options over the defaults, checked.
pub fn measure_options(m: Option<&pb::MeasureOptions>) -> Result<MeasureOptions, Status> {
    let mut o = MeasureOptions::default();
    let Some(m) = m else { return Ok(o) };
    let bad = |what: &str| Err(Status::invalid_argument(format!("measure.{what}")));
    if let Some(n) = m.number {
        if !(1..=1_000_000).contains(&n) {
            return bad("number must be 1 to 1000000");
        }
        o.number = n;
    }
    if let Some(n) = m.repeat {
        if !(1..=1000).contains(&n) {
            return bad("repeat must be 1 to 1000");
        }
        o.repeat = n;
    }
    if let Some(n) = m.min_repeat_ms {
        if n > 600_000 {
            return bad("min_repeat_ms must be at most 600000");
        }
        o.min_repeat_ms = n;
    }
    if let Some(n) = m.warmup {
        if n > 1000 {
            return bad("warmup must be at most 1000");
        }
        o.warmup = n;
    }
    if let Some(f) = m.flush_cache {
        o.flush_cache = f;
    }
    if let Some(t) = m.timeout_s {
        if !(t.is_finite() && t > 0.0 && t <= 86_400.0) {
            return bad("timeout_s must be more than 0 and at most 86400");
        }
        o.run_timeout_s = t;
    }
    if let Some(f) = m.noise_threshold {
        if !(0.0..=1.0).contains(&f) {
            return bad("noise_threshold must be between 0 and 1");
        }
        o.noise_threshold = f;
    }
    Ok(o)
}

impl Api {
    /// The targets of a submission: `target`, or each of `targets` (distinct, every unknown
    /// key named in one NOT_FOUND).
    pub(super) async fn submit_targets(
        &self,
        req: &pb::SubmitRequest,
    ) -> Result<Vec<Target>, Status> {
        if req.targets.is_empty() {
            return Ok(vec![self.measure_target(&req.target).await?]);
        }
        if !req.target.is_empty() {
            return Err(Status::invalid_argument(
                "target and targets are exclusive: name one target, or several in targets",
            ));
        }
        if req.targets.len() > MAX_TARGETS {
            return Err(Status::invalid_argument(format!(
                "{} targets: a submission names at most {MAX_TARGETS}",
                req.targets.len()
            )));
        }
        let mut out: Vec<Target> = vec![];
        let mut unknown = vec![];
        for t in &req.targets {
            match self.measure_target(t).await {
                Ok(target) => {
                    if out.iter().any(|o| o.key() == target.key()) {
                        return Err(Status::invalid_argument(format!(
                            "target '{t}' is named twice (as {})",
                            target.key()
                        )));
                    }
                    out.push(target);
                }
                Err(e) if e.code() == tonic::Code::NotFound => unknown.push(format!("'{t}'")),
                Err(e) => return Err(e),
            }
        }
        if !unknown.is_empty() {
            return Err(Status::not_found(format!(
                "unknown target{} {}: this server measures on \"local\" ({}) and its fleet's \
                 targets",
                if unknown.len() > 1 { "s" } else { "" },
                unknown.join(", "),
                self.local_target().key()
            )));
        }
        Ok(out)
    }

    /// Checks a submission in full, then stores it, owned by `owner` (the token's name):
    /// workloads, the targets, one job per target and their tasks. Nothing is written unless
    /// everything is valid.
    pub async fn submit_job(
        &self,
        req: &pb::SubmitRequest,
        owner: &str,
    ) -> Result<Vec<pb::Job>, Status> {
        let limits = self.limits;
        check_len("name", &req.name, MAX_NAME)?;
        // A shape range is submitted as its representative shapes, checked as any task.
        let range = match &req.range {
            Some(_) if !req.tasks.is_empty() => {
                return Err(Status::invalid_argument(
                    "range and tasks are exclusive: a range job's tasks are its representative \
                     shapes",
                ));
            }
            Some(r) => Some(super::range::submitted_range(r)?),
            None => None,
        };
        let task_specs: &[pb::TaskSpec] = match &range {
            Some(r) => &r.tasks,
            None => &req.tasks,
        };
        if task_specs.is_empty() {
            return Err(Status::invalid_argument("a job needs at least one task"));
        }
        if task_specs.len() > limits.max_tasks_per_job as usize {
            return Err(Status::invalid_argument(format!(
                "{} tasks: this server takes at most {} per job",
                task_specs.len(),
                limits.max_tasks_per_job
            )));
        }
        let targets = self.submit_targets(req).await?;
        let mut tasks = vec![];
        let mut total: u64 = 0;
        for (i, t) in task_specs.iter().enumerate() {
            let task = self
                .resolve_workload(t.workload.as_ref())
                .await
                .map_err(|s| Status::new(s.code(), format!("task {i}: {}", s.message())))?;
            // Before anything is stored: a job of it would end at 0 trials, every run failing.
            check_workload_bytes(&task).map_err(|e| {
                Status::invalid_argument(format!(
                    "task {i} ({}): {e}: give smaller sizes",
                    task.desc.lines().next().unwrap_or("")
                ))
            })?;
            if t.trials == 0 {
                return Err(Status::invalid_argument(format!(
                    "task {i}: trials must be at least 1"
                )));
            }
            if t.trials > limits.max_trials_per_job {
                return Err(Status::invalid_argument(format!(
                    "task {i}: {} trials exceed this server's limit of {} per job",
                    t.trials, limits.max_trials_per_job
                )));
            }
            if !(t.weight.is_finite() && t.weight >= 0.0) {
                return Err(Status::invalid_argument(format!(
                    "task {i}: weight {} must be a finite number >= 0",
                    t.weight
                )));
            }
            total += u64::from(t.trials);
            let weight = if t.weight == 0.0 { 1.0 } else { t.weight };
            tasks.push((task, weight, t.trials, t.alternative));
        }
        if tasks.iter().all(|t| t.3) {
            return Err(Status::invalid_argument(
                "every task is an alternative: a job needs a task of the network itself",
            ));
        }
        if total > u64::from(limits.max_trials_per_job) {
            return Err(Status::invalid_argument(format!(
                "{total} trials in all exceed this server's limit of {} per job",
                limits.max_trials_per_job
            )));
        }
        if req.batch_size > MAX_BATCH {
            return Err(Status::invalid_argument(format!(
                "batch_size {} is more than {MAX_BATCH}",
                req.batch_size
            )));
        }
        if !(MIN_PRIORITY..=MAX_PRIORITY).contains(&req.priority) {
            return Err(Status::invalid_argument(format!(
                "priority {} is out of range: {MIN_PRIORITY} to {MAX_PRIORITY}",
                req.priority
            )));
        }
        let measure = measure_options(req.measure.as_ref())?;
        let cost_model =
            CostModelChoice::parse(&req.cost_model).map_err(Status::invalid_argument)?;
        // Unspecified: Ansor's gradient scheduler, which weighs the tasks and shares their
        // trials, except for a range, whose representative shapes are equals: each takes its
        // trials in turn (the proto says so).
        let scheduler = match pb::SchedulerKind::try_from(req.scheduler) {
            Ok(pb::SchedulerKind::RoundRobin) => "round_robin",
            Ok(pb::SchedulerKind::Unspecified) if range.is_some() => "round_robin",
            Ok(_) => "gradient",
            Err(_) => {
                return Err(Status::invalid_argument(format!(
                    "unknown scheduler {}",
                    req.scheduler
                )));
            }
        };
        let seed = if req.seed == 0 {
            rand::random::<u64>() >> 1
        } else {
            req.seed
        };

        // Valid: store it.
        let store = self.store();
        for target in &targets {
            let target_json = serde_json::to_string(target).expect("a target serializes");
            store
                .put_target(&target.key(), &target_json)
                .await
                .map_err(store_status)?;
        }
        let mut rows = vec![];
        for (task, weight, trials, alternative) in &tasks {
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
            rows.push(NewTask {
                workload_key: task.key.clone(),
                weight: *weight,
                trials: *trials,
                alternative: *alternative,
            });
        }
        // One job per target; several share a group id.
        let group = if req.targets.is_empty() {
            String::new()
        } else {
            format!("g-{:016x}", rand::random::<u64>())
        };
        let rep_tasks: Vec<&tunehub_engine::task::Task> = tasks.iter().map(|(t, ..)| t).collect();
        let new_jobs: Vec<NewJob> = targets
            .iter()
            .map(|target| NewJob {
                name: match &range {
                    Some(r) if req.name.is_empty() => format!("range {}", r.range.spec()),
                    _ => req.name.clone(),
                },
                target_key: target.key(),
                seed,
                batch_size: if req.batch_size == 0 {
                    limits.default_batch
                } else {
                    req.batch_size
                },
                scheduler: scheduler.into(),
                measure: measure.clone(),
                owner: owner.to_string(),
                priority: req.priority,
                group: group.clone(),
                cost_model,
                tasks: rows.clone(),
                range: range.as_ref().map(|r| r.row(&target.key(), &rep_tasks)),
            })
            .collect();
        let ids = self
            .ctx
            .jobs
            .create_all(&new_jobs)
            .await
            .map_err(store_status)?;
        tracing::info!(job_ids = ?ids, group = %group, tasks = tasks.len(), total, "job queued");
        self.ctx.changed();
        let mut out = vec![];
        for id in &ids {
            out.push(self.get_job(id).await?);
        }
        Ok(out)
    }

    pub async fn get_job(&self, id: &str) -> Result<pb::Job, Status> {
        check_len("id", id, MAX_KEY)?;
        let job = self
            .ctx
            .jobs
            .get(id)
            .await
            .map_err(store_status)?
            .ok_or_else(|| Status::not_found(format!("no job '{id}'")))?;
        self.job_proto(&job).await
    }
}

/// Events between two views of a job.
fn diff(job_id: &str, old: &pb::Job, new: &pb::Job) -> Vec<pb::JobEvent> {
    use pb::job_event::Event;
    let mut out = vec![];
    let ev = |e: Event| pb::JobEvent {
        job_id: job_id.to_string(),
        at_ms: now_ms(),
        event: Some(e),
    };
    // Why it waits (no worker, a quarantined one) changes without a round: the job as it is.
    if new.waiting != old.waiting {
        out.push(ev(Event::Snapshot(new.clone())));
    }
    let mut rounds = false;
    for (i, t) in new.tasks.iter().enumerate() {
        let Some(o) = old.tasks.get(i) else { continue };
        rounds |= t.trials_done != o.trials_done;
        if t.trials_done != o.trials_done || t.exhausted != o.exhausted {
            out.push(ev(Event::Round(t.clone())));
        }
        if t.errors > o.errors {
            out.push(ev(Event::Error(pb::TaskError {
                task_index: t.index,
                errors: t.errors,
                message: t.last_error.clone(),
            })));
        }
        if !t.best_record_id.is_empty() && t.best_record_id != o.best_record_id {
            out.push(ev(Event::NewBest(pb::NewBest {
                task_index: t.index,
                record_id: t.best_record_id.clone(),
                seconds: t.best_seconds.unwrap_or(f64::NAN),
                gflops: t.best_gflops.unwrap_or(0.0),
            })));
        }
    }
    // After the rounds, the end-to-end estimate they leave.
    if let (true, Some(e)) = (rounds, &new.estimate) {
        out.push(ev(Event::Estimate(*e)));
    }
    out
}

/// Candidates the job's stored rounds measured, over all its tasks.
fn trials_done(job: &pb::Job) -> u32 {
    job.tasks.iter().map(|t| t.trials_done).sum()
}

/// How far a watcher's candidate events went: the count (the snapshot's, a round's, a
/// candidate's) and the last event's `seq` (builds leave the count where it was).
#[derive(Default)]
struct Told {
    done: u32,
    seq: u64,
}

/// Sends candidate `c` unless `told` is past it; `false` when the watcher is gone.
async fn send_candidate(
    tx: &tokio::sync::mpsc::Sender<Result<pb::JobEvent, Status>>,
    c: &Candidate,
    told: &mut Told,
) -> bool {
    let newer = match c.stage {
        Stage::Measured => c.job_done > told.done,
        Stage::Built => c.job_done > told.done || (c.job_done == told.done && c.seq > told.seq),
    };
    if !newer {
        return true;
    }
    *told = Told {
        done: c.job_done,
        seq: c.seq,
    };
    let e = pb::JobEvent {
        job_id: c.job_id.clone(),
        at_ms: now_ms(),
        event: Some(pb::job_event::Event::Candidate(candidate_proto(c))),
    };
    tx.send(Ok(e)).await.is_ok()
}

fn candidate_proto(c: &Candidate) -> pb::CandidateProgress {
    pb::CandidateProgress {
        stage: match c.stage {
            Stage::Built => pb::CandidateStage::Built,
            Stage::Measured => pb::CandidateStage::Measured,
        } as i32,
        round_built: c.round_built,
        round_size: c.round_size,
        task_index: c.task,
        task_done: c.task_done,
        task_trials: c.task_trials,
        job_done: c.job_done,
        job_trials: c.job_trials,
        ok: c.ok,
        noisy: c.noisy,
        error: c.error.clone(),
        trials_per_s: c.trials_per_s,
        eta_s: c.eta_s,
    }
}

pub(super) fn is_final(state: i32) -> bool {
    pb::JobState::try_from(state).is_ok_and(|s| {
        matches!(
            s,
            pb::JobState::Done | pb::JobState::Failed | pb::JobState::Cancelled
        )
    })
}

type EventStream = Pin<Box<dyn Stream<Item = Result<pb::JobEvent, Status>> + Send>>;

#[tonic::async_trait]
impl Jobs for Api {
    async fn submit(
        &self,
        req: Request<pb::SubmitRequest>,
    ) -> Result<Response<pb::SubmitResponse>, Status> {
        if self.ctx.shutting_down() {
            return Err(Status::unavailable(
                "this server is shutting down and takes no new jobs: submit to another server \
                 of the same database, or again once it is back",
            ));
        }
        let owner = Principal::of(&req).name;
        let jobs = self.submit_job(req.get_ref(), &owner).await?;
        Ok(Response::new(pb::SubmitResponse {
            job: jobs.first().cloned(),
            jobs,
        }))
    }

    async fn submit_model(
        &self,
        req: Request<pb::SubmitModelRequest>,
    ) -> Result<Response<pb::SubmitModelResponse>, Status> {
        if self.ctx.shutting_down() {
            return Err(Status::unavailable(
                "this server is shutting down and takes no new jobs: submit to another server \
                 of the same database, or again once it is back",
            ));
        }
        let owner = Principal::of(&req).name;
        // Owned: the model's bytes move to the extraction rather than being copied.
        let resp = self.submit_model_job(req.into_inner(), &owner).await?;
        Ok(Response::new(resp))
    }

    async fn get(&self, req: Request<pb::GetJobRequest>) -> Result<Response<pb::Job>, Status> {
        Ok(Response::new(self.get_job(&req.get_ref().id).await?))
    }

    async fn list(
        &self,
        req: Request<pb::ListJobsRequest>,
    ) -> Result<Response<pb::ListJobsResponse>, Status> {
        let r = req.get_ref();
        let mut states = vec![];
        for s in &r.states {
            let state = match pb::JobState::try_from(*s) {
                Ok(pb::JobState::Queued) => JobState::Queued,
                Ok(pb::JobState::Running) => JobState::Running,
                Ok(pb::JobState::Done) => JobState::Done,
                Ok(pb::JobState::Failed) => JobState::Failed,
                Ok(pb::JobState::Cancelled) => JobState::Cancelled,
                _ => return Err(Status::invalid_argument(format!("unknown job state {s}"))),
            };
            states.push(state);
        }
        let limit = if r.limit == 0 {
            100
        } else {
            r.limit.min(10_000)
        };
        check_len("group", &r.group, MAX_KEY)?;
        let rows = self
            .ctx
            .jobs
            .list(&states, &r.group, limit)
            .await
            .map_err(store_status)?;
        let mut jobs = vec![];
        for j in &rows {
            jobs.push(self.job_proto(j).await?);
        }
        Ok(Response::new(pb::ListJobsResponse { jobs }))
    }

    async fn cancel(
        &self,
        req: Request<pb::CancelJobRequest>,
    ) -> Result<Response<pb::Job>, Status> {
        let id = &req.get_ref().id;
        check_len("id", id, MAX_KEY)?;
        let caller = Principal::of(&req);
        if !caller.is_admin() {
            let job = self.get_job(id).await?;
            if job.owner != caller.name {
                return Err(Status::permission_denied(format!(
                    "job '{id}' was submitted by '{}': token '{}' ({} role) cancels only its own \
                     jobs",
                    job.owner, caller.name, caller.role
                )));
            }
        }
        let job = self
            .ctx
            .jobs
            .cancel(id)
            .await
            .map_err(store_status)?
            .ok_or_else(|| Status::not_found(format!("no job '{id}'")))?;
        self.ctx.changed();
        Ok(Response::new(self.job_proto(&job).await?))
    }

    async fn trials(
        &self,
        req: Request<pb::JobTrialsRequest>,
    ) -> Result<Response<pb::JobTrialsResponse>, Status> {
        let id = &req.get_ref().id;
        let job = self.get_job(id).await?;
        let mut tasks: Vec<pb::TaskTrials> = (0..job.tasks.len() as u32)
            .map(|i| pb::TaskTrials {
                task_index: i,
                trials: vec![],
            })
            .collect();
        for (task, at_ms, seconds, noisy) in self.ctx.jobs.trials(id).await.map_err(store_status)? {
            if let Some(t) = tasks.get_mut(task as usize) {
                t.trials.push(pb::Trial {
                    at_ms,
                    seconds,
                    noisy,
                });
            }
        }
        Ok(Response::new(pb::JobTrialsResponse {
            job: Some(job),
            tasks,
        }))
    }

    type WatchStream = EventStream;

    async fn watch(&self, req: Request<pb::WatchRequest>) -> Result<Response<EventStream>, Status> {
        use pb::job_event::Event;
        let slot = self.watch_slots.take(&Principal::of(&req).name)?;
        let id = req.get_ref().id.clone();
        // Before the snapshot: no candidate measured after it is missed.
        let mut live = self.ctx.live.subscribe();
        let first = self.get_job(&id).await?;
        // The job's one feed (this read starts it if none runs); its current read is the
        // snapshot, so that every later read it brings is newer.
        let mut feed = self.feeds.subscribe(self, &id, Arc::new(first));
        let mut last = match &*feed.borrow_and_update() {
            Ok(j) => (**j).clone(),
            Err(e) => return Err(e.clone()),
        };
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let api = self.clone();
        tokio::spawn(async move {
            // Held while the stream is: given back when this task ends.
            let _slot = slot;
            let snap = pb::JobEvent {
                job_id: id.clone(),
                at_ms: now_ms(),
                event: Some(Event::Snapshot(last.clone())),
            };
            if tx.send(Ok(snap)).await.is_err() {
                return;
            }
            // Candidates go out in order of their counts, none older than what was sent (the
            // round in progress told again, a broadcast already in the snapshot's counts).
            let mut told = Told {
                done: trials_done(&last),
                seq: 0,
            };
            for c in api.ctx.live.current(&id) {
                if !send_candidate(&tx, &c, &mut told).await {
                    return;
                }
            }
            loop {
                if is_final(last.state) {
                    let done = pb::JobEvent {
                        job_id: id.clone(),
                        at_ms: now_ms(),
                        event: Some(Event::Done(last.clone())),
                    };
                    let _ = tx.send(Ok(done)).await;
                    return;
                }
                // Biased: a round's candidates, sent before it is stored, go out before the
                // round they end.
                tokio::select! {
                    biased;
                    c = live.recv() => {
                        match c {
                            Ok(c) if c.job_id == id => {
                                if !send_candidate(&tx, &c, &mut told).await {
                                    return;
                                }
                            }
                            // Another job's, or skipped by a slow watcher (counts are totals).
                            Ok(_) | Err(RecvError::Lagged(_)) => {}
                            Err(RecvError::Closed) => return,
                        }
                        continue;
                    }
                    read = feed.changed() => {
                        // The feed ended without this job's end (it retired as this watcher
                        // joined, or the server stops): join the job's current feed.
                        let ended = feed.borrow().as_ref().map_or(true, |j| is_final(j.state));
                        if read.is_err() && !ended && !api.ctx.shutting_down() {
                            feed = api.feeds.subscribe(&api, &id, Arc::new(last.clone()));
                            continue;
                        }
                    }
                    () = tx.closed() => return,
                }
                // A stream left open would hold the server's graceful stop.
                if api.ctx.shutting_down() {
                    let _ = tx
                        .send(Err(Status::unavailable(
                            "this server is shutting down: watch the job again on another \
                             server of the same database, or once it is back",
                        )))
                        .await;
                    return;
                }
                let read = feed.borrow_and_update().clone();
                let now = match read {
                    Ok(j) => (*j).clone(),
                    Err(e) => {
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                };
                for e in diff(&id, &last, &now) {
                    if tx.send(Ok(e)).await.is_err() {
                        return;
                    }
                }
                told.done = told.done.max(trials_done(&now));
                last = now;
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}
