//! Property tests: encode/decode roundtrip, set-algebra laws, alloc/free.

use fluxgate_shared::ResourceSet;
use fluxgate_shared::idset::IdSet;
use fluxgate_shared::rset::{AllocError, AllocMode, AllocRequest, Node, Pool};
use proptest::prelude::*;

fn idset(max: u32) -> impl Strategy<Value = IdSet> {
    proptest::collection::btree_set(0..max, 0..max as usize).prop_map(|s| {
        let mut ids = IdSet::new();
        for i in s {
            ids.insert(i);
        }
        ids
    })
}

/// A node of rank `rank` on host `n<rank>` with at least one core or gpu.
fn node(rank: u32) -> impl Strategy<Value = Node> {
    (idset(8), idset(4))
        .prop_filter("a node holds something", |(c, g)| {
            !c.is_empty() || !g.is_empty()
        })
        .prop_map(move |(c, g)| Node::new(rank, Some(&format!("n{rank}")), c, g))
}

fn rset() -> impl Strategy<Value = ResourceSet> {
    proptest::collection::btree_set(0u32..12, 0..8)
        .prop_flat_map(|ranks| {
            ranks
                .into_iter()
                .map(node)
                .collect::<Vec<_>>()
                .prop_map(|nodes| ResourceSet::from_nodes(nodes).expect("distinct ranks"))
        })
        .prop_flat_map(|rs| {
            let ranks = rs.ranks();
            (Just(rs), proptest::option::of(Just(ranks)), 0u32..3)
        })
        .prop_map(|(mut rs, prop_ranks, t)| {
            if let Some(ids) = prop_ranks
                && !ids.is_empty()
            {
                let first = IdSet::from_range(ids.first().unwrap(), ids.first().unwrap());
                rs.set_property("ssd", &first).unwrap();
                rs.set_property("all@gpu", &ids).unwrap();
            }
            if t > 0 {
                rs.set_starttime(Some(1_700_000_000.25 * f64::from(t)));
                rs.set_expiration(Some(1_800_000_000.123_456));
            }
            rs
        })
}

/// Nodes of a few ranks in any order, ranks repeated, ids sometimes
/// overlapping, hostnames sometimes missing.
fn loose_nodes() -> impl Strategy<Value = Vec<Node>> {
    proptest::collection::vec(
        (0u32..6, idset(6), idset(3), proptest::option::of(0u32..3)),
        0..14,
    )
    .prop_map(|v| {
        v.into_iter()
            .map(|(rank, c, g, host)| {
                Node::new(rank, host.map(|h| format!("h{h}")).as_deref(), c, g)
            })
            .collect()
    })
}

proptest! {
    #[test]
    fn from_nodes_matches_adding_one_at_a_time(nodes in loose_nodes()) {
        let mut one_by_one = ResourceSet::new();
        let expected = nodes
            .iter()
            .try_for_each(|n| one_by_one.add_node(n.clone()))
            .map(|()| one_by_one);
        prop_assert_eq!(ResourceSet::from_nodes(nodes), expected);
    }

    #[test]
    fn roundtrip(rs in rset()) {
        prop_assert_eq!(ResourceSet::parse(&rs.to_json_string()).unwrap(), rs.clone());
        prop_assert_eq!(ResourceSet::parse(&rs.encode_flux()).unwrap(), rs);
    }

    #[test]
    fn union_laws(a in rset(), b in rset()) {
        let u = a.union(&b);
        prop_assert_eq!(u.dumps(), b.union(&a).dumps());
        prop_assert_eq!(u.diff(&a).dumps(), b.diff(&a).dumps());
        prop_assert_eq!(u.ncores() + a.intersect(&b).ncores(), a.ncores() + b.ncores());
        prop_assert_eq!(a.union(&a).dumps(), a.dumps());
    }

    #[test]
    fn diff_intersect_laws(a in rset(), b in rset()) {
        let d = a.diff(&b);
        let i = a.intersect(&b);
        prop_assert!(d.intersect(&b).is_empty());
        prop_assert_eq!(i.dumps(), b.intersect(&a).dumps());
        // a = (a - b) + (a & b), disjointly.
        let mut back = d.clone();
        back.append(&i).unwrap();
        prop_assert_eq!(back.dumps(), a.dumps());
        prop_assert!(a.diff(&a).is_empty());
    }

    #[test]
    fn append_fails_exactly_on_overlap(a in rset(), b in rset()) {
        let mut x = a.clone();
        let overlap = !a.intersect(&b).is_empty();
        prop_assert_eq!(x.append(&b).is_err(), overlap);
        if overlap {
            prop_assert_eq!(x, a);
        }
    }

    #[test]
    fn remap_keeps_counts(a in rset()) {
        let mut r = a.clone();
        r.remap();
        prop_assert_eq!(r.nnodes(), a.nnodes());
        prop_assert_eq!(r.ncores(), a.ncores());
        prop_assert_eq!(r.ngpus(), a.ngpus());
        if !r.is_empty() {
            prop_assert_eq!(r.ranks(), IdSet::from_range(0, r.nnodes() as u32 - 1));
        }
    }

    #[test]
    fn alloc_then_free_restores_pool(
        inv in rset(),
        reqs in proptest::collection::vec((1u32..4, 1u32..4, 0u32..2, 0u32..3, any::<bool>()), 1..12),
    ) {
        let mut pool = Pool::new(inv.clone());
        let before = pool.available();
        let mut held = Vec::new();
        for (nslots, cores, gpus, nnodes, exclusive) in reqs {
            let req = AllocRequest {
                nnodes: if exclusive { nnodes.clamp(1, nslots) } else { nnodes.min(nslots) },
                nslots,
                cores_per_slot: cores,
                gpus_per_slot: gpus,
                exclusive,
                constraint: None,
                mode: [AllocMode::WorstFit, AllocMode::BestFit, AllocMode::FirstFit][(nslots % 3) as usize],
            };
            match pool.alloc(&req) {
                Ok(r) => {
                    // What was granted really is part of the inventory and no
                    // longer available.
                    prop_assert_eq!(r.diff(&inv).ncores(), 0);
                    prop_assert!(pool.available().intersect(&r).is_empty());
                    if !exclusive {
                        prop_assert_eq!(r.ncores(), u64::from(nslots * cores));
                    }
                    held.push(r);
                }
                Err(AllocError::Busy) => {
                    // Busy means it fits the idle inventory.
                    let mut idle = Pool::new(inv.clone());
                    prop_assert!(idle.alloc(&req).is_ok());
                }
                Err(AllocError::Unsatisfiable(_)) => {
                    let mut idle = Pool::new(inv.clone());
                    prop_assert!(idle.alloc(&req).is_err());
                }
                Err(e) => prop_assert!(false, "unexpected {e}"),
            }
        }
        while let Some(r) = held.pop() {
            pool.free(&r).unwrap();
            prop_assert!(pool.free(&r).is_err(), "double free must fail");
        }
        prop_assert_eq!(pool.available().dumps(), before.dumps());
        prop_assert_eq!(pool.avail_cores(), inv.ncores());
    }
}

/// Distinct ranks, hostnames sometimes missing or differing between sets,
/// and a property on some ranks (possibly on ranks the set lacks).
fn rset_loose_names() -> impl Strategy<Value = ResourceSet> {
    proptest::collection::btree_map(
        0u32..8,
        (idset(6), idset(3), proptest::option::of(0u32..2)),
        0..6,
    )
    .prop_flat_map(|m| {
        let nodes: Vec<Node> = m
            .into_iter()
            .map(|(rank, (c, g, host))| {
                Node::new(rank, host.map(|h| format!("h{h}")).as_deref(), c, g)
            })
            .collect();
        (Just(nodes), idset(8), 0u32..2)
    })
    .prop_map(|(nodes, marked, t)| {
        let mut rs = ResourceSet::from_nodes(nodes).expect("distinct ranks");
        let marked = marked.intersection(&rs.ranks());
        if !marked.is_empty() {
            rs.set_property("ssd", &marked).unwrap();
        }
        if t > 0 {
            rs.set_starttime(Some(1_700_000_000.25));
        }
        rs
    })
}

proptest! {
    #[test]
    fn union_is_diff_then_append(a in rset_loose_names(), b in rset_loose_names()) {
        let mut expected = a.diff(&b);
        expected.append(&b).expect("a - b and b are disjoint");
        let got = a.union(&b);
        prop_assert_eq!(&got, &expected);
        prop_assert_eq!(got.to_json_string(), expected.to_json_string());
    }
}
