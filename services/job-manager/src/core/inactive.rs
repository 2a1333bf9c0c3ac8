//! Inactive jobs live in the store, not in memory: listing, `Wait`,
//! dependencies and purging read their summaries from it on demand, so memory
//! and start time do not grow with the jobs an instance has run.
//!
//! The core is ahead of the store: a job it has just retired (or purged) may
//! still have that write in the writer's queue, where a read cannot see it.
//! Such jobs are kept here until the flush that wrote them is durable; each
//! flush that wrote any carries an effect that records its number as durable
//! once the committer has seen it on disk. What a read finds here wins over
//! what the store says. Jobs whose stored eventlog cannot be replayed are kept
//! here too (they have no summary to be read back).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use fluxgate_shared::JobId;

use super::effect::Effect;
pub(super) use super::inactive_job::read_summary;
pub use super::inactive_job::{Inactive, read_inactive};
use crate::store::{Store, StoreError};

/// Non-negative times order as their bit patterns; a negative (damaged)
/// time counts as the oldest.
fn age_key(t: f64) -> u64 {
    t.max(0.0).to_bits()
}

/// The inactive jobs: a window over the store plus what it cannot show yet.
#[derive(Debug, Default)]
pub(super) struct InactiveJobs {
    /// Retired jobs whose summary may not be durable yet.
    recent: HashMap<JobId, Inactive>,
    /// The same, with the flush that wrote each, oldest first.
    recent_order: VecDeque<(u64, JobId)>,
    /// Purged jobs whose removal may not be durable yet.
    purged: HashSet<JobId>,
    /// The same, with the flush that wrote each, oldest first.
    purged_order: VecDeque<(u64, JobId)>,
    /// Jobs that could not be replayed; memory only.
    damaged: BTreeMap<JobId, Inactive>,
    /// Inactive jobs not yet reaped by `Wait`, with their summaries: kept
    /// in memory (as few as users leave unreaped) so reaping reads nothing.
    waitable: BTreeMap<JobId, Inactive>,
    /// Inactive jobs in all, purged ones not counted.
    count: u64,
    /// Flushes begun; the current one's number.
    flush: u64,
    /// Something was written in the current flush.
    dirty: bool,
    /// The last flush known durable.
    durable: Arc<AtomicU64>,
}

impl InactiveJobs {
    /// The window over `store`'s inactive jobs: their count and the waitable ones.
    pub(super) fn open(store: &impl Store) -> Result<Self, StoreError> {
        let mut waitable = BTreeMap::new();
        for id in store.waitable_ids()? {
            let id = JobId::from(id);
            if let Some(job) = read_inactive(store, id)? {
                waitable.insert(id, job);
            }
        }
        Ok(InactiveJobs {
            count: store.inactive_count()?,
            waitable,
            // Flush 0 is "none yet"; the first flush is 1.
            flush: 1,
            ..Default::default()
        })
    }

    /// `id` just became inactive; its summary is in the current flush.
    pub(super) fn retired(&mut self, id: JobId, job: Inactive) {
        if job.waitable {
            self.waitable.insert(id, job.clone());
        }
        self.recent.insert(id, job);
        self.recent_order.push_back((self.flush, id));
        self.count += 1;
        self.dirty = true;
    }

    /// `id`'s summary was rewritten in the current flush (it was reaped).
    fn rewritten(&mut self, id: JobId, job: Inactive) {
        if self.recent.insert(id, job).is_none() {
            self.recent_order.push_back((self.flush, id));
        } else if let Some(entry) = self.recent_order.iter_mut().find(|(_, j)| *j == id) {
            // Kept until this flush, not the earlier one, is durable.
            entry.0 = self.flush;
        }
        self.dirty = true;
    }

    /// `id` could not be replayed: listed as failed, never written.
    pub(super) fn damaged(&mut self, id: JobId, job: Inactive) {
        if self.damaged.insert(id, job).is_none() {
            self.count += 1;
        }
    }

    /// `id` is purged in the current flush.
    pub(super) fn purged(&mut self, id: JobId) {
        self.recent.remove(&id);
        self.damaged.remove(&id);
        self.waitable.remove(&id);
        if self.purged.insert(id) {
            self.purged_order.push_back((self.flush, id));
            self.count = self.count.saturating_sub(1);
        }
        self.dirty = true;
    }

    /// End of a flush: the effect that records it as durable, if it wrote
    /// anything this module tracks; forget what earlier flushes made durable.
    pub(super) fn end_flush(&mut self) -> Option<Effect> {
        let durable = self.durable.load(Ordering::Acquire);
        while let Some(&(flush, id)) = self.recent_order.front() {
            if flush > durable {
                break;
            }
            self.recent_order.pop_front();
            self.recent.remove(&id);
        }
        while let Some(&(flush, id)) = self.purged_order.front() {
            if flush > durable {
                break;
            }
            self.purged_order.pop_front();
            self.purged.remove(&id);
        }
        let this = self.flush;
        self.flush += 1;
        if !std::mem::take(&mut self.dirty) {
            return None;
        }
        Some(Effect::InactiveDurable {
            mark: Arc::clone(&self.durable),
            flush: this,
        })
    }

    /// How many inactive jobs there are.
    pub(super) fn count(&self) -> u64 {
        self.count
    }

    /// What memory alone says of `id`, a job that is not active.
    pub(super) fn known(&self, id: JobId) -> Known {
        if self.purged.contains(&id) {
            return Known::Gone;
        }
        match self
            .recent
            .get(&id)
            .or_else(|| self.damaged.get(&id))
            .or_else(|| self.waitable.get(&id))
        {
            Some(j) => Known::Inactive(j.clone()),
            None => Known::AskStore,
        }
    }

    /// Reap a waitable inactive job: `id`, or any when `None`; `None` when
    /// there is none (or `id` is not inactive and waitable). Waitable jobs
    /// are kept in memory until reaped, so this reads nothing.
    pub(super) fn reap(&mut self, id: Option<JobId>) -> Option<(JobId, Inactive)> {
        let id = match id {
            Some(id) => id,
            None => *self.waitable.keys().next()?,
        };
        let mut job = self.waitable.remove(&id)?;
        job.waitable = false;
        self.rewritten(id, job.clone());
        Some((id, job))
    }

    /// How many jobs memory knows better than the store (purged ones still
    /// stored, recent ones maybe stored, damaged ones never): a read of the
    /// oldest asks for this many more than it wants.
    pub(super) fn read_margin(&self) -> usize {
        self.purged.len() + self.recent.len() + self.damaged.len()
    }

    /// Up to `limit` inactive jobs, oldest first by the time each became
    /// inactive (ties in id order), as `(t_inactive, id)`: `stored`, the
    /// store's oldest (read with [`InactiveJobs::read_margin`] to spare),
    /// merged with what only memory has.
    pub(super) fn oldest(&self, stored: Vec<(f64, u64)>, limit: usize) -> Vec<(f64, JobId)> {
        let mut all: Vec<(f64, JobId)> = self
            .damaged
            .iter()
            .chain(self.recent.iter())
            .map(|(id, j)| (j.t_inactive, *id))
            .collect();
        all.extend(
            stored
                .into_iter()
                .map(|(t, id)| (t, JobId::from(id)))
                .filter(|(_, id)| !self.purged.contains(id) && !self.recent.contains_key(id)),
        );
        all.sort_by_key(|(t, id)| (age_key(*t), *id));
        all.truncate(limit);
        all
    }

    /// How many inactive jobs became inactive before `t`, given that the
    /// store counts `stored` (in-flight writes may make it off by the few
    /// jobs they concern).
    pub(super) fn count_before(&self, stored: u64, t: f64) -> u64 {
        let here = self
            .damaged
            .values()
            .chain(self.recent.values())
            .filter(|j| j.t_inactive < t)
            .count() as u64;
        stored.saturating_add(here).min(self.count)
    }

    /// The jobs kept only in memory (damaged ones), for listings.
    pub(super) fn damaged_jobs(&self) -> impl Iterator<Item = (&JobId, &Inactive)> {
        self.damaged.iter()
    }
}

/// What memory says of a job that is not active.
#[derive(Debug, Clone)]
pub(super) enum Known {
    /// Inactive, with its summary.
    Inactive(Inactive),
    /// Purged: no longer known.
    Gone,
    /// Only the store can tell.
    AskStore,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Log, SqliteStore, Write};
    use fluxgate_shared::job::JobResult;

    fn job(t_inactive: f64, waitable: bool) -> Inactive {
        Inactive {
            userid: 1,
            name: "x".into(),
            result: JobResult::Completed,
            waitstatus: Some(0),
            t_submit: 0.0,
            t_run: Some(0.5),
            t_inactive,
            urgency: 16,
            ntasks: 1,
            nnodes: 1,
            nodelist: "node0".into(),
            exception: None,
            waitable,
            queue: None,
            usage: None,
        }
    }

    async fn store_with_jobs(dir: &tempfile::TempDir, ids: &[u64]) -> SqliteStore {
        let store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
        for &id in ids {
            store
                .commit(vec![
                    Write::NewJob {
                        id,
                        userid: 1,
                        jobspec: "{}".into(),
                    },
                    Write::Append {
                        id,
                        log: Log::Main,
                        line: "{}".into(),
                    },
                ])
                .await
                .unwrap();
        }
        store
    }

    /// End the current flush, write `writes` and run its effect once durable.
    async fn flush(jobs: &mut InactiveJobs, store: &SqliteStore, writes: Vec<Write>) {
        let effect = jobs.end_flush();
        if !writes.is_empty() {
            store.commit(writes).await.unwrap();
        }
        if let Some(Effect::InactiveDurable { mark, flush }) = effect {
            mark.fetch_max(flush, Ordering::Release);
        }
    }

    fn id(n: u64) -> JobId {
        JobId::from(n)
    }

    /// What the core's continuation decides: memory first, then the store.
    fn get(jobs: &InactiveJobs, store: &SqliteStore, id: JobId) -> Option<Inactive> {
        match jobs.known(id) {
            Known::Inactive(j) => Some(j),
            Known::Gone => None,
            Known::AskStore => read_inactive(store, id).unwrap(),
        }
    }

    fn oldest(jobs: &InactiveJobs, store: &SqliteStore, limit: usize) -> Vec<u64> {
        let stored = store.oldest_inactive(limit + jobs.read_margin()).unwrap();
        jobs.oldest(stored, limit)
            .into_iter()
            .map(|(_, id)| id.into())
            .collect()
    }

    #[tokio::test]
    async fn a_retired_job_is_found_before_and_after_its_summary_is_durable() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_jobs(&dir, &[1, 2]).await;
        let mut jobs = InactiveJobs::open(&store).unwrap();
        assert_eq!(jobs.count(), 0);
        let j = job(10.0, true);
        let write = j.summary_write(id(1));
        jobs.retired(id(1), j);
        // Not yet in the store: found here.
        assert!(get(&jobs, &store, id(1)).is_some());
        assert_eq!(get(&jobs, &store, id(1)).unwrap().t_inactive, 10.0);
        flush(&mut jobs, &store, vec![write]).await;
        // The next flush forgets it; the store answers from then on.
        flush(&mut jobs, &store, vec![]).await;
        assert!(jobs.recent.is_empty());
        assert_eq!(get(&jobs, &store, id(1)).unwrap().t_inactive, 10.0);
        assert!(get(&jobs, &store, id(3)).is_none());
        // Stored but active: not inactive.
        assert!(get(&jobs, &store, id(2)).is_none());
        assert_eq!(jobs.count(), 1);

        // Reopened, the count and the waitable job come from the store.
        let mut again = InactiveJobs::open(&store).unwrap();
        assert_eq!(again.count(), 1);
        let (reaped, j) = again.reap(None).unwrap();
        assert_eq!(reaped, id(1));
        assert!(!j.waitable);
        assert!(again.reap(Some(id(1))).is_none());
        // The rewritten summary is what is read until it is durable.
        assert!(!get(&again, &store, id(1)).unwrap().waitable);
    }

    #[tokio::test]
    async fn a_purged_job_is_gone_at_once_and_oldest_spans_memory_and_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_jobs(&dir, &[1, 2, 3, 4]).await;
        let mut jobs = InactiveJobs::open(&store).unwrap();
        let mut writes = Vec::new();
        for (n, t) in [(1, 30.0), (2, 10.0)] {
            let j = job(t, false);
            writes.push(j.summary_write(id(n)));
            jobs.retired(id(n), j);
        }
        flush(&mut jobs, &store, writes).await;
        flush(&mut jobs, &store, vec![]).await;
        // One more, not yet durable, and one that could not be replayed.
        jobs.retired(id(3), job(20.0, false));
        jobs.damaged(id(4), Inactive::damaged(1, "bad"));
        assert_eq!(jobs.count(), 4);
        let order = oldest(&jobs, &store, 10);
        assert_eq!(order, [4, 2, 3, 1]);
        assert_eq!(
            jobs.count_before(store.inactive_before(25.0).unwrap(), 25.0),
            3
        );

        jobs.purged(id(2));
        assert!(get(&jobs, &store, id(2)).is_none());
        let order = oldest(&jobs, &store, 2);
        assert_eq!(order, [4, 3]);
        assert_eq!(jobs.count(), 3);
        flush(&mut jobs, &store, vec![Write::Purge { id: 2 }]).await;
        flush(&mut jobs, &store, vec![]).await;
        assert!(jobs.purged.is_empty());
        assert!(get(&jobs, &store, id(2)).is_none());
    }
}
