//! A stored job replayed through the same fold as live events: what
//! recovery (`restart.rs`) and reads of inactive jobs (`inactive.rs`) share.

use fluxgate_shared::eventlog::parse_eventlog_lenient;
use fluxgate_shared::job;
use fluxgate_shared::{Event, JobId, Jobspec, ResourceSet};

use super::{Inactive, Spec};
use crate::store::StoredJob;

/// A stored job replayed through the fold, with what was read to do it.
#[derive(Debug)]
pub(super) struct Replayed {
    pub job: job::Job,
    pub jobspec: Jobspec,
    pub r: Option<ResourceSet>,
    pub events: Vec<Event>,
}

impl Replayed {
    /// When it started (its `start` event).
    pub(super) fn t_run(&self) -> Option<f64> {
        self.events
            .iter()
            .find(|e| e.name == "start")
            .map(|e| e.timestamp)
    }

    /// The nodes of its R, encoded.
    pub(super) fn nodelist(&self) -> String {
        self.r
            .as_ref()
            .and_then(|r| r.nodelist())
            .map(|h| h.encode())
            .unwrap_or_default()
    }

    /// Its summary, once it is inactive.
    pub(super) fn to_inactive(&self) -> Inactive {
        let nnodes = self.r.as_ref().and_then(|r| u32::try_from(r.nnodes()).ok());
        Inactive::from_job(
            &self.job,
            &Spec::of(&self.jobspec),
            self.t_run(),
            nnodes,
            &self.nodelist(),
            Default::default,
        )
    }
}

/// Replay a stored job: its eventlog (bad lines skipped, with a warning),
/// jobspec and R. Why not, when any of them cannot be read.
pub(super) fn replay_stored(s: &StoredJob) -> Result<Replayed, String> {
    let id = JobId::from(s.id);
    let mut text = s.eventlog.join("\n");
    text.push('\n');
    let log = parse_eventlog_lenient(&text);
    for e in &log.errors {
        tracing::warn!(job = %id, error = %e, "skipping a bad stored event");
    }
    let job = job::replay(&log.events).map_err(|e| e.to_string())?;
    let jobspec = Jobspec::parse(&s.jobspec).map_err(|e| format!("stored jobspec: {e}"))?;
    let r = match s.r.as_deref().map(ResourceSet::parse) {
        Some(Ok(r)) => Some(r),
        Some(Err(e)) => return Err(format!("stored R: {e}")),
        None => None,
    };
    Ok(Replayed {
        job,
        jobspec,
        r,
        events: log.events,
    })
}
