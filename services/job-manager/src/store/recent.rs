//! Jobspecs of the jobs made lately, kept in memory by both stores: a job
//! that starts soon after it was submitted (most do) has its jobspec for
//! the start request read from here, without a read of the store (a round
//! trip to PostgreSQL, a thread hop and a page read for SQLite). Stored
//! jobspecs never change, so the copy is never stale.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use super::Write;

/// Bytes kept at most, text and bookkeeping; the oldest go first.
pub const RECENT_BYTES: usize = 32 << 20;

/// What an entry costs beside its text: the map slot, the queue slot and
/// the text's allocation header, rounded up.
const ENTRY_BYTES: usize = 64;

/// The recent jobspecs, shared by the writer (which adds what it
/// committed) and the readers.
#[derive(Debug, Default)]
pub struct Recent {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    specs: HashMap<u64, Arc<str>>,
    order: VecDeque<u64>,
    bytes: usize,
}

impl Recent {
    /// Remember the committed jobspec of job `id`.
    pub fn add(&self, id: u64, jobspec: &str) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.bytes += jobspec.len() + ENTRY_BYTES;
        inner.specs.insert(id, Arc::from(jobspec));
        inner.order.push_back(id);
        // Most entries are taken by their start long before they would be
        // the oldest: drop their places now and then, so that the order
        // does not grow with every job ever made.
        if inner.order.len() > 2 * inner.specs.len() + 1024 {
            let Inner { specs, order, .. } = &mut *inner;
            order.retain(|id| specs.contains_key(id));
        }
        while inner.bytes > RECENT_BYTES {
            let Some(old) = inner.order.pop_front() else {
                break;
            };
            if let Some(spec) = inner.specs.remove(&old) {
                inner.bytes -= spec.len() + ENTRY_BYTES;
            }
        }
    }

    /// Forget job `id` (purged).
    pub fn forget(&self, id: u64) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(spec) = inner.specs.remove(&id) {
            inner.bytes -= spec.len() + ENTRY_BYTES;
        }
    }

    /// Remember the jobspecs of the jobs `batches` made and forget the
    /// purged ones; each batch with whether it was committed.
    pub fn committed<'a>(&self, batches: impl Iterator<Item = (&'a [Write], bool)>) {
        for (batch, ok) in batches {
            if !ok {
                continue;
            }
            for w in batch {
                match w {
                    Write::NewJob { id, jobspec, .. } => self.add(*id, jobspec),
                    Write::Purge { id } => self.forget(*id),
                    _ => {}
                }
            }
        }
    }

    /// The jobspec of job `id`, if it is recent, forgotten here: a job's
    /// start takes it, and a later read (a restart) goes to the store.
    pub fn take(&self, id: u64) -> Option<String> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let spec = inner.specs.remove(&id)?;
        inner.bytes -= spec.len() + ENTRY_BYTES;
        Some(spec.to_string())
    }

    /// The jobspec of job `id`, if it is recent.
    pub fn get(&self, id: u64) -> Option<String> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.specs.get(&id).map(|s| s.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_go_past_the_byte_cap() {
        let recent = Recent::default();
        let big = "x".repeat(RECENT_BYTES / 2 + 1);
        recent.add(1, &big);
        recent.add(2, &big);
        assert!(recent.get(1).is_none());
        assert_eq!(recent.get(2).as_deref(), Some(big.as_str()));
        recent.forget(2);
        assert!(recent.get(2).is_none());
        recent.add(3, "spec");
        assert_eq!(recent.take(3).as_deref(), Some("spec"));
        assert!(recent.take(3).is_none());
    }

    #[test]
    fn taken_entries_leave_no_trace() {
        let recent = Recent::default();
        for id in 0..100_000 {
            recent.add(id, "spec");
            recent.take(id);
        }
        let inner = recent.inner.lock().unwrap();
        assert!(inner.specs.is_empty());
        assert_eq!(inner.bytes, 0);
        assert!(inner.order.len() <= 1025, "{}", inner.order.len());
    }
}
