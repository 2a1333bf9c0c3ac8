//! Resources and how they are shared: `resource` (status and
//! administration), `R` (RFC 20 resource sets), `queue` (the queues jobs
//! wait in) and `accounting` (fair share).

pub mod accounting;
pub mod queue;
pub mod resource;
pub mod rset;
