//! The `fluxgate.v1` gRPC API. Wire types stay at the edge: services convert them
//! to the domain types of `fluxgate-shared` before doing anything else.

#![allow(missing_docs, clippy::all, missing_debug_implementations)]

pub mod codec;
pub mod wire;

/// Generated messages, clients and servers of package `fluxgate.v1`.
pub mod v1 {
    tonic::include_proto!("fluxgate.v1");
}

/// Encoded `FileDescriptorSet` of the API, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("fluxgate_descriptor");
