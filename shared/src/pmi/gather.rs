//! The union of every node's keys at one barrier, as the job's leader
//! gathers them: one contribution per node, the union once all are in.

use super::kvs::Dict;

/// One barrier's contributions, on the node that gathers them.
#[derive(Debug)]
pub struct Gather {
    expected: usize,
    received: Vec<bool>,
    union: Dict,
    count: usize,
}

/// A contribution that does not fit the barrier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GatherError {
    /// From a node the gather does not know.
    #[error("contribution from node {0} of {1}")]
    UnknownNode(usize, usize),
    /// From a node that already gave its keys for this barrier.
    #[error("node {0} contributed twice to one barrier")]
    Twice(usize),
}

impl Gather {
    /// A gather over `nodes` nodes, numbered 0..nodes.
    pub fn new(nodes: usize) -> Gather {
        Gather {
            expected: nodes,
            received: vec![false; nodes],
            union: Dict::new(),
            count: 0,
        }
    }

    /// Add node `node`'s keys; the union once every node has given its own.
    pub fn add(&mut self, node: usize, keys: Dict) -> Result<Option<Dict>, GatherError> {
        let seen = self
            .received
            .get_mut(node)
            .ok_or(GatherError::UnknownNode(node, self.expected))?;
        if *seen {
            return Err(GatherError::Twice(node));
        }
        *seen = true;
        self.count += 1;
        if self.union.is_empty() {
            self.union = keys;
        } else {
            self.union.extend(keys);
        }
        if self.count < self.expected {
            return Ok(None);
        }
        self.received.iter_mut().for_each(|r| *r = false);
        self.count = 0;
        Ok(Some(std::mem::take(&mut self.union)))
    }
}
