//! Effects as data: what the core asks of the world, carried out by the
//! committer only once the batch that caused it is durable.
//!
//! The core never does I/O itself. Handling a message it applies events,
//! queues their writes and queues [`Effect`]s beside them, in the order they
//! must happen; the committer (`commit.rs`) waits for the batch's
//! acknowledgement and then carries out each effect in order: answers a
//! request, tells watchers (stored lines, and a terminal's live output in
//! its place among them), appends to the resource journal, feeds the
//! acquirer, starts a prolog or epilog, or asks the exec link to start,
//! signal, end or re-time a job. Tests read the queued effects directly.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use fluxgate_shared::job::Job;
use fluxgate_shared::{Event, JobId};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use super::store_read::StoreRead;
use super::{Inactive, JobInfo, ResourceView, WaitResult};
use crate::error::Error;
use crate::exec_link::StartJob;
use crate::hub::Published;

/// One thing the world must see once the writes queued before it are durable.
#[derive(Debug)]
pub enum Effect {
    /// Answer a request.
    Reply(Reply),
    /// Tell watchers about a durable line or an ended job.
    Publish(Published),
    /// Show a line of a job's live output (never stored) to its watchers.
    Live { id: JobId, line: Arc<str> },
    /// Append a resource event to the in-memory journal.
    Journal(Event),
    /// Send an RFC 28 acquire response to the scheduler that acquired.
    Acquire {
        to: mpsc::Sender<Map<String, Value>>,
        msg: Map<String, Value>,
    },
    /// Run a prolog or epilog; its end comes back as `Msg::Perilog`.
    Perilog(Box<PerilogRun>),
    /// Open a job's start stream (boxed: it is the largest, and rare).
    ExecStart(Box<StartJob>),
    /// Deliver a fatal exception to a running job's leader.
    ExecKill {
        addr: String,
        id: JobId,
        kind: String,
        note: String,
    },
    /// Find out when a job's part no longer runs on `rank`'s node.
    ExecConfirmGone { addr: String, id: JobId, rank: u32 },
    /// Signal a running job's tasks.
    ExecSignal {
        addr: String,
        id: JobId,
        signum: i32,
    },
    /// Tell a running job's leader its new expiration.
    ExecExpiration {
        addr: String,
        id: JobId,
        expiration: f64,
    },
    /// Send the span of an ended job's life, once its summary is durable
    /// (only queued while spans are exported; see `otlp.rs`).
    JobSpan(Box<JobSpan>),
    /// Inactive jobs retired up to flush `flush` are durable (see `inactive.rs`).
    InactiveDurable { mark: Arc<AtomicU64>, flush: u64 },
    /// Read the store on the blocking pool; the answer goes back to the core
    /// (see `reads.rs` and `store_read.rs`).
    Read(StoreRead),
}

/// A job that became inactive: what its span is made of.
#[derive(Debug)]
pub struct JobSpan {
    pub id: JobId,
    /// Its fold: the times it entered each state, its exceptions.
    pub job: Job,
    /// Its summary: owner, name, result, nodes.
    pub inactive: Inactive,
}

/// A prolog or epilog to run.
#[derive(Debug, Clone, PartialEq)]
pub struct PerilogRun {
    pub cmd: String,
    pub id: JobId,
    pub userid: u32,
    pub which: Which,
    pub timeout: Duration,
}

/// Which site command: a prolog or an epilog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// Before the job starts.
    Prolog,
    /// After the job ends, before its resources are freed.
    Epilog,
}

impl Which {
    pub(super) fn name(self) -> &'static str {
        match self {
            Which::Prolog => "prolog",
            Which::Epilog => "epilog",
        }
    }
}

/// An answer and where it goes.
#[derive(Debug)]
pub struct Answer<T> {
    pub to: oneshot::Sender<T>,
    pub value: T,
}

macro_rules! replies {
    ($($(#[$doc:meta])* $variant:ident($t:ty),)*) => {
        /// Every kind of answer the core gives after commit (boxed, as the
        /// closure each was before: an answer is per request, not per event).
        #[derive(Debug)]
        pub enum Reply {
            $($(#[$doc])* $variant(Box<Answer<$t>>),)*
        }

        impl Reply {
            /// Send the answer; a caller that went away is not an error.
            pub fn send(self) {
                match self {
                    $(Reply::$variant(a) => {
                        let Answer { to, value } = *a;
                        let _ = to.send(value);
                    })*
                }
            }
        }

        $(impl From<Answer<$t>> for Reply {
            fn from(a: Answer<$t>) -> Reply {
                Reply::$variant(Box::new(a))
            }
        })*
    };
}

replies! {
    /// Submitted ids, or why each job was refused.
    Submit(Vec<Result<JobId, Error>>),
    /// Done, or why not.
    Done(Result<(), Error>),
    /// The old urgency.
    Urgency(Result<u8, Error>),
    /// A listing.
    List(Vec<JobInfo>),
    /// A waited-for job.
    Wait(Result<WaitResult, Error>),
    /// Jobs (that would be) purged.
    Purge(Result<u64, Error>),
    /// A running job's new expiration after an update.
    Update(Result<Option<f64>, Error>),
    /// Resource status.
    Resources(ResourceView),
    /// Queue status after a queue request.
    Queues(Result<Vec<super::QueueStatus>, Error>),
    /// The address of a running job's leader exec service.
    Address(Result<String, Error>),
}
