//! What a job used: CPU time and peak memory per node, as the exec
//! services read them from the job's cgroups and report at the job's end
//! (`Finish.usage`), and as the job manager stores it (the job's `usage`
//! key; the exec eventlog's `complete` keeps flux's context).
//!
//! ```json
//! {"nodes": [{"ranks": "0", "hostname": "node0", "user": 1.25,
//!             "system": 0.5, "max_rss": 104857600}],
//!  "total": {"user": 1.25, "system": 0.5, "max_rss": 104857600}}
//! ```
//!
//! Seconds for CPU time, bytes for memory; `max_rss` of the total is the
//! sum of the nodes' peaks (each node's peak memory at any time, the most
//! the job can have held at once).

use serde::{Deserialize, Serialize};

/// What a job used on one node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeUsage {
    /// The ranks of R on that node.
    pub ranks: String,
    /// Its hostname.
    pub hostname: String,
    /// CPU seconds in user mode.
    pub user: f64,
    /// CPU seconds in the kernel.
    pub system: f64,
    /// Peak memory, bytes (0 when the kernel does not keep it).
    pub max_rss: u64,
}

/// The sum over a job's nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Total {
    /// CPU seconds in user mode.
    pub user: f64,
    /// CPU seconds in the kernel.
    pub system: f64,
    /// Sum of the nodes' peak memory, bytes.
    pub max_rss: u64,
}

impl Total {
    /// CPU seconds, user and system.
    pub fn cpu_time(&self) -> f64 {
        self.user + self.system
    }
}

/// What a job used, per node and in total.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobUsage {
    /// Per node, in rank order.
    pub nodes: Vec<NodeUsage>,
    /// Their sum.
    pub total: Total,
}

impl JobUsage {
    /// The usage of `nodes`, sorted by rank, with their total.
    pub fn new(mut nodes: Vec<NodeUsage>) -> Self {
        nodes.sort_by_key(|n| first_rank(&n.ranks));
        let total = nodes.iter().fold(Total::default(), |t, n| Total {
            user: t.user + n.user,
            system: t.system + n.system,
            max_rss: t.max_rss.saturating_add(n.max_rss),
        });
        JobUsage { nodes, total }
    }
}

fn first_rank(ranks: &str) -> u32 {
    ranks
        .split(|c: char| !c.is_ascii_digit())
        .find(|s| !s.is_empty())
        .and_then(|s| s.parse().ok())
        .unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_are_summed_in_rank_order_and_read_back() {
        let node = |ranks: &str, user: f64, max_rss| NodeUsage {
            ranks: ranks.into(),
            hostname: format!("n{ranks}"),
            user,
            system: 0.5,
            max_rss,
        };
        let u = JobUsage::new(vec![node("2-3", 1.0, 10), node("0", 2.0, 5)]);
        assert_eq!(u.nodes[0].ranks, "0");
        assert_eq!(u.total.cpu_time(), 4.0);
        assert_eq!(u.total.max_rss, 15);
        let text = serde_json::to_string(&u).unwrap();
        assert_eq!(serde_json::from_str::<JobUsage>(&text).unwrap(), u);
    }
}
