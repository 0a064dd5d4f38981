//! Generated gRPC types of tunehub's API. The service definitions land with the service issue;
//! this crate exists now so that the workspace has its final shape.
