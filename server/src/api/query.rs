//! The Query service: what compilers ask. Best records and their counts come from the cache in
//! front of the database.

use super::{Api, gflops, internal, schedule_record};
use crate::records::RecordStore;
use crate::workload;
use tonic::{Request, Response, Status};
use tunehub_engine::codegen;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;
use tunehub_proto::v1 as pb;
use tunehub_proto::v1::query_server::Query;

impl Api {
    /// The best record of a workload on a target; `found = false` when there is none.
    async fn best_of(
        &self,
        workload: Option<&pb::Workload>,
        target_key: &str,
        with_source: bool,
        allow_transfer: bool,
    ) -> Result<pb::BestResponse, Status> {
        let task = self.resolve_workload(workload).await?;
        let flops = task.flops;
        let cached = self
            .ctx
            .cache
            .entry(self.store(), &task.key, target_key)
            .await
            .map_err(internal)?;
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
        };
        if let Some(b) = &cached.best {
            if with_source {
                resp.source = self
                    .kernel_source(&task, target_key, &b.steps_json, &b.id)
                    .await?;
            }
            resp.record = Some(schedule_record(b, flops));
        } else if allow_transfer && let Some(t) = self.transferred(&task, target_key).await? {
            if with_source {
                resp.source = self
                    .kernel_source(&task, target_key, &t.record.steps_json, "transferred")
                    .await?;
            }
            resp.found = true;
            resp.record = Some(t.record);
            resp.transfer = Some(t.transfer);
        }
        Ok(resp)
    }

    async fn kernel_source(
        &self,
        task: &Task,
        target_key: &str,
        steps_json: &str,
        record_id: &str,
    ) -> Result<String, Status> {
        let json = self
            .store()
            .target_json(target_key)
            .await
            .map_err(internal)?
            .ok_or_else(|| Status::internal(format!("target {target_key} has no description")))?;
        let target: Target = serde_json::from_str(&json)
            .map_err(|e| Status::internal(format!("target {target_key}: {e}")))?;
        let schedule = Schedule::from_json(steps_json).map_err(|e| {
            Status::internal(format!("record {record_id}: its steps do not replay: {e}"))
        })?;
        // Generated as it was measured: with the task's layout-free inputs packed.
        codegen::generate_with(&task.dag, &schedule, &target, &task.lower_options())
            .map(|k| k.source)
            .map_err(|e| {
                Status::internal(format!("record {record_id}: generating its kernel: {e}"))
            })
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
        let resp = self
            .best_of(
                r.workload.as_ref(),
                &target,
                r.with_source,
                r.allow_transfer,
            )
            .await?;
        if !resp.found {
            let key = self.resolve_workload(r.workload.as_ref()).await?.key;
            let others: Vec<String> = self
                .store()
                .targets_of(&key)
                .await
                .map_err(internal)?
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
        let mut results = Vec::with_capacity(r.workloads.len());
        for (i, w) in r.workloads.iter().enumerate() {
            results.push(
                self.best_of(Some(w), &target, r.with_source, r.allow_transfer)
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
        let task = self.resolve_workload(r.workload.as_ref()).await?;
        let k = if r.k == 0 { 10 } else { r.k.min(10_000) } as usize;
        let flops = task.flops;
        let records = self
            .store()
            .top_k(&task.key, &target, k)
            .await
            .map_err(internal)?
            .iter()
            .map(|r| schedule_record(r, flops))
            .collect();
        Ok(Response::new(pb::TopKResponse { records }))
    }

    async fn list_tuned(
        &self,
        _req: Request<pb::ListTunedRequest>,
    ) -> Result<Response<pb::ListTunedResponse>, Status> {
        let store = self.store();
        let targets = store
            .targets()
            .await
            .map_err(internal)?
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
            .map_err(internal)?
            .into_iter()
            .map(|p| pb::TunedWorkload {
                best_gflops: p.best_cost.map(|c| gflops(p.flops, c)),
                workload_key: p.workload_key,
                description: p.description.unwrap_or_default(),
                options: workload::options_to_pb(&p.options),
                target_key: p.target_key,
                trials: p.trials,
                ok: p.ok,
            })
            .collect();
        Ok(Response::new(pb::ListTunedResponse { targets, workloads }))
    }
}
