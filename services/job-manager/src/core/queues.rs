//! Queues (RFC 33; flux-core's `queue.c`): each queue is enabled (takes
//! submissions) and started (its jobs are handed to the scheduler), or not,
//! with a reason. With no `[queues]` table there is one anonymous queue,
//! named "" here.
//!
//! Protocol (flux's `job-manager.queue-*` RPCs, one request type here):
//! - status / list: every queue when no name is given, else the one named;
//! - enable / disable: a disabled queue refuses submissions ("job submission
//!   to NAME is disabled: REASON"); jobs already in it go on;
//! - start / stop: stopping a queue withdraws its jobs' alloc requests from
//!   the scheduler (they wait in SCHED, held here), starting it hands them
//!   back; running jobs are not touched.
//!
//! With named queues, a control request names a queue or says `all` ("Use
//! --all to apply this command to all queues"). The state of every queue is
//! kept in the store (meta key [`STATE_KEY`]), written in the same batch as
//! the change, so a restart finds queues as they were left.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::Core;
use super::bounds;
use crate::error::Error;
use crate::policy::SitePolicy;
use crate::store::{Store, Write};

/// Meta key of the queues' enabled and started state.
pub const STATE_KEY: &str = "queues";

/// The reason a queue is disabled when none is given (flux-queue's).
pub const DEFAULT_DISABLE_REASON: &str = "disabled by administrator";

/// What a queue request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueAction {
    /// Report the state.
    Status,
    /// Stop scheduling.
    Stop,
    /// Start scheduling.
    Start,
    /// Take submissions.
    Enable,
    /// Refuse submissions.
    Disable,
}

/// A queue request, checked at the edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueRequest {
    /// What to do.
    pub action: QueueAction,
    /// The queue; `None`: the anonymous queue, or all with `all`.
    pub name: Option<String>,
    /// Apply to every queue.
    pub all: bool,
    /// Why (stop, disable).
    pub reason: String,
}

/// One queue's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueState {
    /// Submissions are accepted.
    pub enable: bool,
    /// Why not.
    #[serde(default)]
    pub disable_reason: String,
    /// Jobs are scheduled.
    pub start: bool,
    /// Why not.
    #[serde(default)]
    pub stop_reason: String,
}

impl Default for QueueState {
    fn default() -> Self {
        QueueState {
            enable: true,
            disable_reason: String::new(),
            start: true,
            stop_reason: String::new(),
        }
    }
}

/// A queue's state as reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueStatus {
    /// Its name ("" for the anonymous queue).
    pub name: String,
    /// Its state.
    pub state: QueueState,
    /// It is the default queue (or the anonymous one).
    pub is_default: bool,
}

/// Every queue's state.
#[derive(Debug, Default)]
pub struct QueueSeat {
    states: BTreeMap<String, QueueState>,
}

impl QueueSeat {
    /// The state of the job queue `name` (`None`: anonymous); a queue no
    /// longer configured counts as enabled and started.
    fn state(&self, name: Option<&str>) -> Option<&QueueState> {
        self.states.get(name.unwrap_or(""))
    }

    /// Is `queue` started?
    pub fn started(&self, queue: Option<&str>) -> bool {
        self.state(queue).is_none_or(|s| s.start)
    }

    /// Refuse a submission to a disabled queue, as flux's `queue_submit_check`.
    pub fn accepts(&self, queue: Option<&str>) -> Result<(), Error> {
        match self.state(queue) {
            Some(s) if !s.enable => Err(Error::Unavailable(format!(
                "job submission{} is disabled: {}",
                queue.map(|q| format!(" to {q}")).unwrap_or_default(),
                s.disable_reason
            ))),
            _ => Ok(()),
        }
    }
}

impl<S> Core<S> {
    /// The site policy read at start, for the submit edge and listings.
    pub fn site(&self) -> Arc<SitePolicy> {
        Arc::clone(&self.site)
    }
}

impl<S: Store> Core<S> {
    /// Read the queues' state kept in the store; queues configured since
    /// start enabled and started, queues no longer configured are dropped.
    pub(super) fn restore_queues(&mut self) -> Result<(), Error> {
        let mut stored: BTreeMap<String, QueueState> = match self.store.meta(STATE_KEY)? {
            Some(text) => serde_json::from_str(&text).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "stored queue state unreadable; queues start enabled and started");
                BTreeMap::new()
            }),
            None => BTreeMap::new(),
        };
        let names: Vec<String> = if self.site.queues.is_named() {
            self.site.queues.names().map(str::to_string).collect()
        } else {
            vec![String::new()]
        };
        self.queues.states = names
            .into_iter()
            .map(|n| {
                let state = stored.remove(&n).unwrap_or_default();
                (n, state)
            })
            .collect();
        Ok(())
    }

    /// Answer a queue request (after its change, if any, is durable).
    pub(super) fn queue_request(&mut self, req: QueueRequest) -> Result<Vec<QueueStatus>, Error> {
        let what = match req.action {
            QueueAction::Disable => "queue disable reason",
            _ => "queue stop reason",
        };
        bounds::check_note(what, &req.reason)?;
        let targets = self.queue_targets(&req)?;
        let changed = match req.action {
            QueueAction::Status => false,
            QueueAction::Enable | QueueAction::Disable => {
                let enable = req.action == QueueAction::Enable;
                let reason = match (enable, req.reason.is_empty()) {
                    (true, _) => String::new(),
                    (false, true) => DEFAULT_DISABLE_REASON.to_string(),
                    (false, false) => req.reason.clone(),
                };
                for name in &targets {
                    if let Some(s) = self.queues.states.get_mut(name) {
                        s.enable = enable;
                        s.disable_reason = reason.clone();
                    }
                }
                true
            }
            QueueAction::Start | QueueAction::Stop => {
                let start = req.action == QueueAction::Start;
                for name in &targets {
                    self.set_started(name, start, &req.reason);
                }
                true
            }
        };
        if changed {
            self.save_queues();
        }
        Ok(targets.iter().map(|n| self.queue_status(n)).collect())
    }

    /// The queues a request applies to, checked as flux checks them.
    fn queue_targets(&self, req: &QueueRequest) -> Result<Vec<String>, Error> {
        let named = self.site.queues.is_named();
        match &req.name {
            Some(n) if !self.queues.states.contains_key(n) || !named => {
                Err(Error::Invalid(format!("'{n}' is not a valid queue")))
            }
            Some(n) => Ok(vec![n.clone()]),
            None if named && !req.all && req.action != QueueAction::Status => Err(Error::Invalid(
                "Use --all to apply this command to all queues".into(),
            )),
            None => Ok(self.queues.states.keys().cloned().collect()),
        }
    }

    fn queue_status(&self, name: &str) -> QueueStatus {
        let state = self.queues.states.get(name).cloned().unwrap_or_default();
        let is_default = name.is_empty() || self.site.queues.default_queue() == Some(name);
        QueueStatus {
            name: name.to_string(),
            state,
            is_default,
        }
    }

    /// Start or stop queue `name`: its jobs' alloc requests are handed
    /// back to the scheduler, or withdrawn and held.
    fn set_started(&mut self, name: &str, start: bool, reason: &str) {
        let Some(s) = self.queues.states.get_mut(name) else {
            return;
        };
        let was = s.start;
        s.start = start;
        s.stop_reason = if start {
            String::new()
        } else {
            reason.to_string()
        };
        if was == start {
            return;
        }
        let queue = (!name.is_empty()).then_some(name);
        if start {
            self.release_queue(queue);
        } else {
            self.hold_queue(queue);
        }
    }

    /// Write every queue's state in this batch.
    fn save_queues(&mut self) {
        match serde_json::to_string(&self.queues.states) {
            Ok(value) => self.out.writes.push(Write::Meta {
                key: STATE_KEY.into(),
                value,
            }),
            Err(e) => tracing::error!(error = %e, "queue state not saved"),
        }
    }
}
