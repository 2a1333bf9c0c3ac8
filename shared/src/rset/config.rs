//! R from a `resource.config` array, as flux-core's `rlist_from_config`.
//!
//! Each entry is `{hosts, cores?, gpus?, properties?}`. Hosts get ranks in
//! order of first appearance; an entry naming a host again adds to it.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;

use serde_json::Value;

use super::{Node, ResourceSet, RsetError, merge_nodes};
use crate::hostlist::Hostlist;
use crate::idset::IdSet;

fn cfg(msg: impl Into<String>) -> RsetError {
    RsetError::Config(msg.into())
}

impl ResourceSet {
    /// Build R from the `resource.config` array of a Flux-style config.
    pub fn from_config(conf: &Value) -> Result<ResourceSet, RsetError> {
        let entries = conf
            .as_array()
            .ok_or_else(|| cfg("resource config must be an array"))?;
        let mut hosts = Hosts::default();
        let read = read_entries(entries, &mut hosts);
        // An overlap found here was met before any malformed later entry,
        // so it is the error adding one node at a time would have reported.
        let nodes = merge_nodes(hosts.nodes)
            .map_err(|(pos, e)| cfg(format!("config[{}]: {e}", hosts.entry_of[pos])))?;
        read?;
        let mut rs = ResourceSet {
            nodes,
            ..ResourceSet::default()
        };
        for (name, ranks) in hosts.properties {
            // Every rank was given a node above; names were validated.
            rs.properties.insert(name, IdSet::from_ids(ranks));
        }
        if rs.is_empty() {
            return Err(cfg("no hosts configured"));
        }
        let mut empty = Hostlist::new();
        for n in rs.nodes.iter().filter(|n| n.is_empty()) {
            let _ = empty.push(n.hostname().unwrap_or_default());
        }
        if !empty.is_empty() {
            return Err(cfg(format!(
                "resource.config: {} assigned no resources",
                empty.encode()
            )));
        }
        Ok(rs)
    }
}

/// What the config entries add up to, before nodes of one host are merged.
#[derive(Default)]
struct Hosts {
    /// One node per (entry, host), in config order.
    nodes: Vec<Node>,
    /// The config entry each node came from.
    entry_of: Vec<usize>,
    /// Ranks of the hosts seen, given in order of first appearance.
    ranks: Ranks,
    /// Property name -> ranks holding it (any order, repeats allowed).
    properties: BTreeMap<String, Vec<u32>>,
}

/// Host name -> rank, keyed by the name's hash so that a lookup of a new
/// name touches a flat table and no other name's text, and no name is
/// copied for a key: at 64k hosts a map of owned names cost a cache miss
/// per probe and an allocation per host, and this builder grew faster than
/// its input. Names come from the site's own configuration, so a fast hash
/// that does not resist chosen collisions is enough; a name whose hash
/// another name has is kept by name.
#[derive(Default)]
struct Ranks {
    by_hash: HashMap<u64, u32, foldhash::fast::FixedState>,
    collided: HashMap<String, u32>,
    /// Index in `nodes` of each rank's first node, whose name is the rank's.
    first: Vec<usize>,
    hasher: foldhash::fast::FixedState,
}

impl Ranks {
    /// The rank of `host`, which would be node `at` of `nodes`: a new one
    /// when the name was not seen.
    fn rank(&mut self, host: &str, nodes: &[Node], at: usize) -> u32 {
        let hash = self.hasher.hash_one(host);
        let next = self.first.len() as u32;
        match self.by_hash.entry(hash) {
            Entry::Vacant(v) => {
                v.insert(next);
            }
            Entry::Occupied(o) => {
                let rank = *o.get();
                if nodes[self.first[rank as usize]].hostname() == Some(host) {
                    return rank;
                }
                if let Some(&rank) = self.collided.get(host) {
                    return rank;
                }
                self.collided.insert(host.to_owned(), next);
            }
        }
        self.first.push(at);
        next
    }

    fn reserve(&mut self, n: usize) {
        self.by_hash.reserve(n);
        self.first.reserve(n);
    }
}

/// Check each entry and record its hosts, stopping at the first bad entry.
fn read_entries(entries: &[Value], out: &mut Hosts) -> Result<(), RsetError> {
    for (i, entry) in entries.iter().enumerate() {
        let obj = entry
            .as_object()
            .ok_or_else(|| cfg(format!("config[{i}]: must be an object")))?;
        for k in obj.keys() {
            if !matches!(k.as_str(), "hosts" | "cores" | "gpus" | "properties") {
                return Err(cfg(format!("config[{i}]: unknown key '{k}'")));
            }
        }
        let hosts = match obj.get("hosts") {
            Some(Value::String(s)) => s.as_str(),
            Some(_) => return Err(cfg(format!("config[{i}]: hosts must be a string"))),
            None => return Err(cfg(format!("config[{i}]: object item not found: hosts"))),
        };
        let hl = Hostlist::parse(hosts)
            .map_err(|_| cfg(format!("config[{i}]: invalid hostlist '{hosts}'")))?;
        if hl.is_empty() {
            return Err(cfg(format!("config[{i}]: empty hostlist specified")));
        }
        let ids = |key: &str| -> Result<IdSet, RsetError> {
            match obj.get(key) {
                None => Ok(IdSet::new()),
                Some(Value::String(s)) => IdSet::parse(s)
                    .map_err(|_| cfg(format!("config[{i}]: invalid idset {key}='{s}'"))),
                Some(_) => Err(cfg(format!("config[{i}]: {key} must be a string"))),
            }
        };
        let cores = ids("cores")?;
        let gpus = ids("gpus")?;
        let mut props = Vec::new();
        if let Some(p) = obj.get("properties") {
            let arr = p
                .as_array()
                .ok_or_else(|| cfg(format!("config[{i}]: properties must be an array")))?;
            for v in arr {
                match v.as_str() {
                    Some(s) if super::validate_property_name(s).is_ok() => props.push(s.to_owned()),
                    _ => return Err(cfg(format!("config[{i}]: invalid property \"{v}\""))),
                }
            }
        }
        let first = out.nodes.len();
        out.ranks.reserve(hl.len());
        out.nodes.reserve(hl.len());
        out.entry_of.reserve(hl.len());
        for host in hl.iter() {
            let rank = out.ranks.rank(&host, &out.nodes, out.nodes.len());
            // The name from iter() becomes the node's: one copy less per host.
            out.nodes.push(Node {
                rank,
                hostname: Some(host),
                cores: cores.clone(),
                gpus: gpus.clone(),
            });
            out.entry_of.push(i);
        }
        for p in props {
            let ranks = out.nodes[first..].iter().map(Node::rank);
            out.properties.entry(p).or_default().extend(ranks);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(text: &str) -> Result<ResourceSet, RsetError> {
        ResourceSet::from_config(&serde_json::from_str(text).unwrap())
    }

    #[test]
    fn hosts_get_ranks_in_order_of_first_appearance() {
        let rs = conf(
            r#"[{"hosts": "b,a", "cores": "0-1", "properties": ["x"]},
                {"hosts": "a,c", "gpus": "0", "properties": ["y"]},
                {"hosts": "c", "cores": "2"}]"#,
        )
        .unwrap();
        assert_eq!(
            rs.dumps(),
            "rank0/core[0-1] rank1/core[0-1],gpu0 rank2/core2,gpu0"
        );
        assert_eq!(rs.nodelist().unwrap().encode(), "b,a,c");
        assert_eq!(rs.properties()["x"].to_string(), "0-1");
        assert_eq!(rs.properties()["y"].to_string(), "1-2");
    }

    #[test]
    fn an_overlap_is_reported_before_a_later_bad_entry() {
        let overlap = r#"[{"hosts": "a,b", "cores": "0-1"},
                          {"hosts": "b", "cores": "1"},
                          {"hosts": "a", "cores": "0"},
                          {"hosts": "c", "cores": "x"}]"#;
        assert_eq!(
            conf(overlap).unwrap_err().to_string(),
            "config[1]: resource sets overlap on rank 1: core1"
        );
        let bad_first = r#"[{"hosts": "a", "cores": "x"}, {"hosts": "a"}]"#;
        assert_eq!(
            conf(bad_first).unwrap_err().to_string(),
            "config[0]: invalid idset cores='x'"
        );
    }
}
