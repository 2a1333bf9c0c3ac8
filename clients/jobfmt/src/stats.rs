//! Job counts by state, as flux's job-list stats (`flux.job.stats.JobStats`)
//! hold them, counted from a listing of every job of every user: the
//! `fluxgate jobs --stats` / `--stats-only` line and a child instance's
//! `instance.stats.*` fields. As in flux, "failed" counts every unsuccessful
//! inactive job (failed, canceled and timed out), and purged jobs (which
//! the listing cannot see) are always 0.

use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobState;

/// Job counts of an instance, as flux's `JobStats` holds them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobCounts {
    /// Jobs in DEPEND.
    pub depend: u64,
    /// Jobs in PRIORITY.
    pub priority: u64,
    /// Jobs in SCHED.
    pub sched: u64,
    /// Jobs in RUN.
    pub run: u64,
    /// Jobs in CLEANUP.
    pub cleanup: u64,
    /// Inactive jobs.
    pub inactive: u64,
    /// Every job, NEW and inactive ones included.
    pub total: u64,
    /// Inactive and COMPLETED.
    pub successful: u64,
    /// Inactive and FAILED (flux adds timeouts and cancels in `failed()`).
    pub failed_only: u64,
    /// Inactive and TIMEOUT.
    pub timeout: u64,
    /// Inactive and CANCELED.
    pub canceled: u64,
}

impl JobCounts {
    /// Count `jobs`: every job of every user of the instance.
    pub fn count<'a>(jobs: impl IntoIterator<Item = &'a pb::JobSummary>) -> JobCounts {
        let mut c = JobCounts::default();
        for j in jobs {
            let Ok(state) = j.state.parse::<JobState>() else {
                continue;
            };
            c.total += 1;
            match state {
                JobState::New => {}
                JobState::Depend => c.depend += 1,
                JobState::Priority => c.priority += 1,
                JobState::Sched => c.sched += 1,
                JobState::Run => c.run += 1,
                JobState::Cleanup => c.cleanup += 1,
                JobState::Inactive => {
                    c.inactive += 1;
                    match j.result.as_str() {
                        "COMPLETED" => c.successful += 1,
                        "TIMEOUT" => c.timeout += 1,
                        "CANCELED" => c.canceled += 1,
                        _ => c.failed_only += 1,
                    }
                }
            }
        }
        c
    }

    /// Count the jobs of `queue` among `jobs` (all of them without one).
    pub fn count_in<'a>(
        jobs: impl IntoIterator<Item = &'a pb::JobSummary>,
        queue: Option<&str>,
    ) -> JobCounts {
        JobCounts::count(
            jobs.into_iter()
                .filter(|j| queue.is_none_or(|q| q == j.queue)),
        )
    }

    /// Jobs not yet inactive, NEW included.
    pub fn active(&self) -> u64 {
        self.total - self.inactive
    }

    /// The line `flux jobs --stats` prints.
    pub fn line(&self) -> String {
        format!(
            "{} running, {} completed, {} failed, {} pending, 0 inactive purged",
            self.running(),
            self.successful,
            self.failed(),
            self.pending()
        )
    }

    /// DEPEND, PRIORITY and SCHED.
    pub fn pending(&self) -> u64 {
        self.depend + self.priority + self.sched
    }

    /// RUN and CLEANUP.
    pub fn running(&self) -> u64 {
        self.run + self.cleanup
    }

    /// Every unsuccessful inactive job, as flux's `JobStats.failed`.
    pub fn failed(&self) -> u64 {
        self.failed_only + self.timeout + self.canceled
    }

    /// `str(instance.stats)`: `PD:n R:n CD:n F:n`.
    pub fn summary(&self) -> String {
        format!(
            "PD:{} R:{} CD:{} F:{}",
            self.pending(),
            self.running(),
            self.successful,
            self.failed()
        )
    }

    /// An `instance.stats.NAME` field.
    pub(crate) fn field(&self, name: &str) -> Option<u64> {
        Some(match name {
            "depend" => self.depend,
            "priority" => self.priority,
            "sched" => self.sched,
            "run" => self.run,
            "cleanup" => self.cleanup,
            "inactive" => self.inactive,
            "total" => self.total,
            "successful" => self.successful,
            "failed" => self.failed(),
            "timeout" => self.timeout,
            "canceled" => self.canceled,
            // The listing cannot see purged jobs.
            "inactive_purged" => 0,
            "pending" => self.pending(),
            "running" => self.running(),
            "active" => self.active(),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(state: &str, result: &str, queue: &str) -> pb::JobSummary {
        pb::JobSummary {
            state: state.into(),
            result: result.into(),
            queue: queue.into(),
            ..Default::default()
        }
    }

    #[test]
    fn counts_like_flux() {
        let jobs = [
            job("SCHED", "", "a"),
            job("DEPEND", "", "b"),
            job("RUN", "", "a"),
            job("CLEANUP", "", "a"),
            job("INACTIVE", "COMPLETED", "a"),
            job("INACTIVE", "CANCELED", "a"),
            job("INACTIVE", "TIMEOUT", "b"),
        ];
        let s = JobCounts::count_in(&jobs, None);
        assert_eq!(
            s.line(),
            "2 running, 1 completed, 2 failed, 2 pending, 0 inactive purged"
        );
        assert_eq!(s.active(), 4);
        let q = JobCounts::count_in(&jobs, Some("b"));
        assert_eq!(
            q.line(),
            "0 running, 0 completed, 1 failed, 1 pending, 0 inactive purged"
        );
        assert_eq!(JobCounts::count_in(&[], None).active(), 0);
    }
}
