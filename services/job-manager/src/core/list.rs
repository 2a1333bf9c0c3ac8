//! Listing jobs (`flux jobs`): filters over active jobs, held by the core, and
//! inactive summaries, read from the store.
//!
//! A listing is read in pages, newest first: each part (the core's and the
//! store's) gives the rows below the page's `before` id until their
//! estimated size passes the page's byte budget, and [`merge`] keeps only
//! what both parts are sure of, so that every job is listed once across
//! pages however the parts were cut.

use fluxgate_shared::JobId;
use fluxgate_shared::job::usage::Total;
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
    /// Only jobs with a smaller id (the previous page's last).
    pub before: Option<JobId>,
    /// Each part stops once its rows' estimated size passes this; 0 is no bound.
    pub max_bytes: usize,
    /// Only jobs of this queue.
    pub queue: Option<String>,
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
    /// The job's queue ("" for the anonymous queue).
    pub queue: String,
    /// What it used over its nodes, once they reported it.
    pub usage: Option<Total>,
}

impl JobInfo {
    /// About how many bytes the row takes on the wire (never much less).
    pub fn size_estimate(&self) -> usize {
        let strings = self.name.len()
            + self.nodelist.len()
            + self.annotations.as_ref().map_or(0, String::len)
            + self
                .exception
                .as_ref()
                .map_or(0, |(k, n)| k.len() + n.len());
        strings + 128
    }

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
            queue: j.queue.as_deref().unwrap_or_default().to_string(),
            usage: j.usage,
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

    /// Is `id` on this page's side of `before`?
    fn below(&self, id: JobId) -> bool {
        self.before.is_none_or(|b| id < b)
    }

    /// Has a part of `rows` rows of `bytes` estimated bytes reached a bound?
    fn full(&self, rows: usize, bytes: usize) -> bool {
        (self.max > 0 && rows >= self.max) || (self.max_bytes > 0 && bytes > self.max_bytes)
    }

    /// Does inactive job `j` pass?
    fn passes(&self, j: &Inactive) -> bool {
        !(self.userid.is_some_and(|u| u != j.userid)
            || self.name.as_deref().is_some_and(|n| n != &*j.name)
            || self.since.is_some_and(|s| j.t_inactive < s)
            || (!self.results.is_empty() && !self.results.contains(&j.result))
            || self
                .queue
                .as_deref()
                .is_some_and(|q| j.queue.as_deref() != Some(q)))
    }
}

impl<S: Store> Core<S> {
    /// The active jobs that pass `f` (and inactive ones held only in
    /// memory); the stored inactive ones come from [`stored_inactive`].
    pub(super) fn list(&self, f: &ListFilter) -> Vec<JobInfo> {
        let states = f.states.unwrap_or(StateMask::ACTIVE);
        let mut out = Vec::new();
        if f.wants_inactive() {
            for (id, j) in self.inactive.damaged_jobs() {
                if f.below(*id) && f.passes(j) {
                    out.push(JobInfo::inactive(*id, j));
                }
            }
        }
        // Ids first, rows only for what the page takes: a page of a long
        // queue copies one page of rows, not the queue.
        let mut ids: Vec<JobId> = self
            .jobs
            .iter()
            .filter(|(id, a)| {
                f.below(**id)
                    && states.contains(a.job.state())
                    && f.userid.is_none_or(|u| u == a.job.userid())
                    && f.name.as_deref().is_none_or(|n| n == &*a.spec.name)
                    && f.queue
                        .as_deref()
                        .is_none_or(|q| a.spec.queue.as_deref() == Some(q))
            })
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable_by(|a, b| b.cmp(a));
        let mut bytes: usize = out.iter().map(JobInfo::size_estimate).sum();
        for id in ids {
            if f.full(out.len(), bytes) {
                break;
            }
            let Some(a) = self.jobs.get(&id) else {
                continue;
            };
            let row = active_row(id, a, self.holds.hold_reason(id));
            bytes += row.size_estimate();
            out.push(row);
        }
        newest_first(out, f.max)
    }
}

/// The row of an active job; its memo is shown as flux shows it, under
/// `user` in the annotations, and the limit that holds it (if one does) as
/// `sched.reason_pending`.
fn active_row(id: JobId, a: &super::Active, held: Option<&str>) -> JobInfo {
    let job = &a.job;
    let annotations = match (job.annotations(), job.memo(), held) {
        (None, memo, None) if memo.is_empty() && a.t_estimate.is_none() => None,
        (sched, memo, held) => {
            let mut all = sched.cloned().unwrap_or_default();
            if let Some(t) = a.t_estimate {
                let sched = all
                    .entry("sched")
                    .or_insert_with(|| serde_json::Value::Object(Default::default()));
                if let Some(obj) = sched.as_object_mut() {
                    obj.insert("t_estimate".into(), serde_json::Value::from(t));
                }
            }
            if !memo.is_empty() {
                all.insert("user".into(), serde_json::Value::Object(memo.clone()));
            }
            if let Some(reason) = held {
                let entry = all
                    .entry("sched")
                    .or_insert_with(|| serde_json::Value::Object(Default::default()));
                if let serde_json::Value::Object(sched) = entry {
                    sched.insert("reason_pending".into(), reason.into());
                }
            }
            Some(serde_json::Value::Object(all).to_string())
        }
    };
    JobInfo {
        id,
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
        annotations,
        queue: a.spec.queue.as_deref().unwrap_or_default().to_string(),
        usage: a.usage,
    }
}

/// The stored inactive jobs that pass `f`, newest first, at most `f.max`
/// (0: all). Read after the core's answer to the same listing, which comes
/// once everything it reflects is durable, so no job that was inactive then
/// is missed.
pub fn stored_inactive(store: &impl Store, f: &ListFilter) -> Result<Vec<JobInfo>, StoreError> {
    // A summary that cannot be read keeps its text, to be rebuilt.
    enum Found {
        Read(Inactive),
        Damaged(String),
    }
    let mut found: Vec<(JobId, Found)> = Vec::new();
    let mut kept = 0;
    let mut bytes = 0;
    let before = f.before.map(u64::from);
    store.scan_inactive_below(f.userid, f.since, before, &mut |id, text| {
        let id = JobId::from(id);
        match Inactive::from_summary(text) {
            Ok(j) if f.passes(&j) => {
                bytes += JobInfo::inactive(id, &j).size_estimate();
                found.push((id, Found::Read(j)));
                kept += 1;
            }
            Ok(_) => {}
            // Rebuilt after the scan, which holds the store's reader; counted
            // as kept, so a damaged summary may leave the listing short.
            Err(_) => {
                bytes += text.len() + 128;
                found.push((id, Found::Damaged(text.to_string())));
                kept += 1;
            }
        }
        !f.full(kept, bytes)
    })?;
    let mut out = Vec::with_capacity(found.len());
    for (id, j) in found {
        let j = match j {
            Found::Read(j) => j,
            Found::Damaged(text) => super::inactive::read_summary(store, id, &text)?,
        };
        if f.passes(&j) {
            out.push(JobInfo::inactive(id, &j));
        }
    }
    Ok(out)
}

/// One page from the core's and the store's parts (`f` the filter both
/// were read with): a job in both (it ended between the two reads) is shown
/// as the store has it, inactive. A part that stopped at the page's byte
/// budget may have left out jobs older than its last row, so nothing older
/// than that row is taken from the other part either; the page then says it
/// is cut (true), and the next page starts below its last row.
pub fn merge(core: Vec<JobInfo>, stored: Vec<JobInfo>, f: &ListFilter) -> (Vec<JobInfo>, bool) {
    let cut_at = |part: &[JobInfo]| {
        let bytes: usize = part.iter().map(JobInfo::size_estimate).sum();
        (f.max_bytes > 0 && bytes > f.max_bytes)
            .then(|| part.iter().map(|j| j.id).min())
            .flatten()
    };
    let floor = cut_at(&core).max(cut_at(&stored));
    let ended: std::collections::HashSet<JobId> = stored.iter().map(|j| j.id).collect();
    let mut out = stored;
    out.extend(core.into_iter().filter(|j| !ended.contains(&j.id)));
    if let Some(floor) = floor {
        out.retain(|j| j.id >= floor);
    }
    (newest_first(out, f.max), floor.is_some())
}

/// Newest first, as `flux jobs` shows them; at most `max` (0: all).
fn newest_first(mut out: Vec<JobInfo>, max: usize) -> Vec<JobInfo> {
    out.sort_by_key(|j| std::cmp::Reverse(j.id));
    if max > 0 {
        out.truncate(max);
    }
    out
}
