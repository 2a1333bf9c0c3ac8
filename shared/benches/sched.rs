//! One EASY backfill pass at cluster scale: 16,384 nodes of 64 cores, all
//! busy with 1,024 running 16-node jobs (time limits spread over an hour),
//! a whole-machine head, and 1,000 jobs behind it looked at (the default
//! `sched.queue_depth`, however many more are pending: 100,000 or one).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use fluxgate_shared::ResourceSet;
use fluxgate_shared::idset::IdSet;
use fluxgate_shared::rset::{AllocRequest, Node, Pool};
use fluxgate_shared::sched::{backfill, reserve};

const NODES: u32 = 16_384;
const RUNNING: u32 = 1_024;
const DEPTH: usize = 1_000;

fn nodes(n: u32) -> AllocRequest {
    let mut r = AllocRequest::slots(n, 64);
    r.nnodes = n;
    r.exclusive = true;
    r
}

fn setup() -> (Pool, Vec<(f64, ResourceSet)>) {
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
    let running = (0..RUNNING)
        .map(|i| {
            let r = pool.alloc(&nodes(NODES / RUNNING)).expect("fits");
            (60.0 + f64::from(i) * 3.5, r)
        })
        .collect();
    (pool, running)
}

fn pass(c: &mut Criterion) {
    let (mut pool, running) = setup();
    let ending: Vec<(f64, &ResourceSet)> = running.iter().map(|(t, r)| (*t, r)).collect();
    let head = nodes(NODES);
    let behind: Vec<(AllocRequest, f64)> = (0..DEPTH)
        .map(|i| (nodes(1 + (i as u32 % 8)), 30.0 + (i as f64 % 7.0) * 600.0))
        .collect();
    c.bench_function(
        "easy pass: reserve + 1,000 candidates, 16,384 nodes busy",
        |b| {
            b.iter(|| {
                let rsv = reserve(&pool, &ending, &head, 0.0).expect("fits at the end");
                let mut started = 0;
                for (req, dur) in &behind {
                    if let Ok(r) = backfill(&mut pool, req, Some(*dur), &rsv) {
                        started += 1;
                        pool.free(&r).expect("give back");
                    }
                }
                black_box((rsv.start, started))
            })
        },
    );
}

criterion_group!(benches, pass);
criterion_main!(benches);
