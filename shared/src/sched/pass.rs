//! One scheduling pass: the pending jobs in order, what each gets now and
//! when the first ones will start.
//!
//! The job manager and `fluxgate simulate` both run this code. Jobs are
//! started in order while they fit (RFC 27's sched-simple). The first one
//! that does not fit blocks the queue:
//!
//! - `fcfs` stops there;
//! - `easy` (Mu'alem and Feitelson, 2001) reserves it at the earliest time
//!   its request is free for its duration (the shadow time), and a job
//!   behind it starts now only if that cannot delay the reservation: it
//!   ends by then, or what it takes is spare then;
//! - `conservative` does the same for every job up to its reservation
//!   depth, each reserved in order on what the ones before it left, as
//!   Fluxion's hybrid does: a job behind them starts now only if it delays
//!   none of them.
//!
//! Reservations last one pass: the next pass, with the world changed,
//! makes them again. A job without a time limit is never started behind a
//! blocked job, and one that cannot be reserved at all (jobs without a
//! limit hold what it needs) stops the pass: nothing behind it can be
//! shown not to delay it.
//!
//! Pure: the time is an argument; no I/O.

use std::fmt;

use super::plan::{Held, Plan};
use crate::rset::{AllocError, AllocRequest, Pool, ResourceSet};

/// How jobs behind a blocked one are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Strict order: nothing passes a blocked job.
    Fcfs,
    /// EASY backfill: one reservation, for the first blocked job.
    Easy,
    /// Conservative backfill: reservations for up to `depth` blocked jobs.
    Conservative {
        /// How many blocked jobs get a reservation.
        depth: usize,
    },
}

/// The conservative policy's default depth (Fluxion's hybrid uses 64).
pub const RESERVATION_DEPTH: usize = 64;

/// An unknown policy name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scheduling policy {0:?}: use fcfs, easy or conservative")]
pub struct UnknownPolicy(pub String);

impl Policy {
    /// The policy named `name`, conservative with `depth` reservations.
    pub fn parse(name: &str, depth: usize) -> Result<Self, UnknownPolicy> {
        match name {
            "fcfs" => Ok(Policy::Fcfs),
            "easy" => Ok(Policy::Easy),
            "conservative" => Ok(Policy::Conservative { depth }),
            other => Err(UnknownPolicy(other.to_owned())),
        }
    }

    /// Its name, as configuration spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Policy::Fcfs => "fcfs",
            Policy::Easy => "easy",
            Policy::Conservative { .. } => "conservative",
        }
    }

    /// How many blocked jobs get a reservation.
    pub fn depth(&self) -> usize {
        match self {
            Policy::Fcfs => 0,
            Policy::Easy => 1,
            Policy::Conservative { depth } => (*depth).max(1),
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which blocked jobs a pass reserves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reserve {
    /// Every one up to the policy's depth, so each shows when it should
    /// start (the job manager's `sched.t_estimate`).
    ToDepth,
    /// Only while a reservation can still stop a job from starting now:
    /// once nothing is free now, the pass ends (a replay needs starts,
    /// not estimates).
    WhileFree,
}

/// A job waiting for resources, as a pass sees it.
#[derive(Debug, Clone, Copy)]
pub struct Pending<'a> {
    /// Its id.
    pub id: u64,
    /// What it asks for.
    pub req: &'a AllocRequest,
    /// How long it may run once started, seconds (`None`: no limit).
    pub duration: Option<f64>,
}

/// What a pass decided for one job.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// It starts now on these resources.
    Start {
        /// The job.
        id: u64,
        /// What it gets.
        r: ResourceSet,
    },
    /// It can never be satisfied.
    Refuse {
        /// The job.
        id: u64,
        /// Why.
        error: AllocError,
    },
    /// It waits, and is expected to start at `t`.
    Estimate {
        /// The job.
        id: u64,
        /// When.
        t: f64,
    },
}

/// Run one pass over `pending` (in queue order) at time `now`: jobs
/// started are taken from `pool` and entered in `plan`, which is
/// otherwise left as it was. Without a plan nothing passes a blocked job
/// (strict order needs none, so `fcfs` keeps none).
pub fn pass<'a>(
    policy: Policy,
    reserve: Reserve,
    mut plan: Option<&mut Plan>,
    pool: &mut Pool,
    now: f64,
    pending: impl IntoIterator<Item = Pending<'a>>,
) -> Vec<Decision> {
    let depth = if plan.is_some() { policy.depth() } else { 0 };
    let mut out = Vec::new();
    let mut held: Vec<Held> = Vec::new();
    let mut blocked = false;
    for job in pending {
        if !blocked {
            match pool.alloc(job.req) {
                Ok(r) => {
                    if let Some(plan) = plan.as_deref_mut() {
                        start(plan, now, job, &r);
                    }
                    out.push(Decision::Start { id: job.id, r });
                    continue;
                }
                Err(AllocError::Busy) => blocked = true,
                Err(error) => {
                    out.push(Decision::Refuse { id: job.id, error });
                    continue;
                }
            }
        }
        let Some(plan) = plan.as_deref_mut().filter(|_| depth > 0) else {
            break;
        };
        if let Some(d) = job.duration {
            let need = plan.need(job.req);
            if plan.fits_now(now, d, need) {
                match pool.alloc(job.req) {
                    Ok(r) => {
                        start(plan, now, job, &r);
                        out.push(Decision::Start { id: job.id, r });
                        continue;
                    }
                    Err(AllocError::Busy) => {}
                    Err(error) => {
                        out.push(Decision::Refuse { id: job.id, error });
                        continue;
                    }
                }
            }
        }
        if reserve == Reserve::WhileFree && plan.cores_free_at(now) <= 0 {
            break;
        }
        if held.len() < depth {
            let need = plan.need(job.req);
            let d = job.duration.unwrap_or(f64::INFINITY);
            // A job only some nodes can hold waits for those: counting
            // the whole pool would reserve it now, and hold back jobs that
            // could use the others.
            let t = match pool.hosts_for(job.req) {
                Some(hosts) => plan
                    .earliest_on(&hosts, now, d, need)
                    .and_then(|t| plan.earliest(t, d, need)),
                None => plan.earliest(now, d, need),
            };
            let Some(t) = t else {
                break;
            };
            held.push(plan.reserve(t, d, need));
            out.push(Decision::Estimate { id: job.id, t });
        } else if plan.cores_free_at(now) <= 0 {
            // Every reservation is made and nothing is free now: no job
            // further on could start.
            break;
        }
    }
    if let Some(plan) = plan {
        for h in held {
            plan.release(h);
        }
    }
    out
}

fn start(plan: &mut Plan, now: f64, job: Pending<'_>, r: &ResourceSet) {
    plan.start(job.id, r, job.duration.map(|d| now + d));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::IdSet;
    use crate::sched::testkit::{pool, whole};

    fn job(id: u64, req: &AllocRequest, duration: Option<f64>) -> Pending<'_> {
        Pending { id, req, duration }
    }

    /// A pass making every reservation, as the job manager runs it.
    fn run<'a>(
        policy: Policy,
        plan: &mut Plan,
        pool: &mut Pool,
        now: f64,
        jobs: impl IntoIterator<Item = Pending<'a>>,
    ) -> Vec<Decision> {
        pass(policy, Reserve::ToDepth, Some(plan), pool, now, jobs)
    }

    /// A 4-node pool with job 1 on nodes 0-2 until 100.
    fn three_busy() -> (Pool, Plan) {
        let mut p = pool(4);
        let mut plan = Plan::new(&p);
        let a = p.alloc(&whole(3)).unwrap();
        plan.start(1, &a, Some(100.0));
        (p, plan)
    }

    fn started(out: &[Decision]) -> Vec<u64> {
        out.iter()
            .filter_map(|d| match d {
                Decision::Start { id, .. } => Some(*id),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn easy_backfills_a_short_job_and_not_a_long_one() {
        let (mut p, mut plan) = three_busy();
        let (head, one) = (whole(4), whole(1));
        let jobs = [
            job(2, &head, Some(50.0)),
            job(3, &one, Some(500.0)),
            job(4, &one, None),
            job(5, &one, Some(60.0)),
        ];
        let out = run(Policy::Easy, &mut plan, &mut p, 10.0, jobs);
        assert_eq!(started(&out), [5]);
        assert!(out.contains(&Decision::Estimate { id: 2, t: 100.0 }));
        assert_eq!(plan.running(), 2);
        // Under fcfs nothing passes the head.
        let (mut p, mut plan) = three_busy();
        let out = run(Policy::Fcfs, &mut plan, &mut p, 10.0, jobs);
        assert!(out.is_empty());
    }

    #[test]
    fn a_long_job_may_use_what_the_reservation_leaves() {
        let mut p = pool(4);
        let mut plan = Plan::new(&p);
        let a = p.alloc(&whole(2)).unwrap();
        plan.start(1, &a, Some(100.0));
        let (three, one) = (whole(3), whole(1));
        let jobs = [
            job(2, &three, Some(50.0)),
            job(3, &one, Some(1000.0)),
            job(4, &one, Some(1000.0)),
        ];
        let out = run(Policy::Easy, &mut plan, &mut p, 0.0, jobs);
        assert_eq!(started(&out), [3], "one node is spare at the shadow time");
    }

    #[test]
    fn conservative_protects_the_second_blocked_job_too() {
        // Nodes 0-2 busy until 100. Job 2 wants 4 nodes for 100 (reserved
        // 100-200); job 3 wants 1 node for 300: under easy it starts now on
        // the spare node only if that ends by 100, so it is reserved at 200
        // under conservative; job 4 wants 1 node for 50 and fits now under
        // both; job 5 wants 2 nodes for 1000: easy leaves it (no spare),
        // conservative too.
        let (four, one, two) = (whole(4), whole(1), whole(2));
        let jobs = [
            job(2, &four, Some(100.0)),
            job(3, &one, Some(300.0)),
            job(4, &one, Some(50.0)),
            job(5, &two, Some(1000.0)),
        ];
        let (mut p, mut plan) = three_busy();
        let out = run(
            Policy::Conservative { depth: 64 },
            &mut plan,
            &mut p,
            0.0,
            jobs,
        );
        assert_eq!(started(&out), [4]);
        assert!(out.contains(&Decision::Estimate { id: 2, t: 100.0 }));
        assert!(out.contains(&Decision::Estimate { id: 3, t: 200.0 }));
        assert!(out.contains(&Decision::Estimate { id: 5, t: 200.0 }));
    }

    #[test]
    fn nothing_passes_a_job_that_cannot_be_reserved() {
        let mut p = pool(4);
        let mut plan = Plan::new(&p);
        let a = p.alloc(&whole(3)).unwrap();
        plan.start(1, &a, None);
        let (four, one) = (whole(4), whole(1));
        let jobs = [job(2, &four, Some(50.0)), job(3, &one, Some(1.0))];
        let out = run(Policy::Easy, &mut plan, &mut p, 0.0, jobs);
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn an_unsatisfiable_job_is_refused_and_the_queue_goes_on() {
        let mut p = pool(2);
        let mut plan = Plan::new(&p);
        let (big, one) = (whole(3), whole(1));
        let jobs = [job(1, &big, None), job(2, &one, None)];
        let out = run(Policy::Easy, &mut plan, &mut p, 0.0, jobs);
        assert!(matches!(out[0], Decision::Refuse { id: 1, .. }));
        assert_eq!(started(&out), [2]);
    }

    #[test]
    fn a_job_waiting_for_some_nodes_holds_back_only_those() {
        // Nodes 0-1 are "debug" and busy until 100; 2-3 are free.
        let mut p = pool(4);
        p.add_property("debug", &IdSet::from_range(0, 1)).unwrap();
        let mut plan = Plan::new(&p);
        let mut debug = whole(2);
        debug.constraint = Some(
            crate::rset::Constraint::from_json(&serde_json::json!({"properties": ["debug"]}))
                .unwrap(),
        );
        let mut busy = whole(2);
        busy.constraint = debug.constraint.clone();
        let a = p.alloc(&busy).unwrap();
        plan.start(1, &a, Some(100.0));
        let two = whole(2);
        let jobs = [job(2, &debug, Some(50.0)), job(3, &two, Some(1000.0))];
        let out = run(Policy::Easy, &mut plan, &mut p, 0.0, jobs);
        assert!(
            out.contains(&Decision::Estimate { id: 2, t: 100.0 }),
            "{out:?}"
        );
        assert_eq!(started(&out), [3], "the free nodes are not the debug job's");
    }

    #[test]
    fn policies_parse_by_name() {
        assert_eq!(Policy::parse("easy", 64), Ok(Policy::Easy));
        assert_eq!(
            Policy::parse("conservative", 8),
            Ok(Policy::Conservative { depth: 8 })
        );
        assert!(Policy::parse("sjf", 1).is_err());
        assert_eq!(Policy::Fcfs.depth(), 0);
    }
}
