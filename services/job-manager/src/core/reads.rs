//! Reads of the store for the core, off the core's task.
//!
//! A read waits on the disk (or, for a database store, the network), and
//! the core's one task must never wait: while it did, no event of any job
//! would move. So a read the core needs while running (an inactive job's
//! summary, the oldest jobs to purge) is queued as an [`Effect::Read`]:
//! the committer carries it out once every write queued before it is
//! durable, so the read sees all the core has written, on the blocking
//! pool; its answer comes back to the core's loop as a typed message
//! (`store_read.rs`), whose handler checks the in-memory overlay again
//! (`inactive.rs`) since the core may have moved on meanwhile. Only
//! recovery, before the loop starts, reads directly.

use fluxgate_shared::JobId;
use tokio::sync::mpsc;

use super::Core;
use super::effect::Effect;
use super::inactive::Known;
use super::purge::PurgeAsk;
use super::scheme::Scheme;
use super::store_read::{Found, NotActive, Query, ReadCarrier, ReadDone, StoreRead};
use crate::error::Error;
use crate::store::Store;

/// The channel answers come back on, and how many are owed. Unbounded: a
/// read is queued only for a request or a dependency the core holds, so the
/// answers owed are bounded by those, and the reader on the blocking pool
/// must never wait for the core's loop.
pub(super) struct Reads {
    tx: mpsc::UnboundedSender<ReadDone>,
    rx: Option<mpsc::UnboundedReceiver<ReadDone>>,
    /// Reads queued whose answer has not been applied yet.
    owed: usize,
}

impl Default for Reads {
    fn default() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Reads {
            tx,
            rx: Some(rx),
            owed: 0,
        }
    }
}

impl Reads {
    /// The receiving end, for the core's loop (taken once).
    pub(super) fn take_answers(&mut self) -> Option<mpsc::UnboundedReceiver<ReadDone>> {
        self.rx.take()
    }

    /// Reads whose answer is still owed.
    #[cfg(test)]
    pub(super) fn owed(&self) -> usize {
        self.owed
    }
}

impl<S: Store> Core<S> {
    /// Where the committer carries out this core's reads.
    pub fn read_carrier(&self) -> ReadCarrier<S> {
        ReadCarrier::new(std::sync::Arc::clone(&self.store), self.reads.tx.clone())
    }

    /// Read the store once what is queued so far is durable; the answer
    /// comes back to [`Core::loaded`].
    fn read(&mut self, query: Query) {
        self.reads.owed += 1;
        self.effect(Effect::Read(StoreRead(query)));
    }

    /// Read how `antecedent`, which a dependency of `id` names, ended;
    /// the answer comes back to [`Core::antecedent_read`].
    pub(super) fn read_antecedent(
        &mut self,
        id: JobId,
        antecedent: JobId,
        scheme: Scheme,
        description: String,
    ) {
        self.read(Query::Antecedent {
            id,
            antecedent,
            scheme,
            description,
        });
    }

    /// Read the inactive jobs purge `ask` chooses from; the answer comes
    /// back to [`Core::purge_read`].
    pub(super) fn read_purge(
        &mut self,
        ask: PurgeAsk,
        cutoff: Option<f64>,
        excess: u64,
        margin: u64,
    ) {
        self.read(Query::Purge {
            ask,
            cutoff,
            excess,
            margin,
        });
    }

    /// Is `id`, a job that is not active, an inactive one? `then` is told at
    /// once when memory knows, else once the store has been read.
    pub(super) fn is_inactive_then(&mut self, id: JobId, then: NotActive) {
        match self.inactive.known(id) {
            Known::Inactive(_) => then.tell(id, Ok(true)),
            Known::Gone => then.tell(id, Ok(false)),
            Known::AskStore => self.read(Query::IsInactive { id, then }),
        }
    }

    /// Apply one read's answer and whatever it makes owed.
    pub(super) fn loaded(&mut self, done: ReadDone) {
        self.reads.owed = self.reads.owed.saturating_sub(1);
        match done.0 {
            Found::Antecedent {
                id,
                antecedent,
                scheme,
                description,
                done,
            } => self.antecedent_read(id, antecedent, scheme, description, done),
            Found::IsInactive { id, then, inactive } => {
                // Memory may have learnt better while the store was read.
                let inactive = match self.inactive.known(id) {
                    Known::Inactive(_) => Ok(true),
                    Known::Gone => Ok(false),
                    Known::AskStore => inactive.map_err(Error::from),
                };
                then.tell(id, inactive);
            }
            Found::Purge {
                ask,
                cutoff,
                stored,
            } => self.purge_read(ask, cutoff, stored),
        }
        self.run_actions();
    }
}
