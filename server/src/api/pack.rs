//! Kernel packs (`Query.Pack`, `tunehub pack`): the best kernels of many workloads on one
//! target as one `.c`, one `.h` and a manifest (`tunehub_engine::package::pack`).
//!
//! All or nothing: every workload is resolved and looked up first; a bad one is
//! INVALID_ARGUMENT naming its index, and workloads without a record are one NOT_FOUND that
//! lists every one of them, so a build learns in one call everything it still has to tune.

use super::Api;
use super::kernel::{KernelOf, kernel_to_pb};
use std::collections::HashSet;
use tonic::Status;
use tunehub_engine::package;
use tunehub_proto::v1 as pb;

/// The pack's name when the request gives none.
const DEFAULT_NAME: &str = "tunehub_pack";

impl Api {
    pub(super) async fn pack(&self, r: &pb::PackRequest) -> Result<pb::PackResponse, Status> {
        let name = if r.name.is_empty() {
            DEFAULT_NAME
        } else {
            &r.name
        };
        let bad = |e: package::PackageError| Status::invalid_argument(e.to_string());
        package::check_identifier("pack name", name).map_err(bad)?;
        if !r.symbol_prefix.is_empty() {
            package::check_identifier("symbol prefix", &r.symbol_prefix).map_err(bad)?;
        }
        if r.workloads.is_empty() {
            return Err(Status::invalid_argument(
                "a pack needs at least one workload",
            ));
        }
        let limit = self.limits.max_tasks_per_job as usize;
        if r.workloads.len() > limit {
            return Err(Status::invalid_argument(format!(
                "{} workloads: a pack holds at most {limit} (the server's tasks per job)",
                r.workloads.len()
            )));
        }
        let target = self.query_target(&r.target).await?;

        let mut seen = HashSet::new();
        let mut found = vec![];
        let mut missing = vec![];
        for (i, w) in r.workloads.iter().enumerate() {
            let task = self
                .resolve_workload(Some(w))
                .await
                .map_err(|s| Status::new(s.code(), format!("workload {i}: {}", s.message())))?;
            if !seen.insert(task.key.clone()) {
                continue;
            }
            let entry = self.cached(&task.key, &target).await?;
            match &entry.best {
                Some(best) => found.push((task, best.clone())),
                None => missing.push(format!(
                    "workload {i} ({}, key {})",
                    task.desc.lines().next().unwrap_or(""),
                    task.key
                )),
            }
        }
        if !missing.is_empty() {
            return Err(Status::not_found(format!(
                "no successful record on target {target} for {} of the pack's workloads: {}",
                missing.len(),
                missing.join("; ")
            )));
        }

        let mut kernels = Vec::with_capacity(found.len());
        for (task, best) in &found {
            let seconds = best.mean_cost.unwrap_or(0.0);
            let of = KernelOf {
                target_key: &target,
                steps_json: &best.steps_json,
                record_id: &best.id,
                gflops: super::gflops(task.flops, seconds),
            };
            kernels.push(self.kernel(task, of, &r.symbol_prefix).await?);
        }
        let owned: Vec<package::Kernel> = kernels.iter().map(|k| (**k).clone()).collect();
        let p = package::pack(name, &owned).map_err(bad)?;
        Ok(pb::PackResponse {
            name: p.name,
            source: p.source,
            header: p.header,
            manifest_json: p.manifest_json,
            kernels: kernels.iter().map(|k| kernel_to_pb(k)).collect(),
        })
    }
}
