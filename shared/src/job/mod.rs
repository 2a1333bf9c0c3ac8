//! RFC 21 job states and events: the state machine as a pure fold.
//!
//! - [`JobState`], [`StateMask`], [`JobResult`]: states, virtual states and
//!   results with flux-core's names, letters and bit values.
//! - [`Job`]: the record `apply(&Event)` moves; [`replay`] folds a whole
//!   eventlog through the same `apply`, so recovery has no second path.
//! - [`Action`]: what the job manager owes the job next
//!   ([`Job::pending_actions`]).
//! - [`signal_description`], [`WaitStatus::exit_report`],
//!   [`returncode_reason`]: how a job's end reads to a user.

mod action;
mod context;
mod guards;
mod memo;
mod record;
mod signal;
mod state;
pub mod usage;

pub use action::Action;
pub use guards::ActionGuards;
pub use record::{
    Job, JobException, JobFlags, ReplayError, TransitionError, apply_jobspec_updates, replay,
};
pub use signal::{returncode_reason, signal_description};
pub use state::{JobResult, JobState, JobStateError, StateMask, WaitStatus};
