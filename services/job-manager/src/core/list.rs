//! Listing jobs (`flux jobs`): filters over active jobs and inactive summaries.

use fluxgate_shared::JobId;
use fluxgate_shared::job::{JobResult, JobState, StateMask};

use super::Core;

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

impl Core {
    pub(super) fn list(&self, f: &ListFilter) -> Vec<JobInfo> {
        let states = f.states.unwrap_or(StateMask::ACTIVE);
        let mut out = Vec::new();
        if states.contains(JobState::Inactive) {
            for (id, j) in self.inactive.iter().rev() {
                if f.userid.is_some_and(|u| u != j.userid)
                    || f.name.as_deref().is_some_and(|n| n != &*j.name)
                    || f.since.is_some_and(|s| j.t_inactive < s)
                    || (!f.results.is_empty() && !f.results.contains(&j.result))
                {
                    continue;
                }
                out.push(JobInfo {
                    id: *id,
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
                });
            }
        }
        for (id, a) in &self.jobs {
            let job = &a.job;
            if !states.contains(job.state())
                || f.userid.is_some_and(|u| u != job.userid())
                || f.name.as_deref().is_some_and(|n| n != a.jobspec.job_name())
            {
                continue;
            }
            let counts = a.jobspec.jj_counts();
            out.push(JobInfo {
                id: *id,
                userid: job.userid(),
                name: a.jobspec.job_name().to_string(),
                state: job.state(),
                result: None,
                urgency: job.urgency(),
                priority: job.priority(),
                ntasks: u32::try_from(a.jobspec.ntasks()).unwrap_or(u32::MAX),
                nnodes: a
                    .alloc_nnodes
                    .unwrap_or_else(|| u32::try_from(counts.nnodes).unwrap_or(u32::MAX)),
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
        // Newest first, as `flux jobs` shows them.
        out.sort_by_key(|j| std::cmp::Reverse(j.id));
        if f.max > 0 {
            out.truncate(f.max);
        }
        out
    }
}
