//! The seam: `RecordStore`, what the job driver and the API need of a record store, and what
//! its writes answer.

use super::{NewRecord, Record, StoreError, Workload};
use serde::Serialize;
use std::future::Future;
use tunehub_engine::task::WorkloadOptions;

/// What `commit` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitOutcome {
    /// A new record; `is_new_best` when it became the best of its (workload, target).
    Inserted { is_new_best: bool },
    /// The candidate was already recorded: nothing changed.
    Duplicate,
}

/// Record counts of one (workload, target).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct RecordCounts {
    pub total: u64,
    /// Records with error code 0 (noisy ones included).
    pub ok: u64,
}

/// Where tuning results are kept. Every method is one transaction at most; `commit` is
/// idempotent per candidate, so a repeated or late report is harmless.
///
/// Futures are `Send` so that generic callers can run them on any tokio worker.
pub trait RecordStore: Send + Sync {
    /// Stores a workload unless its key is already there (the first description stays).
    /// `options` are part of the key (the caller computed it with them: `Task::key`).
    fn put_workload(
        &self,
        key: &str,
        description: &str,
        dag_json: &str,
        flops: u64,
        options: &WorkloadOptions,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Stores a target unless its key is already there.
    fn put_target(
        &self,
        key: &str,
        target_json: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Stores one measured candidate and, in the same transaction, moves the best record of its
    /// (workload, target) when it is a better trusted success. The workload and target must
    /// have been put first.
    fn commit(
        &self,
        record: &NewRecord,
    ) -> impl Future<Output = Result<CommitOutcome, StoreError>> + Send;

    /// The best trusted success (lowest mean cost, not noisy).
    fn best(
        &self,
        workload_key: &str,
        target_key: &str,
    ) -> impl Future<Output = Result<Option<Record>, StoreError>> + Send;

    /// The fastest noisy success, for a (workload, target) whose every success was timed on a
    /// slowed machine: its kernel is verified, its time only an upper bound. Not a best; what a
    /// query answers, flagged, rather than no kernel at all. A time flagged for another reason
    /// (disputed or unconfirmed by another device: it carries a message) is never one.
    fn quietest_noisy(
        &self,
        workload_key: &str,
        target_key: &str,
    ) -> impl Future<Output = Result<Option<Record>, StoreError>> + Send;

    /// The `k` best trusted successes, cheapest first.
    fn top_k(
        &self,
        workload_key: &str,
        target_key: &str,
        k: usize,
    ) -> impl Future<Output = Result<Vec<Record>, StoreError>> + Send;

    fn count(
        &self,
        workload_key: &str,
        target_key: &str,
    ) -> impl Future<Output = Result<RecordCounts, StoreError>> + Send;

    /// Every record of a (workload, target), failures included, oldest first: what a resumed
    /// search rebuilds its state from.
    fn records(
        &self,
        workload_key: &str,
        target_key: &str,
    ) -> impl Future<Output = Result<Vec<Record>, StoreError>> + Send;

    fn workload(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<Workload>, StoreError>> + Send;

    /// The target's JSON, as put.
    fn target_json(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<String>, StoreError>> + Send;

    /// Targets that have records of this workload, with their record counts: what to suggest
    /// when the asked-for target has none.
    fn targets_of(
        &self,
        workload_key: &str,
    ) -> impl Future<Output = Result<Vec<(String, u64)>, StoreError>> + Send;
}
