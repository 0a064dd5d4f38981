//! Generated gRPC types of tunehub's API (`proto/tunehub/v1/tunehub.proto`, documented there):
//! the Jobs, Query, Records and Workers services, their clients and servers.

#![allow(clippy::all, clippy::pedantic)]

pub mod v1 {
    tonic::include_proto!("tunehub.v1");

    /// The encoded file descriptor set, for the gRPC reflection service.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        tonic::include_file_descriptor_set!("tunehub_v1_descriptor");
}
