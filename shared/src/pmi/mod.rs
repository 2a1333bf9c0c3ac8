//! PMI, the process management interface MPI libraries use to find their
//! peers (Flux RFC 13): the PMI-1 simple wire protocol, the key-value space
//! a job's tasks share through it, and the union of the nodes' keys at a
//! barrier. Pure: the sockets and the exchange between nodes belong to the
//! exec service.

pub mod gather;
pub mod kvs;
pub mod simple;
pub mod wire;

pub use gather::Gather;
pub use kvs::Dict;
pub use simple::{Output, Setup, SimpleServer};
