//! The store reads the core needs while running, as data: each says what to
//! read and what the answer is for, and comes back to the core's loop as a
//! [`ReadDone`] holding both (see `reads.rs` for why reads leave the core's
//! task). The committer carries a read out with a [`ReadCarrier`] once the
//! writes queued before it are durable.

use std::fmt;
use std::sync::Arc;

use fluxgate_shared::JobId;
use tokio::sync::{mpsc, oneshot};

use super::WaitResult;
use super::inactive_job::{self, Inactive};
use super::purge::{self, PurgeAsk, Stored};
use super::scheme::Scheme;
use crate::error::Error;
use crate::store::{Store, StoreError};

/// A read of the store queued by the core (opaque outside it).
#[derive(Debug)]
pub struct StoreRead(pub(super) Query);

/// A read's answer on its way back to the core (opaque outside it).
#[derive(Debug)]
pub struct ReadDone(pub(super) Found);

/// What to read, and what for.
#[derive(Debug)]
pub(super) enum Query {
    /// The inactive record of `antecedent`, which a dependency of job `id`
    /// (`description`, of `scheme`) names.
    Antecedent {
        id: JobId,
        antecedent: JobId,
        scheme: Scheme,
        description: String,
    },
    /// Whether job `id`, which is not active, is stored as inactive; `then`
    /// is told.
    IsInactive { id: JobId, then: NotActive },
    /// The inactive jobs a purge chooses from: those that ended before
    /// `cutoff`, and (with `ask.force`) the oldest `excess` or so.
    Purge {
        ask: PurgeAsk,
        cutoff: Option<f64>,
        excess: u64,
        margin: u64,
    },
}

/// A query's answer, with what it was for.
#[derive(Debug)]
pub(super) enum Found {
    /// For [`Query::Antecedent`].
    Antecedent {
        id: JobId,
        antecedent: JobId,
        scheme: Scheme,
        description: String,
        done: Result<Option<Inactive>, StoreError>,
    },
    /// For [`Query::IsInactive`].
    IsInactive {
        id: JobId,
        then: NotActive,
        inactive: Result<bool, StoreError>,
    },
    /// For [`Query::Purge`].
    Purge {
        ask: PurgeAsk,
        cutoff: Option<f64>,
        stored: Result<Stored, StoreError>,
    },
}

impl Query {
    /// Read the store (blocks: run it on the blocking pool).
    fn run<S: Store>(self, store: &S) -> Found {
        match self {
            Query::Antecedent {
                id,
                antecedent,
                scheme,
                description,
            } => Found::Antecedent {
                id,
                antecedent,
                scheme,
                description,
                done: inactive_job::read_inactive(store, antecedent),
            },
            Query::IsInactive { id, then } => Found::IsInactive {
                id,
                then,
                // Stored without a summary would be active; it is not.
                inactive: store.summary(id.into()).map(|s| matches!(s, Some(Some(_)))),
            },
            Query::Purge {
                ask,
                cutoff,
                excess,
                margin,
            } => {
                let stored = purge::read_stored(store, &ask, cutoff, excess, margin);
                Found::Purge {
                    ask,
                    cutoff,
                    stored,
                }
            }
        }
    }
}

/// Who waits to hear whether a job that is not active is inactive or unknown.
#[derive(Debug)]
pub(super) enum NotActive {
    /// `Lookup`: `Some(false)` for an inactive job, `None` for an unknown one.
    Lookup(oneshot::Sender<Result<Option<bool>, Error>>),
    /// `Wait` on a job that is not active: not waitable (any more), or unknown.
    Wait(oneshot::Sender<Result<WaitResult, Error>>),
    /// A request on one active job: refused as inactive or unknown.
    Refuse(Box<dyn Refusal>),
}

impl NotActive {
    /// Tell whoever waits whether job `id` is inactive.
    pub(super) fn tell(self, id: JobId, inactive: Result<bool, Error>) {
        match self {
            NotActive::Lookup(reply) => {
                let _ = reply.send(inactive.map(|i| i.then_some(false)));
            }
            NotActive::Wait(reply) => {
                let err = match inactive {
                    Ok(true) => Error::WrongState(format!(
                        "job {id} is not waitable (submit it with the waitable flag) or was already waited for"
                    )),
                    Ok(false) => Error::UnknownJob(id),
                    Err(e) => e,
                };
                let _ = reply.send(Err(err));
            }
            NotActive::Refuse(to) => to.refuse(match inactive {
                Ok(true) => Error::WrongState(format!("job {id} is inactive")),
                Ok(false) => Error::UnknownJob(id),
                Err(e) => e,
            }),
        }
    }
}

/// Where a refusal goes: a request's reply channel, whatever its answer type.
pub(super) trait Refusal: Send + fmt::Debug {
    /// Answer the request with `e`.
    fn refuse(self: Box<Self>, e: Error);
}

impl<T: Send + fmt::Debug> Refusal for oneshot::Sender<Result<T, Error>> {
    fn refuse(self: Box<Self>, e: Error) {
        let _ = (*self).send(Err(e));
    }
}

/// Carries reads out on the blocking pool and sends their answers to the core.
#[derive(Debug)]
pub struct ReadCarrier<S> {
    store: Arc<S>,
    answers: mpsc::UnboundedSender<ReadDone>,
}

impl<S> Clone for ReadCarrier<S> {
    fn clone(&self) -> Self {
        ReadCarrier {
            store: Arc::clone(&self.store),
            answers: self.answers.clone(),
        }
    }
}

impl<S: Store> ReadCarrier<S> {
    /// Reads of `store`, answered on `answers`.
    pub(super) fn new(store: Arc<S>, answers: mpsc::UnboundedSender<ReadDone>) -> Self {
        ReadCarrier { store, answers }
    }

    /// Read, off the async workers; the answer goes to the core.
    pub fn carry(&self, read: StoreRead) {
        let store = Arc::clone(&self.store);
        let answers = self.answers.clone();
        tokio::task::spawn_blocking(move || {
            let found = read.0.run(&*store);
            // The core has stopped when nobody receives: nothing waits for it.
            let _ = answers.send(ReadDone(found));
        });
    }
}
