//! The RFC 44 resource journal: every resource event in memory, capped, and
//! streamed to watchers after a backlog.
//!
//! Protocol (Resource.Journal): a watcher gets the backlog (starting with a
//! `truncate` event when older entries were dropped, whose timestamp is that of
//! the newest dropped one), then a sentinel, then each new event as it is
//! committed. Backlog and subscription are taken under one lock, so no event
//! falls between them or arrives twice.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use fluxgate_shared::Event;
use tokio::sync::broadcast;

/// New events a watcher may fall behind before its stream is ended.
const WATCH_CAPACITY: usize = 4096;

#[derive(Debug)]
struct Inner {
    lines: VecDeque<(f64, Arc<str>)>,
    dropped_at: Option<f64>,
    cap: usize,
    tx: broadcast::Sender<Arc<str>>,
}

/// The shared journal.
#[derive(Debug, Clone)]
pub struct Journal {
    inner: Arc<Mutex<Inner>>,
}

impl Journal {
    /// A journal keeping at most `cap` events (at least one).
    pub fn new(cap: usize) -> Self {
        Journal {
            inner: Arc::new(Mutex::new(Inner {
                lines: VecDeque::new(),
                dropped_at: None,
                cap: cap.max(1),
                tx: broadcast::channel(WATCH_CAPACITY).0,
            })),
        }
    }

    /// Record a committed event and tell watchers.
    pub fn push(&self, event: &Event) {
        let line: Arc<str> = Arc::from(event.to_json());
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if inner.lines.len() == inner.cap
            && let Some((t, _)) = inner.lines.pop_front()
        {
            inner.dropped_at = Some(t);
        }
        inner.lines.push_back((event.timestamp, Arc::clone(&line)));
        let _ = inner.tx.send(line);
    }

    /// The backlog (with `truncate` first when capped) and a live subscription.
    pub fn watch(&self) -> (Vec<Arc<str>>, broadcast::Receiver<Arc<str>>) {
        let Ok(inner) = self.inner.lock() else {
            let (tx, rx) = broadcast::channel(1);
            drop(tx);
            return (Vec::new(), rx);
        };
        let mut backlog = Vec::with_capacity(inner.lines.len() + 1);
        if let Some(t) = inner.dropped_at {
            backlog.push(Arc::from(Event::at(t, "truncate").to_json()));
        }
        backlog.extend(inner.lines.iter().map(|(_, l)| Arc::clone(l)));
        (backlog, inner.tx.subscribe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capped_journal_starts_with_truncate_at_the_newest_dropped_time() {
        let journal = Journal::new(3);
        let events: Vec<Event> = (0..5)
            .map(|i| Event::at(100.5 + f64::from(i), "online"))
            .collect();
        for e in &events {
            journal.push(e);
        }
        let (backlog, _rx) = journal.watch();
        let got: Vec<String> = backlog.iter().map(|l| l.to_string()).collect();
        let mut want = vec![Event::at(101.5, "truncate").to_json()];
        want.extend(events[2..].iter().map(Event::to_json));
        assert_eq!(got, want);
    }

    #[test]
    fn an_uncapped_journal_has_no_truncate() {
        let journal = Journal::new(10);
        journal.push(&Event::at(1.0, "online"));
        let (backlog, _rx) = journal.watch();
        assert_eq!(backlog.len(), 1);
        assert!(!backlog[0].contains("truncate"));
    }
}
