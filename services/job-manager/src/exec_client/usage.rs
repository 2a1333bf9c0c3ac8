//! What a job used on its nodes, from the exec services' wire form
//! (`Finish.usage`, nanoseconds) to its domain form
//! ([`fluxgate_shared::job::usage`], seconds).

use fluxgate_proto::v1::NodeUsage;
use fluxgate_shared::job::usage::{self, JobUsage};

const NS_PER_SEC: f64 = 1e9;

/// The usage of these nodes; `None` when no node reported any (jobs not
/// contained in cgroups there).
pub fn from_wire(nodes: &[NodeUsage]) -> Option<JobUsage> {
    if nodes.is_empty() {
        return None;
    }
    let nodes = nodes
        .iter()
        .map(|n| usage::NodeUsage {
            ranks: n.ranks.clone(),
            hostname: n.hostname.clone(),
            user: n.user_ns as f64 / NS_PER_SEC,
            system: n.system_ns as f64 / NS_PER_SEC,
            max_rss: n.peak_memory,
        })
        .collect();
    Some(JobUsage::new(nodes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanoseconds_become_seconds_and_no_node_is_no_usage() {
        assert_eq!(from_wire(&[]), None);
        let u = from_wire(&[NodeUsage {
            ranks: "0".into(),
            hostname: "n0".into(),
            user_ns: 1_500_000_000,
            system_ns: 500_000_000,
            peak_memory: 4096,
        }])
        .unwrap();
        assert_eq!(u.total.cpu_time(), 2.0);
        assert_eq!(u.nodes[0].max_rss, 4096);
    }
}
