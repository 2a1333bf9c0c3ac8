//! One scheduling pass at cluster scale: 16,384 nodes of 64 cores, all but
//! 4 busy with 1,024 running jobs (time limits spread over an hour),
//! 100,000 pending jobs with a whole-machine job at their head, and the
//! first 1,000 of them looked at (the default `sched.queue_depth`), under
//! easy and under conservative (64 reservations). None of them fits in
//! the 4 idle nodes, so every one is looked at: the worst pass.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use fluxgate_shared::ResourceSet;
use fluxgate_shared::idset::IdSet;
use fluxgate_shared::rset::{AllocRequest, Node, Pool};
use fluxgate_shared::sched::{Pending, Plan, Policy, Reserve, pass};

const NODES: u32 = 16_384;
const RUNNING: u32 = 1_024;
const PENDING: usize = 100_000;
const DEPTH: usize = 1_000;

fn nodes(n: u32) -> AllocRequest {
    let mut r = AllocRequest::slots(n, 64);
    r.nnodes = n;
    r.exclusive = true;
    r
}

fn setup() -> (Pool, Plan) {
    let inventory = ResourceSet::from_nodes((0..NODES).map(|r| {
        Node::new(
            r,
            Some(&format!("node{r}")),
            IdSet::from_range(0, 63),
            IdSet::new(),
        )
    }))
    .expect("disjoint");
    let mut pool = Pool::new(inventory);
    let mut plan = Plan::new(&pool);
    for i in 0..RUNNING {
        let n = if i == 0 {
            NODES / RUNNING - 4
        } else {
            NODES / RUNNING
        };
        let r = pool.alloc(&nodes(n)).expect("fits");
        plan.start(u64::from(i), &r, Some(60.0 + f64::from(i) * 3.5));
    }
    (pool, plan)
}

fn passes(c: &mut Criterion) {
    let (mut pool, mut plan) = setup();
    let mut reqs: Vec<(AllocRequest, f64)> = (0..PENDING)
        .map(|i| (nodes(5 + (i as u32 % 8)), 30.0 + (i as f64 % 7.0) * 600.0))
        .collect();
    reqs[0] = (nodes(NODES), 3600.0);
    let pending = || {
        reqs.iter()
            .enumerate()
            .take(DEPTH)
            .map(|(i, (req, d))| Pending {
                id: 1_000_000 + i as u64,
                req,
                duration: Some(*d),
            })
    };
    for policy in [Policy::Easy, Policy::Conservative { depth: 64 }] {
        let name = format!("{policy} pass: 100,000 pending, 16,384 nodes busy");
        c.bench_function(&name, |b| {
            b.iter(|| {
                let out = pass(
                    policy,
                    Reserve::ToDepth,
                    Some(&mut plan),
                    &mut pool,
                    0.0,
                    pending(),
                );
                assert!(
                    out.iter()
                        .all(|d| matches!(d, fluxgate_shared::sched::Decision::Estimate { .. }))
                );
                black_box(out.len())
            })
        });
    }
}

criterion_group!(benches, passes);
criterion_main!(benches);
