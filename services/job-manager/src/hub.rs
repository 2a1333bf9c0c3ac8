//! Fan-out of committed eventlog lines to watchers.
//!
//! Every line is published only after it is durable, with its position in its
//! log. A watcher subscribes first, then reads the stored log, then takes
//! published lines from the position it has reached; a watcher that falls
//! behind the channel's capacity re-reads the store from where it was, so a
//! slow reader costs the service nothing but its own re-reads.

use std::sync::Arc;

use fluxgate_shared::JobId;
use tokio::sync::broadcast;

use crate::store::Log;

/// Lines a watcher may fall behind before it must re-read the store.
pub const HUB_CAPACITY: usize = 16_384;

/// Longest line the hub carries itself; a watcher reads a longer one from
/// the store. With [`HUB_CAPACITY`] this bounds what lagging watchers keep
/// alive (64 MiB), whatever the jobs write.
pub const HUB_LINE_MAX: usize = 4096;

/// What watchers hear.
#[derive(Debug, Clone)]
pub enum Published {
    /// Line number `seq` (0-based) of a job's log is durable; its text,
    /// unless longer than [`HUB_LINE_MAX`].
    Line {
        id: JobId,
        log: Log,
        seq: u64,
        line: Option<Arc<str>>,
    },
    /// The job is inactive: its logs are final.
    Inactive { id: JobId },
}

/// The broadcast point, cheap to clone.
#[derive(Debug, Clone)]
pub struct Hub {
    tx: broadcast::Sender<Published>,
}

impl Default for Hub {
    fn default() -> Self {
        Hub {
            tx: broadcast::channel(HUB_CAPACITY).0,
        }
    }
}

impl Hub {
    /// Tell every current watcher.
    pub fn publish(&self, p: Published) {
        // No watcher is not an error.
        let _ = self.tx.send(p);
    }

    /// Start listening; subscribe before reading the store.
    pub fn subscribe(&self) -> broadcast::Receiver<Published> {
        self.tx.subscribe()
    }
}
