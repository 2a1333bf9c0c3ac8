//! The guard flags of a job's owed steps: which are already in flight, so
//! that [`super::record::Job::pending_actions`] does not ask for them twice.
//! In memory only: after a restart they start clear.

/// In-memory guard flags: which owed steps are already in flight.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ActionGuards {
    /// `depend` was posted but not yet applied.
    pub depend_posted: bool,
    /// The priority step runs; cleared by `priority`.
    pub priority_requested: bool,
    /// An alloc request is with the scheduler; cleared by `alloc`.
    pub alloc_requested: bool,
    /// The exec start request expects responses; cleared by a final
    /// `release`, or by the job manager when the exec stream is lost.
    pub start_pending: bool,
    /// `free` was posted but not yet applied.
    pub free_posted: bool,
    /// `clean` was posted but not yet applied.
    pub clean_posted: bool,
}
