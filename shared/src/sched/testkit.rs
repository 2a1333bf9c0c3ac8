//! What the scheduling tests share: a small pool and whole-node requests.

use crate::IdSet;
use crate::rset::{AllocRequest, Node, Pool, ResourceSet};

/// `nodes` nodes of 4 cores, all free.
pub fn pool(nodes: u32) -> Pool {
    Pool::new(
        ResourceSet::from_nodes(
            (0..nodes).map(|r| Node::new(r, None, IdSet::from_range(0, 3), IdSet::new())),
        )
        .expect("disjoint ranks"),
    )
}

/// `n` whole nodes of the [`pool`].
pub fn whole(n: u32) -> AllocRequest {
    let mut r = AllocRequest::slots(n, 4);
    r.nnodes = n;
    r.exclusive = true;
    r
}
