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

/// Prefix of a health-check service name through which an exec service
/// tells how it contains jobs: the name ends in its mode (`v2`, `v1` or
/// `off`), SERVING while the service runs. `fluxgate health` shows it.
pub const CONTAINMENT_HEALTH: &str = "fluxgate.v1.Exec.containment.";

/// The containment modes an exec service may report.
pub const CONTAINMENT_MODES: &[&str] = &["v2", "v1", "off"];
