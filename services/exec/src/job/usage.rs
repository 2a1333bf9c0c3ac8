//! The usage of a job's nodes, from the exec services' wire form (`Finish`)
//! to its JSON form ([`fluxgate_shared::job::usage`]).

use fluxgate_proto::v1::NodeUsage;
use fluxgate_shared::job::usage::{self, JobUsage};
use serde_json::Value;

const NS_PER_SEC: f64 = 1e9;

/// The JSON form of these nodes' usage.
pub fn to_json(nodes: &[NodeUsage]) -> Value {
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
    serde_json::to_value(JobUsage::new(nodes)).unwrap_or(Value::Null)
}
