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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use fluxgate_shared::JobId;
use fluxgate_shared::job::{Job, JobResult, JobState};

use super::effect::Effect;
use super::{Inactive, Spec};
use crate::store::{Store, StoreError};

impl Inactive {
    /// What is kept of `job` once it is inactive: `t_run` from its `start`
    /// event, `nnodes` and `nodelist` from its R when it had one (else the
    /// nodes its jobspec asked for), `t_inactive` when the fold has no time.
    pub(super) fn from_job(
        job: &Job,
        spec: &Spec,
        t_run: Option<f64>,
        nnodes: Option<u32>,
        nodelist: &str,
        t_inactive: impl FnOnce() -> f64,
    ) -> Inactive {
        Inactive {
            userid: job.userid(),
            name: spec.name.clone(),
            result: job.result().unwrap_or(JobResult::Failed),
            waitstatus: job.wait_status().map(|w| w.0),
            t_submit: job.t_submit().unwrap_or_default(),
            t_run,
            t_inactive: job.entered(JobState::Inactive).unwrap_or_else(t_inactive),
            urgency: job.urgency(),
            ntasks: spec.ntasks,
            nnodes: nnodes.unwrap_or(spec.nnodes),
            nodelist: nodelist.into(),
            exception: job
                .fatal_exception()
                .map(|e| Box::new((e.kind.clone(), e.note.clone()))),
            waitable: job.flags().waitable,
            queue: spec.queue.as_deref().map(Box::from),
        }
    }
}

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
    /// Inactive jobs not yet reaped by `Wait`.
    waitable: BTreeSet<JobId>,
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
        Ok(InactiveJobs {
            count: store.inactive_count()?,
            waitable: store.waitable_ids()?.into_iter().map(JobId::from).collect(),
            // Flush 0 is "none yet"; the first flush is 1.
            flush: 1,
            ..Default::default()
        })
    }

    /// `id` just became inactive; its summary is in the current flush.
    pub(super) fn retired(&mut self, id: JobId, job: Inactive) {
        if job.waitable {
            self.waitable.insert(id);
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

    /// The summary of inactive job `id`, if it is one.
    pub(super) fn get(
        &self,
        store: &impl Store,
        id: JobId,
    ) -> Result<Option<Inactive>, StoreError> {
        if self.purged.contains(&id) {
            return Ok(None);
        }
        if let Some(j) = self.recent.get(&id).or_else(|| self.damaged.get(&id)) {
            return Ok(Some(j.clone()));
        }
        match store.summary(id.into())? {
            Some(Some(text)) => read_summary(store, id, &text).map(Some),
            // Stored without a summary: active (the caller checks that first).
            Some(None) | None => Ok(None),
        }
    }

    /// Is `id` an inactive job? (The caller has checked it is not active.)
    pub(super) fn contains(&self, store: &impl Store, id: JobId) -> Result<bool, StoreError> {
        if self.purged.contains(&id) {
            return Ok(false);
        }
        if self.recent.contains_key(&id) || self.damaged.contains_key(&id) {
            return Ok(true);
        }
        Ok(store.summary(id.into())?.is_some())
    }

    /// Reap a waitable inactive job: `id`, or any when `None`. `Ok(None)`
    /// when there is none (or `id` is not inactive and waitable).
    pub(super) fn reap(
        &mut self,
        store: &impl Store,
        id: Option<JobId>,
    ) -> Result<Option<(JobId, Inactive)>, StoreError> {
        let id = match id {
            Some(id) if self.waitable.contains(&id) => id,
            Some(_) => return Ok(None),
            None => match self.waitable.first() {
                Some(id) => *id,
                None => return Ok(None),
            },
        };
        self.waitable.remove(&id);
        let Some(mut job) = self.get(store, id)? else {
            return Ok(None);
        };
        job.waitable = false;
        self.rewritten(id, job.clone());
        Ok(Some((id, job)))
    }

    /// Up to `limit` inactive jobs, oldest first by the time each became
    /// inactive (ties in id order), as `(t_inactive, id)`.
    pub(super) fn oldest(
        &self,
        store: &impl Store,
        limit: usize,
    ) -> Result<Vec<(f64, JobId)>, StoreError> {
        let mut all: Vec<(f64, JobId)> = self
            .damaged
            .iter()
            .chain(self.recent.iter())
            .map(|(id, j)| (j.t_inactive, *id))
            .collect();
        // Purged jobs may still be in the store; ask for enough to skip them.
        let stored = store.oldest_inactive(limit.saturating_add(self.purged.len()))?;
        all.extend(
            stored
                .into_iter()
                .map(|(t, id)| (t, JobId::from(id)))
                .filter(|(_, id)| !self.purged.contains(id) && !self.recent.contains_key(id)),
        );
        all.sort_by_key(|(t, id)| (age_key(*t), *id));
        all.truncate(limit);
        Ok(all)
    }

    /// How many inactive jobs became inactive before `t` (in-flight writes
    /// may make it off by the few jobs they concern).
    pub(super) fn count_before(&self, store: &impl Store, t: f64) -> Result<u64, StoreError> {
        let here = self
            .damaged
            .values()
            .chain(self.recent.values())
            .filter(|j| j.t_inactive < t)
            .count() as u64;
        Ok(store
            .inactive_before(t)?
            .saturating_add(here)
            .min(self.count))
    }

    /// The jobs kept only in memory (damaged ones), for listings.
    pub(super) fn damaged_jobs(&self) -> impl Iterator<Item = (&JobId, &Inactive)> {
        self.damaged.iter()
    }
}

/// Read a stored summary; one that cannot be read is rebuilt from the job's
/// eventlog (the canonical record), and failing that the job counts as failed.
pub(super) fn read_summary(
    store: &impl Store,
    id: JobId,
    text: &str,
) -> Result<Inactive, StoreError> {
    match Inactive::from_summary(text) {
        Ok(j) => Ok(j),
        Err(e) => {
            tracing::warn!(job = %id, error = %e, "rebuilding an inactive job's summary from its eventlog");
            let stored = store.read_job(id.into())?;
            Ok(stored
                .ok_or_else(|| "job vanished from the store".to_string())
                .and_then(|s| {
                    super::replay::replay_stored(&s)
                        .map(|r| r.to_inactive())
                        .map_err(|e| e.to_string())
                })
                .unwrap_or_else(|why| Inactive::damaged(0, &why)))
        }
    }
}

impl Inactive {
    /// A job whose stored record cannot be replayed, kept as failed.
    pub(super) fn damaged(userid: u32, why: &str) -> Inactive {
        Inactive {
            userid,
            name: "?".into(),
            result: JobResult::Failed,
            waitstatus: None,
            urgency: 0,
            t_submit: 0.0,
            t_run: None,
            t_inactive: 0.0,
            ntasks: 0,
            nnodes: 0,
            nodelist: "".into(),
            exception: Some(Box::new(("restart".into(), why.to_string()))),
            waitable: false,
            queue: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Log, SqliteStore, Write};

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
        assert!(jobs.contains(&store, id(1)).unwrap());
        assert_eq!(jobs.get(&store, id(1)).unwrap().unwrap().t_inactive, 10.0);
        flush(&mut jobs, &store, vec![write]).await;
        // The next flush forgets it; the store answers from then on.
        flush(&mut jobs, &store, vec![]).await;
        assert!(jobs.recent.is_empty());
        assert_eq!(jobs.get(&store, id(1)).unwrap().unwrap().t_inactive, 10.0);
        assert!(!jobs.contains(&store, id(3)).unwrap());
        // Stored but active: not inactive.
        assert!(jobs.get(&store, id(2)).unwrap().is_none());
        assert_eq!(jobs.count(), 1);

        // Reopened, the count and the waitable job come from the store.
        let mut again = InactiveJobs::open(&store).unwrap();
        assert_eq!(again.count(), 1);
        let (reaped, j) = again.reap(&store, None).unwrap().unwrap();
        assert_eq!(reaped, id(1));
        assert!(!j.waitable);
        assert!(again.reap(&store, Some(id(1))).unwrap().is_none());
        // The rewritten summary is what is read until it is durable.
        assert!(!again.get(&store, id(1)).unwrap().unwrap().waitable);
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
        let order: Vec<u64> = jobs
            .oldest(&store, 10)
            .unwrap()
            .into_iter()
            .map(|(_, id)| id.into())
            .collect();
        assert_eq!(order, [4, 2, 3, 1]);
        assert_eq!(jobs.count_before(&store, 25.0).unwrap(), 3);

        jobs.purged(id(2));
        assert!(!jobs.contains(&store, id(2)).unwrap());
        assert!(jobs.get(&store, id(2)).unwrap().is_none());
        let order: Vec<u64> = jobs
            .oldest(&store, 2)
            .unwrap()
            .into_iter()
            .map(|(_, id)| id.into())
            .collect();
        assert_eq!(order, [4, 3]);
        assert_eq!(jobs.count(), 3);
        flush(&mut jobs, &store, vec![Write::Purge { id: 2 }]).await;
        flush(&mut jobs, &store, vec![]).await;
        assert!(jobs.purged.is_empty());
        assert!(!jobs.contains(&store, id(2)).unwrap());
    }
}
