//! End-to-end tests of tunehub as processes talking over the network (server, workers,
//! databases) that need no binary's path live here, in `tests/tests/`. The tests that drive the
//! `tunehub` binary live beside it in `server/tests/`, where Cargo builds the binary for them:
//! the command line, the service, and the worker fleet (`server/tests/fleet.rs`, which finds
//! `tunehub-worker` beside `tunehub` in the target directory).
//!
//! # Layout
//!
//! - `src/lib.rs`: this page; the crate has no code of its own.
//! - `tests/`: the end-to-end test files (none yet: every such test drives a binary today, so
//!   they are all in `server/tests/`).
