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
    cores: SpanId,
}

#[derive(Debug)]
struct Running {
    ranks: Vec<u32>,
    end: u64,
    cores: SpanId,
}

/// Idle nodes and free cores over time.
#[derive(Debug)]
pub struct Plan {
    nodes: Profile,
    cores: Profile,
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
        Plan {
            nodes: Profile::new(nodes as i64),
            cores: Profile::new(cores as i64),
            node_cores: pool.max_node_cores().max(1),
            running: HashMap::new(),
            on_node: HashMap::new(),
            busy_until: BTreeMap::new(),
        }
    }

    /// Nodes and cores came up (positive) or went down (negative).
    pub fn grow(&mut self, nodes: i64, cores: i64) {
        self.nodes.grow(nodes);
        self.cores.grow(cores);
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
        let cores = self.cores.take(0.0, end, r.ncores() as i64);
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
                cores,
            },
        );
    }

    /// Job `job` no longer holds anything.
    pub fn end(&mut self, job: u64) {
        let Some(run) = self.running.remove(&job) else {
            return;
        };
        self.cores.give_back(run.cores);
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
        // Each profile's answer is where the other's search resumes: both
        // move only forward, and they meet at the first time both fit.
        let mut t = now;
        loop {
            let a = self.nodes.earliest(t, duration, need.nodes)?;
            let b = self.cores.earliest(a, duration, need.cores)?;
            if b <= a {
                return Some(a);
            }
            t = b;
        }
    }

    /// Whether `need` is free from `now` for `duration` seconds.
    pub fn fits_now(&self, now: f64, duration: f64, need: Need) -> bool {
        let end = now + duration;
        self.nodes.min_over(now, end) >= need.nodes && self.cores.min_over(now, end) >= need.cores
    }

    /// Cores free at `now`, reservations taken.
    pub fn cores_free_at(&self, now: f64) -> i64 {
        self.cores.free_at(now)
    }

    /// Hold `need` from `start` for `duration` seconds.
    pub fn reserve(&mut self, start: f64, duration: f64, need: Need) -> Held {
        let end = start + duration;
        Held {
            nodes: self.nodes.take(start, end, need.nodes),
            cores: self.cores.take(start, end, need.cores),
        }
    }

    /// Give a reservation back.
    pub fn release(&mut self, held: Held) {
        self.nodes.give_back(held.nodes);
        self.cores.give_back(held.cores);
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
    use crate::rset::Node;

    fn pool(nodes: u32) -> Pool {
        Pool::new(
            ResourceSet::from_nodes(
                (0..nodes).map(|r| Node::new(r, None, IdSet::from_range(0, 3), IdSet::new())),
            )
            .unwrap(),
        )
    }

    fn whole(n: u32) -> AllocRequest {
        let mut r = AllocRequest::slots(n, 4);
        r.nnodes = n;
        r.exclusive = true;
        r
    }

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
    fn nodes_going_down_shrink_what_is_free() {
        let p = pool(4);
        let mut plan = Plan::new(&p);
        plan.grow(-2, -8);
        assert_eq!(plan.earliest(0.0, 1.0, plan.need(&whole(3))), None);
        assert_eq!(plan.cores_free_at(0.0), 8);
    }
}
