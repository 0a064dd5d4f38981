//! tunehub's service: the record store, jobs and their driver, the worker fleet and the gRPC
//! API. The `tunehub` command line (`cli/`) runs it (`tunehub server`), embeds it (`embedded`),
//! and otherwise talks to it through the API only, as every other client does.
//!
//! # Layout
//!
//! - `records`: the record store (workloads, targets, measured records, best per pair) over SQL.
//! - `jobs`: tuning jobs in the database, their driver, and the measure backend seam.
//! - `fleet`: remote measurement workers: registry, leased pieces, the `Workers` service.
//! - `api`: the gRPC services (`Jobs`, `Query`, `Records`), each request checked in full.
//! - `checks`: the door's checks the API and the fleet share (sizes, imported records).
//! - `workload`: workloads at the API's edge: the proto's workload as the engine's task.
//! - `interchange`: record files converted (Ansor's logs) and distilled, offline.
//! - `cache`: the best-record cache in front of the database.
//! - `answer_cache`: answers by range or transfer, for workloads with no record of their own.
//! - `metrics`: Prometheus metrics and their HTTP endpoint.
//! - `dashboard`: the web dashboard (`--http`): a page and JSON endpoints that call the API
//!   in-process as the browser's token.
//! - `auth`: bearer-token checking of gRPC calls.
//! - `status`: store failures as gRPC statuses (UNAVAILABLE while the database is out of reach).
//! - `health`: the health service following the database's probes.
//! - `status_hook`: a tower layer handing each call's status to hooks (`undecodable`: a message
//!   that does not decode is INVALID_ARGUMENT, not INTERNAL; `fleet::oversized`).
//! - `server`: assembling and running the server (services, job runner, shutdown).
//! - `embedded`: the service inside one process (`tunehub tune`, `--db`, the benchmarks).
//! - `config`: the service's flags, environment and TOML file resolved into its configuration.

pub mod answer_cache;
pub mod api;
pub mod auth;
pub mod cache;
pub mod checks;
pub mod config;
pub mod dashboard;
pub mod embedded;
pub mod fleet;
mod health;
pub mod interchange;
pub mod jobs;
pub mod metrics;
pub mod records;
pub mod server;
mod status;
mod status_hook;
mod undecodable;
pub mod workload;
