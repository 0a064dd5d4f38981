//! End-to-end tests of tunehub: real `tunehub` and `tunehub-worker` processes talking gRPC on
//! loopback, the real compiler (and the aarch64 cross compiler under qemu), real SQLite files
//! and a real PostgreSQL.
//!
//! # Layout
//!
//! This library is what the tests share: `binaries` (the two binaries under test, built fresh),
//! `cli` (the `tunehub` binary as the command-line tests run it, and its outcomes checked),
//! `server` and `worker` (their child processes), `faulty_worker` (fault injection: a fake
//! device that reports what a real one never would), `process` (signals, exits), `jobs`
//! (requests, and waiting on a job through its Watch stream), `metrics` (a scrape of the
//! metrics endpoint), `wait` (waiting for what no stream reports, with a deadline), `tools` (a
//! missing outside tool: a skip, or a failure under CI=true), `pg` (a fresh database on the
//! PostgreSQL test cluster), `immutable` (files made unwritable under a running process:
//! `chattr +i`). The tests, in `tests/`:
//! `service.rs` (the API and the command line's clients), `tune_cli.rs` (`tunehub tune` and
//! `query --db`), `fleet.rs` (workers: kill -9, quarantine, restart, aarch64 under qemu),
//! `operations.rs` (metrics, JSON logs, SIGTERM), `roles.rs` (tokens with roles),
//! `postgres.rs` (the same on PostgreSQL, two servers on one database), `replicas.rs` (two
//! replicas sharing the fleet: pools owned, workers redirected, kill -9), `pg_restart.rs` (jobs
//! across a restart of a cluster of its own), `multi_target.rs` (one submission, a job per
//! target), `deploy.rs` (deploy/ against the binaries and CI), `ansor.rs` (records to and
//! from TVM auto_scheduler logs), `ranges.rs` (shape ranges: tuned, answered,
//! listed, carried), `python_client.rs` (clients/python's pytest suite against the server), `submit_model.rs`
//! (a model submitted as a file to `Jobs.SubmitModel` and as the CLI's tasks: the same job),
//! `store_faults.rs` (the stores' claims and renewals on a SQLite file unwritable for a
//! while: an error, never a success not saved), `first_contact.rs` (a URL without a scheme, TLS on one side only, an unknown CA: one line
//! naming the fix; logs in files and pipes without colour codes), `dashboard.rs` (the web
//! dashboard in headless Chromium: a job followed live, a quarantined worker, a viewer).

pub mod binaries;
pub mod certs;
pub mod cli;
pub mod faulty_worker;
pub mod immutable;
pub mod jobs;
pub mod metrics;
pub mod pg;
pub mod process;
pub mod server;
pub mod tools;
pub mod wait;
pub mod worker;

pub use faulty_worker::FaultyWorker;
pub use immutable::Immutable;
pub use jobs::{
    code_of, get, is_final, op, quick, store_job, submit, submit_req, task, tune_done, wait_final,
    wait_trials,
};
pub use metrics::scrape_raw;
pub use pg::fresh_db;
pub use server::{Server, TOKEN, sqlite_path};
pub use worker::{Worker, broken_compiler, wait_pool};
