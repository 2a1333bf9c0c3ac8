//! The PMI server of one job on this exec process (Flux RFC 13, the PMI-1
//! simple wire protocol; `../shared/spec/rfc13-pmi.md`).
//!
//! Each local task gets one end of a socket pair as `PMI_FD`, with
//! `PMI_RANK`, `PMI_SIZE` and `PMI_SPAWNED` beside it; the other end is a
//! [`client::Client`] whose lines the job's driver feeds to the pure engine
//! ([`fluxgate_shared::pmi::SimpleServer`]). A barrier is a fence across
//! the job's exec processes, an allgather up and down the job's tree of
//! them (`crate::job::tree`), carried by the driver over the streams it
//! already has:
//!
//! ```text
//! every process: its local tasks' keys (once all are in the barrier)
//!                + each child's subtree keys -> one union
//! a part:        StartResponse{pmi: union} to its parent
//! the leader:    the union is the job's -> Exec.PmiFence(job's) to each child
//! a part, given the job's keys: Exec.PmiFence to each child, then its tasks
//!         all sides then answer barrier_out to their tasks; gets are local
//! ```
//!
//! O(exec processes) messages per barrier, at most fan-out + 1 of them
//! through any one process, O(log exec processes) hops on its path. The
//! engine knows nothing of sockets or nodes, so a second wire protocol
//! (PMI-2, PMIx) can be served beside this one from the same key-value
//! space.

pub mod client;

use std::collections::HashMap;
use std::os::fd::OwnedFd;

use fluxgate_shared::pmi::{Dict, Output, Setup, SimpleServer};
use fluxgate_shared::taskmap::Taskmap;
use tokio::sync::mpsc;

use self::client::Client;
pub use self::client::ClientEvent;

/// Events queued from all of a job's PMI connections on this process.
const EVENT_CAPACITY: usize = 256;

/// What the driver must do after a PMI event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Every local task is in the barrier: exchange these keys.
    Fence(Dict),
    /// End the job with a fatal `exec` exception carrying this note.
    Abort(String),
}

/// A task's end of its PMI connection, and the variables that name it.
#[derive(Debug)]
pub struct TaskEnd {
    /// The descriptor the task inherits.
    pub fd: OwnedFd,
    /// `PMI_FD`, `PMI_RANK`, `PMI_SIZE`, `PMI_SPAWNED`.
    pub env: Vec<(String, String)>,
}

/// One job's PMI server on this process.
#[derive(Debug)]
pub struct JobPmi {
    server: SimpleServer,
    clients: HashMap<u32, Client>,
    events: mpsc::Sender<ClientEvent>,
    universe: u32,
    aborting: bool,
    /// A task that started PMI and exited without finalizing: a barrier
    /// on this node can no longer complete.
    departed: Option<u32>,
}

impl JobPmi {
    /// A server for a job of `universe` tasks, `local` of them here, placed
    /// as `taskmap` says; the receiver delivers its connections' events.
    pub fn new(
        kvsname: String,
        universe: u32,
        local: u32,
        taskmap: &Taskmap,
    ) -> (JobPmi, mpsc::Receiver<ClientEvent>) {
        let mut server = SimpleServer::new(Setup {
            kvsname,
            universe_size: universe,
            local_size: local,
        });
        let mapping = taskmap.to_pmi();
        // As flux-core: MPICH copes with a missing mapping, not a truncated one.
        if mapping.len() < fluxgate_shared::pmi::wire::VAL_MAX {
            server.preset("PMI_process_mapping", &mapping);
        }
        let json = taskmap.to_json();
        if json.len() < fluxgate_shared::pmi::wire::VAL_MAX {
            server.preset("flux.taskmap", &json);
        }
        server.preset("flux.instance-level", "0");
        let (events, rx) = mpsc::channel(EVENT_CAPACITY);
        let pmi = JobPmi {
            server,
            clients: HashMap::new(),
            events,
            universe,
            aborting: false,
            departed: None,
        };
        (pmi, rx)
    }

    /// Open task `rank`'s connection: the service keeps one end, the task
    /// gets the other.
    pub fn connect(&mut self, rank: u32) -> std::io::Result<TaskEnd> {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
        let client = Client::serve(rank, OwnedFd::from(ours), self.events.clone())?;
        self.clients.insert(rank, client);
        let fd = OwnedFd::from(theirs);
        let number = std::os::fd::AsRawFd::as_raw_fd(&fd);
        let env = vec![
            ("PMI_FD".to_string(), number.to_string()),
            ("PMI_RANK".to_string(), rank.to_string()),
            ("PMI_SIZE".to_string(), self.universe.to_string()),
            ("PMI_SPAWNED".to_string(), "0".to_string()),
        ];
        Ok(TaskEnd { fd, env })
    }

    /// Handle one event of a connection.
    pub fn on_event(&mut self, ev: ClientEvent) -> Option<Step> {
        match ev {
            ClientEvent::Line { rank, line } => {
                let mut out = Vec::new();
                match self.server.request(rank, &line, &mut out) {
                    Ok(()) => self.carry(out).or_else(|| self.stranded()),
                    Err(e) => self.broken(rank, &e.to_string()),
                }
            }
            ClientEvent::Broken { rank, why } => self.broken(rank, &why),
            ClientEvent::Closed { rank } => {
                self.clients.remove(&rank);
                None
            }
        }
    }

    /// The barrier's exchange is over (`Err`: it failed): release the tasks.
    pub fn fence_done(&mut self, merged: Result<Dict, ()>) {
        let mut out = Vec::new();
        self.server.fence_done(merged, &mut out);
        // Releasing tasks only writes answers: no further step comes of it.
        let _ = self.carry(out);
    }

    /// The job is being torn down: what its tasks do from now on is no
    /// longer a reason to end it.
    pub fn ending(&mut self) {
        self.aborting = true;
    }

    /// Task `rank` has exited: a task that started PMI and left without
    /// finalizing would leave the others waiting forever in this node's
    /// next barrier, so the job ends (as an abort does) once one is
    /// entered, or at once if one is open. Any other exit is the exit
    /// timeout's business, as in flux-core.
    pub fn task_exited(&mut self, rank: u32) -> Option<Step> {
        self.clients.remove(&rank);
        let c = self.server.client(rank);
        if self.aborting || !c.initialized || c.finalized {
            return None;
        }
        self.departed.get_or_insert(rank);
        self.stranded()
    }

    /// Tasks wait in a barrier that a departed task will never enter.
    fn stranded(&mut self) -> Option<Step> {
        let rank = self.departed?;
        if self.aborting || !self.server.in_barrier() {
            return None;
        }
        self.aborting = true;
        Some(Step::Abort(format!(
            "PMI_Abort: task {rank} exited before PMI_Finalize while others waited"
        )))
    }

    fn carry(&mut self, out: Vec<Output>) -> Option<Step> {
        let mut step = None;
        for o in out {
            match o {
                Output::Reply { rank, line } => {
                    if let Some(c) = self.clients.get(&rank)
                        && !c.reply(line)
                    {
                        tracing::debug!(rank, "PMI answer dropped: the task is not reading");
                    }
                }
                Output::Fence(keys) => step = Some(Step::Fence(keys)),
                Output::Abort { message, .. } if !self.aborting => {
                    self.aborting = true;
                    step = Some(Step::Abort(format!("PMI_Abort: {message}")));
                }
                Output::Abort { .. } => {}
            }
        }
        step
    }

    /// A task broke the protocol: fatal, as in flux-core, unless the job is
    /// already being aborted (tasks being killed may write half a line).
    fn broken(&mut self, rank: u32, why: &str) -> Option<Step> {
        self.clients.remove(&rank);
        if self.aborting {
            return None;
        }
        self.aborting = true;
        Some(Step::Abort(format!(
            "PMI-1 wire protocol error (task {rank}): {why}"
        )))
    }
}
