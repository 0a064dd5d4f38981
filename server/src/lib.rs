//! tunehub's server side: the record store, jobs and their driver, the gRPC API, and the
//! `tunehub` command line's parts.
//!
//! A library as well as the `tunehub` binary, so that the end-to-end tests use the same store,
//! server and argument definitions.
//!
//! # Layout
//!
//! - `records`: the record store (workloads, targets, measured records, best per pair) over SQL.
//! - `jobs`: tuning jobs in the database, their driver, and the measure backend seam.
//! - `fleet`: remote measurement workers: registry, leased pieces, the `Workers` service.
//! - `api`: the gRPC services (`Jobs`, `Query`, `Records`) and request checking.
//! - `workload`: workloads at the API's edge: typed options, the op-spec sugar at the door.
//! - `cache`: the best-record cache in front of the database.
//! - `answer_cache`: answers by range or transfer, for workloads with no record of their own.
//! - `metrics`: Prometheus metrics and their HTTP endpoint.
//! - `auth`: bearer-token checking of gRPC calls.
//! - `status`: store failures as gRPC statuses.
//! - `server`: assembling and running the server (services, job runner, shutdown).
//! - `config`: flags, environment and TOML file resolved into configurations.
//! - `cli`: the `tunehub` command line's arguments and how bad input is reported.
//! - `client`: connecting to a server as the commands do.
//! - `oplist`: `tunehub ops`, the operator library listed.

pub mod answer_cache;
pub mod api;
pub mod auth;
pub mod cache;
pub mod cli;
pub mod client;
pub mod config;
pub mod fleet;
pub mod jobs;
pub mod metrics;
pub mod oplist;
pub mod records;
pub mod server;
mod status;
pub mod workload;
