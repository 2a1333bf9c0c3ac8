//! Waiting for jobs (flux-core's `wait.c`): a waitable job's end is
//! reported once, to the first request waiting for it or for any job;
//! reaping is durable before the answer, so a restart cannot reap it again.

use fluxgate_shared::JobId;
use fluxgate_shared::job::JobResult;
use tokio::sync::oneshot;

use super::store_read::NotActive;
use super::{Core, Inactive, WaitResult};
use crate::error::Error;
use crate::store::Store;

/// Where a `Wait` answer goes.
pub type WaitReply = oneshot::Sender<Result<WaitResult, Error>>;

/// Requests waiting for a job (`Some`) or any waitable job (`None`).
#[derive(Debug, Default)]
pub struct Waiters {
    list: Vec<(Option<JobId>, WaitReply)>,
}

impl Waiters {
    /// `reply` waits for `id`, or any job.
    pub fn add(&mut self, id: Option<JobId>, reply: WaitReply) {
        self.list.push((id, reply));
    }

    /// The first request waiting for `id` or for any job, taken.
    pub fn take_for(&mut self, id: JobId) -> Option<WaitReply> {
        let pos = self
            .list
            .iter()
            .position(|(w, _)| w.is_none_or(|w| w == id))?;
        Some(self.list.swap_remove(pos).1)
    }

    /// Someone waits for any job.
    pub fn any_waiting(&self) -> bool {
        self.list.iter().any(|(w, _)| w.is_none())
    }

    /// Answer every request waiting for any job: there is none to wait for.
    pub fn refuse_any(&mut self) {
        let mut keep = Vec::new();
        for (w, reply) in self.list.drain(..) {
            if w.is_none() {
                let _ = reply.send(Err(Error::WrongState("there are no waitable jobs".into())));
            } else {
                keep.push((w, reply));
            }
        }
        self.list = keep;
    }
}

impl<S: Store> Core<S> {
    pub(super) fn wait(
        &mut self,
        id: Option<JobId>,
        reply: oneshot::Sender<Result<WaitResult, Error>>,
    ) {
        if let Some((id, job)) = self.inactive.reap(id) {
            self.out.writes.push(job.summary_write(id));
            let result = wait_result(id, &job);
            // Answered once the reaping is durable, so a restart cannot reap it again.
            self.reply(reply, Ok(result));
            return;
        }
        match id {
            Some(id) => match self.jobs.get(&id) {
                Some(a) if !a.job.flags().waitable => {
                    let _ = reply.send(Err(Error::WrongState(format!(
                        "job {id} is not waitable (submit it with the waitable flag)"
                    ))));
                }
                Some(_) => self.waiters.add(Some(id), reply),
                None => self.is_inactive_then(id, NotActive::Wait(reply)),
            },
            None if self.jobs.values().any(|a| a.job.flags().waitable) => {
                self.waiters.add(None, reply);
            }
            None => {
                let _ = reply.send(Err(Error::WrongState("there are no waitable jobs".into())));
            }
        }
    }

    /// Job `id` ended as `inactive`: answer who waits for it, and those
    /// waiting for any job when no waitable job is left.
    pub(super) fn answer_waiters(&mut self, id: JobId, inactive: &mut Inactive) {
        if inactive.waitable
            && let Some(reply) = self.waiters.take_for(id)
        {
            inactive.waitable = false;
            let result = wait_result(id, inactive);
            self.reply(reply, Ok(result));
        }
        // Any-waiters left with nothing to wait for get an answer now. The
        // scan of active jobs is made only while someone waits, so a job's
        // end costs no work proportional to the queue.
        if self.waiters.any_waiting() && !self.jobs.values().any(|a| a.job.flags().waitable) {
            self.waiters.refuse_any();
        }
    }
}

fn wait_result(id: JobId, j: &Inactive) -> WaitResult {
    let success = j.result == JobResult::Completed;
    let error = if success {
        String::new()
    } else if let Some(e) = &j.exception {
        if e.1.is_empty() {
            format!("Fatal exception type={}", e.0)
        } else {
            format!("Fatal exception type={} {}", e.0, e.1)
        }
    } else if let Some(ws) = j.waitstatus {
        let ws = fluxgate_shared::job::WaitStatus(ws);
        match (ws.exit_code(), ws.signal()) {
            (Some(code), _) => format!("task(s) exited with exit code {code}"),
            (_, Some(sig)) => format!("task(s) terminated by signal {sig}"),
            _ => "job failed".into(),
        }
    } else {
        "job failed".into()
    };
    WaitResult { id, success, error }
}
