//! End-to-end tests of tunehub as processes talking over the network (server, workers,
//! databases) live here, in `tests/tests/`, as the service and the worker fleet land. The
//! command-line tests that drive the `tunehub` binary live beside it in `server/tests/`, where
//! Cargo builds the binary for them.
