//! Allocation from a resource inventory, as flux-core's sched-simple does
//! it (`rlist_alloc` in `rlist.c`), fast on large inventories.
//!
//! Policy (flux-core): the default mode, worst-fit, visits nodes by most
//! free cores first, then rank; each node takes as many slots as fit
//! before the next is tried. Best-fit visits fewest free cores first;
//! first-fit visits in rank order. With a node count, the first N nodes in
//! worst-fit order are taken and slots dealt round-robin across them; with
//! `exclusive` those N nodes must be idle and are taken whole.
//!
//! Failure is either [`AllocError::Busy`] (would fit on the idle
//! inventory: wait for a free) or [`AllocError::Unsatisfiable`] (never fits:
//! the job manager raises an alloc exception at once). flux-core decides
//! this by re-running the allocation on an empty copy; we compute the same
//! answer from node capacities.
//!
//! sched-simple refuses gpus; here a slot may also ask for gpus, taken
//! first-free on the same node as its cores. Without gpus the choices are
//! exactly flux-core's.
//!
//! Availability is kept per node (free core and gpu idsets) plus one
//! ordered index of up nodes per free-core count, so a request visits only
//! the nodes it uses, never the whole inventory.

use std::collections::{BTreeSet, HashMap, VecDeque};

use super::{Constraint, Node, ResourceSet, RsetError, slots_on};
use crate::idset::IdSet;

/// Node visiting order for slot requests without a node count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AllocMode {
    /// Least used nodes first (spreads jobs); flux-core's default.
    #[default]
    WorstFit,
    /// Most used nodes first (packs jobs).
    BestFit,
    /// Rank order.
    FirstFit,
}

/// What a job asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct AllocRequest {
    /// Exact node count, 0 when the job does not ask for nodes.
    pub nnodes: u32,
    /// Number of slots.
    pub nslots: u32,
    /// Cores in each slot (at least 1).
    pub cores_per_slot: u32,
    /// Gpus in each slot.
    pub gpus_per_slot: u32,
    /// Whole nodes (requires `nnodes`).
    pub exclusive: bool,
    /// Only nodes matching this RFC 31 constraint.
    pub constraint: Option<Constraint>,
    /// Node order for slot requests.
    pub mode: AllocMode,
}

impl AllocRequest {
    /// `nslots` slots of `cores_per_slot` cores, anywhere.
    pub fn slots(nslots: u32, cores_per_slot: u32) -> Self {
        Self {
            nnodes: 0,
            nslots,
            cores_per_slot,
            gpus_per_slot: 0,
            exclusive: false,
            constraint: None,
            mode: AllocMode::default(),
        }
    }
    /// `nnodes` whole nodes.
    pub fn nodes_exclusive(nnodes: u32) -> Self {
        Self {
            nnodes,
            nslots: nnodes,
            cores_per_slot: 1,
            exclusive: true,
            ..Self::slots(nnodes, 1)
        }
    }
}

/// Why a request was not granted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// Fits the inventory, but not what is free now.
    #[error("insufficient resources available now")]
    Busy,
    /// Can never be satisfied by this inventory.
    #[error("{0}")]
    Unsatisfiable(String),
    /// The request itself is malformed.
    #[error("invalid request: {0}")]
    Invalid(String),
    /// A free or mark-allocated named resources the pool does not hold so.
    #[error("{0}")]
    Release(String),
}

#[derive(Debug, Clone)]
struct NodeState {
    free_cores: IdSet,
    free_gpus: IdSet,
    nfree: u32,
    up: bool,
}

/// The inventory with per-node availability; allocates and frees.
#[derive(Debug, Clone)]
pub struct Pool {
    inventory: ResourceSet,
    /// The inventory's ranks, built once: asked for on every resource
    /// event, and building them is a pass over every node.
    ranks: IdSet,
    state: Vec<NodeState>,
    /// `buckets[k]`: indices of up nodes with exactly `k` free cores.
    buckets: Vec<BTreeSet<u32>>,
    total_cores: u64,
    total_gpus: u64,
    avail_cores: u64,
    /// Node count per (cores, gpus) shape, for feasibility without scans.
    shapes: HashMap<(u64, u64), u64>,
}

/// A chosen node and the ids taken on it.
type Plan = Vec<(usize, IdSet, IdSet)>;

/// The first `n` ids of `set`.
fn take_first(set: &IdSet, mut n: u64) -> IdSet {
    let mut out = IdSet::new();
    for &(lo, hi) in set.ranges() {
        if n == 0 {
            break;
        }
        let len = u64::from(hi - lo) + 1;
        let take = len.min(n);
        out.insert_range(lo, lo + (take - 1) as u32);
        n -= take;
    }
    out
}

impl Pool {
    /// A pool with everything in `inventory` free and up.
    pub fn new(inventory: ResourceSet) -> Self {
        let maxc = inventory
            .nodes
            .iter()
            .map(|n| n.cores.count())
            .max()
            .unwrap_or(0) as usize;
        let mut buckets = vec![BTreeSet::new(); maxc + 1];
        let mut state = Vec::with_capacity(inventory.nodes.len());
        let mut shapes = HashMap::new();
        let (mut tc, mut tg) = (0, 0);
        for (i, n) in inventory.nodes.iter().enumerate() {
            let nc = n.cores.count();
            let ng = n.gpus.count();
            tc += nc;
            tg += ng;
            *shapes.entry((nc, ng)).or_insert(0) += 1;
            buckets[nc as usize].insert(i as u32);
            state.push(NodeState {
                free_cores: n.cores.clone(),
                free_gpus: n.gpus.clone(),
                nfree: nc as u32,
                up: true,
            });
        }
        Self {
            ranks: inventory.ranks(),
            inventory,
            state,
            buckets,
            total_cores: tc,
            total_gpus: tg,
            avail_cores: tc,
            shapes,
        }
    }

    /// The whole inventory.
    pub fn inventory(&self) -> &ResourceSet {
        &self.inventory
    }

    /// The inventory's ranks.
    pub fn ranks(&self) -> &IdSet {
        &self.ranks
    }

    /// Add property `name` to `ranks` of the inventory (RFC 28 property-add);
    /// later constrained requests see it. Ranks outside the inventory are refused.
    pub fn add_property(&mut self, name: &str, ranks: &IdSet) -> Result<(), RsetError> {
        self.inventory.set_property(name, ranks)
    }

    /// Replace every property of the inventory by an RFC 20 properties
    /// object (`{"name": "idset"}`), validated whole before anything changes.
    pub fn replace_properties(&mut self, props: &serde_json::Value) -> Result<(), RsetError> {
        let mut inv = self.inventory.clone();
        inv.properties.clear();
        inv.assign_properties(props)?;
        self.inventory.properties = inv.properties;
        Ok(())
    }

    /// Remove property `name` from `ranks` (RFC 28 property-remove).
    pub fn remove_property(&mut self, name: &str, ranks: &IdSet) {
        self.inventory.remove_property(name, ranks);
    }

    /// Set the inventory's expiration (RFC 28 `expiration`); allocations are
    /// not touched.
    pub fn set_expiration(&mut self, t: f64) {
        self.inventory.set_expiration(Some(t));
    }
    /// Cores in the inventory.
    pub fn total_cores(&self) -> u64 {
        self.total_cores
    }
    /// Free cores on up nodes.
    pub fn avail_cores(&self) -> u64 {
        self.avail_cores
    }

    /// The free resources of up nodes, as R.
    pub fn available(&self) -> ResourceSet {
        let mut nodes = Vec::new();
        for (n, s) in self.inventory.nodes.iter().zip(&self.state) {
            if s.up && !(s.free_cores.is_empty() && s.free_gpus.is_empty()) {
                nodes.push(Node {
                    rank: n.rank,
                    hostname: n.hostname.clone(),
                    cores: s.free_cores.clone(),
                    gpus: s.free_gpus.clone(),
                });
            }
        }
        let mut out = ResourceSet {
            nodes,
            properties: self.inventory.properties.clone(),
            ..ResourceSet::default()
        };
        out.restrict_properties(&out.ranks());
        out
    }

    /// The part of `r` that is free now.
    pub fn free_part(&self, r: &ResourceSet) -> ResourceSet {
        let nodes = r
            .nodes
            .iter()
            .filter_map(|n| {
                let s = &self.state[self.inventory.index_of(n.rank).ok()?];
                let cores = n.cores.intersection(&s.free_cores);
                let gpus = n.gpus.intersection(&s.free_gpus);
                (!(cores.is_empty() && gpus.is_empty())).then(|| Node {
                    rank: n.rank,
                    hostname: n.hostname.clone(),
                    cores,
                    gpus,
                })
            })
            .collect();
        ResourceSet {
            nodes,
            ..ResourceSet::default()
        }
    }

    /// The allocated resources, as R.
    pub fn allocated(&self) -> ResourceSet {
        let mut nodes = Vec::new();
        for (n, s) in self.inventory.nodes.iter().zip(&self.state) {
            let cores = n.cores.difference(&s.free_cores);
            let gpus = n.gpus.difference(&s.free_gpus);
            if !(cores.is_empty() && gpus.is_empty()) {
                nodes.push(Node {
                    rank: n.rank,
                    hostname: n.hostname.clone(),
                    cores,
                    gpus,
                });
            }
        }
        ResourceSet {
            nodes,
            ..ResourceSet::default()
        }
    }

    /// Mark ranks up (`true`) or down; down nodes are never allocated.
    /// Unknown ranks are ignored. Answers how many nodes and cores changed
    /// state.
    pub fn set_up(&mut self, ranks: &IdSet, up: bool) -> (u64, u64) {
        let (mut nodes, mut cores) = (0, 0);
        for rank in ranks.iter() {
            let Ok(i) = self.inventory.index_of(rank) else {
                continue;
            };
            let s = &mut self.state[i];
            if s.up == up {
                continue;
            }
            s.up = up;
            nodes += 1;
            cores += self.inventory.nodes[i].cores.count();
            let nfree = s.nfree;
            if up {
                self.buckets[nfree as usize].insert(i as u32);
                self.avail_cores += u64::from(nfree);
            } else {
                self.buckets[nfree as usize].remove(&(i as u32));
                self.avail_cores -= u64::from(nfree);
            }
        }
        (nodes, cores)
    }

    /// Up nodes and the cores on them.
    pub fn up_totals(&self) -> (u64, u64) {
        self.inventory
            .nodes
            .iter()
            .zip(&self.state)
            .filter(|(_, s)| s.up)
            .fold((0, 0), |(n, c), (node, _)| (n + 1, c + node.cores.count()))
    }

    /// The up nodes that could ever hold a slot of `req` (those its
    /// constraint matches, with the gpus a slot asks), with their cores;
    /// `None` when that is every node.
    pub fn hosts_for(&self, req: &AllocRequest) -> Option<Vec<(u32, u64)>> {
        if req.constraint.is_none() && req.gpus_per_slot == 0 {
            return None;
        }
        let allowed = req
            .constraint
            .as_ref()
            .map(|c| c.matching_ranks(&self.inventory));
        let hosts = self
            .inventory
            .nodes
            .iter()
            .zip(&self.state)
            .filter(|(n, s)| {
                s.up && allowed.as_ref().is_none_or(|a| a.contains(n.rank))
                    && n.gpus.count() >= u64::from(req.gpus_per_slot)
            })
            .map(|(n, _)| (n.rank, n.cores.count()))
            .collect();
        Some(hosts)
    }

    /// The cores of every node, when all nodes have as many.
    pub fn uniform_cores(&self) -> Option<u64> {
        let mut shapes = self.shapes.keys().map(|(cores, _)| *cores);
        let first = shapes.next()?;
        shapes.all(|c| c == first).then_some(first)
    }

    /// The most cores any node has.
    pub fn max_node_cores(&self) -> u64 {
        self.buckets.len().saturating_sub(1) as u64
    }

    fn set_free(&mut self, i: usize, cores: IdSet, gpus: IdSet) {
        let s = &mut self.state[i];
        let new = cores.count() as u32;
        if s.up {
            self.buckets[s.nfree as usize].remove(&(i as u32));
            self.buckets[new as usize].insert(i as u32);
            self.avail_cores = self.avail_cores + u64::from(new) - u64::from(s.nfree);
        }
        s.nfree = new;
        s.free_cores = cores;
        s.free_gpus = gpus;
    }

    fn is_idle(&self, i: usize) -> bool {
        let s = &self.state[i];
        let n = &self.inventory.nodes[i];
        s.up && u64::from(s.nfree) == n.cores.count() && s.free_gpus.count() == n.gpus.count()
    }

    /// Up node indices by most free cores first, then rank.
    fn worst_fit_order(&self, min_free: u32) -> impl Iterator<Item = usize> + '_ {
        self.buckets
            .iter()
            .enumerate()
            .skip(min_free as usize)
            .rev()
            .flat_map(|(_, b)| b.iter().map(|&i| i as usize))
    }

    /// Allocate `req`; on success the returned R holds the chosen ids and
    /// `nslots`, and those ids are no longer free.
    pub fn alloc(&mut self, req: &AllocRequest) -> Result<ResourceSet, AllocError> {
        self.check(req)?;
        let allowed = match &req.constraint {
            Some(c) => {
                let ranks = c.matching_ranks(&self.inventory);
                let mut idx = vec![false; self.state.len()];
                let mut cores = 0;
                for r in ranks.iter() {
                    if let Ok(i) = self.inventory.index_of(r) {
                        idx[i] = true;
                        cores += self.inventory.nodes[i].cores.count();
                    }
                }
                if cores == 0 {
                    return Err(AllocError::Unsatisfiable(
                        "no resources satisfy provided constraints".into(),
                    ));
                }
                Some(idx)
            }
            None => None,
        };
        let allowed = allowed.as_deref();
        let need = u64::from(req.nslots) * u64::from(req.cores_per_slot);
        let plan = if allowed.is_none() && need > self.avail_cores {
            None
        } else {
            self.plan(req, allowed)
        };
        let Some(plan) = plan else {
            return Err(if self.feasible_when_idle(req, allowed) {
                AllocError::Busy
            } else if allowed.is_some() {
                AllocError::Unsatisfiable("unsatisfiable constrained request".into())
            } else {
                AllocError::Unsatisfiable("unsatisfiable request".into())
            });
        };
        Ok(self.apply(req, plan))
    }

    fn check(&self, req: &AllocRequest) -> Result<(), AllocError> {
        if req.nslots == 0 || req.cores_per_slot == 0 {
            return Err(AllocError::Invalid(
                "nslots and cores per slot must be greater than 0".into(),
            ));
        }
        if req.exclusive && req.nnodes == 0 {
            return Err(AllocError::Invalid(
                "exclusive allocation only supported with nnodes".into(),
            ));
        }
        if req.nnodes > 0 && req.nslots < req.nnodes {
            return Err(AllocError::Invalid(format!(
                "{} slots cannot span {} nodes",
                req.nslots, req.nnodes
            )));
        }
        let cores = u64::from(req.nslots) * u64::from(req.cores_per_slot);
        let gpus = u64::from(req.nslots) * u64::from(req.gpus_per_slot);
        if cores > self.total_cores || gpus > self.total_gpus {
            return Err(AllocError::Unsatisfiable("unsatisfiable request".into()));
        }
        if req.nnodes as usize > self.state.len() {
            return Err(AllocError::Unsatisfiable("unsatisfiable request".into()));
        }
        Ok(())
    }

    fn plan(&self, req: &AllocRequest, allowed: Option<&[bool]>) -> Option<Plan> {
        let ok = |i: usize| allowed.is_none_or(|a| a[i]);
        if req.nnodes > 0 {
            let picked: Vec<usize> = self
                .worst_fit_order(0)
                .filter(|&i| ok(i))
                .take(req.nnodes as usize)
                .collect();
            if picked.len() < req.nnodes as usize {
                return None;
            }
            if req.exclusive {
                if !picked.iter().all(|&i| self.is_idle(i)) {
                    return None;
                }
                return Some(
                    picked
                        .into_iter()
                        .map(|i| {
                            let n = &self.inventory.nodes[i];
                            (i, n.cores.clone(), n.gpus.clone())
                        })
                        .collect(),
                );
            }
            let caps: Vec<(u64, u64)> = picked
                .iter()
                .map(|&i| {
                    (
                        u64::from(self.state[i].nfree),
                        self.state[i].free_gpus.count(),
                    )
                })
                .collect();
            let taken = round_robin(&caps, req)?;
            return Some(
                picked
                    .into_iter()
                    .zip(taken)
                    .filter(|&(_, k)| k > 0)
                    .map(|(i, k)| self.take(i, k, req))
                    .collect(),
            );
        }
        let mut left = u64::from(req.nslots);
        let mut plan = Vec::new();
        let mut visit = |i: usize, plan: &mut Plan| {
            let s = &self.state[i];
            let k = slots_on(
                u64::from(s.nfree),
                s.free_gpus.count(),
                req.cores_per_slot,
                req.gpus_per_slot,
            )
            .min(left);
            if k > 0 {
                plan.push(self.take(i, k, req));
                left -= k;
            }
            left == 0
        };
        let c = req.cores_per_slot;
        match req.mode {
            AllocMode::WorstFit => {
                for i in self.worst_fit_order(c).filter(|&i| ok(i)) {
                    if visit(i, &mut plan) {
                        break;
                    }
                }
            }
            AllocMode::BestFit => {
                let order = self
                    .buckets
                    .iter()
                    .skip(c as usize)
                    .flat_map(|b| b.iter().map(|&i| i as usize));
                for i in order.filter(|&i| ok(i)) {
                    if visit(i, &mut plan) {
                        break;
                    }
                }
            }
            AllocMode::FirstFit => {
                for i in (0..self.state.len()).filter(|&i| ok(i)) {
                    if self.state[i].up && self.state[i].nfree >= c && visit(i, &mut plan) {
                        break;
                    }
                }
            }
        }
        (left == 0).then_some(plan)
    }

    /// Ids for `k` slots on node `i`: the first free ones.
    fn take(&self, i: usize, k: u64, req: &AllocRequest) -> (usize, IdSet, IdSet) {
        let s = &self.state[i];
        (
            i,
            take_first(&s.free_cores, k * u64::from(req.cores_per_slot)),
            take_first(&s.free_gpus, k * u64::from(req.gpus_per_slot)),
        )
    }

    fn apply(&mut self, req: &AllocRequest, plan: Plan) -> ResourceSet {
        let mut nodes = Vec::with_capacity(plan.len());
        for (i, cores, gpus) in plan {
            let s = &self.state[i];
            let fc = s.free_cores.difference(&cores);
            let fg = if gpus.is_empty() {
                s.free_gpus.clone()
            } else {
                s.free_gpus.difference(&gpus)
            };
            self.set_free(i, fc, fg);
            let n = &self.inventory.nodes[i];
            nodes.push(Node {
                rank: n.rank,
                hostname: n.hostname.clone(),
                cores,
                gpus,
            });
        }
        nodes.sort_by_key(|n| n.rank);
        let mut out = ResourceSet {
            nodes,
            nslots: Some(req.nslots),
            ..ResourceSet::default()
        };
        if req.exclusive && !self.inventory.properties.is_empty() {
            // Whole nodes are copied with their properties (rnode_copy).
            out.properties = self.inventory.properties.clone();
            out.restrict_properties(&out.ranks());
        }
        out
    }

    /// Would `req` succeed if every node were up and idle?
    fn feasible_when_idle(&self, req: &AllocRequest, allowed: Option<&[bool]>) -> bool {
        let (c, g) = (req.cores_per_slot, req.gpus_per_slot);
        let nodes = self.inventory.nodes.iter().enumerate();
        let ok = |i: usize| allowed.is_none_or(|a| a[i]);
        if req.nnodes == 0 {
            let cap: u64 = match allowed {
                None => self
                    .shapes
                    .iter()
                    .map(|(&(nc, ng), &count)| slots_on(nc, ng, c, g) * count)
                    .sum(),
                Some(_) => nodes
                    .filter(|&(i, _)| ok(i))
                    .map(|(_, n)| slots_on(n.cores.count(), n.gpus.count(), c, g))
                    .sum(),
            };
            return cap >= u64::from(req.nslots);
        }
        // Whole nodes of the whole inventory: a count, not a pass over every
        // node (a busy pool answers this for each job a backfill pass tries).
        if allowed.is_none() && req.exclusive {
            return self.state.len() >= req.nnodes as usize;
        }
        let mut cand: Vec<(u64, usize, u64)> = nodes
            .filter(|&(i, _)| ok(i))
            .map(|(i, n)| (n.cores.count(), i, n.gpus.count()))
            .collect();
        if cand.len() < req.nnodes as usize {
            return false;
        }
        if req.exclusive {
            return true;
        }
        cand.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let caps: Vec<(u64, u64)> = cand
            .iter()
            .take(req.nnodes as usize)
            .map(|&(nc, _, ng)| (nc, ng))
            .collect();
        round_robin(&caps, req).is_some()
    }

    /// Return an allocation to the pool. Every id must be allocated now;
    /// on error nothing changes.
    pub fn free(&mut self, r: &ResourceSet) -> Result<(), AllocError> {
        self.release(r, false, true)
    }

    /// As [`free`](Self::free), but ranks no longer in the pool are skipped
    /// (the inventory may shrink while a job runs).
    pub fn free_tolerant(&mut self, r: &ResourceSet) -> Result<(), AllocError> {
        self.release(r, true, true)
    }

    /// Mark `r` allocated (a job found running after a restart); every id
    /// must be free now. On error nothing changes.
    pub fn mark_allocated(&mut self, r: &ResourceSet) -> Result<(), AllocError> {
        self.release(r, false, false)
    }

    fn release(&mut self, r: &ResourceSet, tolerant: bool, free: bool) -> Result<(), AllocError> {
        let mut updates = Vec::with_capacity(r.nodes.len());
        for n in &r.nodes {
            let i = match self.inventory.index_of(n.rank) {
                Ok(i) => i,
                Err(_) if tolerant => continue,
                Err(_) => {
                    return Err(AllocError::Release(format!(
                        "rank {} is not in the resource inventory",
                        n.rank
                    )));
                }
            };
            let inv = &self.inventory.nodes[i];
            let s = &self.state[i];
            if !n.cores.is_subset(&inv.cores) || !n.gpus.is_subset(&inv.gpus) {
                return Err(AllocError::Release(format!(
                    "rank {} has no {}",
                    n.rank,
                    super::children_dumps(
                        &n.cores.difference(&inv.cores),
                        &n.gpus.difference(&inv.gpus)
                    )
                )));
            }
            let busy_c = n.cores.intersection(&s.free_cores);
            let busy_g = n.gpus.intersection(&s.free_gpus);
            let (fc, fg) = if free {
                if !busy_c.is_empty() || !busy_g.is_empty() {
                    return Err(AllocError::Release(format!(
                        "rank {} {} is not allocated",
                        n.rank,
                        super::children_dumps(&busy_c, &busy_g)
                    )));
                }
                (s.free_cores.union(&n.cores), s.free_gpus.union(&n.gpus))
            } else {
                if busy_c != n.cores || busy_g != n.gpus {
                    return Err(AllocError::Release(format!(
                        "rank {} {} is already allocated",
                        n.rank,
                        super::children_dumps(
                            &n.cores.difference(&busy_c),
                            &n.gpus.difference(&busy_g)
                        )
                    )));
                }
                (
                    s.free_cores.difference(&n.cores),
                    s.free_gpus.difference(&n.gpus),
                )
            };
            updates.push((i, fc, fg));
        }
        for (i, fc, fg) in updates {
            self.set_free(i, fc, fg);
        }
        Ok(())
    }
}

/// Deal `req.nslots` slots round-robin over nodes with free (cores, gpus)
/// `caps`, as flux-core's `rlist_alloc_nnodes`: a node leaves the rotation
/// when its cores run out, and the first node that cannot take a slot ends
/// the attempt. Returns the slot count per node.
fn round_robin(caps: &[(u64, u64)], req: &AllocRequest) -> Option<Vec<u64>> {
    let (c, g) = (u64::from(req.cores_per_slot), u64::from(req.gpus_per_slot));
    let mut taken = vec![0u64; caps.len()];
    let mut left: Vec<(u64, u64)> = caps.to_vec();
    let mut ring: VecDeque<usize> = (0..caps.len()).collect();
    for _ in 0..req.nslots {
        let i = ring.pop_front()?;
        let (fc, fg) = left[i];
        if fc < c || fg < g {
            return None;
        }
        left[i] = (fc - c, fg - g);
        taken[i] += 1;
        if left[i].0 > 0 {
            ring.push_back(i);
        }
    }
    Some(taken)
}
