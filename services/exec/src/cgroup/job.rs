//! One job's cgroup on this node, on either hierarchy, and the job's
//! tasks in it: placed before they exec, counted until reaped, killed
//! together.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tokio::sync::Notify;

use super::{Oom, Usage, v1, v2};

/// Pause between rounds of the whole-tree kill.
const KILL_ROUND: Duration = Duration::from_millis(5);

/// The hierarchy a job's cgroup is in.
#[derive(Debug)]
pub enum Backend {
    /// v1 hierarchies.
    V1(v1::Job),
    /// The unified hierarchy.
    V2(v2::Job),
}

/// A job's cgroup and the count of its tasks not yet reaped.
#[derive(Debug)]
pub struct JobCgroup {
    backend: Backend,
    /// Tasks placed and not yet reaped.
    live: AtomicUsize,
    /// Woken when `live` falls to zero.
    all_reaped: Notify,
}

impl JobCgroup {
    /// A job's cgroup, no task in it yet.
    pub fn new(backend: Backend) -> Self {
        JobCgroup {
            backend,
            live: AtomicUsize::new(0),
            all_reaped: Notify::new(),
        }
    }

    /// Put a task's process in the job's cgroup (before it execs or drops
    /// privileges); it counts as live until [`JobCgroup::reaped`].
    pub fn place(&self, pid: i32) -> io::Result<()> {
        match &self.backend {
            Backend::V1(j) => j.place(pid),
            Backend::V2(j) => j.place(pid),
        }?;
        self.live.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// True when a task of the service's own user may be spawned straight
    /// into the cgroup ([`JobCgroup::spawn_inside`]) rather than through
    /// the wrapper: v1, where one thread can join a cgroup alone.
    pub fn spawns_directly(&self) -> bool {
        matches!(self.backend, Backend::V1(_))
    }

    /// Run `spawn` (which starts one task) so that its process is born in
    /// the job's cgroup; on success the task counts as live. Only where
    /// [`JobCgroup::spawns_directly`].
    pub fn spawn_inside<T>(&self, spawn: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        let spawned = match &self.backend {
            Backend::V1(j) => j.spawn_inside(spawn),
            Backend::V2(_) => Err(io::Error::other(
                "a v2 cgroup takes whole processes: start the task through the wrapper",
            )),
        }?;
        self.live.fetch_add(1, Ordering::SeqCst);
        Ok(spawned)
    }

    /// A task placed here has been reaped.
    pub fn reaped(&self) {
        let before = self
            .live
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if before == Ok(1) {
            self.all_reaped.notify_waiters();
        }
    }

    /// Wait until every task placed has been reaped (at once if none is live).
    pub async fn tasks_reaped(&self) {
        loop {
            let woken = self.all_reaped.notified();
            if self.live.load(Ordering::SeqCst) == 0 {
                return;
            }
            woken.await;
        }
    }

    /// The processes in the job's cgroup.
    pub fn procs(&self) -> Vec<i32> {
        let mut pids = match &self.backend {
            Backend::V1(j) => j.procs(),
            Backend::V2(j) => j.procs(),
        };
        // The service itself, for the instant one of its threads spawns a
        // task inside, is not the job's.
        let me = std::process::id() as i32;
        pids.retain(|&p| p != me);
        pids
    }

    /// True when no process is left in the job's cgroup.
    pub fn is_empty(&self) -> bool {
        self.procs().is_empty()
    }

    /// Send `signal` to every process of the job: only its own processes,
    /// never a pid that may have been reaped and reused.
    pub fn signal(&self, signal: Signal) -> usize {
        match &self.backend {
            Backend::V1(j) => j.signal(signal),
            Backend::V2(j) => j.signal(signal),
        }
    }

    /// SIGKILL every process of the job until none is left or `bound` has
    /// passed (blocking); true when the cgroup is empty.
    pub fn kill_all(&self, bound: Duration) -> bool {
        let until = Instant::now() + bound;
        loop {
            // The usual end: nothing left, nothing to freeze.
            if self.is_empty() {
                return true;
            }
            self.signal(Signal::SIGKILL);
            if Instant::now() >= until {
                return self.is_empty();
            }
            std::thread::sleep(KILL_ROUND);
        }
    }

    /// CPU time and peak memory so far.
    pub fn usage(&self) -> Usage {
        match &self.backend {
            Backend::V1(j) => j.usage(),
            Backend::V2(j) => j.usage(),
        }
    }

    /// What the OOM killer did in the job.
    pub fn oom(&self) -> Oom {
        match &self.backend {
            Backend::V1(j) => j.oom(),
            Backend::V2(j) => j.oom(),
        }
    }

    /// Remove the job's cgroup (empty by now).
    pub fn remove(&self) -> io::Result<()> {
        match &self.backend {
            Backend::V1(j) => j.remove(),
            Backend::V2(j) => j.remove(),
        }
    }

    /// The job is over and its cgroup empty: removed, or on v1 kept for a
    /// later job when it ended clean.
    pub fn retire(&self) -> io::Result<()> {
        match &self.backend {
            Backend::V1(j) => j.retire(),
            Backend::V2(j) => j.remove(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::Limits;

    #[tokio::test]
    async fn the_job_knows_when_its_last_task_is_reaped() {
        let tmp = tempfile::tempdir().unwrap();
        let job = v2::Job::create(tmp.path(), "j", &Limits::default()).unwrap();
        let cg = std::sync::Arc::new(JobCgroup::new(Backend::V2(job)));
        cg.tasks_reaped().await;
        cg.place(1).unwrap();
        cg.place(2).unwrap();
        let waiter = {
            let cg = cg.clone();
            tokio::spawn(async move { cg.tasks_reaped().await })
        };
        cg.reaped();
        assert!(!waiter.is_finished());
        cg.reaped();
        tokio::time::timeout(Duration::from_secs(30), waiter)
            .await
            .unwrap()
            .unwrap();
        // More reaps than placements do not wrap around.
        cg.reaped();
        cg.tasks_reaped().await;
    }
}
