//! Replay a workload in virtual time through the scheduling code the job
//! manager runs: the same pool, the same EASY reservation and backfill.
//!
//! A job asking `procs` cores gets `ceil(procs / cores_per_node)` whole
//! nodes. It runs for its run time, or until its time limit when it runs
//! past it (a timeout). At each instant, jobs that end give their nodes
//! back first, then the jobs submitted then join the queue, then one
//! scheduling pass runs: the queue in submit order (ties by job number),
//! the head started while it fits; under `easy`, a blocked head is
//! reserved and the jobs behind it are backfilled (every one of them is
//! looked at).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use super::backfill::{backfill, reserve};
use super::swf::SwfJob;
use crate::IdSet;
use crate::rset::{AllocError, AllocRequest, Node, Pool, ResourceSet};

/// The policies a replay can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Strict order.
    Fcfs,
    /// EASY backfill.
    Easy,
}

/// The machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Machine {
    /// Nodes.
    pub nodes: u32,
    /// Cores of each.
    pub cores_per_node: u32,
}

/// What happened to one job.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Its number in the trace.
    pub id: u64,
    /// When it was submitted.
    pub submit: f64,
    /// When it started.
    pub start: f64,
    /// When it ended.
    pub end: f64,
    /// Nodes it ran on.
    pub nodes: u32,
}

/// A replay's result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Replay {
    /// The jobs that ran, in the order they started.
    pub jobs: Vec<Outcome>,
    /// Jobs that can never run on the machine (more nodes than it has).
    pub unsatisfiable: Vec<u64>,
}

/// The figures a replay is judged by.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summary {
    /// Jobs that ran.
    pub jobs: usize,
    /// Node-seconds used over node-seconds available from the first submit
    /// to the last end.
    pub utilization: f64,
    /// Mean wait (start - submit), seconds.
    pub mean_wait: f64,
    /// 95th percentile wait (nearest rank), seconds.
    pub p95_wait: f64,
    /// Mean bounded slowdown: (wait + run) / max(run, 10 s), at least 1.
    pub mean_bounded_slowdown: f64,
    /// First submit to last end, seconds.
    pub makespan: f64,
}

/// A job waiting in the replay.
#[derive(Debug)]
struct Waiting {
    index: usize,
    req: AllocRequest,
}

/// Events at one instant, in the order they are handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    End,
    Submit,
}

/// The replay's running state.
struct Sim<'a> {
    jobs: &'a [SwfJob],
    events: BinaryHeap<Reverse<(u64, Kind, usize)>>,
    /// What each running job holds.
    held: Vec<Option<ResourceSet>>,
    /// The key of each running job with a limit in `ending`.
    limit_key: Vec<Option<u64>>,
    /// Running jobs with a limit, by when it ends.
    ending: BTreeMap<(u64, usize), ()>,
    out: Replay,
}

impl Sim<'_> {
    /// Job `i` starts at `now` on `r`.
    fn start(&mut self, i: usize, r: ResourceSet, now: f64) {
        let j = &self.jobs[i];
        let run = match j.requested {
            Some(limit) => j.run.min(limit),
            None => j.run,
        };
        let end = now + run;
        self.events.push(Reverse((time_key(end), Kind::End, i)));
        if let Some(limit) = j.requested {
            let k = time_key(now + limit);
            self.ending.insert((k, i), ());
            self.limit_key[i] = Some(k);
        }
        self.out.jobs.push(Outcome {
            id: j.id,
            submit: j.submit,
            start: now,
            end,
            nodes: r.nnodes() as u32,
        });
        self.held[i] = Some(r);
    }

    /// Job `i` ended: what it held goes back to `pool`.
    fn end(&mut self, i: usize, pool: &mut Pool) {
        if let Some(r) = self.held[i].take() {
            let _ = pool.free(&r);
        }
        if let Some(k) = self.limit_key[i].take() {
            self.ending.remove(&(k, i));
        }
    }
}

/// Replay `jobs` on `machine` under `policy`.
pub fn replay(jobs: &[SwfJob], machine: Machine, policy: Policy) -> Replay {
    let cores = machine.cores_per_node.max(1);
    let mut pool = Pool::new(
        ResourceSet::from_nodes(
            (0..machine.nodes)
                .map(|r| Node::new(r, None, IdSet::from_range(0, cores - 1), IdSet::new())),
        )
        .unwrap_or_default(),
    );
    let mut sim = Sim {
        jobs,
        events: jobs
            .iter()
            .enumerate()
            .map(|(i, j)| Reverse((time_key(j.submit), Kind::Submit, i)))
            .collect(),
        held: vec![None; jobs.len()],
        limit_key: vec![None; jobs.len()],
        ending: BTreeMap::new(),
        out: Replay::default(),
    };
    let mut queue: VecDeque<Waiting> = VecDeque::new();
    while let Some(Reverse((key, _, _))) = sim.events.peek().copied() {
        let now = f64::from_bits(key);
        while let Some(Reverse((k, kind, i))) = sim.events.peek().copied() {
            if k != key {
                break;
            }
            sim.events.pop();
            match kind {
                Kind::End => sim.end(i, &mut pool),
                Kind::Submit => {
                    let n = jobs[i].procs.div_ceil(u64::from(cores));
                    let Ok(n) = u32::try_from(n) else {
                        sim.out.unsatisfiable.push(jobs[i].id);
                        continue;
                    };
                    let mut req = AllocRequest::slots(n, cores);
                    req.nnodes = n;
                    req.exclusive = true;
                    queue.push_back(Waiting { index: i, req });
                }
            }
        }
        // The head while it fits.
        while let Some(head) = queue.front() {
            match pool.alloc(&head.req) {
                Ok(r) => {
                    let i = head.index;
                    queue.pop_front();
                    sim.start(i, r, now);
                }
                Err(AllocError::Busy) => break,
                Err(_) => {
                    sim.out.unsatisfiable.push(jobs[head.index].id);
                    queue.pop_front();
                }
            }
        }
        if policy != Policy::Easy || queue.len() < 2 {
            continue;
        }
        let rsv = {
            let running: Vec<(f64, &ResourceSet)> = sim
                .ending
                .keys()
                .filter_map(|&(k, i)| sim.held[i].as_ref().map(|r| (f64::from_bits(k), r)))
                .collect();
            reserve(&pool, &running, &queue[0].req, now)
        };
        let Some(rsv) = rsv else {
            continue;
        };
        let mut k = 1;
        while k < queue.len() {
            let w = &queue[k];
            let end = jobs[w.index].requested.map(|limit| now + limit);
            match backfill(&mut pool, &w.req, end, &rsv) {
                Ok(r) => {
                    let i = w.index;
                    let _ = queue.remove(k);
                    sim.start(i, r, now);
                }
                Err(AllocError::Busy) => k += 1,
                Err(_) => {
                    sim.out.unsatisfiable.push(jobs[w.index].id);
                    let _ = queue.remove(k);
                }
            }
        }
    }
    sim.out
}

/// Non-negative times order as their bits.
fn time_key(t: f64) -> u64 {
    t.max(0.0).to_bits()
}

/// The figures of `replay` on a machine of `nodes` nodes.
pub fn summarize(replay: &Replay, nodes: u32) -> Summary {
    let jobs = &replay.jobs;
    if jobs.is_empty() {
        return Summary::default();
    }
    let first = jobs.iter().map(|j| j.submit).fold(f64::INFINITY, f64::min);
    let last = jobs.iter().map(|j| j.end).fold(0.0, f64::max);
    let makespan = (last - first).max(0.0);
    let used: f64 = jobs
        .iter()
        .map(|j| (j.end - j.start) * f64::from(j.nodes))
        .sum();
    let mut waits: Vec<f64> = jobs.iter().map(|j| j.start - j.submit).collect();
    waits.sort_by(f64::total_cmp);
    let n = waits.len() as f64;
    let rank = ((0.95 * n).ceil() as usize).clamp(1, waits.len());
    let slowdown: f64 = jobs
        .iter()
        .map(|j| {
            let run = j.end - j.start;
            ((j.start - j.submit + run) / run.max(10.0)).max(1.0)
        })
        .sum();
    Summary {
        jobs: jobs.len(),
        utilization: if makespan > 0.0 {
            used / (f64::from(nodes) * makespan)
        } else {
            0.0
        },
        mean_wait: waits.iter().sum::<f64>() / n,
        p95_wait: waits[rank - 1],
        mean_bounded_slowdown: slowdown / n,
        makespan,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u64, submit: f64, run: f64, nodes: u64, limit: Option<f64>) -> SwfJob {
        SwfJob {
            id,
            submit,
            run,
            procs: nodes * 4,
            requested: limit,
            user: None,
        }
    }

    const M: Machine = Machine {
        nodes: 4,
        cores_per_node: 4,
    };

    fn starts(r: &Replay) -> Vec<(u64, f64)> {
        let mut v: Vec<(u64, f64)> = r.jobs.iter().map(|o| (o.id, o.start)).collect();
        v.sort_by_key(|x| x.0);
        v
    }

    /// 3 nodes busy until 100, a whole-machine head, a short and a long job.
    fn trace() -> Vec<SwfJob> {
        vec![
            job(1, 0.0, 100.0, 3, Some(100.0)),
            job(2, 1.0, 50.0, 4, Some(60.0)),
            job(3, 2.0, 20.0, 1, Some(30.0)),
            job(4, 3.0, 20.0, 1, Some(500.0)),
        ]
    }

    #[test]
    fn fcfs_keeps_order() {
        let r = replay(&trace(), M, Policy::Fcfs);
        assert_eq!(starts(&r), [(1, 0.0), (2, 100.0), (3, 150.0), (4, 150.0)]);
    }

    #[test]
    fn easy_backfills_the_short_job_only() {
        let r = replay(&trace(), M, Policy::Easy);
        assert_eq!(starts(&r), [(1, 0.0), (2, 100.0), (3, 2.0), (4, 150.0)]);
    }

    #[test]
    fn a_job_past_its_limit_ends_at_the_limit_and_the_head_never_waits_longer() {
        // Job 1 runs 1,000 s but asked for 100: a timeout at 100.
        let jobs = vec![
            job(1, 0.0, 1000.0, 3, Some(100.0)),
            job(2, 1.0, 10.0, 4, Some(10.0)),
            job(3, 2.0, 10.0, 1, Some(90.0)),
        ];
        let r = replay(&jobs, M, Policy::Easy);
        assert_eq!(starts(&r), [(1, 0.0), (2, 100.0), (3, 2.0)]);
        assert_eq!(r.jobs.iter().find(|o| o.id == 1).unwrap().end, 100.0);
    }

    #[test]
    fn a_job_larger_than_the_machine_is_reported() {
        let r = replay(&[job(9, 0.0, 1.0, 5, None)], M, Policy::Easy);
        assert_eq!(r.unsatisfiable, [9]);
        assert!(r.jobs.is_empty());
    }

    #[test]
    fn easy_never_delays_the_heads_reservation_on_a_generated_trace() {
        let jobs = super::super::swf::generate(400, 16, 4, 3);
        let m = Machine {
            nodes: 16,
            cores_per_node: 4,
        };
        let fcfs = summarize(&replay(&jobs, m, Policy::Fcfs), 16);
        let easy = summarize(&replay(&jobs, m, Policy::Easy), 16);
        assert_eq!(fcfs.jobs, 400);
        assert_eq!(easy.jobs, 400);
        assert!(easy.mean_wait <= fcfs.mean_wait, "{easy:?} vs {fcfs:?}");
        assert!(easy.utilization >= fcfs.utilization * 0.99);
    }
}
