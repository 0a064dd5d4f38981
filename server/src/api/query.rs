//! The Query service: what compilers ask. Best records and their counts come from the cache in
//! front of the database.

use super::kernel::{KernelOf, kernel_to_pb};
use super::{Api, gflops, schedule_record, store_status};
use crate::answer_cache::{Kept, NoRecordAnswer};
use crate::auth::Principal;
use crate::checks::memory::check_workload_bytes;
use crate::records::RecordStore;
use crate::workload;
use std::sync::Arc;
use tonic::{Request, Response, Status};
use tunehub_engine::package;
use tunehub_engine::task::Task;
use tunehub_proto::v1 as pb;
use tunehub_proto::v1::query_server::Query;

/// TopK answers carry the kernels of at most this many records (the fastest).
const TOP_K_KERNELS: usize = 64;

/// What an answer carries besides the record (the request's kernel options).
#[derive(Clone, Copy)]
pub(super) struct Want<'a> {
    source: bool,
    kernel: bool,
    prefix: &'a str,
}

impl<'a> Want<'a> {
    /// The options of a request; INVALID_ARGUMENT for a prefix that is not a C identifier.
    pub(super) fn new(
        source: bool,
        omit_kernel: bool,
        prefix: &'a str,
    ) -> Result<Want<'a>, Status> {
        if !prefix.is_empty() {
            package::check_identifier("symbol prefix", prefix)
                .map_err(|e| Status::invalid_argument(e.to_string()))?;
        }
        Ok(Want {
            source,
            kernel: !omit_kernel,
            prefix,
        })
    }
}

impl Api {
    /// The answer for a workload with no record on the target: from a tuned shape range that
    /// holds it (asked or not), else, with `allow_transfer`, from its tuned neighbours. Answers
    /// with `allow_transfer` are kept in memory ([`crate::answer_cache`]): a repeat is not made
    /// again.
    async fn no_record_answer(
        &self,
        task: &Arc<Task>,
        workload: Option<&pb::Workload>,
        target_key: &str,
        allow_transfer: bool,
    ) -> Result<Kept, Status> {
        let answers = &self.ctx.cache.answers;
        if allow_transfer && let Some(kept) = answers.get(&task.key, target_key) {
            if kept.as_ref().is_some_and(|a| a.range.is_none()) {
                self.tune_transferred(task, workload, target_key).await;
            }
            return Ok(kept);
        }
        let started = answers.now();
        let answer = if let Some((t, range)) = self.range_answer(task, target_key).await? {
            Some(NoRecordAnswer {
                record: t.record,
                transfer: t.transfer,
                range: Some(range),
            })
        } else if allow_transfer && let Some(t) = self.transferred(task, target_key).await? {
            self.tune_transferred(task, workload, target_key).await;
            Some(NoRecordAnswer {
                record: t.record,
                transfer: t.transfer,
                range: None,
            })
        } else {
            None
        };
        let answer = answer.map(Arc::new);
        if allow_transfer {
            answers.put(&task.key, target_key, answer.clone(), started);
        }
        Ok(answer)
    }

    /// The best record of a workload on a target; `found = false` when there is none.
    async fn best_of(
        &self,
        workload: Option<&pb::Workload>,
        target_key: &str,
        want: Want<'_>,
        allow_transfer: bool,
    ) -> Result<pb::BestResponse, Status> {
        let (mut resp, kernel) = self
            .answer(workload, target_key, want, allow_transfer)
            .await?;
        if let Some(k) = kernel {
            if want.source {
                resp.source = k.source.clone();
            }
            if want.kernel {
                resp.kernel = Some(kernel_to_pb(&k));
            }
        }
        Ok(resp)
    }

    /// The answer for a workload on a target (its record, or a transferred one), without the
    /// kernel's text, and the kernel when `want` asks for its source or itself.
    pub(super) async fn answer(
        &self,
        workload: Option<&pb::Workload>,
        target_key: &str,
        want: Want<'_>,
        allow_transfer: bool,
    ) -> Result<(pb::BestResponse, Option<Arc<package::Kernel>>), Status> {
        let task = Arc::new(self.resolve_workload(workload).await?);
        let flops = task.flops;
        let cached = self.cached(&task.key, target_key).await?;
        let mut resp = pb::BestResponse {
            found: cached.best.is_some(),
            record: None,
            description: task.desc.clone(),
            options: workload::options_to_pb(&task.options()),
            flops,
            source: String::new(),
            records_total: cached.counts.total,
            records_ok: cached.counts.ok,
            transfer: None,
            kernel: None,
            range: None,
        };
        if let Some(b) = &cached.best {
            resp.record = Some(schedule_record(b, flops));
        } else if cached.counts.ok > 0
            && let Some(q) = self
                .store()
                .quietest_noisy(&task.key, target_key)
                .await
                .map_err(store_status)?
        {
            // Every success was timed on a slowed machine: the fastest of them, flagged, rather
            // than no kernel (or one adapted from another shape) for a workload that was tuned.
            resp.found = true;
            resp.record = Some(schedule_record(&q, flops));
        } else if let Some(a) = self
            .no_record_answer(&task, workload, target_key, allow_transfer)
            .await?
        {
            resp.found = true;
            resp.record = Some(a.record.clone());
            resp.transfer = Some(a.transfer.clone());
            resp.range = a.range.clone();
        }
        let mut kernel = None;
        if let Some(rec) = &resp.record
            && (want.source || want.kernel)
        {
            kernel = Some(
                self.kernel(
                    &task,
                    KernelOf {
                        target_key,
                        steps_json: &rec.steps_json,
                        record_id: &rec.record_id,
                        gflops: rec.gflops,
                    },
                    want.prefix,
                )
                .await?,
            );
        }
        Ok((resp, kernel))
    }
}

impl Api {
    /// `measure_transfer`: checked, then the transferred candidates of a workload with no
    /// record measured and stored (`measure_transfer`), so that the answer is a measured one.
    async fn measure_before_answer(
        &self,
        workload: Option<&pb::Workload>,
        target: &str,
        allow_transfer: bool,
    ) -> Result<(), Status> {
        if !allow_transfer {
            return Err(Status::invalid_argument(
                "measure_transfer measures transferred candidates: it needs allow_transfer",
            ));
        }
        let local = self.local_target().key();
        if target != local {
            return Err(Status::failed_precondition(format!(
                "measure_transfer measures on this server's own machine (target {local}); \
                 target {target} is measured by its workers, through a job"
            )));
        }
        let task = Arc::new(self.resolve_workload(workload).await?);
        check_workload_bytes(&task).map_err(|e| {
            Status::invalid_argument(format!(
                "measure_transfer: the workload cannot be measured: {e}; ask without \
                 measure_transfer"
            ))
        })?;
        let cached = self.cached(&task.key, target).await?;
        if cached.best.is_none() {
            self.measure_transferred(&task).await?;
        }
        Ok(())
    }
}

#[tonic::async_trait]
impl Query for Api {
    async fn best(
        &self,
        req: Request<pb::BestRequest>,
    ) -> Result<Response<pb::BestResponse>, Status> {
        let r = req.get_ref();
        let target = self.query_target(&r.target).await?;
        let want = Want::new(r.with_source, r.omit_kernel, &r.symbol_prefix)?;
        if r.measure_transfer {
            // Measuring stores records: not for a read-only token.
            let caller = Principal::of(&req);
            if caller.role.read_only() {
                return Err(Status::permission_denied(format!(
                    "token '{}' has the {} role, which may not measure (measure_transfer \
                     stores records): ask without it, or with a client token",
                    caller.name, caller.role
                )));
            }
            self.measure_before_answer(r.workload.as_ref(), &target, r.allow_transfer)
                .await?;
        }
        let resp = self
            .best_of(r.workload.as_ref(), &target, want, r.allow_transfer)
            .await?;
        if !resp.found {
            let key = self.resolve_workload(r.workload.as_ref()).await?.key;
            let others: Vec<String> = self
                .store()
                .targets_of(&key)
                .await
                .map_err(store_status)?
                .into_iter()
                .filter(|(t, _)| *t != target)
                .map(|(t, n)| format!("{t} ({n})"))
                .collect();
            let mut hint = if others.is_empty() {
                String::new()
            } else {
                format!("; records exist on: {}", others.join(", "))
            };
            if r.allow_transfer {
                hint.push_str(&format!(
                    "; no tuned workload of its structure on {target} to transfer from either"
                ));
            }
            return Err(Status::not_found(format!(
                "no successful record of workload {key} ({}) on target {target}{hint}",
                resp.description.lines().next().unwrap_or("")
            )));
        }
        Ok(Response::new(resp))
    }

    async fn best_batch(
        &self,
        req: Request<pb::BestBatchRequest>,
    ) -> Result<Response<pb::BestBatchResponse>, Status> {
        let r = req.get_ref();
        let target = self.query_target(&r.target).await?;
        let want = Want::new(r.with_source, r.omit_kernel, &r.symbol_prefix)?;
        let mut results = Vec::with_capacity(r.workloads.len());
        for (i, w) in r.workloads.iter().enumerate() {
            results.push(
                self.best_of(Some(w), &target, want, r.allow_transfer)
                    .await
                    .map_err(|s| Status::new(s.code(), format!("workload {i}: {}", s.message())))?,
            );
        }
        Ok(Response::new(pb::BestBatchResponse { results }))
    }

    async fn top_k(
        &self,
        req: Request<pb::TopKRequest>,
    ) -> Result<Response<pb::TopKResponse>, Status> {
        let r = req.get_ref();
        let target = self.query_target(&r.target).await?;
        let want = Want::new(false, r.omit_kernel, &r.symbol_prefix)?;
        let task = self.resolve_workload(r.workload.as_ref()).await?;
        let k = if r.k == 0 { 10 } else { r.k.min(10_000) } as usize;
        let flops = task.flops;
        let records: Vec<pb::ScheduleRecord> = self
            .store()
            .top_k(&task.key, &target, k)
            .await
            .map_err(store_status)?
            .iter()
            .map(|r| schedule_record(r, flops))
            .collect();
        let mut kernels = vec![];
        if want.kernel {
            // Each kernel is generated C: the fastest few are what a compiler links.
            for rec in records.iter().take(TOP_K_KERNELS) {
                let of = KernelOf {
                    target_key: &target,
                    steps_json: &rec.steps_json,
                    record_id: &rec.record_id,
                    gflops: rec.gflops,
                };
                kernels.push(kernel_to_pb(&*self.kernel(&task, of, want.prefix).await?));
            }
        }
        Ok(Response::new(pb::TopKResponse { records, kernels }))
    }

    async fn pack(
        &self,
        req: Request<pb::PackRequest>,
    ) -> Result<Response<pb::PackResponse>, Status> {
        Api::pack(self, req.get_ref()).await.map(Response::new)
    }

    type BuildModelStream = super::build::PieceStream;

    async fn build_model(
        &self,
        req: Request<pb::BuildModelRequest>,
    ) -> Result<Response<Self::BuildModelStream>, Status> {
        let pieces = Api::build_model(self, req.into_inner()).await?;
        Ok(Response::new(Box::pin(tokio_stream::iter(
            pieces.into_iter().map(Ok),
        ))))
    }

    async fn range(
        &self,
        req: Request<pb::RangeRequest>,
    ) -> Result<Response<pb::RangeResponse>, Status> {
        self.range_table(req.get_ref()).await.map(Response::new)
    }

    async fn list_tuned(
        &self,
        _req: Request<pb::ListTunedRequest>,
    ) -> Result<Response<pb::ListTunedResponse>, Status> {
        let store = self.store();
        let targets = store
            .targets()
            .await
            .map_err(store_status)?
            .into_iter()
            .map(|(key, target_json, trials)| pb::TargetInfo {
                key,
                target_json,
                trials,
            })
            .collect();
        let workloads = store
            .tuned()
            .await
            .map_err(store_status)?
            .into_iter()
            .map(|p| pb::TunedWorkload {
                best_gflops: p.best_cost.map(|c| gflops(p.flops, c)),
                workload_key: p.workload_key,
                description: p.description.unwrap_or_default(),
                options: workload::options_to_pb(&p.options),
                target_key: p.target_key,
                trials: p.trials,
                ok: p.ok,
                noisy: p.noisy,
            })
            .collect();
        Ok(Response::new(pb::ListTunedResponse { targets, workloads }))
    }
}
