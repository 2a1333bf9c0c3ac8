//! How each node contains jobs (`v2`, `v1`: a cgroup per job; `off`:
//! process groups only), as its exec service said in its hello: kept for
//! `Resource.List`, so that `fluxgate resource info` shows it. Outside the
//! core: nothing schedules by it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Hostname to containment mode, of every node that joined since start.
#[derive(Debug, Clone, Default)]
pub struct Containment(Arc<Mutex<BTreeMap<String, String>>>);

impl Containment {
    /// Record what the nodes of an accepted hello said (an empty mode:
    /// an exec service too old to say, left unknown).
    pub fn record<'a>(&self, nodes: impl IntoIterator<Item = (&'a str, &'a str)>) {
        let Ok(mut map) = self.0.lock() else {
            return;
        };
        for (host, mode) in nodes {
            if mode.is_empty() {
                map.remove(host);
            } else {
                map.insert(host.to_string(), mode.to_string());
            }
        }
    }

    /// Every node's mode, by hostname.
    pub fn all(&self) -> BTreeMap<String, String> {
        self.0.lock().map(|m| m.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_hello_of_a_node_counts() {
        let c = Containment::default();
        c.record([("node0", "v1"), ("node1", "off")]);
        c.record([("node1", "v2"), ("node2", "")]);
        let all = c.all();
        assert_eq!(all["node0"], "v1");
        assert_eq!(all["node1"], "v2");
        assert!(!all.contains_key("node2"));
    }
}
