//! `tunehub`, the command line: tune an operator or a model on this machine, ask a service for
//! kernels, run and manage jobs, move records. Every command is a client of tunehub's API (the
//! proto), as the Python client is: of a service named by `--server`, or of one embedded in
//! this process on a database file (`tune`, `--db`). Only `tunehub server` runs the service.
//!
//! A library as well as the binary: the end-to-end tests and the benchmarks use the same client,
//! embedded service and argument definitions.
//!
//! # Layout
//!
//! - `commands`: the command line (`Cli`) and one module per command, its arguments beside it.
//! - `args`: argument groups several commands share (measurement, models, workloads, database).
//! - `client`: the settings that reach a service (flags, environment, config file) and the
//!   connection.
//! - `embedded`: the service inside this process, and a job run in it to its end.
//! - `escaped`: others' text (a worker's device id) with its control characters escaped.
//! - `workload`: workloads as the command line gives them, as the API's.
//! - `model`: an ONNX model's tasks, extracted here; `model_files`: a compiled model's files
//!   from the service, written into a directory.
//! - `session`: the service a command talks to: a server, or one embedded on `--db`.
//! - `progress`: progress bars; `curves`: a job's tuning curves drawn as SVG (`report`).
//! - `show`: the API's messages as text and JSON.
//! - `usage`: exit statuses and one-line errors.

pub mod args;
pub mod client;
pub mod commands;
pub mod curves;
pub mod embedded;
pub mod escaped;
pub mod model;
pub mod model_files;
pub mod progress;
pub mod session;
pub mod show;
pub mod usage;
pub mod workload;

pub use commands::Cli;
