//! Replay a workload in virtual time through the scheduling code the job
//! manager runs: the same pool, plan and pass ([`super::pass`]).
//!
//! A job asking `procs` cores gets `ceil(procs / cores_per_node)` whole
//! nodes. It runs for its run time, or until its time limit when it runs
//! past it (a timeout). At each instant, jobs that end give their nodes
//! back first, then the jobs submitted then join the queue, then one
//! scheduling pass runs over the queue in submit order (ties by job
//! number), at most `queue_depth` jobs deep.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::pass::{Decision, Pending, Policy, Reserve, pass};
use super::plan::Plan;
use super::swf::SwfJob;
use crate::IdSet;
use crate::rset::{AllocRequest, Node, Pool, ResourceSet};

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

/// Events at one instant, in the order they are handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    End,
    Submit,
}

/// Replay `jobs` on `machine` under `policy`, looking at most
/// `queue_depth` waiting jobs deep in each pass.
pub fn replay(jobs: &[SwfJob], machine: Machine, policy: Policy, queue_depth: usize) -> Replay {
    let cores = machine.cores_per_node.max(1);
    let mut pool = machine_pool(machine.nodes, cores);
    let mut plan = Plan::new(&pool);
    let mut events: BinaryHeap<Reverse<(u64, Kind, usize)>> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| Reverse((time_key(j.submit), Kind::Submit, i)))
        .collect();
    let mut held: Vec<Option<ResourceSet>> = vec![None; jobs.len()];
    // Jobs that have left the queue, started or refused.
    let mut left = vec![false; jobs.len()];
    let mut out = Replay::default();
    // Waiting jobs in submit order, with what each asks.
    // Jobs leave from anywhere in it: they are marked in `left` and
    // swept out when they are at the front or make up half of it.
    let mut queue: VecDeque<(usize, AllocRequest)> = VecDeque::new();
    let mut marked = 0usize;
    while let Some(Reverse((key, _, _))) = events.peek().copied() {
        let now = f64::from_bits(key);
        while let Some(Reverse((k, kind, i))) = events.peek().copied() {
            if k != key {
                break;
            }
            events.pop();
            match kind {
                Kind::End => {
                    if let Some(r) = held[i].take() {
                        let _ = pool.free(&r);
                    }
                    plan.end(i as u64);
                }
                Kind::Submit => {
                    let n = jobs[i].procs.div_ceil(u64::from(cores));
                    let Ok(n) = u32::try_from(n) else {
                        out.unsatisfiable.push(jobs[i].id);
                        continue;
                    };
                    let mut req = AllocRequest::slots(n, cores);
                    req.nnodes = n;
                    req.exclusive = true;
                    queue.push_back((i, req));
                }
            }
        }
        if queue.is_empty() {
            continue;
        }
        let pending = queue
            .iter()
            .filter(|(i, _)| !left[*i])
            .take(queue_depth)
            .map(|(i, req)| Pending {
                id: *i as u64,
                req,
                duration: jobs[*i].requested,
            });
        let decisions = pass(
            policy,
            Reserve::WhileFree,
            Some(&mut plan),
            &mut pool,
            now,
            pending,
        );
        let mut gone = 0;
        for d in decisions {
            match d {
                Decision::Start { id, r } => {
                    let i = id as usize;
                    let j = &jobs[i];
                    let run = j.requested.map_or(j.run, |limit| j.run.min(limit));
                    let end = now + run;
                    events.push(Reverse((time_key(end), Kind::End, i)));
                    out.jobs.push(Outcome {
                        id: j.id,
                        submit: j.submit,
                        start: now,
                        end,
                        nodes: r.nnodes() as u32,
                    });
                    held[i] = Some(r);
                    left[i] = true;
                    gone += 1;
                }
                Decision::Refuse { id, .. } => {
                    out.unsatisfiable.push(jobs[id as usize].id);
                    left[id as usize] = true;
                    gone += 1;
                }
                Decision::Estimate { .. } => {}
            }
        }
        if gone > 0 {
            marked += gone;
            sweep(&mut queue, &left, &mut marked);
        }
    }
    out
}

/// A machine of `nodes` nodes of `cores` cores each, all free.
fn machine_pool(nodes: u32, cores: u32) -> Pool {
    Pool::new(
        ResourceSet::from_nodes(
            (0..nodes).map(|r| Node::new(r, None, IdSet::from_range(0, cores - 1), IdSet::new())),
        )
        .unwrap_or_default(),
    )
}

/// Drop the jobs that have left from the front of the queue, and from all
/// of it once they make up half of it (`marked` of them are still in it).
fn sweep<T>(queue: &mut VecDeque<(usize, T)>, left: &[bool], marked: &mut usize) {
    while queue.front().is_some_and(|(i, _)| left[*i]) {
        queue.pop_front();
        *marked -= 1;
    }
    if *marked * 2 > queue.len() {
        queue.retain(|(i, _)| !left[*i]);
        *marked = 0;
    }
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
        let r = replay(&trace(), M, Policy::Fcfs, usize::MAX);
        assert_eq!(starts(&r), [(1, 0.0), (2, 100.0), (3, 150.0), (4, 150.0)]);
    }

    #[test]
    fn easy_backfills_the_short_job_only() {
        let r = replay(&trace(), M, Policy::Easy, usize::MAX);
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
        let r = replay(&jobs, M, Policy::Easy, usize::MAX);
        assert_eq!(starts(&r), [(1, 0.0), (2, 100.0), (3, 2.0)]);
        assert_eq!(r.jobs.iter().find(|o| o.id == 1).unwrap().end, 100.0);
    }

    #[test]
    fn a_job_larger_than_the_machine_is_reported() {
        let r = replay(&[job(9, 0.0, 1.0, 5, None)], M, Policy::Easy, usize::MAX);
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
        let fcfs = summarize(&replay(&jobs, m, Policy::Fcfs, usize::MAX), 16);
        let easy = summarize(&replay(&jobs, m, Policy::Easy, usize::MAX), 16);
        assert_eq!(fcfs.jobs, 400);
        assert_eq!(easy.jobs, 400);
        assert!(easy.mean_wait <= fcfs.mean_wait, "{easy:?} vs {fcfs:?}");
        assert!(easy.utilization >= fcfs.utilization * 0.99);
        let cons = summarize(
            &replay(&jobs, m, Policy::Conservative { depth: 64 }, usize::MAX),
            16,
        );
        assert_eq!(cons.jobs, 400);
        assert!(cons.mean_wait <= fcfs.mean_wait, "{cons:?} vs {fcfs:?}");
    }

    #[test]
    fn conservative_does_not_let_a_long_job_delay_the_second_in_line() {
        // Nodes 0-2 busy until 100 (job 1). Job 2 (3 nodes) is reserved at
        // 100-200, leaving node 3 spare; job 3 (4 nodes, 100 s) could start
        // at 200. Job 4 (1 node, 250 s, submitted last) fits on the spare
        // node under easy, but it would still hold it at 200, so
        // conservative keeps it waiting until job 3 is done.
        let jobs = vec![
            job(1, 0.0, 100.0, 3, Some(100.0)),
            job(2, 1.0, 100.0, 3, Some(100.0)),
            job(3, 2.0, 100.0, 4, Some(100.0)),
            job(4, 3.0, 250.0, 1, Some(250.0)),
        ];
        let easy = replay(&jobs, M, Policy::Easy, usize::MAX);
        let cons = replay(&jobs, M, Policy::Conservative { depth: 64 }, usize::MAX);
        assert_eq!(starts(&easy), [(1, 0.0), (2, 100.0), (3, 253.0), (4, 3.0)]);
        assert_eq!(
            starts(&cons),
            [(1, 0.0), (2, 100.0), (3, 200.0), (4, 300.0)]
        );
    }
}
