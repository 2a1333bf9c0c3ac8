//! The committer: waits for each batch to be durable, in order, then runs the
//! effects that were waiting for it.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::store::{Ack, SqliteStore, Store, Write};

/// Work that may only happen once the writes before it are on disk.
pub type Effect = Box<dyn FnOnce() + Send>;

/// Batches handed to the store but not yet acknowledged, bounded.
const IN_FLIGHT: usize = 256;

/// The core's side of the committer.
#[derive(Debug, Clone)]
pub struct Committer {
    tx: mpsc::Sender<(Option<Ack>, Vec<Effect>)>,
}

impl Committer {
    /// Start the committer task. If the store fails, `on_fatal` is called once and
    /// no further effect runs: what was not acknowledged was never promised.
    pub fn spawn(on_fatal: impl FnOnce(String) + Send + 'static) -> Self {
        let (tx, mut rx) = mpsc::channel::<(Option<Ack>, Vec<Effect>)>(IN_FLIGHT);
        tokio::spawn(async move {
            let mut on_fatal = Some(on_fatal);
            while let Some((ack, effects)) = rx.recv().await {
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
        Committer { tx }
    }

    /// Enqueue `writes` (in call order) and schedule `effects` after them.
    pub async fn send(&self, store: &Arc<SqliteStore>, writes: Vec<Write>, effects: Vec<Effect>) {
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
        if self.tx.send((ack, effects)).await.is_err() {
            tracing::error!("committer stopped; dropping effects");
        }
    }
}
