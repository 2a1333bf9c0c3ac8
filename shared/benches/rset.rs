//! Resource sets at cluster scale: 16,384 nodes, 64 cores and 8 gpus each.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use fluxgate_shared::ResourceSet;
use fluxgate_shared::idset::IdSet;
use fluxgate_shared::rset::{AllocRequest, Node, Pool};

const NODES: u32 = 16_384;

fn big_r_text() -> String {
    format!(
        "{{\"version\":1,\"execution\":{{\"R_lite\":[{{\"rank\":\"0-{}\",\
         \"children\":{{\"core\":\"0-63\",\"gpu\":\"0-7\"}}}}],\
         \"starttime\":0.0,\"expiration\":0.0,\"nodelist\":[\"node[0-{}]\"]}}}}",
        NODES - 1,
        NODES - 1
    )
}

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

/// A pool with a quarter of the nodes taken whole and 10,000 single-core
/// jobs spread (worst-fit) over the rest, so most nodes are partly busy.
fn busy_pool() -> Pool {
    let mut pool = Pool::new(big_r());
    pool.alloc(&AllocRequest::nodes_exclusive(NODES / 4))
        .expect("whole nodes");
    for _ in 0..10_000 {
        pool.alloc(&AllocRequest::slots(1, 1)).expect("a core");
    }
    pool
}

fn parse_count(c: &mut Criterion) {
    let text = big_r_text();
    c.bench_function("rset/parse+count 16k nodes", |b| {
        b.iter(|| {
            let rs = ResourceSet::parse(black_box(&text)).expect("valid R");
            black_box((rs.nnodes(), rs.ncores(), rs.ngpus()))
        })
    });
    let rs = ResourceSet::parse(&text).expect("valid R");
    c.bench_function("rset/emit 16k nodes", |b| {
        b.iter(|| black_box(rs.to_json_string()))
    });
}

fn alloc_free(c: &mut Criterion) {
    let mut pool = busy_pool();
    let one_core = AllocRequest::slots(1, 1);
    c.bench_function("rset/alloc+free 1 core (16k nodes, busy)", |b| {
        b.iter(|| {
            let r = pool.alloc(black_box(&one_core)).expect("fits");
            pool.free(&r).expect("allocated");
        })
    });
    let one_node = AllocRequest::nodes_exclusive(1);
    c.bench_function("rset/alloc+free 1 node (16k nodes, busy)", |b| {
        b.iter(|| {
            let r = pool.alloc(black_box(&one_node)).expect("fits");
            pool.free(&r).expect("allocated");
        })
    });
}

criterion_group!(benches, parse_count, alloc_free);
criterion_main!(benches);
