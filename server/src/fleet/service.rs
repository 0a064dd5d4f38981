//! The `Workers` gRPC service (`proto/tunehub/v1/tunehub.proto`): registration, heartbeats,
//! long-polled pulls of leased pieces, and reports (checked at the door, `report`). With
//! several server replicas, a worker registering for a pool another replica owns is sent there
//! (`owners`), and so is one whose pool this replica lost.

use super::owners::{Claim, PoolOwners};
use super::registry::{Fleet, FleetError};
use super::report::check_report;
use crate::auth::Principal;
use crate::checks::import::check_target;
use crate::checks::limits::{MAX_KEY, check_len};
use crate::checks::text::check_printable;
use crate::records::{RecordStore, SqlStore};
use crate::status::store_status;
use crate::workload;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::{Request, Response, Status};
use tunehub_engine::target::Target;
use tunehub_proto::Message;
use tunehub_proto::v1 as pb;
use tunehub_proto::v1::workers_server::Workers;

/// A device's description as JSON: a few hundred bytes in practice. It is stored (the targets
/// table) and shown by `tunehub workers`, so it is bounded like a client's strings.
const MAX_TARGET_JSON: usize = 64 << 10;

/// The longest a Pull waits for work before answering "none".
const MAX_PULL_WAIT: Duration = Duration::from_secs(10);

/// How far past the message limit gRPC's decoder lets a report through to `report`, which
/// refuses it itself: logged with its size and worker, counted against the worker, its piece
/// measured elsewhere. Past this gRPC refuses it before any handler (`oversized` logs that).
pub const REPORT_DECODE_FACTOR: usize = 4;

#[derive(Clone)]
pub struct WorkersService {
    pub fleet: Arc<Fleet>,
    pub store: SqlStore,
    /// Pool ownership among replicas; `None`: every pool is this server's.
    pub owners: Option<Arc<PoolOwners>>,
    /// The largest report kept (the server's message limit); the decoder's limit is
    /// `REPORT_DECODE_FACTOR` times this, so that a larger one is refused here, logged.
    pub max_report_bytes: usize,
}

fn status(e: FleetError) -> Status {
    match e {
        FleetError::UnknownWorker(_) => Status::not_found(e.to_string()),
        FleetError::Invalid(_) => Status::invalid_argument(e.to_string()),
    }
}

#[tonic::async_trait]
impl Workers for WorkersService {
    async fn register(
        &self,
        req: Request<pb::RegisterWorkerRequest>,
    ) -> Result<Response<pb::RegisterWorkerResponse>, Status> {
        // With the device id, who the worker is (its quarantine follows both).
        let subject = Principal::of(&req).name;
        let req = req.into_inner();
        if req.device_id.trim().is_empty() {
            return Err(Status::invalid_argument("device_id is empty"));
        }
        check_len("device_id", &req.device_id, MAX_KEY)?;
        check_printable("device_id", &req.device_id).map_err(Status::invalid_argument)?;
        check_len("target_json", &req.target_json, MAX_TARGET_JSON)?;
        let target: Target = serde_json::from_str(&req.target_json)
            .map_err(|e| Status::invalid_argument(format!("target_json: {e}")))?;
        check_target("target_json", &target).map_err(Status::invalid_argument)?;
        let key = target.key();
        let heartbeat_ms = self.fleet.cfg.heartbeat.as_millis() as u32;
        if let Some(owners) = &self.owners {
            let claim = owners.take(&key).await.map_err(|e| {
                Status::unavailable(format!("cannot take the pool of target {key}: {e}"))
            })?;
            if let Claim::Elsewhere { owner, address } = claim {
                tracing::info!(device_id = %req.device_id, target_key = %key, %owner, %address,
                    "worker sent to the replica that owns its pool");
                return Ok(Response::new(pb::RegisterWorkerResponse {
                    worker_id: String::new(),
                    target_key: key,
                    heartbeat_ms,
                    redirect: address,
                }));
            }
        }
        // Stored so that jobs can name the key (and wait for it) while no worker is online.
        let json = serde_json::to_string(&target).expect("a target serializes");
        self.store
            .put_target(&key, &json)
            .await
            .map_err(store_status)?;
        let (worker_id, target_key) = self.fleet.register(&subject, &req.device_id, target, json);
        Ok(Response::new(pb::RegisterWorkerResponse {
            worker_id,
            target_key,
            heartbeat_ms,
            redirect: String::new(),
        }))
    }

    async fn heartbeat(
        &self,
        req: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatResponse>, Status> {
        let subject = Principal::of(&req).name;
        let req = req.into_inner();
        self.fleet
            .check_subject(&req.worker_id, &subject)
            .map_err(status)?;
        let beat = self
            .fleet
            .heartbeat(&req.worker_id, &req.lease_id)
            .map_err(status)?;
        Ok(Response::new(pb::HeartbeatResponse {
            lease_lost: !beat.lease_held,
            redirect: beat.moved_to.unwrap_or_default(),
        }))
    }

    async fn pull(
        &self,
        req: Request<pb::PullRequest>,
    ) -> Result<Response<pb::PullResponse>, Status> {
        let subject = Principal::of(&req).name;
        let req = req.into_inner();
        self.fleet
            .check_subject(&req.worker_id, &subject)
            .map_err(status)?;
        let until =
            Instant::now() + Duration::from_millis(u64::from(req.wait_ms)).min(MAX_PULL_WAIT);
        loop {
            // Armed before looking, so that a piece queued between the look and the wait wakes
            // it: a pull waits on the queue, not on a poll interval.
            let queued = self.fleet.queued();
            tokio::pin!(queued);
            queued.as_mut().enable();
            if let Some(l) = self.fleet.pull(&req.worker_id).map_err(status)? {
                let p = &l.payload;
                let piece = pb::WorkPiece {
                    lease_id: l.lease_id,
                    job_id: p.job_id.clone(),
                    workload_key: p.workload_key.clone(),
                    dag_json: p.dag_json.clone(),
                    description: p.description.clone(),
                    options: workload::options_to_pb(&p.workload_options),
                    steps_json: l.indices.iter().map(|&i| p.steps_json[i].clone()).collect(),
                    options_json: p.options_json.clone(),
                };
                return Ok(Response::new(pb::PullResponse { piece: Some(piece) }));
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Response::new(pb::PullResponse { piece: None }));
            }
            let _ = tokio::time::timeout(left, queued).await;
        }
    }

    async fn report(
        &self,
        req: Request<pb::ReportRequest>,
    ) -> Result<Response<pb::ReportResponse>, Status> {
        let subject = Principal::of(&req).name;
        let req = req.into_inner();
        self.fleet
            .check_subject(&req.worker_id, &subject)
            .map_err(status)?;
        let size = req.encoded_len();
        if size > self.max_report_bytes {
            let why = format!(
                "the report is {size} bytes, over the server's limit of {} bytes",
                self.max_report_bytes
            );
            tracing::warn!(worker_id = %req.worker_id, lease = %req.lease_id, bytes = size,
                limit = self.max_report_bytes, "report refused: {why}");
            return Err(status(self.fleet.refuse(
                &req.worker_id,
                &req.lease_id,
                why,
            )));
        }
        // Checked before anything of it is kept: a worker's report must never fail a job.
        let results = match check_report(req.results) {
            Ok(r) => r,
            Err(why) => {
                tracing::warn!(worker_id = %req.worker_id, lease = %req.lease_id, bytes = size,
                    "report refused: {why}");
                return Err(status(self.fleet.refuse(
                    &req.worker_id,
                    &req.lease_id,
                    why,
                )));
            }
        };
        let accepted = self
            .fleet
            .report(&req.worker_id, &req.lease_id, results, req.handed_back)
            .map_err(|e| {
                // Refused against its lease (a count other than the piece's, a time faster
                // than the device's peak): logged like the door's refusals.
                if let FleetError::Invalid(why) = &e {
                    tracing::warn!(worker_id = %req.worker_id, lease = %req.lease_id,
                        bytes = size, "report refused: {why}");
                }
                status(e)
            })?;
        Ok(Response::new(pb::ReportResponse { accepted }))
    }

    async fn list(
        &self,
        _req: Request<pb::ListWorkersRequest>,
    ) -> Result<Response<pb::ListWorkersResponse>, Status> {
        let (workers, queued) = self.fleet.list();
        let mut targets = std::collections::HashMap::new();
        Ok(Response::new(pb::ListWorkersResponse {
            workers: workers
                .into_iter()
                .map(|w| {
                    targets.entry(w.target_key.clone()).or_insert(w.target_json);
                    pb::WorkerInfo {
                        id: w.id,
                        device_id: w.device_id,
                        target_key: w.target_key,
                        status: w.status.to_string(),
                        last_heartbeat_ms: w.last_heartbeat_ms,
                        measured: w.measured,
                        errors: w.errors,
                        quarantine_reason: w.quarantine_reason,
                        target_json: String::new(),
                    }
                })
                .collect(),
            queued: queued.into_iter().collect(),
            targets,
        }))
    }
}
