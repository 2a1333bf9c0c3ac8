//! What `fluxgate top` shows of one instance, updated by pure functions from
//! a listing and the job journal's entries, so that every rule here is
//! tested without a server or a terminal.

use std::collections::{BTreeMap, HashSet};

use fluxgate_proto::v1 as pb;
use fluxgate_shared::Event;
use fluxgate_shared::job::JobState;

/// Inactive jobs kept for the list; older ones are only counted.
pub const INACTIVE_ROWS: usize = 100;

/// One row of the job list.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRow {
    /// The job's id.
    pub id: u64,
    /// Its owner.
    pub userid: u32,
    /// Its name (from the jobspec).
    pub name: String,
    /// Its RFC 21 state.
    pub state: JobState,
    /// Tasks asked for.
    pub ntasks: u32,
    /// Nodes asked for or allocated.
    pub nnodes: u32,
    /// When it started running, if it did.
    pub t_run: Option<f64>,
    /// When it became inactive, if it did.
    pub t_inactive: Option<f64>,
}

impl JobRow {
    /// The row of a listing entry.
    pub fn from_summary(s: &pb::JobSummary) -> JobRow {
        JobRow {
            id: s.id,
            userid: s.userid,
            name: s.name.clone(),
            state: state_named(&s.state).unwrap_or(JobState::New),
            ntasks: s.ntasks,
            nnodes: s.nnodes,
            t_run: (s.t_run > 0.0).then_some(s.t_run),
            t_inactive: (s.t_inactive > 0.0).then_some(s.t_inactive),
        }
    }

    /// How long it has run (or ran) at time `now`; `None` before it started.
    pub fn runtime(&self, now: f64) -> Option<f64> {
        let start = self.t_run?;
        let end = self.t_inactive.unwrap_or(now);
        Some((end - start).max(0.0))
    }
}

/// Used and total counts of one kind of resource.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Allocated to jobs.
    pub used: u64,
    /// In the instance.
    pub total: u64,
}

/// Nodes and cores of the instance.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resources {
    /// Nodes with any allocation, of all nodes.
    pub nodes: Usage,
    /// Allocated cores, of all cores.
    pub cores: Usage,
}

/// Jobs by state, as flux top's header counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// NEW, DEPEND, PRIORITY, SCHED.
    pub pending: usize,
    /// RUN, CLEANUP.
    pub running: usize,
    /// INACTIVE.
    pub inactive: usize,
}

/// One instance as top shows it.
#[derive(Debug, Clone, Default)]
pub struct Model {
    /// Jobs by id: every active job, and the newest inactive ones.
    pub jobs: BTreeMap<u64, JobRow>,
    /// Inactive jobs, counted (more than `jobs` holds).
    pub inactive: usize,
    /// Nodes and cores, once read.
    pub resources: Option<Resources>,
    /// When the instance's job manager started, once read.
    pub started: Option<f64>,
    /// The selected job's id.
    pub selected: Option<u64>,
    /// The journal's snapshot is complete: live from here.
    pub live: bool,
    /// Active jobs the listing had that the journal's snapshot has not
    /// confirmed yet; those left at its sentinel ended in between.
    unconfirmed: HashSet<u64>,
}

impl Model {
    /// Start over from a listing of every job (`List` of all states).
    pub fn relist(&mut self, rows: &[pb::JobSummary]) {
        self.jobs.clear();
        self.inactive = 0;
        self.live = false;
        for s in rows {
            let row = JobRow::from_summary(s);
            if row.state == JobState::Inactive {
                self.inactive += 1;
            }
            self.jobs.insert(row.id, row);
        }
        self.unconfirmed = self
            .jobs
            .values()
            .filter(|j| j.state.is_active())
            .map(|j| j.id)
            .collect();
        self.trim();
        self.keep_selection();
    }

    /// Apply one journal entry.
    pub fn apply(&mut self, e: &pb::JobJournalEntry) {
        match e.kind() {
            pb::JobJournalKind::Snapshot => {
                if let Some(s) = &e.job {
                    self.unconfirmed.remove(&s.id);
                    self.upsert(JobRow::from_summary(s));
                }
            }
            pb::JobJournalKind::Sentinel => {
                // Active in the listing, absent from the snapshot: it ended
                // between the two.
                for id in std::mem::take(&mut self.unconfirmed) {
                    if let Some(j) = self.jobs.get_mut(&id)
                        && j.state.is_active()
                    {
                        j.state = JobState::Inactive;
                        self.inactive += 1;
                    }
                }
                self.live = true;
                self.trim();
            }
            pb::JobJournalKind::Event => self.event(e),
            // The caller re-lists; until then nothing is known for sure.
            pb::JobJournalKind::Resync | pb::JobJournalKind::Unspecified => self.live = false,
        }
        self.keep_selection();
    }

    /// Insert or merge a row: a state never moves back, since the snapshot
    /// may already show what an event repeats.
    fn upsert(&mut self, row: JobRow) {
        match self.jobs.get_mut(&row.id) {
            Some(old) => {
                let state = old.state.max(row.state);
                if state == JobState::Inactive && old.state.is_active() {
                    self.inactive += 1;
                }
                // A row read before the job started or ended lacks what
                // the events already told.
                let t_run = row.t_run.or(old.t_run);
                let t_inactive = row.t_inactive.or(old.t_inactive);
                *old = JobRow {
                    state,
                    t_run,
                    t_inactive,
                    ..row
                };
            }
            None => {
                if row.state == JobState::Inactive {
                    self.inactive += 1;
                }
                self.jobs.insert(row.id, row);
            }
        }
    }

    /// One event of one job.
    fn event(&mut self, e: &pb::JobJournalEntry) {
        if let Some(s) = &e.job {
            self.upsert(JobRow::from_summary(s));
        }
        let Ok(event) = Event::parse_json(&e.event) else {
            return;
        };
        let job = self.jobs.entry(e.id).or_insert_with(|| JobRow {
            id: e.id,
            userid: 0,
            name: String::new(),
            state: JobState::New,
            ntasks: 0,
            nnodes: 0,
            t_run: None,
            t_inactive: None,
        });
        match event.name.as_str() {
            "start" => job.t_run = Some(event.timestamp),
            "clean" => job.t_inactive = Some(event.timestamp),
            _ => {}
        }
        if let Some(next) = next_state(&event)
            && next > job.state
        {
            job.state = next;
            if next == JobState::Inactive {
                self.inactive += 1;
                self.trim();
            }
        }
    }

    /// Keep at most [`INACTIVE_ROWS`] inactive rows, the newest.
    fn trim(&mut self) {
        let inactive: Vec<u64> = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Inactive)
            .map(|j| j.id)
            .collect();
        if inactive.len() > INACTIVE_ROWS {
            // Ids grow with submission time: the smallest are the oldest.
            for id in &inactive[..inactive.len() - INACTIVE_ROWS] {
                self.jobs.remove(id);
            }
        }
    }

    /// Jobs by state.
    pub fn counts(&self) -> Counts {
        let mut c = Counts {
            inactive: self.inactive,
            ..Counts::default()
        };
        for j in self.jobs.values() {
            if j.state.is_pending() || j.state == JobState::New {
                c.pending += 1;
            } else if j.state.is_running() {
                c.running += 1;
            }
        }
        c
    }

    /// The list in display order: running, then pending, then inactive;
    /// newest first within each.
    pub fn rows(&self) -> Vec<&JobRow> {
        let mut rows: Vec<&JobRow> = self.jobs.values().collect();
        rows.sort_by_key(|j| (group(j.state), std::cmp::Reverse(j.id)));
        rows
    }

    /// Move the selection `by` rows (down when positive), within the list.
    pub fn select(&mut self, by: isize) {
        let rows = self.rows();
        if rows.is_empty() {
            self.selected = None;
            return;
        }
        let at = self
            .selected
            .and_then(|id| rows.iter().position(|j| j.id == id))
            .unwrap_or(0);
        let to = at.saturating_add_signed(by).min(rows.len() - 1);
        self.selected = Some(rows[to].id);
    }

    /// Where the selection is in [`Model::rows`].
    pub fn selected_index(&self) -> Option<usize> {
        let id = self.selected?;
        self.rows().iter().position(|j| j.id == id)
    }

    /// A selection always names a listed job; the first one by default.
    fn keep_selection(&mut self) {
        if self.selected.is_none_or(|id| !self.jobs.contains_key(&id)) {
            self.selected = self.rows().first().map(|j| j.id);
        }
    }
}

/// Display group of a state: running first, pending next, inactive last.
fn group(state: JobState) -> u8 {
    if state.is_running() {
        0
    } else if state.is_active() {
        1
    } else {
        2
    }
}

/// The state an event moves a job to, if it moves it (RFC 21).
fn next_state(event: &Event) -> Option<JobState> {
    Some(match event.name.as_str() {
        "validate" => JobState::Depend,
        "depend" => JobState::Priority,
        "priority" => JobState::Sched,
        "alloc" => JobState::Run,
        "finish" => JobState::Cleanup,
        // Only a fatal exception ends a job.
        "exception" if event.ctx_i64("severity") == Ok(0) => JobState::Cleanup,
        "clean" => JobState::Inactive,
        _ => return None,
    })
}

/// The state of a listing's state name.
fn state_named(name: &str) -> Option<JobState> {
    JobState::ALL.into_iter().find(|s| s.name() == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(id: u64, state: &str) -> pb::JobSummary {
        pb::JobSummary {
            id,
            userid: 1000,
            name: format!("job{id}"),
            state: state.into(),
            ntasks: 1,
            nnodes: 1,
            ..Default::default()
        }
    }

    fn event(id: u64, line: &str) -> pb::JobJournalEntry {
        pb::JobJournalEntry {
            kind: pb::JobJournalKind::Event.into(),
            id,
            event: line.into(),
            job: None,
        }
    }

    fn snapshot(s: pb::JobSummary) -> pb::JobJournalEntry {
        pb::JobJournalEntry {
            kind: pb::JobJournalKind::Snapshot.into(),
            id: s.id,
            event: String::new(),
            job: Some(s),
        }
    }

    fn sentinel() -> pb::JobJournalEntry {
        pb::JobJournalEntry {
            kind: pb::JobJournalKind::Sentinel.into(),
            ..Default::default()
        }
    }

    #[test]
    fn events_move_states_forward_and_count_jobs() {
        let mut m = Model::default();
        m.relist(&[summary(1, "INACTIVE"), summary(2, "SCHED")]);
        m.apply(&snapshot(summary(2, "SCHED")));
        m.apply(&sentinel());
        assert!(m.live);
        let mut new = event(3, r#"{"timestamp":10.0,"name":"submit","context":{}}"#);
        new.job = Some(summary(3, "NEW"));
        m.apply(&new);
        m.apply(&event(3, r#"{"timestamp":10.1,"name":"validate"}"#));
        m.apply(&event(2, r#"{"timestamp":11.0,"name":"alloc"}"#));
        m.apply(&event(2, r#"{"timestamp":11.5,"name":"start"}"#));
        assert_eq!(
            m.counts(),
            Counts {
                pending: 1,
                running: 1,
                inactive: 1
            }
        );
        assert_eq!(m.jobs[&3].state, JobState::Depend);
        assert_eq!(m.jobs[&2].runtime(13.5), Some(2.0));
        // Running first, then pending, then inactive, newest first.
        let order: Vec<u64> = m.rows().iter().map(|j| j.id).collect();
        assert_eq!(order, [2, 3, 1]);

        m.apply(&event(
            2,
            r#"{"timestamp":12.0,"name":"finish","context":{"status":0}}"#,
        ));
        m.apply(&event(2, r#"{"timestamp":12.5,"name":"clean"}"#));
        assert_eq!(m.jobs[&2].state, JobState::Inactive);
        assert_eq!(m.jobs[&2].runtime(100.0), Some(1.0));
        assert_eq!(m.counts().inactive, 2);
    }

    #[test]
    fn a_repeated_event_never_moves_a_state_back() {
        let mut m = Model::default();
        m.apply(&snapshot(summary(5, "RUN")));
        m.apply(&event(
            5,
            r#"{"timestamp":1.0,"name":"priority","context":{"priority":16}}"#,
        ));
        assert_eq!(m.jobs[&5].state, JobState::Run);
        // A non-fatal exception does not end it; a fatal one does.
        m.apply(&event(
            5,
            r#"{"timestamp":2.0,"name":"exception","context":{"type":"x","severity":1}}"#,
        ));
        assert_eq!(m.jobs[&5].state, JobState::Run);
        m.apply(&event(
            5,
            r#"{"timestamp":3.0,"name":"exception","context":{"type":"cancel","severity":0}}"#,
        ));
        assert_eq!(m.jobs[&5].state, JobState::Cleanup);
    }

    #[test]
    fn a_job_listed_active_but_missing_from_the_snapshot_ended_in_between() {
        let mut m = Model::default();
        m.relist(&[summary(7, "RUN"), summary(8, "SCHED")]);
        m.apply(&snapshot(summary(8, "SCHED")));
        m.apply(&sentinel());
        assert_eq!(m.jobs[&7].state, JobState::Inactive);
        assert_eq!(m.counts().inactive, 1);
        assert_eq!(m.counts().pending, 1);
    }

    #[test]
    fn only_the_newest_inactive_rows_are_kept_but_all_are_counted() {
        let mut m = Model::default();
        let rows: Vec<pb::JobSummary> = (1..=(INACTIVE_ROWS as u64 + 20))
            .map(|i| summary(i, "INACTIVE"))
            .collect();
        m.relist(&rows);
        assert_eq!(m.jobs.len(), INACTIVE_ROWS);
        assert_eq!(m.counts().inactive, INACTIVE_ROWS + 20);
        assert!(!m.jobs.contains_key(&1), "the oldest are dropped");
    }

    #[test]
    fn the_selection_moves_within_the_list_and_follows_its_job() {
        let mut m = Model::default();
        m.relist(&[summary(1, "SCHED"), summary(2, "SCHED"), summary(3, "RUN")]);
        // Display order: 3 (running), 2, 1.
        assert_eq!(m.selected, Some(3));
        m.select(1);
        assert_eq!(m.selected, Some(2));
        m.select(5);
        assert_eq!(m.selected, Some(1));
        m.select(-10);
        assert_eq!(m.selected, Some(3));
        // Job 2 starts running: the selection stays on it, now second
        // (running, after the newer job 3).
        m.select(1);
        m.apply(&event(2, r#"{"timestamp":1.0,"name":"alloc"}"#));
        assert_eq!(m.selected, Some(2));
        assert_eq!(m.selected_index(), Some(1));
    }
}
