//! The record store: workloads, targets and measured candidates, and the best record per
//! (workload, target).
//!
//! `RecordStore` is the seam; `SqlStore` implements it over sqlx's `Any` driver, so that one code
//! path serves a SQLite file and a PostgreSQL database. The schema lives in `migrations/`
//! (applied on open) and every statement here is written in the SQL that SQLite and PostgreSQL
//! share (`$n` placeholders, `ON CONFLICT` upserts, `COUNT(CASE ...)`); the few that differ
//! (row locks) ask `SqlStore::backend`.
//!
//! Ids are computed here, never by the database: see `record_id` and the migration's header.
//!
//! # Layout
//!
//! - `error`: `StoreError`, everything that can go wrong in the store.
//! - `record`: a measured candidate, as reported (`NewRecord`) and as stored (`Record`).
//! - `workload`: a stored workload, its options, and the engine task they make.
//! - `store`: the `RecordStore` seam and what its writes answer.
//! - `ids`: canonical steps, schedule hashes, record ids, the clock.
//! - `sql`: `SqlStore`, opening a database and migrating it.
//! - `migrations`: the schema's migration files, embedded.
//! - `release`: a SQLite connection given back to the pool with no transaction left open.
//! - `writable`: a SQLite connection the store keeps can write (SQLite's silent read-only).
//! - `rows`: decoding the columns queries select.
//! - `queries`: `RecordStore` over SQL.
//! - `commit`: storing one record inside a transaction (shared with the job store).
//! - `counts`: the record counts a transaction adds, per (workload, target).
//! - `listing`: what has been tuned, for `ListTuned`.
//! - `transfer`: the export's selection and the import's transaction.
//! - `legacy`: workloads stored before typed options, brought up to date on open.
//! - `structure`: a workload's extent-free structure key and extents; the nearest tuned
//!   workloads of one structure on a target.
//! - `neighbours`: the tuned workloads of each (structure, target), kept in memory.
//! - `warm`: keeping those read for a server, at start and after each new tuned workload.
//! - `ranges`: shape ranges (dynamic shapes): their rows, representatives and jobs.

mod commit;
mod counts;
mod error;
mod ids;
mod legacy;
mod listing;
mod migrations;
mod neighbours;
mod queries;
mod ranges;
mod record;
mod release;
mod rows;
mod sql;
mod store;
mod structure;
mod transfer;
mod warm;
mod workload;
mod writable;

pub(crate) use commit::commit_on;
pub(crate) use counts::CountDeltas;
pub use error::StoreError;
pub use ids::{canonical_steps, now_ms, record_id, schedule_hash};
pub use listing::TunedPair;
pub(crate) use ranges::put_range_on;
pub use ranges::{RangeRow, Representative, range_id};
pub use record::{NewRecord, Record};
pub use sql::{Backend, SqlStore, database_url};
pub use store::{CommitOutcome, RecordCounts, RecordStore};
pub use structure::Neighbor;
pub use workload::Workload;

#[cfg(test)]
mod tests;
