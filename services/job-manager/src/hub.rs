//! Fan-out of committed eventlog lines to watchers.
//!
//! Every line is published only after it is durable, with its position in its
//! log. A watcher subscribes first, then reads the stored log, then takes
//! published lines from the position it has reached; a watcher that falls
//! behind the channel's capacity re-reads the store from where it was, so a
//! slow reader costs the service nothing but its own re-reads.
//!
//! Live output (`live.rs`), never stored, rides the same channel, so that
//! it keeps its place among the job's lines; a watcher that falls behind
//! loses what it missed of it, as a terminal's reader would.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use fluxgate_shared::JobId;
use tokio::sync::broadcast;

use crate::live::{LiveLine, LiveOutput};
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
    /// Line `n` of job `id`'s live output (see `live.rs`): shown, not stored.
    Live { id: JobId, n: u64, line: Arc<str> },
    /// The job is inactive: its logs are final.
    Inactive { id: JobId },
}

/// The broadcast point, cheap to clone.
#[derive(Debug, Clone)]
pub struct Hub {
    tx: broadcast::Sender<Published>,
    /// Followers of each job's logs, so that the store commits their lines
    /// at once instead of letting them ride a later group commit.
    followed: Arc<Mutex<HashMap<JobId, usize>>>,
    /// Followers of live output, and what is held for jobs without one.
    live: Arc<Mutex<LiveOutput>>,
}

impl Default for Hub {
    fn default() -> Self {
        Hub {
            tx: broadcast::channel(HUB_CAPACITY).0,
            followed: Arc::default(),
            live: Arc::default(),
        }
    }
}

/// One follower of a job's live output, counted until dropped.
#[derive(Debug)]
pub struct FollowingLive {
    live: Arc<Mutex<LiveOutput>>,
    id: JobId,
}

impl Drop for FollowingLive {
    fn drop(&mut self) {
        lock(&self.live).unfollow(self.id);
    }
}

/// A poisoned lock still holds consistent state: every change is one call.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One follower of a job's logs, counted until dropped.
#[derive(Debug)]
pub struct Following {
    followed: Arc<Mutex<HashMap<JobId, usize>>>,
    id: JobId,
}

impl Drop for Following {
    fn drop(&mut self) {
        let mut followed = self.followed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = followed.get_mut(&self.id) {
            *n -= 1;
            if *n == 0 {
                followed.remove(&self.id);
            }
        }
    }
}

impl Hub {
    /// Tell every current watcher.
    pub fn publish(&self, p: Published) {
        if let Published::Inactive { id } = &p {
            lock(&self.live).forget(*id);
        }
        // No watcher is not an error.
        let _ = self.tx.send(p);
    }

    /// Tell the job's live watchers `line`, or hold it for the next one.
    pub fn publish_live(&self, id: JobId, line: Arc<str>) {
        // Numbered and sent under one lock: the channel's order is the numbers'.
        let mut live = lock(&self.live);
        let n = live.publish(id, Arc::clone(&line));
        let _ = self.tx.send(Published::Live { id, n, line });
    }

    /// Someone follows job `id`'s live output until the guard is dropped:
    /// what was held for it (already subscribed, it may hear those again).
    pub fn follow_live(&self, id: JobId) -> (FollowingLive, Vec<LiveLine>) {
        let held = lock(&self.live).follow(id);
        let guard = FollowingLive {
            live: Arc::clone(&self.live),
            id,
        };
        (guard, held)
    }

    /// Start listening; subscribe before reading the store.
    pub fn subscribe(&self) -> broadcast::Receiver<Published> {
        self.tx.subscribe()
    }

    /// Someone follows job `id`'s logs until the guard is dropped.
    pub fn follow(&self, id: JobId) -> Following {
        let mut followed = self.followed.lock().unwrap_or_else(|e| e.into_inner());
        *followed.entry(id).or_default() += 1;
        Following {
            followed: Arc::clone(&self.followed),
            id,
        }
    }

    /// Whether anyone follows one of these jobs' logs.
    pub fn followed(&self, mut ids: impl Iterator<Item = JobId>) -> bool {
        let followed = self.followed.lock().unwrap_or_else(|e| e.into_inner());
        !followed.is_empty() && ids.any(|id| followed.contains_key(&id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_is_followed_while_a_guard_lives() {
        let hub = Hub::default();
        let (a, b) = (JobId::from(1u64), JobId::from(2u64));
        assert!(!hub.followed([a, b].into_iter()));
        let first = hub.follow(a);
        let second = hub.follow(a);
        assert!(hub.followed([b, a].into_iter()));
        assert!(!hub.followed([b].into_iter()));
        drop(first);
        assert!(hub.followed([a].into_iter()));
        drop(second);
        assert!(!hub.followed([a].into_iter()));
    }
}
