//! The schedule ahead: idle nodes and free cores over time, from the
//! running jobs' time limits and the reservations of waiting jobs.
//!
//! A node is idle from the end of the last job on it, so the node profile
//! holds, for each limit, how many nodes become idle then. Cores free as
//! each job ends. A reservation takes both over its span. Counts, not
//! placements: "when could N idle nodes and C cores be free for D seconds"
//! is answered in O(log S) by the two [`Profile`]s, and the pool's own
//! placement decides which resources a job gets when it starts. On a pool
//! of alike nodes a count that fits is a placement that fits; with
//! constraints or uneven nodes a count is what must hold, and the pool may
//! still say busy.
//!
//! While every node has C cores and everything held is whole nodes, free
//! cores are idle nodes times C: the cores profile is then not kept, which
//! halves the work of whole-node clusters. It is made from what is held the
//! first time a job or reservation takes part of a node.

use std::collections::{BTreeMap, HashMap};

use super::profile::{Profile, SpanId};
use crate::rset::{AllocRequest, Pool, ResourceSet};

/// What a request takes, counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    /// Idle nodes (an exclusive request's node count, else the fewest
    /// nodes its cores could fit on).
    pub nodes: i64,
    /// Cores.
    pub cores: i64,
}

/// A reservation made in a [`Plan`], to give back.
#[derive(Debug, Clone, Copy)]
pub struct Held {
    nodes: SpanId,
    /// Its slot in the plan's reservations.
    slot: usize,
}

#[derive(Debug, Clone, Copy)]
struct Reserved {
    start: f64,
    end: f64,
    cores: i64,
    span: Option<SpanId>,
}

#[derive(Debug)]
struct Running {
    ranks: Vec<u32>,
    end: u64,
    ncores: i64,
    cores: Option<SpanId>,
}

/// Idle nodes and free cores over time.
#[derive(Debug)]
pub struct Plan {
    nodes: Profile,
    /// Free cores; `None` while they are idle nodes times `whole`.
    cores: Option<Profile>,
    /// The cores of every node, when all have as many.
    whole: Option<u64>,
    /// Up cores, for making the cores profile.
    total_cores: i64,
    reserved: Vec<Option<Reserved>>,
    /// The most cores on one node: the fewest nodes C cores take is C / this.
    node_cores: u64,
    running: HashMap<u64, Running>,
    /// End keys of the jobs on each busy node.
    on_node: HashMap<u32, Vec<u64>>,
    /// Nodes busy until each end, and the span that says so.
    busy_until: BTreeMap<u64, (i64, SpanId)>,
}

/// Ordering key of a time, as the profiles use: non-negative times order
/// as their bits.
fn key(t: f64) -> u64 {
    t.max(0.0).to_bits()
}

impl Plan {
    /// The plan of `pool` with nothing running: its up nodes and cores free.
    pub fn new(pool: &Pool) -> Self {
        let (nodes, cores) = pool.up_totals();
        let whole = pool.uniform_cores().filter(|c| *c > 0);
        Plan {
            nodes: Profile::new(nodes as i64),
            cores: whole.is_none().then(|| Profile::new(cores as i64)),
            whole,
            total_cores: cores as i64,
            reserved: Vec::new(),
            node_cores: pool.max_node_cores().max(1),
            running: HashMap::new(),
            on_node: HashMap::new(),
            busy_until: BTreeMap::new(),
        }
    }

    /// Nodes and cores came up (positive) or went down (negative).
    pub fn grow(&mut self, nodes: i64, cores: i64) {
        self.nodes.grow(nodes);
        self.total_cores += cores;
        if let Some(p) = &mut self.cores {
            p.grow(cores);
        }
    }

    /// Keep free cores from now on: something takes part of a node.
    fn keep_cores(&mut self) -> &mut Profile {
        if self.cores.is_none() {
            let mut p = Profile::new(self.total_cores);
            for run in self.running.values_mut() {
                run.cores = Some(p.take(0.0, f64::from_bits(run.end), run.ncores));
            }
            for r in self.reserved.iter_mut().flatten() {
                r.span = Some(p.take(r.start, r.end, r.cores));
            }
            self.cores = Some(p);
        }
        self.cores.get_or_insert_with(|| Profile::new(0))
    }

    /// Whether `cores` on `nodes` nodes are those nodes whole.
    fn is_whole(&self, nodes: i64, cores: i64) -> bool {
        self.whole.is_some_and(|c| nodes * c as i64 == cores)
    }

    /// What `req` takes, counted.
    pub fn need(&self, req: &AllocRequest) -> Need {
        let cores = u64::from(req.nslots) * u64::from(req.cores_per_slot);
        let nodes = if req.exclusive {
            u64::from(req.nnodes)
        } else {
            cores.div_ceil(self.node_cores)
        };
        Need {
            nodes: nodes as i64,
            cores: cores as i64,
        }
    }

    /// Job `job` holds `r` until `end` (`None`: no limit).
    pub fn start(&mut self, job: u64, r: &ResourceSet, end: Option<f64>) {
        self.end(job);
        let end = end.filter(|t| !t.is_nan()).unwrap_or(f64::INFINITY);
        let k = key(end);
        let ncores = r.ncores() as i64;
        if self.cores.is_none() && !self.is_whole(r.nnodes() as i64, ncores) {
            self.keep_cores();
        }
        let cores = self.cores.as_mut().map(|p| p.take(0.0, end, ncores));
        let mut moved: BTreeMap<u64, i64> = BTreeMap::new();
        let ranks: Vec<u32> = r.nodes().iter().map(|n| n.rank()).collect();
        for &rank in &ranks {
            let ends = self.on_node.entry(rank).or_default();
            let old = ends.iter().max().copied();
            ends.push(k);
            if old.is_none_or(|o| o < k) {
                if let Some(o) = old {
                    *moved.entry(o).or_default() -= 1;
                }
                *moved.entry(k).or_default() += 1;
            }
        }
        self.move_busy(moved);
        self.running.insert(
            job,
            Running {
                ranks,
                end: k,
                ncores,
                cores,
            },
        );
    }

    /// Job `job` no longer holds anything.
    pub fn end(&mut self, job: u64) {
        let Some(run) = self.running.remove(&job) else {
            return;
        };
        if let (Some(p), Some(span)) = (&mut self.cores, run.cores) {
            p.give_back(span);
        }
        let mut moved: BTreeMap<u64, i64> = BTreeMap::new();
        for rank in run.ranks {
            let Some(ends) = self.on_node.get_mut(&rank) else {
                continue;
            };
            let old = ends.iter().max().copied();
            if let Some(i) = ends.iter().position(|e| *e == run.end) {
                ends.swap_remove(i);
            }
            let new = ends.iter().max().copied();
            if ends.is_empty() {
                self.on_node.remove(&rank);
            }
            if old != new {
                if let Some(o) = old {
                    *moved.entry(o).or_default() -= 1;
                }
                if let Some(n) = new {
                    *moved.entry(n).or_default() += 1;
                }
            }
        }
        self.move_busy(moved);
    }

    /// Change how many nodes are busy until each end.
    fn move_busy(&mut self, moved: BTreeMap<u64, i64>) {
        for (end, delta) in moved {
            if delta == 0 {
                continue;
            }
            match self.busy_until.get_mut(&end) {
                Some((n, span)) => {
                    *n += delta;
                    if *n == 0 {
                        let span = *span;
                        self.busy_until.remove(&end);
                        self.nodes.give_back(span);
                    } else {
                        self.nodes.retake(*span, *n);
                    }
                }
                None => {
                    let span = self.nodes.take(0.0, f64::from_bits(end), delta);
                    self.busy_until.insert(end, (delta, span));
                }
            }
        }
    }

    /// The earliest time at or after `now` at which `need` is free for
    /// `duration` seconds (infinite: for good); `None` if never, as the
    /// limits say.
    pub fn earliest(&self, now: f64, duration: f64, need: Need) -> Option<f64> {
        let Some(cores) = &self.cores else {
            return self.nodes.earliest(now, duration, self.as_nodes(need));
        };
        // Each profile's answer is where the other's search resumes: both
        // move only forward, and they meet at the first time both fit.
        let mut t = now;
        loop {
            let a = self.nodes.earliest(t, duration, need.nodes)?;
            let b = cores.earliest(a, duration, need.cores)?;
            if b <= a {
                return Some(a);
            }
            t = b;
        }
    }

    /// As [`Plan::earliest`], on `hosts` (rank, cores) alone: for a request
    /// that only some nodes can hold (a constraint, gpus), when enough of
    /// those are idle, as the running jobs' limits say. Reservations are
    /// not counted; O(hosts), made only for such a request when it waits.
    pub fn earliest_on(
        &self,
        hosts: &[(u32, u64)],
        now: f64,
        duration: f64,
        need: Need,
    ) -> Option<f64> {
        let total: u64 = hosts.iter().map(|h| h.1).sum();
        let most = hosts.iter().map(|h| h.1).max().unwrap_or(1).max(1) as i64;
        if (hosts.len() as i64) < need.nodes || (total as i64) < need.cores {
            return None;
        }
        let mut idle = Profile::new(hosts.len() as i64);
        for (rank, _) in hosts {
            if let Some(end) = self.on_node.get(rank).and_then(|e| e.iter().max()) {
                idle.take(0.0, f64::from_bits(*end), 1);
            }
        }
        let nodes = need.nodes.max((need.cores + most - 1) / most);
        idle.earliest(now, duration, nodes)
    }

    /// Idle nodes that hold `need`'s cores too, while cores are idle nodes
    /// times the cores of each.
    fn as_nodes(&self, need: Need) -> i64 {
        let c = self.whole.unwrap_or(1).max(1) as i64;
        need.nodes.max((need.cores + c - 1) / c)
    }

    /// Whether `need` is free from `now` for `duration` seconds.
    pub fn fits_now(&self, now: f64, duration: f64, need: Need) -> bool {
        let end = now + duration;
        match &self.cores {
            None => self.nodes.min_over(now, end) >= self.as_nodes(need),
            Some(cores) => {
                self.nodes.min_over(now, end) >= need.nodes
                    && cores.min_over(now, end) >= need.cores
            }
        }
    }

    /// Cores free at `now`, reservations taken.
    pub fn cores_free_at(&self, now: f64) -> i64 {
        match &self.cores {
            Some(p) => p.free_at(now),
            None => self.nodes.free_at(now) * self.whole.unwrap_or(1) as i64,
        }
    }

    /// Hold `need` from `start` for `duration` seconds.
    pub fn reserve(&mut self, start: f64, duration: f64, need: Need) -> Held {
        let end = start + duration;
        if self.cores.is_none() && !self.is_whole(need.nodes, need.cores) {
            self.keep_cores();
        }
        let span = self.cores.as_mut().map(|p| p.take(start, end, need.cores));
        let r = Reserved {
            start,
            end,
            cores: need.cores,
            span,
        };
        let slot = match self.reserved.iter().position(Option::is_none) {
            Some(i) => {
                self.reserved[i] = Some(r);
                i
            }
            None => {
                self.reserved.push(Some(r));
                self.reserved.len() - 1
            }
        };
        Held {
            nodes: self.nodes.take(start, end, need.nodes),
            slot,
        }
    }

    /// Give a reservation back.
    pub fn release(&mut self, held: Held) {
        self.nodes.give_back(held.nodes);
        let r = self.reserved.get_mut(held.slot).and_then(Option::take);
        if let (Some(p), Some(span)) = (&mut self.cores, r.and_then(|r| r.span)) {
            p.give_back(span);
        }
    }

    /// Running jobs it knows of.
    pub fn running(&self) -> usize {
        self.running.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::IdSet;
    use crate::sched::testkit::{pool, whole};

    #[test]
    fn a_node_is_idle_when_its_last_job_ends() {
        let mut p = pool(2);
        let mut plan = Plan::new(&p);
        // a: 4 cores of node 0 and 2 of node 1; b: the other 2 of node 1.
        let a = p.alloc(&AllocRequest::slots(6, 1)).unwrap();
        let b = p.alloc(&AllocRequest::slots(2, 1)).unwrap();
        assert_eq!(b.ranks(), IdSet::from_range(1, 1));
        plan.start(1, &a, Some(100.0));
        plan.start(2, &b, Some(50.0));
        let two = plan.need(&whole(2));
        assert_eq!(plan.earliest(0.0, 10.0, two), Some(100.0));
        plan.end(1);
        assert_eq!(plan.earliest(0.0, 10.0, two), Some(50.0));
        plan.end(2);
        assert_eq!(plan.earliest(0.0, 10.0, two), Some(0.0));
    }

    #[test]
    fn a_reservation_holds_its_span() {
        let mut p = pool(4);
        let mut plan = Plan::new(&p);
        let a = p.alloc(&whole(3)).unwrap();
        plan.start(1, &a, Some(100.0));
        let head = plan.need(&whole(4));
        let t = plan.earliest(0.0, 50.0, head).unwrap();
        assert_eq!(t, 100.0);
        let held = plan.reserve(t, 50.0, head);
        let one = plan.need(&whole(1));
        assert!(plan.fits_now(0.0, 100.0, one), "ends by the shadow time");
        assert!(!plan.fits_now(0.0, 101.0, one), "would delay the head");
        assert_eq!(plan.earliest(0.0, 101.0, one), Some(150.0));
        plan.release(held);
        assert!(plan.fits_now(0.0, 1000.0, one));
        assert_eq!(plan.running(), 1);
    }

    #[test]
    fn cores_are_counted_from_the_first_job_that_takes_part_of_a_node() {
        let mut p = pool(2);
        let mut plan = Plan::new(&p);
        let a = p.alloc(&whole(1)).unwrap();
        plan.start(1, &a, Some(100.0));
        let held = plan.reserve(50.0, 100.0, plan.need(&whole(1)));
        assert!(plan.cores.is_none(), "whole nodes only: no cores profile");
        assert_eq!(plan.cores_free_at(0.0), 4);
        let b = p.alloc(&AllocRequest::slots(2, 1)).unwrap();
        plan.start(2, &b, Some(40.0));
        assert!(plan.cores.is_some());
        assert_eq!(plan.cores_free_at(0.0), 2);
        assert_eq!(plan.cores_free_at(60.0), 0, "the reservation holds node 1");
        let three = plan.need(&AllocRequest::slots(3, 1));
        assert_eq!(plan.earliest(0.0, 5.0, three), Some(40.0));
        assert_eq!(plan.earliest(0.0, 20.0, three), Some(100.0));
        plan.release(held);
        assert_eq!(plan.earliest(0.0, 20.0, three), Some(40.0));
    }

    #[test]
    fn whole_nodes_answer_alike_with_and_without_a_cores_profile() {
        let mut p = pool(8);
        let mut lazy = Plan::new(&p);
        let mut kept = Plan::new(&p);
        kept.keep_cores();
        let mut seed = 11u64;
        let mut next = move |m: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        let mut running: Vec<(u64, ResourceSet)> = Vec::new();
        for step in 0..300u64 {
            let now = step as f64;
            if next(3) == 0 && !running.is_empty() {
                let (id, r) = running.swap_remove(next(running.len() as u64) as usize);
                p.free(&r).unwrap();
                lazy.end(id);
                kept.end(id);
            } else if let Ok(r) = p.alloc(&whole(1 + next(3) as u32)) {
                let end = Some(now + 1.0 + next(50) as f64);
                lazy.start(step, &r, end);
                kept.start(step, &r, end);
                running.push((step, r));
            }
            let held: Vec<_> = (0..next(4))
                .map(|_| {
                    let need = lazy.need(&whole(1 + next(8) as u32));
                    let t = now + next(40) as f64;
                    let d = 1.0 + next(30) as f64;
                    (lazy.reserve(t, d, need), kept.reserve(t, d, need))
                })
                .collect();
            let need = lazy.need(&whole(1 + next(8) as u32));
            let d = 1.0 + next(60) as f64;
            assert_eq!(lazy.earliest(now, d, need), kept.earliest(now, d, need));
            assert_eq!(lazy.fits_now(now, d, need), kept.fits_now(now, d, need));
            assert_eq!(lazy.cores_free_at(now), kept.cores_free_at(now));
            for (a, b) in held {
                lazy.release(a);
                kept.release(b);
            }
        }
        assert!(lazy.cores.is_none());
    }

    #[test]
    fn nodes_going_down_shrink_what_is_free() {
        let p = pool(4);
        let mut plan = Plan::new(&p);
        plan.grow(-2, -8);
        assert_eq!(plan.earliest(0.0, 1.0, plan.need(&whole(3))), None);
        assert_eq!(plan.cores_free_at(0.0), 8);
    }
}
