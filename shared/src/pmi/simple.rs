//! The PMI-1 simple server of one job on one node: a pure state machine fed
//! with the lines its local tasks write, answering with what to send back.
//!
//! It follows flux-core's `simple_server.c`. The barrier is a fence: once
//! every local task has entered it, the node's pending puts go out as
//! [`Output::Fence`]; whoever carries the exchange across the job's nodes
//! calls [`SimpleServer::fence_done`] with the union, and every task that
//! spoke is released with `barrier_out`. What the engine does not know (the
//! sockets, the other nodes, how an abort ends the job) stays with its
//! caller, so a second wire protocol can share [`super::kvs`] beside it.

use std::collections::BTreeMap;

use super::kvs::{Dict, Kvs};
use super::wire::{self, Request, WireError};

/// What a job's server on one node knows at its start.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The job's kvsname (one per job).
    pub kvsname: String,
    /// Tasks in the whole job.
    pub universe_size: u32,
    /// Tasks on this node: the barrier waits for all of them.
    pub local_size: u32,
}

/// What the caller is to do after a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Write `line` to task `rank`.
    Reply {
        /// The task's global rank.
        rank: u32,
        /// The answer, `\n`-terminated.
        line: String,
    },
    /// Every local task is in the barrier: exchange these keys with the
    /// job's other nodes, then call [`SimpleServer::fence_done`].
    Fence(Dict),
    /// Task `rank` asked to abort the job.
    Abort {
        /// The task's global rank.
        rank: u32,
        /// The exit code it asked for.
        code: u32,
        /// Its message, or flux-core's "aborted".
        message: String,
    },
}

/// Where one task's conversation stands.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Client {
    /// It has sent `init`.
    pub initialized: bool,
    /// It has sent `finalize`.
    pub finalized: bool,
    /// It waits in the current barrier.
    pub in_barrier: bool,
    /// Between `mcmd=spawn` and `endcmd`.
    spawning: bool,
}

/// One job's PMI-1 server on one node.
#[derive(Debug)]
pub struct SimpleServer {
    setup: Setup,
    kvs: Kvs,
    clients: BTreeMap<u32, Client>,
    entered: u32,
    fencing: bool,
}

impl SimpleServer {
    /// A server for `setup`, with nothing put yet.
    pub fn new(setup: Setup) -> SimpleServer {
        SimpleServer {
            setup,
            kvs: Kvs::default(),
            clients: BTreeMap::new(),
            entered: 0,
            fencing: false,
        }
    }

    /// Set a node-local key before the tasks start (`PMI_process_mapping`).
    pub fn preset(&mut self, key: &str, value: &str) {
        self.kvs.preset(key, value);
    }

    /// Where task `rank`'s conversation stands (default: it never spoke).
    pub fn client(&self, rank: u32) -> Client {
        self.clients.get(&rank).copied().unwrap_or_default()
    }

    /// True while a barrier is open on this node: some task has entered it
    /// and not been released.
    pub fn in_barrier(&self) -> bool {
        self.entered > 0 || self.fencing
    }

    /// Handle one line of task `rank`; what to do is pushed onto `out`. An
    /// error means the task broke the protocol.
    pub fn request(
        &mut self,
        rank: u32,
        line: &[u8],
        out: &mut Vec<Output>,
    ) -> Result<(), WireError> {
        let client = self.clients.entry(rank).or_default();
        if client.spawning {
            // A multi-line spawn is read to its end and refused there.
            if wire::is_endcmd(line) {
                client.spawning = false;
                reply(
                    out,
                    rank,
                    format!("cmd=spawn_result rc={}\n", wire::RC_FAIL),
                );
            }
            return Ok(());
        }
        let answer = match wire::parse(line)? {
            Request::Init {
                version,
                subversion,
            } => {
                client.initialized = true;
                wire::init_reply(version, subversion)
            }
            Request::GetMaxes => wire::maxes_reply(),
            Request::GetAppnum => "cmd=appnum rc=0 appnum=0\n".into(),
            Request::GetUniverseSize => {
                format!("cmd=universe_size rc=0 size={}\n", self.setup.universe_size)
            }
            Request::GetMyKvsname => {
                format!("cmd=my_kvsname rc=0 kvsname={}\n", self.setup.kvsname)
            }
            Request::Put(fields) => {
                let rc = match fields {
                    Ok((key, value)) => match self.kvs.put(key, value) {
                        Ok(()) => 0,
                        Err(_) => 2, // PMI_ERR_NOMEM
                    },
                    Err(rc) => rc,
                };
                format!("cmd=put_result rc={rc}\n")
            }
            Request::Get(key) => {
                let value = key.and_then(|k| self.kvs.get(&k).ok_or(wire::RC_INVALID_KEY));
                wire::get_reply(value)
            }
            Request::Finalize => {
                client.finalized = true;
                "cmd=finalize_ack rc=0\n".into()
            }
            Request::Abort { code, message } => {
                out.push(Output::Abort {
                    rank,
                    code,
                    message: message.unwrap_or_else(|| "aborted".into()),
                });
                return Ok(());
            }
            Request::NotImplemented(answer) => {
                format!(
                    "cmd={answer} rc={} msg=command not implemented\n",
                    wire::RC_FAIL
                )
            }
            Request::SpawnStart => {
                client.spawning = true;
                return Ok(());
            }
            Request::BarrierIn => return self.barrier_in(rank, out),
        };
        reply(out, rank, answer);
        Ok(())
    }

    fn barrier_in(&mut self, rank: u32, out: &mut Vec<Output>) -> Result<(), WireError> {
        let client = self.clients.entry(rank).or_default();
        if client.in_barrier {
            return Err(WireError::OutOfOrder(
                "barrier_in while already in the barrier",
            ));
        }
        client.in_barrier = true;
        self.entered += 1;
        if self.entered >= self.setup.local_size {
            self.entered = 0;
            self.fencing = true;
            out.push(Output::Fence(self.kvs.take_pending()));
        }
        Ok(())
    }

    /// The exchange of the current barrier is over: `Ok` with the union of
    /// every node's keys, `Err` when it failed. Every task that spoke is
    /// released.
    pub fn fence_done(&mut self, merged: Result<Dict, ()>, out: &mut Vec<Output>) {
        let rc = match merged {
            Ok(dict) => {
                self.kvs.commit(dict);
                0
            }
            Err(()) => wire::RC_FAIL,
        };
        self.fencing = false;
        for (&rank, client) in self.clients.iter_mut() {
            if client.in_barrier {
                client.in_barrier = false;
                reply(out, rank, wire::barrier_out(rc));
            }
        }
    }
}

fn reply(out: &mut Vec<Output>, rank: u32, line: String) {
    out.push(Output::Reply { rank, line });
}
