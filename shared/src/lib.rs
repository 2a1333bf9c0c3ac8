//! The Flux data model, pure: no I/O, no async.
//!
//! Every rule that can be a function lives here so that the services stay thin.
//! Each module is named after the RFC concept it holds.

pub mod auth;
pub mod conninfo;
pub mod eventlog;
pub mod hostlist;
pub mod idset;
pub mod job;
pub mod jobid;
pub mod jobspec;
pub mod mustache;
pub mod pmi;
pub mod policy;
pub mod resource;
pub mod rset;
pub mod sched;
pub mod size;
pub mod taskmap;

pub use eventlog::Event;
pub use hostlist::Hostlist;
pub use idset::IdSet;
pub use job::JobState;
pub use jobid::JobId;
pub use jobspec::Jobspec;
pub use rset::ResourceSet;
