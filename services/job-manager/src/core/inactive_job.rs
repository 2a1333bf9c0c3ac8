//! One inactive job as memory keeps it ([`Inactive`]: enough to list and
//! wait on it), and how it is read back from the store's summary. Apart
//! from the set of inactive jobs ([`super::inactive`]) so that the store's
//! readers need none of the core's state.

use fluxgate_shared::JobId;
use fluxgate_shared::job::usage::Total;
use fluxgate_shared::job::{Job, JobResult, JobState};

use super::Spec;
use crate::store::{Store, StoreError};

/// What is kept in memory of an inactive job: enough to list and wait on it.
#[derive(Debug, Clone)]
pub struct Inactive {
    /// Owner.
    pub userid: u32,
    /// Job name.
    pub name: Box<str>,
    /// How it ended.
    pub result: JobResult,
    /// Largest wait status, when it ran.
    pub waitstatus: Option<i32>,
    /// Submit, run and inactive times.
    pub t_submit: f64,
    /// Start time, if it started.
    pub t_run: Option<f64>,
    /// Inactive time.
    pub t_inactive: f64,
    /// Its urgency when it ended.
    pub urgency: u8,
    /// Tasks it asked for.
    pub ntasks: u32,
    /// Nodes it asked for (or got).
    pub nnodes: u32,
    /// Nodes it ran on.
    pub nodelist: Box<str>,
    /// First fatal exception: type and note.
    pub exception: Option<Box<(String, String)>>,
    /// Not yet reaped by `Wait`.
    pub waitable: bool,
    /// Its queue, when it named one.
    pub queue: Option<Box<str>>,
    /// What it used over its nodes, when they reported it.
    pub usage: Option<Total>,
}

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
            usage: None,
        }
    }
}

/// Inactive job `id` as the store has it: `None` when it is not stored, or
/// stored without a summary (active). Blocks: not for the core's task.
pub fn read_inactive(store: &impl Store, id: JobId) -> Result<Option<Inactive>, StoreError> {
    match store.summary(id.into())? {
        Some(Some(text)) => read_summary(store, id, &text).map(Some),
        Some(None) | None => Ok(None),
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
            let Some(stored) = store.read_job(id.into())? else {
                return Ok(Inactive::damaged(0, "job vanished from the store"));
            };
            Ok(match super::replay::replay_stored(&stored) {
                Ok(r) => r.to_inactive(),
                Err(e) => Inactive::damaged(stored.userid, &e.to_string()),
            })
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
            usage: None,
        }
    }
}
