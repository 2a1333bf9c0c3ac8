//! Wall-clock timers of the pipeline: R expirations and begin-time dependencies.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::future::Future;
use std::time::Duration;

use fluxgate_shared::JobId;

use super::Core;
use crate::clock;
use crate::store::Store;

/// What a timer does when it fires.
#[derive(Debug, Clone, PartialEq)]
pub enum Timer {
    /// The job's R expired: raise a `timeout` exception.
    Expiration,
    /// A begin-time dependency is satisfied.
    BeginTime { description: String },
    /// A start that waits for its nodes to join gives up.
    StartDeadline,
}

/// Seconds since the epoch, totally ordered (timers never hold NaN).
#[derive(Debug, Clone, Copy, PartialEq)]
struct At(f64);
impl Eq for At {}
impl Ord for At {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}
impl PartialOrd for At {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Pending timers, earliest first; cancelled ones are dropped when they surface.
#[derive(Debug, Default)]
pub struct Timers {
    heap: BinaryHeap<Reverse<(At, u64)>>,
    entries: HashMap<u64, (JobId, Timer)>,
    by_job: HashMap<JobId, Vec<u64>>,
    next: u64,
}

impl Timers {
    /// Fire `timer` for `id` at wall-clock time `at`.
    pub fn add(&mut self, at: f64, id: JobId, timer: Timer) {
        let key = self.next;
        self.next += 1;
        self.heap.push(Reverse((At(at), key)));
        self.entries.insert(key, (id, timer));
        self.by_job.entry(id).or_default().push(key);
    }

    /// Drop every timer of `id`.
    pub fn cancel(&mut self, id: JobId) {
        for key in self.by_job.remove(&id).unwrap_or_default() {
            self.entries.remove(&key);
        }
    }

    /// Drop `id`'s timers of one kind.
    pub fn cancel_kind(&mut self, id: JobId, kind: &Timer) {
        if let Some(keys) = self.by_job.get_mut(&id) {
            keys.retain(|k| {
                let same = self.entries.get(k).is_some_and(|(_, t)| t == kind);
                if same {
                    self.entries.remove(k);
                }
                !same
            });
        }
    }

    /// Resolves when the earliest live timer is due; never when there is none.
    pub fn next_deadline(&mut self) -> impl Future<Output = ()> + Send + 'static {
        while let Some(Reverse((_, key))) = self.heap.peek() {
            if self.entries.contains_key(key) {
                break;
            }
            self.heap.pop();
        }
        let wait = self
            .heap
            .peek()
            .map(|Reverse((at, _))| Duration::from_secs_f64((at.0 - clock::now()).max(0.0)));
        async move {
            match wait {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        }
    }

    /// Every timer due at `now`, earliest first.
    pub fn due(&mut self, now: f64) -> Vec<(JobId, Timer)> {
        let mut out = Vec::new();
        while let Some(Reverse((at, key))) = self.heap.peek().copied() {
            if at.0 > now {
                break;
            }
            self.heap.pop();
            if let Some((id, timer)) = self.entries.remove(&key) {
                if let Some(keys) = self.by_job.get_mut(&id) {
                    keys.retain(|k| *k != key);
                }
                out.push((id, timer));
            }
        }
        out
    }
}

impl<S: Store> Core<S> {
    pub(super) fn fire_timers(&mut self) {
        for (id, timer) in self.timers.due(clock::now()) {
            match timer {
                Timer::Expiration => {
                    let running = self
                        .jobs
                        .get(&id)
                        .is_some_and(|a| a.job.state() == fluxgate_shared::JobState::Run);
                    if running {
                        let _ = self.raise(id, "timeout", 0, "resource allocation expired", None);
                    }
                }
                Timer::BeginTime { description } => self.begin_time_reached(id, description),
                Timer::StartDeadline => self.start_deadline(id),
            }
        }
        self.run_actions();
    }
}
