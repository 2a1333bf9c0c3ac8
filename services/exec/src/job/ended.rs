//! The last responses of jobs that ended, kept a while: a job manager that
//! died after they were sent but before it stored them (a failover, a
//! crash) asks for the job again, and hears how it ended instead of
//! "job lost".

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use fluxgate_proto::v1::StartResponse;

/// How long an ended job's last responses are kept: longer than a job
/// manager takes to be replaced and its nodes to rejoin, and than a
/// partition a node survives (its job manager then hears the real end of a
/// job that ended meanwhile).
pub const KEEP_FOR: Duration = Duration::from_secs(3600);
/// Most ended jobs kept at once (the oldest go first).
pub const KEEP_MAX: usize = 100_000;
/// Responses kept of each job: its end (finish, release) and a little before.
pub const TAIL: usize = 8;

/// Ended jobs' tails, oldest first.
#[derive(Debug, Default)]
pub struct Ended {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    tails: HashMap<u64, Vec<StartResponse>>,
    order: VecDeque<(Instant, u64)>,
}

impl Ended {
    /// Keep the last responses of job `id`, which has just ended.
    pub fn keep(&self, id: u64, tail: Vec<StartResponse>) {
        let now = Instant::now();
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        while let Some(&(t, old)) = inner.order.front() {
            if now.duration_since(t) < KEEP_FOR && inner.order.len() < KEEP_MAX {
                break;
            }
            inner.order.pop_front();
            inner.tails.remove(&old);
        }
        inner.tails.insert(id, tail);
        inner.order.push_back((now, id));
    }

    /// The jobs whose ends are kept.
    pub fn ids(&self) -> Vec<u64> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.tails.keys().copied().collect()
    }

    /// The last responses of job `id`, if it ended lately.
    pub fn get(&self, id: u64) -> Option<Vec<StartResponse>> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.tails.get(&id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ended_job_is_kept_and_the_oldest_go_past_the_cap() {
        let ended = Ended::default();
        for id in 0..(KEEP_MAX as u64 + 2) {
            ended.keep(id, vec![StartResponse { id, response: None }]);
        }
        assert!(ended.get(0).is_none(), "past the cap");
        assert_eq!(
            ended.get(KEEP_MAX as u64 + 1).unwrap()[0].id,
            KEEP_MAX as u64 + 1
        );
    }
}
