//! The committer: waits for each batch to be durable, in order, then runs the
//! effects that were waiting for it.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use crate::store::{Ack, SqliteStore, Store, Write};

/// Work that may only happen once the writes before it are on disk.
pub type Effect = Box<dyn FnOnce() + Send>;

/// Batches handed to the store but not yet acknowledged, bounded.
const IN_FLIGHT: usize = 256;

/// Bytes of writes handed to the store but not yet acknowledged. A batch
/// count alone does not bound memory: one batch may hold every output line
/// that arrived during a pass of the core, and lines wait here (and in the
/// effects that publish them) until they are durable.
const BYTES_IN_FLIGHT: usize = 16 << 20;

/// What waits for one batch: its ack, its effects, its share of the byte budget.
type Pending = (Option<Ack>, Vec<Effect>, Option<OwnedSemaphorePermit>);

/// The core's side of the committer.
#[derive(Debug, Clone)]
pub struct Committer {
    tx: mpsc::Sender<Pending>,
    budget: Arc<Semaphore>,
}

impl Committer {
    /// Start the committer task. If the store fails, `on_fatal` is called once and
    /// no further effect runs: what was not acknowledged was never promised.
    pub fn spawn(on_fatal: impl FnOnce(String) + Send + 'static) -> Self {
        let (tx, mut rx) = mpsc::channel::<Pending>(IN_FLIGHT);
        tokio::spawn(async move {
            let mut on_fatal = Some(on_fatal);
            while let Some((ack, effects, _bytes)) = rx.recv().await {
                if let Some(ack) = ack
                    && let Err(e) = ack.wait().await
                {
                    tracing::error!(error = %e, "store commit failed; stopping");
                    if let Some(f) = on_fatal.take() {
                        f(e.to_string());
                    }
                    // Drain without acting: nothing after a failed commit is durable.
                    while rx.recv().await.is_some() {}
                    return;
                }
                for effect in effects {
                    effect();
                }
            }
        });
        Committer {
            tx,
            budget: Arc::new(Semaphore::new(BYTES_IN_FLIGHT)),
        }
    }

    /// Enqueue `writes` (in call order) and schedule `effects` after them.
    pub async fn send(&self, store: &Arc<SqliteStore>, writes: Vec<Write>, effects: Vec<Effect>) {
        // A batch larger than the whole budget waits for everything before it.
        let bytes = writes
            .iter()
            .map(Write::size)
            .sum::<usize>()
            .min(BYTES_IN_FLIGHT);
        let permit = match u32::try_from(bytes) {
            Ok(n) if n > 0 => Arc::clone(&self.budget).acquire_many_owned(n).await.ok(),
            _ => None,
        };
        let ack = if writes.is_empty() {
            None
        } else {
            match store.enqueue(writes).await {
                Ok(ack) => Some(ack),
                Err(e) => {
                    tracing::error!(error = %e, "store closed; dropping effects");
                    return;
                }
            }
        };
        if self.tx.send((ack, effects, permit)).await.is_err() {
            tracing::error!("committer stopped; dropping effects");
        }
    }
}
