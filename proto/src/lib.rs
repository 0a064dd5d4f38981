//! Generated gRPC types of tunehub's API (`proto/tunehub/v1/tunehub.proto`, documented there):
//! the Jobs, Query, Records and Workers services, their clients and servers.
//!
//! # Layout
//!
//! - `tunehub/v1/tunehub.proto`: the API, the single source of its types and documentation.
//! - `build.rs`: generates the Rust code with tonic-prost-build and the vendored protoc.
//! - [`v1`]: the generated types, clients and servers, and the descriptor set for reflection.

#![allow(clippy::all, clippy::pedantic)]

/// The messages' trait (sizes, encoding), for crates that use the types without depending on
/// prost themselves: the server measures a worker's report before keeping it.
pub use prost::Message;

pub mod v1 {
    tonic::include_proto!("tunehub.v1");

    /// The encoded file descriptor set, for the gRPC reflection service.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        tonic::include_file_descriptor_set!("tunehub_v1_descriptor");
}
