//! A job's containment on this node, as its driver sees it: the job's
//! cgroup made with its limits before the first task, signals to every
//! process in it, the kill of what is left once the tasks are gone, the
//! OOM killer's doings as a job exception, and the usage read at the end.

use std::sync::Arc;
use std::time::Duration;

use fluxgate_proto::v1::NodeUsage;
use fluxgate_shared::IdSet;
use nix::sys::signal::Signal;
use tokio::time::Instant;

use crate::cgroup::{Cgroups, JobCgroup, Oom};
use crate::layout::RankTasks;
use fluxgate_shared::size;

/// How long processes a job's tasks left behind (a `setsid` child holding
/// their output open) may go on once every task has exited.
pub const EXIT_GRACE: Duration = Duration::from_secs(5);
/// One round of the whole-tree kill at the end of a job; rounds repeat,
/// with a warning each, until the cgroup is empty.
const KILL_ROUND: Duration = Duration::from_secs(5);

/// The job's cgroup here, if jobs are contained.
#[derive(Debug, Default)]
pub struct Contain {
    cgroup: Option<Arc<JobCgroup>>,
    /// When to kill what the tasks left behind.
    linger_until: Option<Instant>,
    /// Set once the grace has been given.
    lingered: bool,
    /// OOM kills already reported.
    oom_reported: u64,
    /// Ranks of R this process runs, and the host, for usage and notes.
    ranks: String,
    host: String,
}

impl Contain {
    /// Make the cgroup of job `id` for the `local` ranks; the exception
    /// note when it cannot be made or the job's options are wrong.
    pub async fn create(
        cgroups: &Arc<Cgroups>,
        id: u64,
        jobspec: &fluxgate_shared::Jobspec,
        local: &[RankTasks],
        host: String,
    ) -> Result<Contain, String> {
        let cores: IdSet = local.iter().flat_map(|r| r.cores.iter().copied()).collect();
        let count = local.iter().map(|r| r.cores.len() as u64).sum();
        let limits = cgroups.job_limits(jobspec, &cores, count)?;
        let ranks = local.iter().map(|r| r.rank).collect::<IdSet>().to_string();
        if let Some(cgroup) = cgroups.reused_job(id, &limits) {
            return Ok(Contain {
                cgroup: Some(cgroup),
                ranks,
                host,
                ..Contain::default()
            });
        }
        // Making a cgroup waits on the kernel (milliseconds on v1): off
        // the async workers.
        let made = {
            let cgroups = Arc::clone(cgroups);
            tokio::task::spawn_blocking(move || cgroups.job(id, &limits))
                .await
                .map_err(|e| std::io::Error::other(e.to_string()))
                .and_then(|r| r)
        };
        let cgroup = made.map_err(|e| format!("cannot make the job's cgroup on {host}: {e}"))?;
        Ok(Contain {
            cgroup,
            ranks,
            host,
            ..Contain::default()
        })
    }

    /// The cgroup tasks join.
    pub fn cgroup(&self) -> Option<Arc<JobCgroup>> {
        self.cgroup.clone()
    }

    /// What reads the job's usage here while it runs, when it has a cgroup.
    pub fn meter(&self) -> Option<Meter> {
        self.cgroup.clone().map(|cgroup| Meter {
            cgroup,
            ranks: self.ranks.clone(),
            host: self.host.clone(),
        })
    }

    /// Signal every process of the job; false when there is no cgroup
    /// (the caller signals the tasks' process groups).
    pub fn signal(&self, signal: Signal) -> bool {
        match &self.cgroup {
            Some(cg) => {
                cg.signal(signal);
                true
            }
            None => false,
        }
    }

    /// The job's processes, when it has a cgroup: whom a signal by pid may
    /// reach (a pid not listed may have been reaped, and reused).
    pub fn members(&self) -> Option<Vec<i32>> {
        self.cgroup.as_ref().map(|cg| cg.procs())
    }

    /// The cgroup, while its tasks' end is yet to be seen.
    pub fn awaiting_tasks(&self) -> Option<Arc<JobCgroup>> {
        self.cgroup
            .clone()
            .filter(|_| self.linger_until.is_none() && !self.lingered)
    }

    /// Every task has been reaped: what is left gets [`EXIT_GRACE`].
    pub fn tasks_gone(&mut self) {
        self.linger_until = Some(Instant::now() + EXIT_GRACE);
    }

    /// When the grace of what the tasks left behind ends.
    pub fn linger_until(&self) -> Option<Instant> {
        self.linger_until
    }

    /// The grace is over: kill what is left (in the background; its output
    /// ends and the job with it).
    pub fn end_grace(&mut self) {
        self.linger_until = None;
        self.lingered = true;
        if let Some(cg) = self.cgroup.clone() {
            let left = cg.procs().len();
            if left > 0 {
                tracing::info!(left, "killing what the job's tasks left running");
                tokio::task::spawn_blocking(move || cg.kill_all(KILL_ROUND));
            }
        }
    }

    /// The exception note for OOM kills not yet reported.
    pub fn new_oom(&mut self) -> Option<String> {
        let oom = self.cgroup.as_ref()?.oom();
        if oom.kills <= self.oom_reported {
            return None;
        }
        self.oom_reported = oom.kills;
        Some(oom_note(&oom, &self.host))
    }

    /// Kill everything left in the job's cgroup and wait until it is empty,
    /// read what the job used, and remove the cgroup.
    pub async fn end(&mut self) -> Option<NodeUsage> {
        let cg = self.cgroup.clone()?;
        let emptied = cg.clone();
        let mut rounds = 0u32;
        // Usually empty by now: no thread handed the kill.
        while !emptied.is_empty() {
            let cg = emptied.clone();
            let empty = tokio::task::spawn_blocking(move || cg.kill_all(KILL_ROUND))
                .await
                .unwrap_or(false);
            if empty {
                break;
            }
            rounds = rounds.saturating_add(1);
            tracing::warn!(
                rounds,
                left = emptied.procs().len(),
                "the job's cgroup does not empty: the job is not released on this node"
            );
        }
        let usage = self.meter().map(|m| m.read());
        // Empty now; its removal or reuse (slow on v1) need not hold the
        // release.
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || {
            let _job = span.enter();
            if let Err(e) = cg.retire() {
                tracing::warn!(error = %e, "cannot remove the job's cgroup");
            }
        });
        usage
    }
}

/// Reads what a job has used on this node from its cgroup, live (for
/// `Tasks`) or at its end.
#[derive(Debug, Clone)]
pub struct Meter {
    cgroup: Arc<JobCgroup>,
    ranks: String,
    host: String,
}

impl Meter {
    /// CPU time and peak memory so far, in the exec services' wire form.
    pub fn read(&self) -> NodeUsage {
        let usage = self.cgroup.usage();
        NodeUsage {
            ranks: self.ranks.clone(),
            hostname: self.host.clone(),
            user_ns: usage.user_ns,
            system_ns: usage.system_ns,
            peak_memory: usage.peak_memory.unwrap_or(0),
        }
    }
}

/// What a job is told when the OOM killer ended some of its processes.
fn oom_note(oom: &Oom, host: &str) -> String {
    let limit = oom.limit.filter(|&l| l < u64::MAX / 2).map_or_else(
        || "its memory limit".to_string(),
        |l| format!("its memory limit of {}", size::display(l)),
    );
    let by = match (oom.peak, oom.limit) {
        (Some(p), Some(l)) if p > l => format!(", by {}", size::display(p - l)),
        _ => String::new(),
    };
    let peak = oom
        .peak
        .map(|p| format!(" (peak use {})", size::display(p)))
        .unwrap_or_default();
    format!(
        "the job went over {limit} on {host}{by}{peak}: the out-of-memory killer \
         ended {} of its processes",
        oom.kills
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oom_note_names_the_limit_the_host_and_the_peak() {
        let oom = Oom {
            kills: 1,
            limit: Some(64 << 20),
            peak: Some(64 << 20),
        };
        let note = oom_note(&oom, "node0");
        assert!(
            note.contains("went over its memory limit of 64M on node0"),
            "{note}"
        );
        assert!(note.contains("peak use 64M"), "{note}");
        let over = Oom {
            peak: Some(80 << 20),
            ..oom
        };
        assert!(oom_note(&over, "n").contains("by 16M"));
    }
}
