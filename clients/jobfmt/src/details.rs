//! Job fields flux's job-list carries and the listing's summary does not:
//! `cwd`, `project`, `bank`, `ncores`, `ranks`, `duration`, `expiration`,
//! `t_priority`, `t_sched`, `t_cleanup`, `dependencies`, and an inactive
//! job's last `priority`. They are read from the job's jobspec, eventlog
//! and R (one request a job, made only when the format names one of them)
//! and worked out here, without I/O.

use fluxgate_shared::job::{Job, JobState};
use fluxgate_shared::jobspec::jj_counts;
use fluxgate_shared::{Event, ResourceSet};
use serde_json::Value;

/// The fields this module fills.
pub const FIELDS: &[&str] = &[
    "cwd",
    "project",
    "bank",
    "ncores",
    "ranks",
    "duration",
    "expiration",
    "t_priority",
    "t_sched",
    "t_cleanup",
    "dependencies",
    "priority",
];

/// What a job's stored documents say of the fields in [`FIELDS`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobDetails {
    /// `attributes.system.cwd`.
    pub cwd: String,
    /// `attributes.system.project`.
    pub project: String,
    /// `attributes.system.bank`.
    pub bank: String,
    /// Cores allocated (R), else asked for (jobspec slots times slot size).
    pub ncores: Option<u64>,
    /// The ranks of R, as an idset.
    pub ranks: String,
    /// Time limit in seconds (after `update`), 0 for none.
    pub duration: f64,
    /// R's expiration, 0 for none.
    pub expiration: f64,
    /// When the job entered PRIORITY, SCHED and CLEANUP (0: not yet).
    pub t_priority: f64,
    pub t_sched: f64,
    pub t_cleanup: f64,
    /// Outstanding dependencies, by description.
    pub dependencies: Vec<String>,
    /// The last priority the job was given (kept once it is inactive).
    pub priority: Option<u32>,
}

impl JobDetails {
    /// Worked out from the job's stored documents (each may be missing or
    /// empty: the job was not allocated, or the text is unreadable).
    pub fn from_documents(jobspec: &str, eventlog: &str, r: &str) -> JobDetails {
        let mut d = JobDetails::default();
        let events: Vec<Event> = eventlog
            .lines()
            .filter(|l| !l.trim().is_empty())
            .filter_map(|l| Event::parse_json(l).ok())
            .collect();
        // Event by event, so that one the fold refuses costs only itself.
        let mut fold = Job::new();
        for e in &events {
            let _ = fold.apply(e);
        }
        let job = (!events.is_empty()).then_some(fold);
        if let Ok(mut spec) = serde_json::from_str::<Value>(jobspec) {
            if let Some(job) = &job {
                job.apply_jobspec_updates(&mut spec);
            }
            let system = &spec["attributes"]["system"];
            let text = |k: &str| system[k].as_str().unwrap_or_default().to_string();
            d.cwd = text("cwd");
            d.project = text("project");
            d.bank = text("bank");
            d.duration = system["duration"].as_f64().unwrap_or(0.0);
            d.ncores = jj_counts(&spec)
                .ok()
                .map(|jj| jj.nslots.saturating_mul(jj.slot_size));
        }
        if let Some(job) = &job {
            let at = |s: JobState| job.entered(s).unwrap_or(0.0);
            d.t_priority = at(JobState::Priority);
            d.t_sched = at(JobState::Sched);
            d.t_cleanup = at(JobState::Cleanup);
            d.dependencies = job.dependencies().iter().cloned().collect();
            d.priority = job.priority();
        }
        if let Ok(r) = ResourceSet::parse(r) {
            d.ranks = r.ranks().to_string();
            d.expiration = r.expiration().unwrap_or(0.0);
            d.ncores = Some(r.ncores());
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JOBSPEC: &str = r#"{"version":1,"resources":[{"type":"slot","count":2,"label":"task","with":[{"type":"core","count":3}]}],"tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],"attributes":{"system":{"duration":60,"cwd":"/w","bank":"b1","project":"p1"}}}"#;

    #[test]
    fn fields_come_from_jobspec_eventlog_and_r() {
        let eventlog = [
            r#"{"timestamp":10.0,"name":"submit","context":{"userid":1,"urgency":16,"flags":0,"version":1}}"#,
            r#"{"timestamp":10.5,"name":"validate"}"#,
            r#"{"timestamp":10.6,"name":"dependency-add","context":{"description":"after-finish=f1"}}"#,
            r#"{"timestamp":11.0,"name":"dependency-remove","context":{"description":"after-finish=f1"}}"#,
            r#"{"timestamp":11.1,"name":"depend"}"#,
            r#"{"timestamp":11.2,"name":"priority","context":{"priority":16}}"#,
            r#"{"timestamp":11.3,"name":"jobspec-update","context":{"attributes.system.duration":120.0}}"#,
            r#"{"timestamp":11.4,"name":"priority","context":{"priority":20}}"#,
            r#"{"timestamp":12.0,"name":"alloc"}"#,
            r#"{"timestamp":12.1,"name":"start"}"#,
            r#"{"timestamp":13.0,"name":"finish","context":{"status":0}}"#,
            r#"{"timestamp":13.1,"name":"release","context":{"ranks":"all","final":true}}"#,
            r#"{"timestamp":13.2,"name":"free"}"#,
            r#"{"timestamp":13.3,"name":"clean"}"#,
        ]
        .join("\n");
        let r = r#"{"version":1,"execution":{"R_lite":[{"rank":"2-3","children":{"core":"0-1"}}],"nodelist":["n[2-3]"],"starttime":12,"expiration":132}}"#;
        let d = JobDetails::from_documents(JOBSPEC, &eventlog, r);
        assert_eq!(d.cwd, "/w");
        assert_eq!((d.bank.as_str(), d.project.as_str()), ("b1", "p1"));
        assert_eq!(d.duration, 120.0, "the updated duration");
        assert_eq!(d.ranks, "2-3");
        assert_eq!(d.expiration, 132.0);
        assert_eq!(d.ncores, Some(4), "R's cores once allocated");
        assert_eq!((d.t_priority, d.t_sched, d.t_cleanup), (11.1, 11.2, 13.0));
        assert!(d.dependencies.is_empty());
        assert_eq!(d.priority, Some(20), "kept once inactive");
    }

    #[test]
    fn a_pending_job_has_what_it_asked_for() {
        let eventlog = [
            r#"{"timestamp":10.0,"name":"submit","context":{"userid":1,"urgency":16,"flags":0,"version":1}}"#,
            r#"{"timestamp":10.5,"name":"validate"}"#,
            r#"{"timestamp":10.6,"name":"dependency-add","context":{"description":"singleton"}}"#,
        ]
        .join("\n");
        let d = JobDetails::from_documents(JOBSPEC, &eventlog, "");
        assert_eq!(d.ncores, Some(6), "2 slots of 3 cores");
        assert_eq!(d.dependencies, ["singleton"]);
        assert_eq!((d.t_priority, d.t_sched, d.expiration), (0.0, 0.0, 0.0));
        assert_eq!(d.ranks, "");
        assert_eq!(d.priority, None);
    }
}
