//! RFC 20 resource sets (R version 1): parse, emit, count, combine, allocate.
//!
//! A [`ResourceSet`] holds one [`Node`] per execution target (rank), kept
//! sorted by rank, with the core and gpu ids it controls and its hostname.
//! Properties are kept per set as `name -> ranks` (the shape R stores them
//! in), so a 16k-node set with a handful of properties stays small.
//!
//! Semantics follow flux-core's librlist (`rlist.c`, `rnode.c`), which is
//! what `flux R` and the schedulers use; where it differs from RFC 20's
//! wording the code says so.

mod config;
mod constraint;
pub mod constraint_query;
mod execution;
mod expiration;
mod json;
mod ops;
mod properties;
mod typed;

pub mod alloc;

use std::collections::BTreeMap;

use crate::hostlist::Hostlist;
use crate::idset::{EncodeFlags, IdSet};

pub use alloc::{AllocError, AllocMode, AllocRequest, Pool};
pub use constraint::Constraint;
pub use constraint_query::{QueryError, parse_query, requires_constraint};
pub use expiration::{ExpirationError, job_expiration, running_job_expiration};
pub use properties::validate_property_name;

/// Why an R object or an operation on one was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RsetError {
    /// The text is not JSON at all.
    #[error("R is not valid JSON: {0}")]
    Json(String),
    /// A key of R is missing, has the wrong type or a bad value.
    #[error("R {key}: {reason}")]
    Invalid {
        /// Dotted path of the offending key, e.g. `execution.R_lite[0].rank`.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The same core or gpu of a rank appears in both sets of a disjoint merge.
    #[error("resource sets overlap on rank {rank}: {what}")]
    Overlap {
        /// The rank present in both.
        rank: u32,
        /// Which ids collide, e.g. `core[0-1]`.
        what: String,
    },
    /// A property name or assignment is not acceptable.
    #[error("{0}")]
    Property(String),
    /// A hostlist argument could not be used.
    #[error("{0}")]
    Hosts(String),
    /// An RFC 31 constraint object is malformed.
    #[error("invalid constraint: {0}")]
    Constraint(String),
    /// `verify` found resources missing or a mismatched rank or hostname.
    #[error("{0}")]
    Verify(String),
    /// A `resource.config` entry is malformed.
    #[error("{0}")]
    Config(String),
}

/// One execution target: a rank, its hostname and its child resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    rank: u32,
    hostname: Option<String>,
    cores: IdSet,
    gpus: IdSet,
}

impl Node {
    /// A node with the given rank, optional hostname, core and gpu ids.
    pub fn new(rank: u32, hostname: Option<&str>, cores: IdSet, gpus: IdSet) -> Self {
        Self {
            rank,
            hostname: hostname.map(str::to_owned),
            cores,
            gpus,
        }
    }
    /// The execution target id.
    pub fn rank(&self) -> u32 {
        self.rank
    }
    /// The hostname, when R has a nodelist.
    pub fn hostname(&self) -> Option<&str> {
        self.hostname.as_deref()
    }
    /// Logical core ids.
    pub fn cores(&self) -> &IdSet {
        &self.cores
    }
    /// Logical gpu ids.
    pub fn gpus(&self) -> &IdSet {
        &self.gpus
    }
    /// True when the node holds no core and no gpu.
    pub fn is_empty(&self) -> bool {
        self.cores.is_empty() && self.gpus.is_empty()
    }
    /// The short form `core[0-3],gpu0` (empty sets left out), as flux-core prints.
    pub fn children_dumps(&self) -> String {
        children_dumps(&self.cores, &self.gpus)
    }
}

/// An idset in RANGE form (`0-3,7`), as R stores ranks and ids.
pub(crate) fn range_str(ids: &IdSet) -> String {
    ids.encode(EncodeFlags {
        range: true,
        brackets: false,
    })
}

fn children_dumps(cores: &IdSet, gpus: &IdSet) -> String {
    let flags = EncodeFlags {
        range: true,
        brackets: true,
    };
    let mut out = String::new();
    for (name, ids) in [("core", cores), ("gpu", gpus)] {
        if ids.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str(name);
        out.push_str(&ids.encode(flags));
    }
    out
}

/// An RFC 20 resource set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourceSet {
    /// Sorted by rank, one entry per rank.
    nodes: Vec<Node>,
    /// Property name -> ranks; every idset non-empty and within `nodes`.
    properties: BTreeMap<String, IdSet>,
    /// `execution.nslots`, set on scheduler allocations.
    nslots: Option<u32>,
    /// Seconds since the epoch; 0 = unset (RFC 20).
    starttime: f64,
    /// Seconds since the epoch; 0 = unset (RFC 20).
    expiration: f64,
    /// Opaque scheduler data, carried through untouched.
    scheduling: Option<serde_json::Value>,
}

impl ResourceSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Build a set from nodes in any order; nodes sharing a rank are merged
    /// (disjointly). Same result and same error as [`add_node`](Self::add_node)
    /// for each node in turn, in O(n log n) rather than one vector insert per node.
    pub fn from_nodes(nodes: impl IntoIterator<Item = Node>) -> Result<Self, RsetError> {
        let nodes = merge_nodes(nodes.into_iter().collect()).map_err(|(_, e)| e)?;
        Ok(ResourceSet {
            nodes,
            ..Self::default()
        })
    }

    /// Add one node; if its rank exists the ids are merged and must not overlap.
    /// Each call may move the nodes above the rank: to build a set from many
    /// nodes use [`from_nodes`](Self::from_nodes).
    pub fn add_node(&mut self, node: Node) -> Result<(), RsetError> {
        match self.index_of(node.rank) {
            Ok(i) => {
                let have = &mut self.nodes[i];
                check_disjoint(have, &node)?;
                have.cores = have.cores.union(&node.cores);
                have.gpus = have.gpus.union(&node.gpus);
                if have.hostname.is_none() {
                    have.hostname = node.hostname;
                }
            }
            Err(i) => self.nodes.insert(i, node),
        }
        Ok(())
    }

    /// The nodes, ascending by rank.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
    /// The node of `rank`.
    pub fn node(&self, rank: u32) -> Option<&Node> {
        self.index_of(rank).ok().map(|i| &self.nodes[i])
    }
    pub(crate) fn index_of(&self, rank: u32) -> Result<usize, usize> {
        self.nodes.binary_search_by_key(&rank, |n| n.rank)
    }

    /// True when there are no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
    /// Number of execution targets.
    pub fn nnodes(&self) -> usize {
        self.nodes.len()
    }
    /// Number of cores over all nodes.
    pub fn ncores(&self) -> u64 {
        self.nodes.iter().map(|n| n.cores.count()).sum()
    }
    /// Number of gpus over all nodes.
    pub fn ngpus(&self) -> u64 {
        self.nodes.iter().map(|n| n.gpus.count()).sum()
    }
    /// Count by type name as `flux R decode --count` does: `node`, `core`,
    /// `gpu`; any other name counts 0 (flux-core counts an unknown child type).
    pub fn count(&self, kind: &str) -> u64 {
        match kind {
            "node" => self.nnodes() as u64,
            "core" => self.ncores(),
            "gpu" => self.ngpus(),
            _ => 0,
        }
    }
    /// The ranks as an idset.
    pub fn ranks(&self) -> IdSet {
        IdSet::from_sorted_ids(self.nodes.iter().map(|n| n.rank))
    }
    /// Hostnames in rank order, or `None` when some node has no hostname.
    pub fn nodelist(&self) -> Option<Hostlist> {
        let mut hl = Hostlist::new();
        for n in &self.nodes {
            let host = n.hostname.as_deref()?;
            hl.push(host).ok()?;
        }
        Some(hl)
    }

    /// flux-core's one-line summary, e.g. `rank[0-1]/core[0-3],gpu[0-1]`:
    /// ranks with identical children are grouped, groups space-separated.
    pub fn dumps(&self) -> String {
        let flags = EncodeFlags {
            range: true,
            brackets: true,
        };
        let mut out = String::new();
        for (ranks, node) in self.groups() {
            if node.is_empty() {
                continue;
            }
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str("rank");
            out.push_str(&ranks.encode(flags));
            out.push('/');
            out.push_str(&node.children_dumps());
        }
        out
    }

    /// Ranks grouped by identical children, groups ordered by first rank.
    pub(crate) fn groups(&self) -> Vec<(IdSet, &Node)> {
        let mut index: std::collections::HashMap<(&IdSet, &IdSet), usize> =
            std::collections::HashMap::new();
        let mut groups: Vec<(IdSet, &Node)> = Vec::new();
        for n in &self.nodes {
            match index.get(&(&n.cores, &n.gpus)) {
                // Nodes are visited by ascending rank: each rank goes on the end.
                Some(&g) => groups[g].0.push_ascending(n.rank),
                None => {
                    index.insert((&n.cores, &n.gpus), groups.len());
                    groups.push((IdSet::from_range(n.rank, n.rank), n));
                }
            }
        }
        groups
    }

    /// `execution.nslots`: the slot count of a scheduler allocation.
    pub fn slot_count(&self) -> Option<u32> {
        self.nslots
    }
    /// Set or clear `execution.nslots`.
    pub fn set_slot_count(&mut self, nslots: Option<u32>) {
        self.nslots = nslots.filter(|&n| n > 0);
    }
    /// How many slots of `cores_per_slot` cores and `gpus_per_slot` gpus fit,
    /// counting each node on its own (a slot never spans nodes). A zero
    /// per-slot count means that type does not limit.
    pub fn nslots(&self, cores_per_slot: u32, gpus_per_slot: u32) -> u64 {
        self.nodes
            .iter()
            .map(|n| {
                slots_on(
                    n.cores.count(),
                    n.gpus.count(),
                    cores_per_slot,
                    gpus_per_slot,
                )
            })
            .sum()
    }

    /// Start time (seconds since the epoch), `None` when unset.
    pub fn starttime(&self) -> Option<f64> {
        (self.starttime > 0.0).then_some(self.starttime)
    }
    /// Expiration (seconds since the epoch), `None` when unset.
    pub fn expiration(&self) -> Option<f64> {
        (self.expiration > 0.0).then_some(self.expiration)
    }
    /// Set the start time; `None` or a value <= 0 unsets it.
    pub fn set_starttime(&mut self, t: Option<f64>) {
        self.starttime = t.filter(|&t| t > 0.0).unwrap_or(0.0);
    }
    /// Set the expiration; `None` or a value <= 0 unsets it.
    pub fn set_expiration(&mut self, t: Option<f64>) {
        self.expiration = t.filter(|&t| t > 0.0).unwrap_or(0.0);
    }

    /// The opaque top-level `scheduling` key.
    pub fn scheduling(&self) -> Option<&serde_json::Value> {
        self.scheduling.as_ref()
    }
    /// Set or clear the opaque `scheduling` key.
    pub fn set_scheduling(&mut self, v: Option<serde_json::Value>) {
        self.scheduling = v;
    }
}

/// Slots of `cps` cores and `gps` gpus that fit in `cores` and `gpus`.
pub(crate) fn slots_on(cores: u64, gpus: u64, cps: u32, gps: u32) -> u64 {
    let by_cores = if cps > 0 {
        cores / u64::from(cps)
    } else {
        u64::MAX
    };
    let by_gpus = if gps > 0 {
        gpus / u64::from(gps)
    } else {
        u64::MAX
    };
    let n = by_cores.min(by_gpus);
    if n == u64::MAX { 0 } else { n }
}

/// Sort `nodes` by rank and merge those sharing a rank, as adding them one
/// at a time with [`ResourceSet::add_node`] would: ids unioned, the first
/// hostname kept, and the same [`RsetError::Overlap`] for the same node.
///
/// On error, also returns the position in `nodes` of the node that
/// `add_node` would have refused (the earliest one in input order), so that
/// callers can name the input entry it came from.
pub(crate) fn merge_nodes(mut nodes: Vec<Node>) -> Result<Vec<Node>, (usize, RsetError)> {
    // R is nearly always written in rank order, one node per rank: nothing to do.
    if nodes.windows(2).all(|w| w[0].rank < w[1].rank) {
        return Ok(nodes);
    }
    // Keyed by (rank, input position): unique keys, so an unstable sort
    // keeps input order within a rank, which decides the hostname and which
    // node is the overlapping one.
    let mut order: Vec<(u32, usize)> = nodes.iter().map(|n| n.rank).zip(0..).collect();
    order.sort_unstable();
    let mut slots: Vec<Option<Node>> = nodes.drain(..).map(Some).collect();
    let mut merged: Vec<Node> = Vec::with_capacity(order.len());
    let mut first_error: Option<(usize, RsetError)> = None;
    // Set when a rank has refused a node: add_node would have stopped there,
    // so later nodes of that rank cannot produce the first error.
    let mut failed_rank: Option<u32> = None;
    for (rank, pos) in order {
        let Some(node) = slots[pos].take() else {
            continue;
        };
        match merged.last_mut() {
            Some(have) if have.rank == rank => {
                if failed_rank == Some(rank) {
                    continue;
                }
                if let Err(e) = check_disjoint(have, &node) {
                    failed_rank = Some(rank);
                    if first_error.as_ref().is_none_or(|(p, _)| pos < *p) {
                        first_error = Some((pos, e));
                    }
                    continue;
                }
                have.cores = have.cores.union(&node.cores);
                have.gpus = have.gpus.union(&node.gpus);
                if have.hostname.is_none() {
                    have.hostname = node.hostname;
                }
            }
            _ => merged.push(node),
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(merged),
    }
}

fn check_disjoint(have: &Node, add: &Node) -> Result<(), RsetError> {
    let flags = EncodeFlags {
        range: true,
        brackets: true,
    };
    let c = have.cores.intersection(&add.cores);
    let g = have.gpus.intersection(&add.gpus);
    if c.is_empty() && g.is_empty() {
        return Ok(());
    }
    let mut what = Vec::new();
    if !c.is_empty() {
        what.push(format!("core{}", c.encode(flags)));
    }
    if !g.is_empty() {
        what.push(format!("gpu{}", g.encode(flags)));
    }
    Err(RsetError::Overlap {
        rank: have.rank,
        what: what.join(","),
    })
}
