//! Reads of the store for the core, off the core's task.
//!
//! A read waits on the disk (or, for a database store, the network), and
//! the core's one task must never wait: while it did, no event of any job
//! would move. So a read the core needs while running (an inactive job's
//! summary, the oldest jobs to purge) is queued as an [`Effect::Read`]:
//! the committer carries it out once every write queued before it is
//! durable, so the read sees all the core has written, on the blocking
//! pool; its answer comes back to the core's loop as a continuation, which
//! checks the in-memory overlay again (`inactive.rs`) since the core may
//! have moved on meanwhile. Only recovery, before the loop starts, reads
//! directly.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::Core;
use super::effect::{Effect, StoreRead};
use crate::store::{Store, StoreError};

/// What to do with a read's answer, on the core's task.
pub(super) type Loaded<S> = Box<dyn FnOnce(&mut Core<S>) + Send>;

/// The channel answers come back on, and how many are owed.
pub(super) struct Reads<S> {
    tx: mpsc::UnboundedSender<Loaded<S>>,
    rx: Option<mpsc::UnboundedReceiver<Loaded<S>>>,
    /// Reads queued whose answer has not been applied yet.
    owed: usize,
}

impl<S> Default for Reads<S> {
    fn default() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Reads {
            tx,
            rx: Some(rx),
            owed: 0,
        }
    }
}

impl<S> Reads<S> {
    /// The receiving end, for the core's loop (taken once).
    pub(super) fn take_answers(&mut self) -> Option<mpsc::UnboundedReceiver<Loaded<S>>> {
        self.rx.take()
    }

    /// Reads whose answer is still owed.
    #[cfg(test)]
    pub(super) fn owed(&self) -> usize {
        self.owed
    }
}

impl<S: Store> Core<S> {
    /// Read the store once what is queued so far is durable, then run
    /// `then` with the answer on the core's task.
    pub(super) fn read_then<T: Send + 'static>(
        &mut self,
        read: impl FnOnce(&S) -> Result<T, StoreError> + Send + 'static,
        then: impl FnOnce(&mut Core<S>, Result<T, StoreError>) + Send + 'static,
    ) {
        let store = Arc::clone(&self.store);
        let tx = self.reads.tx.clone();
        self.reads.owed += 1;
        self.effect(Effect::Read(StoreRead::new(move || {
            let answer = read(&store);
            // The core has stopped when nobody receives: nothing waits for it.
            let _ = tx.send(Box::new(move |core: &mut Core<S>| then(core, answer)));
        })));
    }

    /// Apply one read's answer and whatever it makes owed.
    pub(super) fn loaded(&mut self, answer: Loaded<S>) {
        self.reads.owed = self.reads.owed.saturating_sub(1);
        answer(self);
        self.run_actions();
    }
}
