//! The Kernel of an answer (`tunehub_engine::package`): a record's schedule as a named C
//! function with its calling contract, for Best, BestBatch, TopK and Pack.
//!
//! Kernels are cached by what determines them (target, workload, steps, prefix): records are
//! immutable, so an entry never goes stale, and a compiler asking again gets the same text
//! without a code generation or a database read.

use super::{Api, store_status};
use crate::records::RecordStore;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tonic::Status;
use tunehub_engine::package::{self, Provenance};
use tunehub_engine::schedule::Schedule;
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;
use tunehub_proto::v1 as pb;

/// Entries kept; past it the cache starts over (a kernel is a few kB: a few tens of MB at most).
const CAPACITY: usize = 4096;

type Key = (String, String, String, String);

/// Generated kernels, shared by the services.
#[derive(Debug, Default)]
pub struct KernelCache {
    entries: Mutex<HashMap<Key, Arc<package::Kernel>>>,
}

impl KernelCache {
    fn get(&self, key: &Key) -> Option<Arc<package::Kernel>> {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned()
    }

    fn put(&self, key: Key, k: Arc<package::Kernel>) {
        let mut e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if e.len() >= CAPACITY {
            e.clear();
        }
        e.insert(key, k);
    }
}

/// What a kernel is generated from: the record (or the transferred answer) and its speed.
pub(super) struct KernelOf<'a> {
    pub target_key: &'a str,
    pub steps_json: &'a str,
    /// Empty for a transferred answer.
    pub record_id: &'a str,
    pub gflops: f64,
}

impl Api {
    /// The stored description of a known target.
    pub(super) async fn target_of(&self, target_key: &str) -> Result<Target, Status> {
        let json = self
            .store()
            .target_json(target_key)
            .await
            .map_err(store_status)?
            .ok_or_else(|| Status::internal(format!("target {target_key} has no description")))?;
        serde_json::from_str(&json)
            .map_err(|e| Status::internal(format!("target {target_key}: {e}")))
    }

    /// The kernel of `of` on `task`, named under `prefix` (INVALID_ARGUMENT for a prefix that
    /// is not a C identifier).
    pub(super) async fn kernel(
        &self,
        task: &Task,
        of: KernelOf<'_>,
        prefix: &str,
    ) -> Result<Arc<package::Kernel>, Status> {
        let key = (
            of.target_key.to_string(),
            task.key.clone(),
            of.steps_json.to_string(),
            prefix.to_string(),
        );
        if let Some(k) = self.kernels.get(&key) {
            return Ok(k);
        }
        let target = self.target_of(of.target_key).await?;
        let record = if of.record_id.is_empty() {
            "transferred"
        } else {
            of.record_id
        };
        let schedule = Schedule::from_json(of.steps_json).map_err(|e| {
            Status::internal(format!("record {record}: its steps do not replay: {e}"))
        })?;
        // The stored description names the symbol, not this request's spelling: a workload
        // asked for by op spec or by text form is one workload, with one symbol.
        let description = self
            .store()
            .workload(&task.key)
            .await
            .map_err(store_status)?
            .and_then(|w| w.description)
            .unwrap_or_else(|| task.desc.clone());
        let provenance = Provenance {
            record_id: of.record_id.to_string(),
            workload_key: task.key.clone(),
            target_key: of.target_key.to_string(),
            description,
            gflops: of.gflops,
        };
        let k =
            package::kernel(task, &schedule, &target, provenance, prefix).map_err(|e| match e {
                package::PackageError::BadName(m) => Status::invalid_argument(m),
                other => Status::internal(other.to_string()),
            })?;
        let k = Arc::new(k);
        self.kernels.put(key, Arc::clone(&k));
        Ok(k)
    }
}

/// The proto form of a kernel.
pub fn kernel_to_pb(k: &package::Kernel) -> pb::Kernel {
    pb::Kernel {
        symbol: k.symbol.clone(),
        source: k.source.clone(),
        header: k.header.clone(),
        args: k
            .args
            .iter()
            .map(|a| pb::KernelArg {
                name: a.name.clone(),
                role: a.role.as_str().to_string(),
                dtype: a.dtype.to_string(),
                shape: a.shape.clone(),
                strides: a.strides.clone(),
                alignment: a.alignment,
                pack_function: a.pack_function.clone().unwrap_or_default(),
                packed_elements: a.packed_elements.map_or(0, |n| n.max(0) as u64),
                layout: a.layout.to_string(),
            })
            .collect(),
        cflags: k.cflags.clone(),
        ldflags: k.ldflags.clone(),
        compiler: k.compiler.clone(),
        compiler_version: k.compiler_version.clone(),
        threads: k.threads,
        set_num_threads: k.set_num_threads.clone(),
        record_id: k.provenance.record_id.clone(),
        workload_key: k.provenance.workload_key.clone(),
        target_key: k.provenance.target_key.clone(),
        description: k.provenance.description.clone(),
        gflops: k.provenance.gflops,
    }
}
