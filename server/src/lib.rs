//! tunehub's server side: the record store and the `tunehub` command line's parts.
//!
//! A library as well as the `tunehub` binary, so that the end-to-end tests (and later the gRPC
//! server) use the same store and argument definitions.

pub mod cli;
pub mod oplist;
pub mod records;
