//! Listing jobs (`flux jobs`): filters over active jobs, held by the core, and
//! inactive summaries, read from the store.

use fluxgate_shared::JobId;
use fluxgate_shared::job::{JobResult, JobState, StateMask};

use super::{Core, Inactive};
use crate::store::{Store, StoreError};

/// Which jobs to list.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// States to include; empty means every active state.
    pub states: Option<StateMask>,
    /// Only this user's jobs.
    pub userid: Option<u32>,
    /// Only jobs with this name.
    pub name: Option<String>,
    /// Only jobs inactive since this time.
    pub since: Option<f64>,
    /// Results to keep among inactive jobs; empty keeps all.
    pub results: Vec<JobResult>,
    /// At most this many; 0 is no limit.
    pub max: usize,
}

/// One row of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct JobInfo {
    pub id: JobId,
    pub userid: u32,
    pub name: String,
    pub state: JobState,
    pub result: Option<JobResult>,
    pub urgency: u8,
    pub priority: Option<u32>,
    pub ntasks: u32,
    pub nnodes: u32,
    pub nodelist: String,
    pub t_submit: f64,
    pub t_run: Option<f64>,
    pub t_inactive: Option<f64>,
    pub waitstatus: Option<i32>,
    pub exception: Option<(String, String)>,
    pub annotations: Option<String>,
}

impl JobInfo {
    /// The row of an inactive job.
    fn inactive(id: JobId, j: &Inactive) -> JobInfo {
        JobInfo {
            id,
            userid: j.userid,
            name: j.name.to_string(),
            state: JobState::Inactive,
            result: Some(j.result),
            urgency: j.urgency,
            priority: None,
            ntasks: j.ntasks,
            nnodes: j.nnodes,
            nodelist: j.nodelist.to_string(),
            t_submit: j.t_submit,
            t_run: j.t_run,
            t_inactive: Some(j.t_inactive),
            waitstatus: j.waitstatus,
            exception: j.exception.as_deref().cloned(),
            annotations: None,
        }
    }
}

impl ListFilter {
    /// Does the filter want inactive jobs at all?
    pub fn wants_inactive(&self) -> bool {
        self.states
            .unwrap_or(StateMask::ACTIVE)
            .contains(JobState::Inactive)
    }

    /// Does inactive job `j` pass?
    fn passes(&self, j: &Inactive) -> bool {
        !(self.userid.is_some_and(|u| u != j.userid)
            || self.name.as_deref().is_some_and(|n| n != &*j.name)
            || self.since.is_some_and(|s| j.t_inactive < s)
            || (!self.results.is_empty() && !self.results.contains(&j.result)))
    }
}

impl Core {
    /// The active jobs that pass `f` (and inactive ones held only in
    /// memory); the stored inactive ones come from [`stored_inactive`].
    pub(super) fn list(&self, f: &ListFilter) -> Vec<JobInfo> {
        let states = f.states.unwrap_or(StateMask::ACTIVE);
        let mut out = Vec::new();
        if f.wants_inactive() {
            for (id, j) in self.inactive.damaged_jobs() {
                if f.passes(j) {
                    out.push(JobInfo::inactive(*id, j));
                }
            }
        }
        for (id, a) in &self.jobs {
            let job = &a.job;
            if !states.contains(job.state())
                || f.userid.is_some_and(|u| u != job.userid())
                || f.name.as_deref().is_some_and(|n| n != &*a.spec.name)
            {
                continue;
            }
            out.push(JobInfo {
                id: *id,
                userid: job.userid(),
                name: a.spec.name.to_string(),
                state: job.state(),
                result: None,
                urgency: job.urgency(),
                priority: job.priority(),
                ntasks: a.spec.ntasks,
                nnodes: a.alloc_nnodes.unwrap_or(a.spec.nnodes),
                nodelist: a.nodelist.clone(),
                t_submit: job.t_submit().unwrap_or_default(),
                t_run: a.t_run,
                t_inactive: None,
                waitstatus: job.wait_status().map(|w| w.0),
                exception: job
                    .fatal_exception()
                    .map(|e| (e.kind.clone(), e.note.clone())),
                annotations: job
                    .annotations()
                    .map(|m| serde_json::Value::Object(m.clone()).to_string()),
            });
        }
        newest_first(out, f.max)
    }
}

/// The stored inactive jobs that pass `f`, newest first, at most `f.max`
/// (0: all). Read after the core's answer to the same listing, which comes
/// once everything it reflects is durable, so no job that was inactive then
/// is missed.
pub fn stored_inactive(store: &impl Store, f: &ListFilter) -> Result<Vec<JobInfo>, StoreError> {
    let mut found: Vec<(JobId, Result<Inactive, String>)> = Vec::new();
    let mut kept = 0;
    store.scan_inactive(f.userid, f.since, &mut |id, text| {
        let id = JobId::from(id);
        match Inactive::from_summary(text) {
            Ok(j) if f.passes(&j) => {
                found.push((id, Ok(j)));
                kept += 1;
            }
            Ok(_) => {}
            // Rebuilt after the scan, which holds the store's reader; counted
            // as kept, so a damaged summary may leave the listing short.
            Err(_) => {
                found.push((id, Err(text.to_string())));
                kept += 1;
            }
        }
        f.max == 0 || kept < f.max
    })?;
    let mut out = Vec::with_capacity(found.len());
    for (id, j) in found {
        let j = match j {
            Ok(j) => j,
            Err(text) => super::inactive::read_summary(store, id, &text)?,
        };
        if f.passes(&j) {
            out.push(JobInfo::inactive(id, &j));
        }
    }
    Ok(out)
}

/// One listing from the core's and the store's parts: a job in both (it
/// ended between the two reads) is shown as the store has it, inactive.
pub fn merge(core: Vec<JobInfo>, stored: Vec<JobInfo>, max: usize) -> Vec<JobInfo> {
    let ended: std::collections::HashSet<JobId> = stored.iter().map(|j| j.id).collect();
    let mut out = stored;
    out.extend(core.into_iter().filter(|j| !ended.contains(&j.id)));
    newest_first(out, max)
}

/// Newest first, as `flux jobs` shows them; at most `max` (0: all).
fn newest_first(mut out: Vec<JobInfo>, max: usize) -> Vec<JobInfo> {
    out.sort_by_key(|j| std::cmp::Reverse(j.id));
    if max > 0 {
        out.truncate(max);
    }
    out
}
