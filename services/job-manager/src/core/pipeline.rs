//! The action step (flux-core's `event_job_action`): after events are posted,
//! do what each touched job's new state asks for, until nothing more is owed.

use fluxgate_shared::JobId;
use fluxgate_shared::job::{Action, JobState};
use serde_json::Value;

use super::{Core, effect};
use crate::store::Store;

/// Most rounds of owed actions for one job in one pass.
const MAX_ROUNDS: usize = 32;

/// flux-core's priority for urgency 31 (expedite).
pub const PRIORITY_MAX: u32 = u32::MAX;

/// The default priority plugin: 0 holds, 31 expedites, otherwise the urgency.
pub fn priority_of(urgency: u8) -> u32 {
    match urgency {
        0 => 0,
        31 => PRIORITY_MAX,
        u => u32::from(u),
    }
}

impl<S: Store> Core<S> {
    /// Run owed actions for every job touched since the last call.
    pub(super) fn run_actions(&mut self) {
        // Posting events touches more jobs (dependents, the scheduler's picks), so
        // loop until the work list is empty. Each job's owed actions are bounded by
        // its state machine, so this ends.
        loop {
            while let Some(id) = self.out.touched.pop() {
                if self.act(id) {
                    self.out.resched = true;
                }
            }
            if !std::mem::take(&mut self.out.resched) {
                break;
            }
            self.timed_schedule();
        }
    }

    /// Take `id`'s owed actions; true if the scheduler should run.
    fn act(&mut self, id: JobId) -> bool {
        // ERROR level so the span is on whenever any line is: every line
        // logged while the job is acted on (post, start, free, retire) has its id.
        let _span = tracing::error_span!("job", job = %id).entered();
        let mut resched = false;
        // Each round moves the job along its state machine, so a handful of
        // rounds always suffices; the bound turns a pipeline bug into a log line
        // instead of a hung job manager.
        for _ in 0..MAX_ROUNDS {
            let Some(active) = self.jobs.get_mut(&id) else {
                return resched;
            };
            let actions = active.job.pending_actions();
            if actions.is_empty() {
                if active.job.state() == JobState::Inactive {
                    self.retire(id);
                }
                return resched;
            }
            for action in actions {
                if let Some(active) = self.jobs.get_mut(&id) {
                    active.job.mark(action);
                }
                match action {
                    Action::PostDepend => {
                        self.post(id, "depend", None);
                    }
                    Action::RequestPriority => {
                        let priority = self.priority_for(id);
                        self.post(
                            id,
                            "priority",
                            Self::context([("priority", Value::from(priority))]),
                        );
                    }
                    Action::RequestAlloc => {
                        // Through the gate of stopped queues and limits (hold.rs).
                        self.admit_alloc(id);
                        resched = true;
                    }
                    Action::CancelAlloc => self.withdraw_alloc(id),
                    Action::StartExec { reattach } => {
                        if !reattach && self.begin_perilog(id, effect::Which::Prolog) {
                            // The start is owed again once prolog-finish lands.
                            if let Some(a) = self.jobs.get_mut(&id) {
                                a.job.guards.start_pending = false;
                            }
                        } else {
                            self.start_exec(id, reattach);
                        }
                    }
                    Action::FreeResources => {
                        if self.begin_perilog(id, effect::Which::Epilog) {
                            if let Some(a) = self.jobs.get_mut(&id) {
                                a.job.guards.free_posted = false;
                            }
                        } else {
                            self.free_resources(id);
                            resched = true;
                        }
                    }
                    Action::PostClean => {
                        self.post(id, "clean", None);
                    }
                }
            }
        }
        tracing::error!(job = %id, "owed actions did not settle; leaving the job as it is");
        resched
    }

    /// Urgency changed: recompute the priority (a new `priority` event while
    /// SCHED, as flux-core's reprioritize does) and requeue.
    pub(super) fn reprioritize(&mut self, id: JobId) {
        let Some(active) = self.jobs.get(&id) else {
            return;
        };
        if active.job.state() != JobState::Sched {
            return;
        }
        let priority = self.priority_for(id);
        if active.job.priority() == Some(priority) {
            return;
        }
        self.post(
            id,
            "priority",
            Self::context([("priority", Value::from(priority))]),
        );
        if priority == 0 {
            self.withdraw_alloc(id);
            if let Some(a) = self.jobs.get_mut(&id) {
                a.job.mark(Action::CancelAlloc);
            }
        } else {
            self.requeue(id);
            self.out.resched = true;
        }
        self.out.touched.push(id);
    }
}
