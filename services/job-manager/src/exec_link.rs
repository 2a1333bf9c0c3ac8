//! What the core and the exec client share, and nothing of either.
//!
//! The core decides that a job starts, is signalled, gets an exception or a
//! new expiration; the exec link carries that out toward the exec services
//! (RFC 32 over gRPC in the exec client, a recording one in the core's
//! tests). What the exec services answer comes back as [`ExecMsg`]s through
//! an [`ExecSink`]. This module imports neither the core nor the client, so
//! the two meet here without importing each other.

use std::collections::BTreeMap;
use std::future::Future;

use fluxgate_shared::JobId;
use fluxgate_shared::job::usage::JobUsage;
use serde_json::{Map, Value};

use crate::auth::JobCredentials;

/// A start request, ready to send.
#[derive(Debug, Clone)]
pub struct StartJob {
    pub id: JobId,
    pub userid: u32,
    /// Changes to apply to the stored jobspec (`jobspec-update`).
    pub jobspec_updates: Map<String, Value>,
    pub r: String,
    pub reattach: bool,
    pub leader: String,
    pub peers: BTreeMap<u32, String>,
    /// R's expiration, when the job has one: its credential's too.
    pub expiration: Option<f64>,
    /// Mints the job's credential for its tasks.
    pub credentials: JobCredentials,
}

/// What an exec start stream said about a job.
#[derive(Debug, Clone, PartialEq)]
pub enum ExecMsg {
    /// The tasks are running.
    Started { id: JobId },
    /// Re-attached to running tasks after a restart.
    Reattached { id: JobId },
    /// Targets released; `final` is the last response.
    Release {
        id: JobId,
        ranks: String,
        last: bool,
    },
    /// An exception from the exec service.
    Exception {
        id: JobId,
        kind: String,
        severity: u8,
        note: String,
    },
    /// The tasks ended; the largest wait status, and what the job used
    /// on its nodes (`None` where no node contains its jobs in cgroups).
    Finish {
        id: JobId,
        status: i32,
        usage: Option<JobUsage>,
    },
    /// An RFC 50 line for `exec.eventlog`.
    ExecLine { id: JobId, line: String },
    /// An RFC 24 line for `output`.
    OutputLine { id: JobId, line: String },
    /// An RFC 24 `data` line to show the job's live watchers, not stored.
    LiveOutputLine { id: JobId, line: String },
    /// The stream ended before the final release.
    Lost { id: JobId, error: String },
    /// The job no longer runs on `rank`'s node (asked by
    /// [`ExecLink::confirm_gone`]).
    PartGone { id: JobId, rank: u32 },
}

impl ExecMsg {
    /// The job it is about.
    pub fn id(&self) -> JobId {
        match self {
            ExecMsg::Started { id }
            | ExecMsg::Reattached { id }
            | ExecMsg::Release { id, .. }
            | ExecMsg::Exception { id, .. }
            | ExecMsg::Finish { id, .. }
            | ExecMsg::ExecLine { id, .. }
            | ExecMsg::OutputLine { id, .. }
            | ExecMsg::LiveOutputLine { id, .. }
            | ExecMsg::Lost { id, .. }
            | ExecMsg::PartGone { id, .. } => *id,
        }
    }
}

/// Where an exec link delivers what the exec services say.
pub trait ExecSink: Clone + Send + Sync + 'static {
    /// Deliver `msg`, waiting while the receiver is full; false once the
    /// receiver is gone (the link then stops reading).
    fn deliver(&self, msg: ExecMsg) -> impl Future<Output = bool> + Send;
    /// Resolves once the receiver is gone (the core stopped): the link then
    /// ends its streams, so that the exec services are not held by a job
    /// manager that no longer leads.
    fn closed(&self) -> impl Future<Output = ()> + Send;
}

/// How the core's decisions reach the exec services. Every call returns at
/// once: what a call leads to comes back through the link's [`ExecSink`],
/// and a request that cannot be delivered is only logged (the job's start
/// stream reports what matters). The committer calls these only once the
/// batch that asked for them is durable.
pub trait ExecLink: Send + Sync + 'static {
    /// Open the job's start stream to its leader (RFC 32 `start`, or `reattach`).
    fn start(&self, job: StartJob);
    /// Deliver a fatal exception to the job's leader at `addr`.
    fn exception(&self, addr: String, id: JobId, kind: String, note: String);
    /// Signal the job's tasks through its leader at `addr`.
    fn signal(&self, addr: String, id: JobId, signum: i32);
    /// Tell the job's leader at `addr` its new R expiration.
    fn expiration(&self, addr: String, id: JobId, expiration: f64);
    /// Find out when job `id` no longer runs on `rank`'s exec service at
    /// `addr`: [`ExecMsg::PartGone`] then.
    fn confirm_gone(&self, addr: String, id: JobId, rank: u32);
}
