//! The scheduler's cost per decision on a cluster-sized inventory: 16,384
//! nodes of 64 cores and 8 gpus, busy (a quarter of the nodes taken whole,
//! 10,000 single-core jobs spread over the rest).
//!
//! A decision is a pass of the seat (`Sched::pass`, what `Core::schedule`
//! runs) over a queue whose head is the job asked about: turn its jobspec
//! into a request, try the pool, and on a grant take the job out of the
//! queue. Each iteration also frees what was granted, so the pool stays as
//! busy as it started. Not included: writing the job's R and alloc event,
//! which happen once per granted job whatever the queue holds.
//!
//! - `sched/alloc+free ...`: one decision that is granted, for 1 core, 1
//!   whole node and 128 whole nodes.
//! - `sched/blocked head ...`: one pass on a head that does not fit now
//!   (every change retries it), on a pool with no idle node, under easy:
//!   the head is reserved.
//! - `sched/queue depth/N`: with N jobs pending, one job enters at the tail
//!   and the head is granted 1 core and leaves; the queue keeps its depth.
//!   The cost must not grow with N.
//!
//! `cargo bench -p fluxgate-job-manager --bench sched -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use std::sync::Arc;

use fluxgate_job_manager::core::sched::{Sched, request};
use fluxgate_shared::idset::IdSet;
use fluxgate_shared::jobspec::JobspecBuilder;
use fluxgate_shared::rset::{AllocError, AllocRequest, Node, Pool};
use fluxgate_shared::sched::{Decision, Pending, Policy};
use fluxgate_shared::{JobId, Jobspec, ResourceSet};

const NODES: u32 = 16_384;

/// The default priority of a job at the default urgency.
const PRIORITY: u32 = 16;

fn big_r() -> ResourceSet {
    ResourceSet::from_nodes((0..NODES).map(|r| {
        Node::new(
            r,
            Some(&format!("node{r}")),
            IdSet::from_range(0, 63),
            IdSet::from_range(0, 7),
        )
    }))
    .expect("disjoint")
}

/// A scheduler over the 16k-node R with every node up and, as in the
/// `fluxgate-shared` rset bench, a quarter of the nodes taken whole and
/// 10,000 single-core jobs spread (worst-fit) over the rest, looking one
/// job deep (one decision per pass). `easy` keeps the plan up to date on
/// every grant and free; `fcfs` keeps none.
fn busy_sched(policy: Policy) -> Sched {
    let mut sched = Sched::with_policy(policy, 1);
    sched.define(big_r());
    sched.set_up(&IdSet::from_range(0, NODES - 1), true);
    take(&mut sched, &[AllocRequest::nodes_exclusive(NODES / 4)]);
    take(&mut sched, &vec![AllocRequest::slots(1, 1); 10_000]);
    sched
}

/// Hold `reqs` as running jobs (ids above any the cases queue), placed as
/// a pool of the same R places them, with limits over the next hour.
fn take(sched: &mut Sched, reqs: &[AllocRequest]) {
    let mut shadow = Pool::new(big_r());
    shadow
        .mark_allocated(&sched.pool().expect("defined").allocated())
        .expect("allocated in the copy");
    for (i, req) in reqs.iter().enumerate() {
        let r = shadow.alloc(req).expect("fits");
        sched.mark_allocated(&r);
        let id = JobId::from(u64::MAX - (i as u64) - u64::from(NODES));
        sched.hold(id, Arc::new(r), Some(60.0 + (i % 3600) as f64));
    }
}

fn jobspec(builder: JobspecBuilder) -> Jobspec {
    builder.build().expect("valid jobspec")
}

fn one_core() -> Jobspec {
    jobspec(JobspecBuilder::new(["true"]))
}

/// Decide for the head of the queue as `Core::schedule` does: the first
/// decision of a pass.
fn decide(sched: &mut Sched, jobspec: &Jobspec) -> Result<ResourceSet, AllocError> {
    let req = request(jobspec).expect("a valid request");
    let out = sched.pass(0.0, |id| {
        Some(Pending {
            id: id.into(),
            req: &req,
            duration: Some(3600.0),
        })
    });
    match out.into_iter().next() {
        Some(Decision::Start { r, .. }) => Ok(r),
        Some(Decision::Refuse { error, .. }) => Err(error),
        _ => Err(AllocError::Busy),
    }
}

fn alloc_free(c: &mut Criterion) {
    for policy in [Policy::Fcfs, Policy::Easy] {
        alloc_free_under(c, policy);
    }
}

fn alloc_free_under(c: &mut Criterion, policy: Policy) {
    let mut sched = busy_sched(policy);
    let cases = [
        ("1 core", one_core(), 1),
        (
            "1 node",
            jobspec(JobspecBuilder::new(["true"]).nodes(1).exclusive(true)),
            1,
        ),
        (
            "128 nodes",
            jobspec(JobspecBuilder::new(["true"]).nodes(128).exclusive(true)),
            128,
        ),
    ];
    for (name, spec, nnodes) in &cases {
        let id = JobId::from(1);
        c.bench_function(
            &format!("sched/{policy}/alloc+free {name} (16k nodes, busy)"),
            |b| {
                b.iter(|| {
                    sched.enqueue(id, PRIORITY);
                    let r = decide(&mut sched, black_box(spec)).expect("fits");
                    sched.free(&r).expect("allocated");
                    sched.release_hold(id);
                    r.nnodes()
                })
            },
        );
        sched.enqueue(id, PRIORITY);
        let r = decide(&mut sched, spec).expect("fits");
        assert_eq!(r.nnodes(), *nnodes, "{name}: wrong shape");
        assert_eq!(sched.head(), None, "{name}: a granted job left the queue");
        sched.free(&r).expect("allocated");
        sched.release_hold(id);
    }
}

fn blocked_head(c: &mut Criterion) {
    for policy in [Policy::Fcfs, Policy::Easy] {
        blocked_head_under(c, policy);
    }
}

fn blocked_head_under(c: &mut Criterion, policy: Policy) {
    let mut sched = busy_sched(policy);
    // Leave no node idle: one core taken on each of the 12,288 nodes that
    // were not taken whole (worst-fit visits idle nodes first).
    take(
        &mut sched,
        &vec![AllocRequest::slots(1, 1); (NODES - NODES / 4) as usize],
    );
    let cases = [
        (
            "128 whole nodes",
            jobspec(JobspecBuilder::new(["true"]).nodes(128).exclusive(true)),
        ),
        (
            "128 nodes x 64 cores, shared",
            jobspec(
                JobspecBuilder::new(["true"])
                    .nodes(128)
                    .ntasks(128)
                    .cores_per_task(64)
                    .exclusive(false),
            ),
        ),
    ];
    let id = JobId::from(1);
    sched.enqueue(id, PRIORITY);
    for (name, spec) in &cases {
        assert_eq!(
            decide(&mut sched, spec).map(|r| r.nnodes()),
            Err(AllocError::Busy),
            "{name}: must wait"
        );
        assert_eq!(sched.head(), Some(id), "{name}: a busy head stays queued");
        // A retry after something came up or was freed looks at the pool again.
        let nothing = IdSet::new();
        c.bench_function(
            &format!("sched/{policy}/blocked head {name} (16k nodes, none idle)"),
            |b| {
                b.iter(|| {
                    sched.set_up(&nothing, true);
                    decide(&mut sched, black_box(spec)).is_err()
                })
            },
        );
        // Any other event finds the head stalled and does not.
        c.bench_function(
            &format!("sched/{policy}/blocked head {name}, nothing freed since"),
            |b| b.iter(|| decide(&mut sched, black_box(spec)).is_err()),
        );
    }
}

fn queue_depth(c: &mut Criterion) {
    for policy in [Policy::Fcfs, Policy::Easy] {
        queue_depth_under(c, policy);
    }
}

fn queue_depth_under(c: &mut Criterion, policy: Policy) {
    let mut sched = busy_sched(policy);
    let spec = one_core();
    let mut group = c.benchmark_group(format!("sched/{policy}/queue depth"));
    let mut queued = 0u64;
    let mut next = 1u64;
    for depth in [10u64, 10_000, 1_000_000] {
        while queued < depth {
            sched.enqueue(JobId::from(next), PRIORITY);
            next += 1;
            queued += 1;
        }
        group.bench_with_input(BenchmarkId::from_parameter(depth), &depth, |b, _| {
            b.iter(|| {
                sched.enqueue(JobId::from(next), PRIORITY);
                next += 1;
                let head = sched.head().expect("queued");
                let r = decide(&mut sched, black_box(&spec)).expect("fits");
                sched.free(&r).expect("allocated");
                sched.release_hold(head);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, alloc_free, blocked_head, queue_depth);
criterion_main!(benches);
