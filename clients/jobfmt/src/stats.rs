//! `fluxgate jobs --stats` / `--stats-only`: the summary line flux prints
//! from job-list's stats (`flux.job.stats.JobStats`), counted here from a
//! listing of every job of every user. As in flux, "failed" counts every
//! unsuccessful inactive job (failed, canceled and timed out).

use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobState;

/// Job counts as `flux jobs --stats` shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// DEPEND, PRIORITY and SCHED.
    pub pending: u64,
    /// RUN and CLEANUP.
    pub running: u64,
    /// Inactive and COMPLETED.
    pub successful: u64,
    /// Inactive and not COMPLETED.
    pub failed: u64,
    /// Purged inactive jobs: the listing cannot see them, so always 0.
    pub inactive_purged: u64,
    /// Jobs not yet inactive (including NEW).
    pub active: u64,
}

impl Stats {
    /// Count `jobs`, only those of `queue` when one is given.
    pub fn count<'a>(
        jobs: impl IntoIterator<Item = &'a pb::JobSummary>,
        queue: Option<&str>,
    ) -> Stats {
        let mut s = Stats::default();
        for j in jobs {
            if queue.is_some_and(|q| q != j.queue) {
                continue;
            }
            match j.state.parse::<JobState>() {
                Ok(JobState::Inactive) if j.result == "COMPLETED" => s.successful += 1,
                Ok(JobState::Inactive) => s.failed += 1,
                Ok(st) => {
                    s.active += 1;
                    if st.is_running() {
                        s.running += 1;
                    } else if st != JobState::New {
                        s.pending += 1;
                    }
                }
                Err(_) => {}
            }
        }
        s
    }

    /// The line flux prints.
    pub fn line(&self) -> String {
        format!(
            "{} running, {} completed, {} failed, {} pending, {} inactive purged",
            self.running, self.successful, self.failed, self.pending, self.inactive_purged
        )
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
        let s = Stats::count(&jobs, None);
        assert_eq!(
            s.line(),
            "2 running, 1 completed, 2 failed, 2 pending, 0 inactive purged"
        );
        assert_eq!(s.active, 4);
        let q = Stats::count(&jobs, Some("b"));
        assert_eq!(
            q.line(),
            "0 running, 0 completed, 1 failed, 1 pending, 0 inactive purged"
        );
        assert_eq!(Stats::count(&[], None).active, 0);
    }
}
