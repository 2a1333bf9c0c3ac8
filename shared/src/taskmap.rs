//! The RFC 34 task map: how many tasks each node of a job runs, in blocks
//! `[nodeid, nnodes, ppn, repeat]`, and its PMI form
//! (`PMI_process_mapping`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde_json::json;

/// A job's task map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taskmap {
    blocks: Vec<[u64; 4]>,
}

impl Taskmap {
    /// The map of `counts[i]` tasks on node i, tasks numbered in node order.
    /// Runs of nodes with the same count collapse into one block; nodes
    /// without a task are gaps.
    pub fn from_counts(counts: &[u64]) -> Taskmap {
        let mut blocks: Vec<[u64; 4]> = Vec::new();
        for (node, &ppn) in counts.iter().enumerate() {
            if ppn == 0 {
                continue;
            }
            let node = node as u64;
            match blocks.last_mut() {
                Some(b) if b[0] + b[1] == node && b[2] == ppn => b[1] += 1,
                _ => blocks.push([node, 1, ppn, 1]),
            }
        }
        Taskmap { blocks }
    }

    /// The blocks.
    pub fn blocks(&self) -> &[[u64; 4]] {
        &self.blocks
    }

    /// RFC 34 JSON: `{"version":1,"map":[...]}`.
    pub fn to_json(&self) -> String {
        json!({"version": 1, "map": self.blocks}).to_string()
    }

    /// The PMI `PMI_process_mapping` value: `(vector,(NODE,NNODES,PPN),...)`.
    pub fn to_pmi(&self) -> String {
        let parts: Vec<String> = self
            .blocks
            .iter()
            .map(|b| format!("({},{},{})", b[0], b[1], b[2]))
            .collect();
        format!("(vector,{})", parts.join(","))
    }
}

/// Tasks per node of a slot-based request, as flux's `rcalc` places them:
/// each task to the node with the most free slots left (`slots[i]` at
/// first), ties to the lower node; more tasks than slots oversubscribe
/// evenly.
pub fn tasks_per_node(slots: &[u64], ntasks: u64) -> Vec<u64> {
    let mut counts = vec![0u64; slots.len()];
    // Free slots may go negative.
    let mut heap: BinaryHeap<(i64, Reverse<usize>)> = slots
        .iter()
        .enumerate()
        .map(|(i, s)| (i64::try_from(*s).unwrap_or(i64::MAX), Reverse(i)))
        .collect();
    for _ in 0..ntasks {
        let Some((free, Reverse(i))) = heap.pop() else {
            break;
        };
        counts[i] += 1;
        heap.push((free - 1, Reverse(i)));
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_go_to_the_node_with_most_free_slots() {
        assert_eq!(tasks_per_node(&[4, 4], 4), [2, 2]);
        assert_eq!(tasks_per_node(&[4, 4], 3), [2, 1]);
        assert_eq!(tasks_per_node(&[1, 1], 4), [2, 2]);
        assert_eq!(tasks_per_node(&[2, 4], 2), [0, 2]);
    }

    #[test]
    fn blocks_collapse_runs_and_skip_gaps() {
        let m = Taskmap::from_counts(&[2, 2, 0, 1]);
        assert_eq!(m.blocks(), &[[0, 2, 2, 1], [3, 1, 1, 1]]);
        assert_eq!(m.to_pmi(), "(vector,(0,2,2),(3,1,1))");
        assert_eq!(m.to_json(), r#"{"version":1,"map":[[0,2,2,1],[3,1,1,1]]}"#);
    }

    #[test]
    fn even_spread_is_one_block() {
        assert_eq!(Taskmap::from_counts(&[2, 2]).to_pmi(), "(vector,(0,2,2))");
    }
}
