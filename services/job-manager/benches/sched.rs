//! The scheduler's cost per decision on a cluster-sized inventory: 16,384
//! nodes of 64 cores and 8 gpus, busy (a quarter of the nodes taken whole,
//! 10,000 single-core jobs spread over the rest).
//!
//! A decision is what `Core::schedule` does for the head of the queue:
//! turn its jobspec into a request, try the pool, and on a grant take the
//! job out of the queue. Each iteration also frees what was granted, so the
//! pool stays as busy as it started. Not included: writing the job's R and
//! alloc event, which happen once per granted job whatever the queue holds.
//!
//! - `sched/alloc+free ...`: one decision that is granted, for 1 core, 1
//!   whole node and 128 whole nodes.
//! - `sched/blocked head ...`: one decision on a head that does not fit now
//!   (every event retries it), on a pool with no idle node.
//! - `sched/queue depth/N`: with N jobs pending, one job enters at the tail
//!   and the head is granted 1 core and leaves; the queue keeps its depth.
//!   The cost must not grow with N.
//!
//! `cargo bench -p fluxgate-job-manager --bench sched -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use fluxgate_job_manager::core::sched::{Sched, request};
use fluxgate_shared::idset::IdSet;
use fluxgate_shared::jobspec::JobspecBuilder;
use fluxgate_shared::rset::{AllocError, AllocRequest, Node};
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
/// 10,000 single-core jobs spread (worst-fit) over the rest.
fn busy_sched() -> Sched {
    let mut sched = Sched::new();
    sched.define(big_r());
    sched.set_up(&IdSet::from_range(0, NODES - 1), true);
    // Setup grants go to ids above any the cases queue; they never leave.
    let setup = JobId::from(u64::MAX);
    sched
        .try_alloc(setup, &AllocRequest::nodes_exclusive(NODES / 4))
        .expect("whole nodes");
    for _ in 0..10_000 {
        sched
            .try_alloc(setup, &AllocRequest::slots(1, 1))
            .expect("a core");
    }
    sched
}

fn jobspec(builder: JobspecBuilder) -> Jobspec {
    builder.build().expect("valid jobspec")
}

fn one_core() -> Jobspec {
    jobspec(JobspecBuilder::new(["true"]))
}

/// Decide for the head of the queue as `Core::schedule` does.
fn decide(sched: &mut Sched, jobspec: &Jobspec) -> Result<ResourceSet, AllocError> {
    let id = sched.head().expect("a queued job");
    let req = request(jobspec).expect("a valid request");
    sched.try_alloc(id, &req)
}

fn alloc_free(c: &mut Criterion) {
    let mut sched = busy_sched();
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
        c.bench_function(&format!("sched/alloc+free {name} (16k nodes, busy)"), |b| {
            b.iter(|| {
                sched.enqueue(id, PRIORITY);
                let r = decide(&mut sched, black_box(spec)).expect("fits");
                sched.free(&r).expect("allocated");
                r.nnodes()
            })
        });
        sched.enqueue(id, PRIORITY);
        let r = decide(&mut sched, spec).expect("fits");
        assert_eq!(r.nnodes(), *nnodes, "{name}: wrong shape");
        assert_eq!(sched.head(), None, "{name}: a granted job left the queue");
        sched.free(&r).expect("allocated");
    }
}

fn blocked_head(c: &mut Criterion) {
    let mut sched = busy_sched();
    // Leave no node idle: one core taken on each of the 12,288 nodes that
    // were not taken whole (worst-fit visits idle nodes first).
    let setup = JobId::from(u64::MAX);
    for _ in 0..NODES - NODES / 4 {
        sched
            .try_alloc(setup, &AllocRequest::slots(1, 1))
            .expect("a core");
    }
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
            &format!("sched/blocked head {name} (16k nodes, none idle)"),
            |b| {
                b.iter(|| {
                    sched.set_up(&nothing, true);
                    decide(&mut sched, black_box(spec)).is_err()
                })
            },
        );
        // Any other event finds the head stalled and does not.
        c.bench_function(
            &format!("sched/blocked head {name}, nothing freed since"),
            |b| b.iter(|| decide(&mut sched, black_box(spec)).is_err()),
        );
    }
}

fn queue_depth(c: &mut Criterion) {
    let mut sched = busy_sched();
    let spec = one_core();
    let mut group = c.benchmark_group("sched/queue depth");
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
                let r = decide(&mut sched, black_box(&spec)).expect("fits");
                sched.free(&r).expect("allocated");
            })
        });
    }
    group.finish();
}

criterion_group!(benches, alloc_free, blocked_head, queue_depth);
criterion_main!(benches);
