//! R from a `resource.config` array, as flux-core's `rlist_from_config`.
//!
//! Each entry is `{hosts, cores?, gpus?, properties?}`. Hosts get ranks in
//! order of first appearance; an entry naming a host again adds to it.

use std::collections::BTreeMap;
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
        assign_ranks(&mut hosts.nodes);
        // Before the merge moves nodes: the ranks of each property's nodes.
        let properties: Vec<(String, Vec<u32>)> = std::mem::take(&mut hosts.properties)
            .into_iter()
            .map(|(name, spans)| {
                let ranks = spans
                    .into_iter()
                    .flat_map(|span| hosts.nodes[span].iter().map(Node::rank))
                    .collect();
                (name, ranks)
            })
            .collect();
        // An overlap found here was met before any malformed later entry,
        // so it is the error adding one node at a time would have reported.
        let nodes = merge_nodes(hosts.nodes)
            .map_err(|(pos, e)| cfg(format!("config[{}]: {e}", hosts.entry_of[pos])))?;
        read?;
        let mut rs = ResourceSet {
            nodes,
            ..ResourceSet::default()
        };
        for (name, ranks) in properties {
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
    /// One node per (entry, host), in config order; ranks given by [`assign_ranks`].
    nodes: Vec<Node>,
    /// The config entry each node came from.
    entry_of: Vec<usize>,
    /// Property name -> the nodes (by position in `nodes`) holding it.
    properties: BTreeMap<String, Vec<std::ops::Range<usize>>>,
}

/// Give each node the rank of its host: hosts are numbered in order of first
/// appearance, and a host named again gets the rank it already has.
///
/// Names are matched by sorting (hash, position) pairs rather than through a
/// map: a map's probes land anywhere in a table as large as the config, and
/// at 64k hosts each one missed the cache, so the builder grew faster than
/// its input. Only nodes whose hash another node shares are compared by name
/// (the same host named again, or a collision). Names come from the site's
/// own configuration, so a fast hash that does not resist chosen collisions
/// is enough.
fn assign_ranks(nodes: &mut [Node]) {
    let hasher = foldhash::fast::FixedState::default();
    let mut keys: Vec<(u64, u32)> = nodes
        .iter()
        .zip(0u32..)
        .map(|(n, pos)| (hasher.hash_one(n.hostname().unwrap_or_default()), pos))
        .collect();
    keys.sort_unstable();
    // The position of each node's first namesake, itself when it is the first.
    let mut first: Vec<u32> = (0..nodes.len() as u32).collect();
    for group in keys.chunk_by(|a, b| a.0 == b.0).filter(|g| g.len() > 1) {
        // In position order: the earliest member with a name is its first.
        for (k, &(_, pos)) in group.iter().enumerate() {
            let name = nodes[pos as usize].hostname();
            if let Some(&(_, f)) = group[..k]
                .iter()
                .find(|&&(_, q)| nodes[q as usize].hostname() == name)
            {
                first[pos as usize] = f;
            }
        }
    }
    let mut next = 0;
    for pos in 0..nodes.len() {
        let f = first[pos] as usize;
        nodes[pos].rank = if f == pos {
            next += 1;
            next - 1
        } else {
            nodes[f].rank
        };
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
        out.nodes.reserve(hl.len());
        out.entry_of.reserve(hl.len());
        for host in hl.iter() {
            // The name from iter() becomes the node's: one copy less per host.
            out.nodes.push(Node {
                rank: 0,
                hostname: Some(host),
                cores: cores.clone(),
                gpus: gpus.clone(),
            });
            out.entry_of.push(i);
        }
        for p in props {
            let nodes = first..out.nodes.len();
            out.properties.entry(p).or_default().push(nodes);
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
