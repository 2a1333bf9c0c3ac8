//! Node membership: exec services join, heartbeat and leave; the inventory is
//! defined from configuration or from what the nodes report.
//!
//! Protocol (the Node.Join stream, see proto/fluxgate/v1/exec.proto): an exec
//! process sends Hello with the nodes it serves and its own address; the core
//! maps each hostname to a rank (R file or nodelist order, or join order when
//! only a size is configured), answers Welcome with the ranks, and marks them
//! up. A broken stream marks them down.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use fluxgate_shared::rset::Node;
use fluxgate_shared::{Hostlist, IdSet, JobId, JobState, ResourceSet};
use tokio::sync::oneshot;

use super::Core;
use crate::store::Store;

/// One node an exec process serves.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeInfo {
    /// Its hostname.
    pub hostname: String,
    /// Core ids it found.
    pub cores: IdSet,
    /// Gpu ids it found.
    pub gpus: IdSet,
}

/// The jobs a hello lists.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HelloJobs {
    /// Jobs the exec service still runs.
    pub running: Vec<JobId>,
    /// Jobs that ended there lately, whose ends it holds.
    pub ended: Vec<JobId>,
}

/// Why a join stream's hello is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JoinRefused {
    /// The hello lists no node.
    #[error("hello names no node")]
    NoNode,
    /// Every rank of a size-configured instance is taken.
    #[error("host {host} cannot join: the instance already has its {size} nodes")]
    Full { host: String, size: u32 },
    /// The host is not one of the configured ones.
    #[error("host {0} is not in this instance's resource inventory")]
    Unknown(String),
}

/// When each join session was last heard: written by the join streams as
/// heartbeats arrive, taken by the core once a tick. Thousands of nodes
/// heartbeat every few seconds; this way a heartbeat costs its stream a
/// short lock, not a message to the core and a wake-up of its task.
#[derive(Debug, Clone, Default)]
pub struct Heartbeats(Arc<Mutex<HashMap<u64, Instant>>>);

impl Heartbeats {
    /// Session `session` was heard now.
    pub fn beat(&self, session: u64) {
        self.lock().insert(session, Instant::now());
    }

    /// Every session of `sessions` was heard now (a relay's heartbeat).
    pub fn beat_all(&self, sessions: impl IntoIterator<Item = u64>) {
        let now = Instant::now();
        let mut map = self.lock();
        for s in sessions {
            map.insert(s, now);
        }
    }

    /// What was heard since the last take.
    fn take(&self) -> HashMap<u64, Instant> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Instant>> {
        // Each change is one insert or one take: a poisoned map is whole.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Messages from the join streams.
#[derive(Debug)]
pub enum NodeMsg {
    /// A join stream said hello; answer the ranks or why not.
    Hello {
        session: u64,
        nodes: Vec<NodeInfo>,
        addr: String,
        jobs: HelloJobs,
        reply: oneshot::Sender<Result<Vec<u32>, JoinRefused>>,
    },
    /// A heartbeat on a join stream, told at once (the service records
    /// them in [`Heartbeats`] instead).
    Heartbeat { session: u64 },
    /// The join stream ended.
    Gone { session: u64 },
}

/// Where ranks come from.
#[derive(Debug)]
enum Source {
    /// The inventory is known: hostnames map to its ranks.
    Fixed,
    /// Hostnames in rank order; resources come from the nodes.
    Nodelist(Vec<String>),
    /// This many nodes, ranked in join order.
    Size(u32),
}

/// Membership state.
#[derive(Debug)]
pub struct Nodes {
    source: Source,
    rank_of_host: HashMap<String, u32>,
    discovered: BTreeMap<u32, NodeInfo>,
    sessions: HashMap<u64, Vec<u32>>,
    session_of_rank: HashMap<u32, u64>,
    online: IdSet,
}

impl Nodes {
    /// Membership for a known inventory.
    pub fn fixed(inventory: &ResourceSet) -> Self {
        let rank_of_host = inventory
            .nodes()
            .iter()
            .filter_map(|n| n.hostname().map(|h| (h.to_string(), n.rank())))
            .collect();
        Self::with(Source::Fixed, rank_of_host)
    }

    /// Membership for a nodelist whose resources are discovered.
    pub fn nodelist(hosts: &Hostlist) -> Self {
        let names: Vec<String> = hosts.iter().collect();
        let rank_of_host = names
            .iter()
            .enumerate()
            .map(|(i, h)| (h.clone(), i as u32))
            .collect();
        Self::with(Source::Nodelist(names), rank_of_host)
    }

    /// Membership for `size` nodes in join order.
    pub fn size(size: u32) -> Self {
        Self::with(Source::Size(size), HashMap::new())
    }

    fn with(source: Source, rank_of_host: HashMap<String, u32>) -> Self {
        Nodes {
            source,
            rank_of_host,
            discovered: BTreeMap::new(),
            sessions: HashMap::new(),
            session_of_rank: HashMap::new(),
            online: IdSet::new(),
        }
    }

    /// Ranks whose exec service is connected.
    pub fn online(&self) -> &IdSet {
        &self.online
    }

    /// Hostnames by rank, when configuration names them.
    pub fn hosts(&self) -> Option<Hostlist> {
        match &self.source {
            Source::Nodelist(names) => {
                let mut hl = Hostlist::new();
                for n in names {
                    hl.push(n).ok()?;
                }
                Some(hl)
            }
            _ => None,
        }
    }

    fn rank_for(&mut self, host: &str) -> Result<u32, JoinRefused> {
        if let Some(r) = self.rank_of_host.get(host) {
            return Ok(*r);
        }
        match self.source {
            Source::Size(n) if (self.rank_of_host.len() as u32) < n => {
                let r = self.rank_of_host.len() as u32;
                self.rank_of_host.insert(host.to_string(), r);
                Ok(r)
            }
            Source::Size(size) => Err(JoinRefused::Full {
                host: host.to_string(),
                size,
            }),
            _ => Err(JoinRefused::Unknown(host.to_string())),
        }
    }

    /// The inventory, once every expected node has reported (discovery only).
    fn discovered_inventory(&self) -> Option<ResourceSet> {
        let expected = match &self.source {
            Source::Fixed => return None,
            Source::Nodelist(names) => names.len(),
            Source::Size(n) => *n as usize,
        };
        if self.discovered.len() < expected {
            return None;
        }
        let nodes = self
            .discovered
            .iter()
            .map(|(rank, n)| Node::new(*rank, Some(&n.hostname), n.cores.clone(), n.gpus.clone()));
        match ResourceSet::from_nodes(nodes) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::error!(error = %e, "discovered resources do not form an R");
                None
            }
        }
    }
}

impl<S: Store> Core<S> {
    /// Where the join streams record heartbeats for this core.
    pub fn heartbeats(&self) -> Heartbeats {
        self.beats.clone()
    }

    /// Apply the heartbeats heard since the last tick.
    pub(super) fn take_heartbeats(&mut self) {
        for (session, at) in self.beats.take() {
            if let Some(ranks) = self.nodes.sessions.get(&session).cloned() {
                self.heartbeat(&ranks, at);
            }
        }
    }

    pub(super) fn node_msg(&mut self, msg: NodeMsg) {
        match msg {
            NodeMsg::Hello {
                session,
                nodes,
                addr,
                jobs,
                reply,
            } => {
                let r = self.node_hello(session, nodes, addr.clone());
                if let Ok(ranks) = &r {
                    self.reconcile(ranks, &addr, jobs);
                }
                let _ = reply.send(r);
            }
            NodeMsg::Heartbeat { session } => {
                let ranks = self
                    .nodes
                    .sessions
                    .get(&session)
                    .cloned()
                    .unwrap_or_default();
                self.heartbeat(&ranks, Instant::now());
            }
            NodeMsg::Gone { session } => self.node_gone(session),
        }
    }

    fn node_hello(
        &mut self,
        session: u64,
        nodes: Vec<NodeInfo>,
        addr: String,
    ) -> Result<Vec<u32>, JoinRefused> {
        if nodes.is_empty() {
            return Err(JoinRefused::NoNode);
        }
        let mut ranks = Vec::with_capacity(nodes.len());
        for n in &nodes {
            ranks.push(self.nodes.rank_for(&n.hostname)?);
        }
        let defined_before = self.sched.pool().is_some();
        let mut online = IdSet::new();
        for (rank, info) in ranks.iter().zip(nodes) {
            // A node that re-joins replaces its previous stream.
            if let Some(old) = self.nodes.session_of_rank.insert(*rank, session)
                && old != session
                && let Some(list) = self.nodes.sessions.get_mut(&old)
            {
                list.retain(|r| r != rank);
            }
            self.nodes.discovered.insert(*rank, info);
            self.exec.set(*rank, addr.clone());
            if !self.nodes.online.contains(*rank) {
                online.insert(*rank);
            }
            self.nodes.online.insert(*rank);
            self.res.heard(*rank, std::time::Instant::now());
        }
        self.nodes
            .sessions
            .entry(session)
            .or_default()
            .extend(ranks.iter().copied());
        if !online.is_empty() {
            self.post_resource(fluxgate_shared::resource::ResourceEvent::Online { idset: online });
        }
        if !defined_before && let Some(inventory) = self.nodes.discovered_inventory() {
            tracing::info!(nodes = inventory.nnodes(), "resources defined by discovery");
            self.define_discovered(inventory, true);
        }
        tracing::info!(?ranks, addr, "nodes joined");
        self.out.resched = true;
        self.retry_deferred_starts();
        Ok(ranks)
    }

    fn node_gone(&mut self, session: u64) {
        let Some(ranks) = self.nodes.sessions.remove(&session) else {
            return;
        };
        let mut down = IdSet::new();
        for rank in ranks {
            if self.nodes.session_of_rank.get(&rank) == Some(&session) {
                self.nodes.session_of_rank.remove(&rank);
                self.exec.remove(rank);
                self.nodes.online.remove(rank);
                down.insert(rank);
            }
        }
        if down.is_empty() {
            return;
        }
        tracing::warn!(ranks = %down, "nodes left");
        self.post_resource(fluxgate_shared::resource::ResourceEvent::Offline {
            idset: down.clone(),
        });
        // Its jobs are not failed here: a broken stream may be a partition
        // that heals, and the node's tasks run on meanwhile. They fail when
        // the node is lost (silent past the lost timeout, `check_torpid`),
        // or when it comes back without them (the reattach says so).
    }

    /// Raise node-failure on every running job with a rank in `down`, as
    /// flux-core does, its note naming the hosts after `why`; a job is
    /// failed once (it leaves RUN).
    pub(super) fn fail_jobs_on(&mut self, down: &IdSet, why: &str) {
        let hit: Vec<_> = self
            .jobs
            .iter()
            .filter(|(_, a)| {
                a.job.state() == JobState::Run
                    && a.r
                        .as_ref()
                        .is_some_and(|r| r.nodes().iter().any(|n| down.contains(n.rank())))
            })
            .map(|(id, a)| {
                let hosts: Vec<String> =
                    a.r.iter()
                        .flat_map(|r| r.nodes())
                        .filter(|n| down.contains(n.rank()))
                        .map(|n| {
                            format!(
                                "rank {} ({})",
                                n.rank(),
                                n.hostname().unwrap_or("unknown host")
                            )
                        })
                        .collect();
                (*id, hosts.join(", "))
            })
            .collect();
        for (id, hosts) in hit {
            let note = format!("{why} {hosts}");
            let _ = self.raise(id, "node-failure", 0, &note, None);
        }
    }

    /// A node that joined listed `jobs`: those it runs that this job
    /// manager has ended (or never knew on these ranks) are killed there;
    /// those it believes running whose contact was lost are reattached (the
    /// node then says how they went, their real end included).
    fn reconcile(&mut self, ranks: &[u32], addr: &str, jobs: HelloJobs) {
        for id in jobs.running {
            let here = self.jobs.get(&id).is_some_and(|a| {
                !a.job.is_released()
                    && a.r
                        .as_ref()
                        .is_some_and(|r| r.nodes().iter().any(|n| ranks.contains(&n.rank())))
            });
            if here {
                continue;
            }
            tracing::warn!(job = %id, addr, "a rejoining node runs a job that has ended here: killing it");
            self.effect(super::effect::Effect::ExecKill {
                addr: addr.to_string(),
                id,
                kind: "exec".to_string(),
                note: "the job manager has ended this job".to_string(),
            });
        }
        // Jobs whose contact was lost, running there or ended, are
        // reattached on the next tick now that their node answers.
        if !jobs.ended.is_empty() {
            tracing::debug!(
                addr,
                ended = jobs.ended.len(),
                "a rejoining node holds ended jobs"
            );
        }
    }
}
