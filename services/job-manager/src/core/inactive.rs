//! Inactive jobs kept for listing, `Wait` and dependencies, indexed by id and
//! by the time each became inactive, so that purging the oldest costs what
//! is purged rather than a sort of every inactive job on each tick.

use std::collections::{BTreeMap, BTreeSet};

use fluxgate_shared::job::{Job, JobResult, JobState};
use fluxgate_shared::{JobId, Jobspec};

use super::Inactive;

impl Inactive {
    /// What is kept of `job` once it is inactive: `t_run` from its `start`
    /// event, `nnodes` and `nodelist` from its R when it had one (else the
    /// nodes its jobspec asked for), `t_inactive` when the fold has no time.
    pub(super) fn from_job(
        job: &Job,
        jobspec: &Jobspec,
        t_run: Option<f64>,
        nnodes: Option<u32>,
        nodelist: &str,
        t_inactive: impl FnOnce() -> f64,
    ) -> Inactive {
        let asked = || u32::try_from(jobspec.jj_counts().nnodes).unwrap_or(u32::MAX);
        Inactive {
            userid: job.userid(),
            name: jobspec.job_name().into(),
            result: job.result().unwrap_or(JobResult::Failed),
            waitstatus: job.wait_status().map(|w| w.0),
            t_submit: job.t_submit().unwrap_or_default(),
            t_run,
            t_inactive: job.entered(JobState::Inactive).unwrap_or_else(t_inactive),
            urgency: job.urgency(),
            ntasks: u32::try_from(jobspec.ntasks()).unwrap_or(u32::MAX),
            nnodes: nnodes.unwrap_or_else(asked),
            nodelist: nodelist.into(),
            exception: job
                .fatal_exception()
                .map(|e| Box::new((e.kind.clone(), e.note.clone()))),
            waitable: job.flags().waitable,
        }
    }
}

/// Non-negative times order as their bit patterns; a negative (damaged)
/// time counts as the oldest.
fn age_key(t: f64) -> u64 {
    t.max(0.0).to_bits()
}

/// The inactive jobs.
#[derive(Debug, Default)]
pub(super) struct InactiveJobs {
    by_id: BTreeMap<JobId, Inactive>,
    by_age: BTreeSet<(u64, JobId)>,
}

impl InactiveJobs {
    /// Keep `job` (replacing an earlier entry of the same id).
    pub(super) fn insert(&mut self, id: JobId, job: Inactive) {
        self.by_age.insert((age_key(job.t_inactive), id));
        if let Some(old) = self.by_id.insert(id, job)
            && age_key(old.t_inactive) != age_key(self.by_id[&id].t_inactive)
        {
            self.by_age.remove(&(age_key(old.t_inactive), id));
        }
    }

    /// Forget a job.
    pub(super) fn remove(&mut self, id: &JobId) -> Option<Inactive> {
        let job = self.by_id.remove(id)?;
        self.by_age.remove(&(age_key(job.t_inactive), *id));
        Some(job)
    }

    /// One job.
    pub(super) fn get(&self, id: &JobId) -> Option<&Inactive> {
        self.by_id.get(id)
    }

    /// One job, to change what is not indexed (`waitable`); its
    /// `t_inactive` must stay as it is.
    pub(super) fn get_mut(&mut self, id: &JobId) -> Option<&mut Inactive> {
        self.by_id.get_mut(id)
    }

    /// Is the job here?
    pub(super) fn contains_key(&self, id: &JobId) -> bool {
        self.by_id.contains_key(id)
    }

    /// How many.
    pub(super) fn len(&self) -> usize {
        self.by_id.len()
    }

    /// In id order.
    pub(super) fn iter(&self) -> impl DoubleEndedIterator<Item = (&JobId, &Inactive)> {
        self.by_id.iter()
    }

    /// In id order, to change what is not indexed (see [`Self::get_mut`]).
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&JobId, &mut Inactive)> {
        self.by_id.iter_mut()
    }

    /// Ids, oldest (by inactive time) first; ties in id order.
    pub(super) fn oldest(&self) -> impl Iterator<Item = (f64, JobId)> + '_ {
        self.by_age
            .iter()
            .map(|(bits, id)| (f64::from_bits(*bits), *id))
    }
}

#[cfg(test)]
mod tests {
    use fluxgate_shared::job::JobResult;

    use super::*;

    fn job(t_inactive: f64) -> Inactive {
        Inactive {
            userid: 1,
            name: "x".into(),
            result: JobResult::Completed,
            waitstatus: None,
            t_submit: 0.0,
            t_run: None,
            t_inactive,
            urgency: 16,
            ntasks: 1,
            nnodes: 1,
            nodelist: "".into(),
            exception: None,
            waitable: false,
        }
    }

    #[test]
    fn oldest_first_and_kept_in_step_with_the_ids() {
        let mut jobs = InactiveJobs::default();
        jobs.insert(JobId::from(3), job(30.0));
        jobs.insert(JobId::from(1), job(50.0));
        jobs.insert(JobId::from(2), job(10.0));
        jobs.insert(JobId::from(4), job(-1.0));
        let order: Vec<u64> = jobs.oldest().map(|(_, id)| id.into()).collect();
        assert_eq!(order, [4, 2, 3, 1]);
        // Replacing an entry moves it.
        jobs.insert(JobId::from(2), job(60.0));
        assert!(jobs.remove(&JobId::from(3)).is_some());
        assert!(jobs.remove(&JobId::from(3)).is_none());
        let order: Vec<u64> = jobs.oldest().map(|(_, id)| id.into()).collect();
        assert_eq!(order, [4, 1, 2]);
        assert_eq!(jobs.len(), 3);
        assert_eq!(jobs.oldest().count(), jobs.len());
    }
}
