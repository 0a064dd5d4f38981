//! tunehub's server side: the record store, jobs and their driver, the gRPC API, and the
//! `tunehub` command line's parts.
//!
//! A library as well as the `tunehub` binary, so that the end-to-end tests use the same store,
//! server and argument definitions.

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
