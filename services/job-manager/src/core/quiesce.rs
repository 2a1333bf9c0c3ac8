//! `queue idle` and `queue drain` (flux-queue(1)): requests answered once no
//! job runs (none in RUN or CLEANUP), or once no job is active at all. They
//! are checked when they arrive and each time a job retires, the only moment
//! either can become true.

use fluxgate_shared::JobState;
use tokio::sync::oneshot;

use super::Core;
use crate::error::Error;
use crate::store::Store;

/// What a request waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quiet {
    /// No job running: none in RUN or CLEANUP (`queue idle`).
    Idle,
    /// No job active (`queue drain`).
    Drained,
}

/// Requests waiting for the instance to quiet down.
#[derive(Debug, Default)]
pub struct Quiescers {
    list: Vec<(Quiet, oneshot::Sender<Result<(), Error>>)>,
}

impl<S: Store> Core<S> {
    /// Answer `reply` once the instance is as quiet as `what` asks.
    pub(super) fn quiesce(&mut self, what: Quiet, reply: oneshot::Sender<Result<(), Error>>) {
        self.quiescers.list.push((what, reply));
        self.answer_quiet();
    }

    /// Answer the requests whose condition holds now.
    pub(super) fn answer_quiet(&mut self) {
        if self.quiescers.list.is_empty() {
            return;
        }
        let drained = self.jobs.is_empty();
        let idle = drained
            || !self
                .jobs
                .values()
                .any(|a| matches!(a.job.state(), JobState::Run | JobState::Cleanup));
        let (ready, waiting) = std::mem::take(&mut self.quiescers.list)
            .into_iter()
            .partition(|(what, _)| match what {
                Quiet::Idle => idle,
                Quiet::Drained => drained,
            });
        self.quiescers.list = waiting;
        for (_, reply) in ready {
            self.reply(reply, Ok(()));
        }
    }
}
