//! `flux update`: change a job's jobspec attributes after submission.
//!
//! Only `attributes.system.duration` can change, the update workflow tools
//! need most. Protocol (RFC 21): the job eventlog gets `jobspec-update` with
//! the dotted keys; a running job also gets `resource-update {expiration}`
//! with its new R expiration (its start time plus the new duration, 0 for
//! none). The stored R and the expiration timer follow, and an instance
//! running inside the job watches its eventlog for that `resource-update` to
//! post its own (RFC 44), so the change flows down every level.

use std::sync::Arc;

use fluxgate_shared::rset::{job_expiration, running_job_expiration};
use fluxgate_shared::{JobId, JobState};
use serde_json::{Map, Value};

use super::Core;
use super::timers::Timer;
use crate::clock;
use crate::error::Error;
use crate::store::{Store, Write};

/// The only key `Update` accepts.
pub const DURATION_KEY: &str = "attributes.system.duration";

/// The duration in an update request, checked.
fn duration_of(updates: &Map<String, Value>) -> Result<f64, Error> {
    if updates.is_empty() {
        return Err(Error::Invalid("update must name at least one key".into()));
    }
    if let Some(k) = updates.keys().find(|k| *k != DURATION_KEY) {
        return Err(Error::Invalid(format!(
            "cannot update {k:?}: only {DURATION_KEY} can be updated"
        )));
    }
    match updates.get(DURATION_KEY).and_then(Value::as_f64) {
        Some(d) if d >= 0.0 && d.is_finite() => Ok(d),
        _ => Err(Error::Invalid(format!(
            "{DURATION_KEY} must be a number of seconds >= 0"
        ))),
    }
}

impl<S: Store> Core<S> {
    /// Apply `updates` to job `id`; answers a running job's new expiration.
    pub(super) fn update(
        &mut self,
        id: JobId,
        updates: Map<String, Value>,
    ) -> Result<Option<f64>, Error> {
        let duration = duration_of(&updates)?;
        // Whole seconds are written as integers, as RFC 21's example shows.
        let mut updates = updates;
        if duration.fract() == 0.0 && duration < 9.0e15 {
            updates.insert(DURATION_KEY.into(), Value::from(duration as i64));
        }
        let state = self.active(id)?.job.state();
        let _span = tracing::info_span!("update", job = %id).entered();
        match state {
            JobState::New | JobState::Depend | JobState::Priority | JobState::Sched => {
                // As at submit: no pending job may ask to outlive the instance.
                if duration > 0.0
                    && let Err(e) =
                        job_expiration(clock::now(), duration, self.instance_expiration())
                {
                    return Err(Error::Invalid(e.to_string()));
                }
                self.post(id, "jobspec-update", Some(updates));
                if let Some(a) = self.jobs.get_mut(&id) {
                    a.spec.duration = duration;
                }
                Ok(None)
            }
            JobState::Run => {
                let start = self
                    .jobs
                    .get(&id)
                    .and_then(|a| a.r.as_ref())
                    .and_then(|r| r.starttime())
                    .ok_or_else(|| {
                        Error::WrongState(format!("job {id} has no resources to update"))
                    })?;
                // Inside an instance that expires, the job cannot outlive it.
                let expiration =
                    running_job_expiration(start, duration, self.instance_expiration());
                self.post(id, "jobspec-update", Some(updates));
                if let Some(a) = self.jobs.get_mut(&id) {
                    a.spec.duration = duration;
                }
                self.set_job_expiration(id, expiration);
                tracing::info!(duration, expiration, "running job's duration updated");
                Ok(Some(expiration))
            }
            JobState::Cleanup | JobState::Inactive => Err(Error::WrongState(format!(
                "job {id} has finished running; its duration cannot change"
            ))),
        }
    }

    /// Move a running job's R expiration: `resource-update` in its eventlog,
    /// the stored R, and the timer that raises its `timeout`.
    pub(super) fn set_job_expiration(&mut self, id: JobId, expiration: f64) {
        self.post(
            id,
            "resource-update",
            Self::context([("expiration", Value::from(expiration))]),
        );
        if let Some(r) = self.jobs.get_mut(&id).and_then(|a| a.r.as_mut()) {
            let r = Arc::make_mut(r);
            r.set_expiration(Some(expiration));
            self.out.writes.push(Write::SetR {
                id: id.into(),
                r: r.to_json_string(),
            });
        }
        self.timers.cancel_kind(id, &Timer::Expiration);
        if expiration > 0.0 {
            self.timers.add(expiration, id, Timer::Expiration);
        }
        if let Some(r) = self.jobs.get(&id).and_then(|a| a.r.clone()) {
            self.sched
                .hold(id, r, (expiration > 0.0).then_some(expiration));
        }
        self.exec_expiration(id, expiration);
    }

    /// The instance's expiration changed: running jobs take their new
    /// expirations (jobs without a limit end with the instance; no job
    /// outlives it), so an instance inside one of them follows too.
    pub(super) fn instance_expiration_changed(&mut self) {
        let instance = self.instance_expiration();
        let running: Vec<(JobId, f64, f64, f64)> = self
            .jobs
            .iter()
            .filter(|(_, a)| a.job.state() == JobState::Run)
            .filter_map(|(id, a)| {
                let r = a.r.as_ref()?;
                let start = r.starttime()?;
                Some((*id, start, a.spec.duration, r.expiration().unwrap_or(0.0)))
            })
            .collect();
        for (id, start, duration, old) in running {
            let new = running_job_expiration(start, duration, instance);
            // Sub-millisecond differences are clock noise, not a change.
            if (new - old).abs() > 1e-3 {
                let _span = tracing::info_span!("expiration", job = %id).entered();
                tracing::info!(old, new, "job expiration follows the instance's");
                self.set_job_expiration(id, new);
            }
        }
    }
}
