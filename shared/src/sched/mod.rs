//! Scheduling as pure functions: the schedule ahead as counts over time
//! ([`profile`], [`plan`]), one pass of a policy over the pending jobs
//! ([`pass`]: fcfs, EASY and conservative backfill), workload traces in the
//! Standard Workload Format ([`swf`]) and the replay of a trace in virtual
//! time through the same code the job manager runs ([`simulate`]).

pub mod pass;
pub mod plan;
pub mod profile;
pub mod simulate;
pub mod swf;
#[cfg(test)]
mod testkit;

pub use pass::{Decision, Pending, Policy, RESERVATION_DEPTH, Reserve, UnknownPolicy, pass};
pub use plan::{Need, Plan};
