//! What the job manager owes a job in its current state.
//!
//! flux-core's `event_job_action()` runs after every event and does what the
//! state asks for; guard flags (`depend_posted`, `alloc_queued`,
//! `start_pending`, `free_posted`) make it idempotent. Here the same rules
//! are a pure query, [`Job::pending_actions`]; the job manager performs each
//! action and records it with [`Job::mark`]. Events clear the guards they
//! answer (`alloc` clears the alloc request, a final `release` the start).
//! Guards are not stored: after a restart they start clear, so a replayed job
//! asks again for what it still needs (a new alloc request, a start with
//! reattach).

use super::record::Job;
use super::state::JobState;

/// One step the job manager owes a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// DEPEND with nothing outstanding: post `depend`.
    PostDepend,
    /// PRIORITY: compute a priority and post `priority`.
    RequestPriority,
    /// SCHED with a non-zero priority: ask the scheduler for resources.
    RequestAlloc,
    /// An alloc request is out but the job left SCHED: withdraw it.
    CancelAlloc,
    /// RUN with no prolog running: start the job shells; `reattach` when a
    /// `start` was already logged (restart), so running shells are adopted.
    StartExec {
        /// The shells were started before; reattach instead of launching.
        reattach: bool,
    },
    /// CLEANUP holding resources, shells done, no epilog running: return the
    /// resources to the scheduler and post `free`.
    FreeResources,
    /// CLEANUP with nothing left to wait for: post `clean`.
    PostClean,
}

impl Job {
    /// The steps owed now, in the order they should be taken. Empty when the
    /// job waits on something outside the job manager (or is inactive).
    pub fn pending_actions(&self) -> Vec<Action> {
        let g = &self.guards;
        let mut out = Vec::new();
        match self.state() {
            JobState::New | JobState::Inactive => {}
            JobState::Depend => {
                if self.dependencies().is_empty() && !g.depend_posted {
                    out.push(Action::PostDepend);
                }
            }
            JobState::Priority => {
                if g.alloc_requested {
                    out.push(Action::CancelAlloc);
                }
                if !g.priority_requested {
                    out.push(Action::RequestPriority);
                }
            }
            JobState::Sched => {
                // Priority 0 means held: flux-core keeps such jobs out of the
                // scheduler's queue.
                if !g.alloc_requested && self.priority().is_some_and(|p| p > 0) {
                    out.push(Action::RequestAlloc);
                }
            }
            JobState::Run => {
                if self.perilog_active() == 0 && !g.start_pending && !self.is_released() {
                    out.push(Action::StartExec {
                        reattach: self.has_started(),
                    });
                }
            }
            JobState::Cleanup => {
                if g.alloc_requested {
                    out.push(Action::CancelAlloc);
                }
                let quiet = self.perilog_active() == 0 && !g.start_pending;
                if self.has_resources() && quiet && !g.free_posted && !self.flags().alloc_bypass {
                    out.push(Action::FreeResources);
                }
                if !self.has_resources() && quiet && !g.alloc_requested && !g.clean_posted {
                    out.push(Action::PostClean);
                }
            }
        }
        out
    }

    /// Record that `action` was taken, so it is not owed again.
    pub fn mark(&mut self, action: Action) {
        let g = &mut self.guards;
        match action {
            Action::PostDepend => g.depend_posted = true,
            Action::RequestPriority => g.priority_requested = true,
            Action::RequestAlloc => g.alloc_requested = true,
            Action::CancelAlloc => g.alloc_requested = false,
            Action::StartExec { .. } => g.start_pending = true,
            Action::FreeResources => g.free_posted = true,
            Action::PostClean => g.clean_posted = true,
        }
    }
}
