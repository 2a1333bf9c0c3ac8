//! The gauges counted from what the core holds (jobs and nodes by state), set
//! on each heartbeat tick while metrics are served; see crate::telemetry.

use fluxgate_shared::{IdSet, JobState};
use metrics::gauge;

use super::Core;
use crate::store::Store;
use crate::telemetry::{JOBS, NODES, SCHED_PASS};

impl<S: Store> Core<S> {
    /// Count jobs and nodes by state into their gauges: O(active jobs), once a tick.
    pub(super) fn set_gauges(&self) {
        if self.config.metrics.listen.is_none() {
            return;
        }
        let mut jobs = [0usize; JobState::ALL.len()];
        for a in self.jobs.values() {
            jobs[a.job.state().index()] += 1;
        }
        jobs[JobState::Inactive.index()] +=
            usize::try_from(self.inactive.count()).unwrap_or(usize::MAX);
        for state in JobState::ALL {
            gauge!(JOBS, "state" => state.name()).set(jobs[state.index()] as f64);
        }
        let allocated = self
            .sched
            .pool()
            .map(|p| p.allocated().ranks())
            .unwrap_or_default();
        let groups = self.res.state().status(&IdSet::new(), &allocated);
        for (state, ranks) in [
            ("online", &groups.up),
            ("offline", &groups.offline),
            ("torpid", &groups.torpid),
            ("drained", &groups.drained),
            ("draining", &groups.draining),
            ("allocated", &groups.allocated),
            ("schedulable", self.res.up()),
        ] {
            gauge!(NODES, "state" => state).set(ranks.count() as f64);
        }
    }

    /// Run one scheduling pass, timed.
    pub(super) fn timed_schedule(&mut self) {
        let started = std::time::Instant::now();
        self.schedule();
        metrics::histogram!(SCHED_PASS).record(started.elapsed().as_secs_f64());
    }
}
