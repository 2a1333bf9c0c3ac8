//! The processes of a job's tasks, and its usage so far, for `Exec.Tasks`
//! (`flux job hostpids`, `fluxgate job usage` of a running job).
//!
//! The job's driver records each task it launches here, its cgroup's meter,
//! and its children in the job's tree, which run (or start) the other ranks
//! of its subtree; the RPC reads the record directly rather than
//! asking the driver, which may be stalled on a full response channel (see
//! [`super`]). A task that has exited stays listed with the pid it had, as
//! flux's MPIR process table does: the list describes the job's launch.

use std::collections::HashMap;
use std::sync::Mutex;

use fluxgate_proto::v1::{ExecTaskProcess, NodeUsage};
use fluxgate_shared::JobId;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::contain::Meter;
use super::peer::Peer;
use super::stdin::Chunk;
use crate::error::ExecError;

/// One task's process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskProc {
    /// The task's global rank.
    pub task_rank: u32,
    /// The rank of R it runs on.
    pub node_rank: u32,
    /// That rank's hostname.
    pub hostname: String,
    /// Its process id.
    pub pid: i32,
}

impl From<TaskProc> for ExecTaskProcess {
    fn from(t: TaskProc) -> Self {
        ExecTaskProcess {
            task_rank: t.task_rank,
            node_rank: t.node_rank,
            hostname: t.hostname,
            pid: t.pid,
        }
    }
}

impl From<ExecTaskProcess> for TaskProc {
    fn from(t: ExecTaskProcess) -> Self {
        TaskProc {
            task_rank: t.task_rank,
            node_rank: t.node_rank,
            hostname: t.hostname,
            pid: t.pid,
        }
    }
}

/// What a job has launched on this process, and who runs the rest.
#[derive(Debug, Default)]
pub struct Procs {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Set with the job's `start` response: every local task has been
    /// launched (or failed to) and every peer has said `start`.
    started: bool,
    local: Vec<TaskProc>,
    peers: Vec<Peer>,
    /// Where input for the local tasks goes, when the job takes input.
    stdin: Option<mpsc::Sender<Chunk>>,
    /// Reads the job's usage here, when it has a cgroup.
    meter: Option<Meter>,
}

/// What [`Procs::snapshot`] gives once the job has started.
#[derive(Debug)]
pub struct Snapshot {
    /// The tasks launched on this process.
    pub local: Vec<TaskProc>,
    /// The children in the job's tree, answering for the rest of the subtree.
    pub peers: Vec<Peer>,
    /// Reads the job's usage here, when it has a cgroup.
    pub meter: Option<Meter>,
}

/// A job's tasks and its usage so far, over a subtree of its nodes.
#[derive(Debug, Default)]
pub struct Gathered {
    /// The tasks, in task rank order.
    pub tasks: Vec<TaskProc>,
    /// Each node's usage so far, where the job has a cgroup.
    pub usage: Vec<NodeUsage>,
}

impl Procs {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic elsewhere while holding the lock leaves the lists intact.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Record a task just launched.
    pub fn add(&self, task: TaskProc) {
        self.lock().local.push(task);
    }

    /// Record where the local tasks' input goes.
    pub fn set_stdin(&self, stdin: mpsc::Sender<Chunk>) {
        self.lock().stdin = Some(stdin);
    }

    /// Where the local tasks' input goes (none when the job takes no
    /// input), and the peers running the other tasks.
    pub fn input_targets(&self) -> (Option<mpsc::Sender<Chunk>>, Vec<Peer>) {
        let inner = self.lock();
        (inner.stdin.clone(), inner.peers.clone())
    }

    /// Record the children in the job's tree, which answer for the rest of
    /// this process's subtree.
    pub fn set_peers(&self, peers: Vec<Peer>) {
        self.lock().peers = peers;
    }

    /// Record what reads the job's usage here.
    pub fn set_meter(&self, meter: Option<Meter>) {
        self.lock().meter = meter;
    }

    /// The job has said `start`: its list is complete.
    pub fn mark_started(&self) {
        self.lock().started = true;
    }

    /// The local tasks and the peers, once the job has started.
    pub fn snapshot(&self) -> Option<Snapshot> {
        let inner = self.lock();
        inner.started.then(|| Snapshot {
            local: inner.local.clone(),
            peers: inner.peers.clone(),
            meter: inner.meter.clone(),
        })
    }
}

/// Every task of job `id` in this process's subtree and the usage so far
/// of its nodes: the local ones of `snapshot` and each child's (its whole
/// subtree's), asked of all children at once; tasks in task rank order.
pub async fn gather(id: JobId, snapshot: Snapshot) -> Result<Gathered, ExecError> {
    let Snapshot {
        mut local,
        peers,
        meter,
    } = snapshot;
    // A few small reads of the cgroup's files, which never wait on a disk.
    let mut usage: Vec<NodeUsage> = meter.iter().map(Meter::read).collect();
    let mut asks = JoinSet::new();
    // Which peer each ask went to, for the error that names it.
    let mut asked = HashMap::new();
    for peer in peers {
        let who = (peer.address.clone(), peer.ranks.to_string());
        let ask = asks.spawn(async move { peer.tasks(id.into()).await });
        asked.insert(ask.id(), who);
    }
    while let Some(joined) = asks.join_next_with_id().await {
        let (ask, answer) = match joined {
            Ok((ask, answer)) => (ask, answer),
            Err(e) => (e.id(), Err(e.to_string())),
        };
        let (address, ranks) = asked.remove(&ask).unwrap_or_default();
        let answer = answer.map_err(|error| ExecError::PeerTasks {
            address,
            ranks,
            error,
        })?;
        local.extend(answer.tasks.into_iter().map(TaskProc::from));
        usage.extend(answer.usage);
    }
    local.sort_by_key(|t| t.task_rank);
    Ok(Gathered {
        tasks: local,
        usage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(task_rank: u32, pid: i32) -> TaskProc {
        TaskProc {
            task_rank,
            node_rank: 0,
            hostname: "node0".into(),
            pid,
        }
    }

    #[test]
    fn nothing_is_listed_before_the_start() {
        let procs = Procs::default();
        procs.add(task(1, 11));
        assert!(procs.snapshot().is_none());
        procs.add(task(0, 10));
        procs.mark_started();
        let snap = procs.snapshot().expect("started");
        assert_eq!(snap.local, [task(1, 11), task(0, 10)]);
        assert!(snap.peers.is_empty());
    }

    #[tokio::test]
    async fn without_peers_the_local_tasks_come_in_rank_order() {
        let snap = Snapshot {
            local: vec![task(2, 12), task(0, 10), task(1, 11)],
            peers: Vec::new(),
            meter: None,
        };
        let all = gather(JobId::from(1), snap).await.unwrap();
        assert!(all.usage.is_empty());
        let ranks: Vec<u32> = all.tasks.iter().map(|t| t.task_rank).collect();
        assert_eq!(ranks, [0, 1, 2]);
    }

    #[test]
    fn the_wire_form_keeps_every_field() {
        let t = TaskProc {
            task_rank: 3,
            node_rank: 2,
            hostname: "node2".into(),
            pid: 4242,
        };
        assert_eq!(TaskProc::from(ExecTaskProcess::from(t.clone())), t);
    }
}
