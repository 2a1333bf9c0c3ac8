//! Scheduling as pure functions: EASY backfill over the real pool
//! ([`backfill`]), workload traces in the Standard Workload Format
//! ([`swf`]) and the replay of a trace in virtual time through the same
//! code the job manager runs ([`simulate`]).

pub mod backfill;
pub mod simulate;
pub mod swf;

pub use backfill::{Reservation, backfill, reserve};
