//! The dashboard's endpoints. Each JSON one names the gRPC method it stands for, admits the
//! caller for that method (`caller::admit`) and calls the service in-process with the caller
//! as principal, answering the method's message as JSON (the proto's field names). The page
//! polls them (every 2 s while it shows a running job): the same reads a `Watch` stream makes,
//! without a stream held open per tab.

use super::assets;
use super::caller::{Refusal, admit, request};
use crate::api::Api;
use crate::auth::{Auth, permits};
use crate::fleet::WorkersService;
use crate::health::DatabaseHealth;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, header};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Instant;
use tonic::Status;
use tunehub_proto::v1 as pb;
use tunehub_proto::v1::jobs_server::Jobs;
use tunehub_proto::v1::query_server::Query;
use tunehub_proto::v1::workers_server::Workers;

const JOBS_LIST: &str = "/tunehub.v1.Jobs/List";
const JOBS_TRIALS: &str = "/tunehub.v1.Jobs/Trials";
const JOBS_CANCEL: &str = "/tunehub.v1.Jobs/Cancel";
const WORKERS_LIST: &str = "/tunehub.v1.Workers/List";
const QUERY_LIST_TUNED: &str = "/tunehub.v1.Query/ListTuned";
const QUERY_BEST: &str = "/tunehub.v1.Query/Best";

/// Jobs listed at most (newest first), as `tunehub jobs` lists them.
const JOBS_SHOWN: u32 = 200;

/// What the endpoints call: the API's services, and the tokens they admit.
#[derive(Clone)]
pub struct Dashboard {
    pub api: Api,
    /// The fleet's service; `None` on a server without a fleet (its page says so).
    pub workers: Option<WorkersService>,
    pub auth: Auth,
    /// The health service's last probe of the database (`health::follow_database`).
    pub database: DatabaseHealth,
    pub started: Instant,
}

type Shared = State<Arc<Dashboard>>;
type Answer<T> = Result<Json<T>, Refusal>;

pub fn router(d: Dashboard) -> Router {
    Router::new()
        .route("/", get(assets::index))
        .route("/app.js", get(assets::script))
        .route("/style.css", get(assets::style))
        .route("/api/whoami", get(whoami))
        .route("/api/health", get(health))
        .route("/api/jobs", get(jobs))
        .route("/api/jobs/{id}", get(job))
        .route("/api/jobs/{id}/cancel", post(cancel))
        .route("/api/workers", get(workers))
        .route("/api/records", get(records))
        .route("/api/kernel/{target}/{workload}", get(kernel))
        .fallback(not_found)
        .with_state(Arc::new(d))
}

async fn not_found() -> Refusal {
    Refusal(Status::not_found("no such page: the dashboard is at /"))
}

/// The token's name and role, and which views and actions the role admits (the page hides
/// what it may not do; the endpoints refuse it anyway).
async fn whoami(State(d): Shared, headers: HeaderMap) -> Answer<Value> {
    let token = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes());
    let p = d.auth.principal(token)?;
    let may = |path| permits(p.role, path);
    Ok(Json(json!({
        "name": p.name,
        "role": p.role.as_str(),
        "may": {
            "jobs": may(JOBS_LIST) && may(JOBS_TRIALS),
            // A client cancels its own jobs only (the page compares the job's owner).
            "cancel": may(JOBS_CANCEL),
            "cancel_any": p.is_admin(),
            "workers": may(WORKERS_LIST),
            "records": may(QUERY_LIST_TUNED) && may(QUERY_BEST),
        },
    })))
}

/// The server's health as its gRPC health service sees it (its last probe of the database:
/// no probe of its own, so open pages cost the database nothing), with what it runs: any valid
/// token may look, as any caller may ask the health service.
async fn health(State(d): Shared, headers: HeaderMap) -> Answer<Value> {
    let token = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes());
    d.auth.principal(token)?;
    let ctx = &d.api.ctx;
    let database = match &*d.database.borrow() {
        Ok(()) => "ok".to_string(),
        Err(why) => format!("unavailable: {why}"),
    };
    let jobs = match ctx.jobs.count_by_state().await {
        Ok(counts) => counts
            .into_iter()
            .map(|(s, n)| (s.as_str().to_string(), json!(n)))
            .collect::<serde_json::Map<_, _>>(),
        Err(_) => serde_json::Map::new(),
    };
    Ok(Json(json!({
        "serving": database == "ok" && !ctx.shutting_down(),
        "database": database,
        "shutting_down": ctx.shutting_down(),
        "instance": ctx.instance,
        "target_key": ctx.backend.target().key(),
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_s": d.started.elapsed().as_secs(),
        "jobs": jobs,
    })))
}

async fn jobs(State(d): Shared, headers: HeaderMap) -> Answer<pb::ListJobsResponse> {
    let caller = admit(&d.auth, &headers, JOBS_LIST)?;
    let req = pb::ListJobsRequest {
        limit: JOBS_SHOWN,
        ..Default::default()
    };
    Ok(Json(d.api.list(request(caller, req)).await?.into_inner()))
}

/// A job with every trial it measured: its tasks' progress and the points of its curves.
async fn job(
    State(d): Shared,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Answer<pb::JobTrialsResponse> {
    let caller = admit(&d.auth, &headers, JOBS_TRIALS)?;
    let req = pb::JobTrialsRequest { id };
    Ok(Json(d.api.trials(request(caller, req)).await?.into_inner()))
}

async fn cancel(State(d): Shared, headers: HeaderMap, Path(id): Path<String>) -> Answer<pb::Job> {
    let caller = admit(&d.auth, &headers, JOBS_CANCEL)?;
    tracing::info!(job = %id, token = %caller.name, "cancel from the dashboard");
    let req = pb::CancelJobRequest { id };
    Ok(Json(d.api.cancel(request(caller, req)).await?.into_inner()))
}

async fn workers(State(d): Shared, headers: HeaderMap) -> Answer<pb::ListWorkersResponse> {
    let caller = admit(&d.auth, &headers, WORKERS_LIST)?;
    let Some(w) = &d.workers else {
        return Ok(Json(pb::ListWorkersResponse::default()));
    };
    let req = request(caller, pb::ListWorkersRequest {});
    Ok(Json(w.list(req).await?.into_inner()))
}

async fn records(State(d): Shared, headers: HeaderMap) -> Answer<pb::ListTunedResponse> {
    let caller = admit(&d.auth, &headers, QUERY_LIST_TUNED)?;
    let req = request(caller, pb::ListTunedRequest {});
    Ok(Json(d.api.list_tuned(req).await?.into_inner()))
}

/// The best record of a (workload, target) with its kernel: the C source and its contract
/// (arguments, flags, threads).
async fn kernel(
    State(d): Shared,
    headers: HeaderMap,
    Path((target, workload)): Path<(String, String)>,
) -> Answer<pb::BestResponse> {
    let caller = admit(&d.auth, &headers, QUERY_BEST)?;
    let req = pb::BestRequest {
        workload: Some(pb::Workload {
            kind: Some(pb::workload::Kind::WorkloadKey(workload)),
            options: None,
        }),
        target,
        with_source: true,
        ..Default::default()
    };
    Ok(Json(d.api.best(request(caller, req)).await?.into_inner()))
}
