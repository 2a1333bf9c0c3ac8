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

    /// Its prolog and epilog as the log records them.
    pub(super) fn perilogs(&self) -> Perilogs {
        // (starts, finishes, description of the last start) per command.
        let mut seen: [(usize, usize, Option<&str>); 2] = [(0, 0, None); 2];
        for e in &self.events {
            let (slot, start) = match &*e.name {
                "prolog-start" => (0, true),
                "prolog-finish" => (0, false),
                "epilog-start" => (1, true),
                "epilog-finish" => (1, false),
                _ => continue,
            };
            if start {
                seen[slot].0 += 1;
                seen[slot].2 = Some(
                    e.context
                        .as_ref()
                        .and_then(|c| c.get("description"))
                        .and_then(|d| d.as_str())
                        .unwrap_or_default(),
                );
            } else {
                seen[slot].1 += 1;
            }
        }
        let interrupted = ["prolog", "epilog"]
            .into_iter()
            .zip(seen)
            .filter(|(_, (starts, ends, _))| starts > ends)
            .map(|(w, (_, _, desc))| (w, desc.unwrap_or_default().to_string()))
            .collect();
        Perilogs {
            prolog_started: seen[0].0 > 0,
            epilog_started: seen[1].0 > 0,
            interrupted,
        }
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

/// Why a stored job cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub(super) enum ReplayFailure {
    /// Its eventlog does not fold.
    #[error("{0}")]
    Eventlog(#[from] job::ReplayError),
    /// Its jobspec no longer parses.
    #[error("stored jobspec: {0}")]
    Jobspec(#[from] fluxgate_shared::jobspec::JobspecError),
    /// Its R no longer parses.
    #[error("stored R: {0}")]
    R(#[from] fluxgate_shared::rset::RsetError),
}

/// What a replayed eventlog says of the job's prolog and epilog, read in
/// one pass over its events.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Perilogs {
    /// A `prolog-start` is in the log.
    pub prolog_started: bool,
    /// An `epilog-start` is in the log.
    pub epilog_started: bool,
    /// Started and not finished ("prolog" before "epilog"), with the
    /// description of the last start.
    pub interrupted: Vec<(&'static str, String)>,
}

/// Replay a stored job: its eventlog (bad lines skipped, with a warning),
/// jobspec and R. Why not, when any of them cannot be read.
pub(super) fn replay_stored(s: &StoredJob) -> Result<Replayed, ReplayFailure> {
    let id = JobId::from(s.id);
    let mut text = s.eventlog.join("\n");
    text.push('\n');
    let log = parse_eventlog_lenient(&text);
    for e in &log.errors {
        tracing::warn!(job = %id, error = %e, "skipping a bad stored event");
    }
    let job = job::replay(&log.events)?;
    let jobspec = Jobspec::parse(&s.jobspec).map_err(ReplayFailure::Jobspec)?;
    let r = s.r.as_deref().map(ResourceSet::parse).transpose()?;
    Ok(Replayed {
        job,
        jobspec,
        r,
        events: log.events,
    })
}
