//! An in-memory [`Store`], for tests of the core: the same contract as the
//! embedded store (a batch is atomic, a new job's id is unique, appends name
//! a stored job, a summary makes a job inactive), with no file and no
//! thread. Every batch is durable as soon as it is enqueued.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use super::{Ack, Batch, CommitStats, Log, LogPos, Store, StoreError, StoredJob, Urgency, Write};

/// One stored job.
#[derive(Debug, Clone, Default)]
struct Job {
    userid: u32,
    jobspec: String,
    r: Option<String>,
    logs: [Vec<String>; 4],
    summary: Option<String>,
    t_inactive: Option<f64>,
    waitable: bool,
    key: Option<String>,
}

#[derive(Debug, Clone, Default)]
struct State {
    jobs: BTreeMap<u64, Job>,
    resource_events: Vec<String>,
    meta: HashMap<String, String>,
    stats: CommitStats,
}

/// A store held in memory.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<State>,
}

fn slot(log: Log) -> usize {
    match log {
        Log::Main => 0,
        Log::Exec => 1,
        Log::Output => 2,
        Log::Usage => 3,
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&State) -> T) -> Result<T, StoreError> {
        let state = self
            .state
            .lock()
            .map_err(|_| StoreError::Read("memory store poisoned".into()))?;
        Ok(f(&state))
    }

    /// Apply `batch` whole or not at all.
    fn apply(&self, batch: Batch) -> Result<(), StoreError> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| StoreError::Write("memory store poisoned".into()))?;
        let mut next = state.clone();
        let n = batch.len() as u64;
        for write in batch {
            apply(&mut next, write)?;
        }
        next.stats.commits += 1;
        next.stats.batches += 1;
        next.stats.writes += n;
        *state = next;
        Ok(())
    }
}

fn apply(state: &mut State, write: Write) -> Result<(), StoreError> {
    match write {
        Write::NewJob {
            id,
            userid,
            jobspec,
        } => {
            if state.jobs.contains_key(&id) {
                return Err(StoreError::Duplicate(id));
            }
            state.jobs.insert(
                id,
                Job {
                    userid,
                    jobspec,
                    ..Job::default()
                },
            );
        }
        Write::Append { id, log, line } => {
            let job = state.jobs.get_mut(&id).ok_or(StoreError::UnknownJob(id))?;
            job.logs[slot(log)].push(line);
        }
        Write::SetR { id, r } => {
            state.jobs.get_mut(&id).ok_or(StoreError::UnknownJob(id))?.r = Some(r);
        }
        Write::ResourceEvent { line } => state.resource_events.push(line),
        Write::Meta { key, value } => {
            state.meta.insert(key, value);
        }
        Write::Purge { id } => {
            state.jobs.remove(&id);
        }
        Write::Summary { id, summary } => {
            let job = state.jobs.get_mut(&id).ok_or(StoreError::UnknownJob(id))?;
            let parsed: Option<serde_json::Value> = serde_json::from_str(&summary).ok();
            job.t_inactive = parsed
                .as_ref()
                .and_then(|v| v.get("t_inactive"))
                .and_then(serde_json::Value::as_f64);
            job.waitable = parsed
                .as_ref()
                .and_then(|v| v.get("waitable"))
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false);
            job.summary = Some(summary);
        }
        Write::ReplaceResourceEventlog { lines } => state.resource_events = lines,
        Write::IdempotencyKey { id, key } => {
            state
                .jobs
                .get_mut(&id)
                .ok_or(StoreError::UnknownJob(id))?
                .key = Some(key);
        }
    }
    Ok(())
}

impl Store for MemoryStore {
    fn enqueue_with(
        &self,
        batch: Batch,
        _urgency: Urgency,
    ) -> impl std::future::Future<Output = Result<Ack, StoreError>> + Send {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let _ = tx.send(self.apply(batch));
        std::future::ready(Ok(Ack(rx)))
    }

    fn read_log(&self, id: u64, log: Log) -> Result<Option<Vec<String>>, StoreError> {
        self.with(|s| s.jobs.get(&id).map(|j| j.logs[slot(log)].clone()))
    }

    fn read_log_page(
        &self,
        id: u64,
        log: Log,
        from: LogPos,
        limit: usize,
    ) -> Result<(Vec<String>, LogPos), StoreError> {
        self.with(|s| {
            let lines: Vec<String> = s
                .jobs
                .get(&id)
                .map(|j| {
                    j.logs[slot(log)]
                        .iter()
                        .skip(usize::try_from(from.line).unwrap_or(usize::MAX))
                        .take(limit)
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            let next = LogPos::line(from.line + lines.len() as u64);
            (lines, next)
        })
    }

    fn log_len(&self, id: u64, log: Log) -> Result<u64, StoreError> {
        self.with(|s| {
            s.jobs
                .get(&id)
                .map_or(0, |j| j.logs[slot(log)].len() as u64)
        })
    }

    fn jobspec(&self, id: u64) -> Result<Option<String>, StoreError> {
        self.with(|s| s.jobs.get(&id).map(|j| j.jobspec.clone()))
    }

    fn read_job(&self, id: u64) -> Result<Option<StoredJob>, StoreError> {
        self.with(|s| s.jobs.get(&id).map(|j| stored(id, j)))
    }

    fn load_jobs(&self) -> Result<Vec<StoredJob>, StoreError> {
        self.with(|s| {
            s.jobs
                .iter()
                .filter(|(_, j)| j.t_inactive.is_none())
                .map(|(&id, j)| stored(id, j))
                .collect()
        })
    }

    fn summary(&self, id: u64) -> Result<Option<Option<String>>, StoreError> {
        self.with(|s| s.jobs.get(&id).map(|j| j.summary.clone()))
    }

    fn max_job_id(&self) -> Result<Option<u64>, StoreError> {
        self.with(|s| s.jobs.keys().next_back().copied())
    }

    fn inactive_count(&self) -> Result<u64, StoreError> {
        self.with(|s| s.jobs.values().filter(|j| j.t_inactive.is_some()).count() as u64)
    }

    fn inactive_before(&self, t: f64) -> Result<u64, StoreError> {
        self.with(|s| {
            s.jobs
                .values()
                .filter(|j| j.t_inactive.is_some_and(|ti| ti < t))
                .count() as u64
        })
    }

    fn oldest_inactive(&self, limit: usize) -> Result<Vec<(f64, u64)>, StoreError> {
        self.with(|s| {
            let mut v: Vec<(f64, u64)> = s
                .jobs
                .iter()
                .filter_map(|(&id, j)| j.t_inactive.map(|t| (t, id)))
                .collect();
            v.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            v.truncate(limit);
            v
        })
    }

    fn waitable_ids(&self) -> Result<Vec<u64>, StoreError> {
        self.with(|s| {
            s.jobs
                .iter()
                .filter(|(_, j)| j.waitable)
                .map(|(&id, _)| id)
                .collect()
        })
    }

    fn scan_inactive_below(
        &self,
        userid: Option<u32>,
        since: Option<f64>,
        before: Option<u64>,
        visit: &mut dyn FnMut(u64, &str) -> bool,
    ) -> Result<(), StoreError> {
        let found: Vec<(u64, String)> = self.with(|s| {
            s.jobs
                .iter()
                .rev()
                .filter(|&(&id, j)| {
                    j.t_inactive
                        .is_some_and(|t| since.is_none_or(|since| t >= since))
                        && userid.is_none_or(|u| u == j.userid)
                        && before.is_none_or(|b| id < b)
                })
                .map(|(&id, j)| (id, j.summary.clone().unwrap_or_default()))
                .collect()
        })?;
        for (id, summary) in found {
            if !visit(id, &summary) {
                break;
            }
        }
        Ok(())
    }

    fn resource_eventlog(&self) -> Result<Vec<String>, StoreError> {
        self.with(|s| s.resource_events.clone())
    }

    fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.with(|s| s.meta.get(key).cloned())
    }

    fn job_by_key(&self, userid: u32, key: &str) -> Result<Option<u64>, StoreError> {
        self.with(|s| {
            s.jobs
                .iter()
                .find(|(_, j)| j.userid == userid && j.key.as_deref() == Some(key))
                .map(|(id, _)| *id)
        })
    }

    fn stats(&self) -> CommitStats {
        self.with(|s| s.stats).unwrap_or_default()
    }
}

fn stored(id: u64, j: &Job) -> StoredJob {
    StoredJob {
        id,
        userid: j.userid,
        jobspec: j.jobspec.clone(),
        r: j.r.clone(),
        eventlog: j.logs[0].clone(),
        summary: j.summary.clone(),
    }
}
