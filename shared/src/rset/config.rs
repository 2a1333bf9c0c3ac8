//! R from a `resource.config` array, as flux-core's `rlist_from_config`.
//!
//! Each entry is `{hosts, cores?, gpus?, properties?}`. Hosts get ranks in
//! order of first appearance; an entry naming a host again adds to it.

use serde_json::Value;

use super::{Node, ResourceSet, RsetError};
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
        let mut rs = ResourceSet::new();
        let mut hostmap: Vec<String> = Vec::new();
        let mut index = std::collections::HashMap::<String, u32>::new();
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
                        Some(s) if super::validate_property_name(s).is_ok() => {
                            props.push(s.to_owned())
                        }
                        _ => return Err(cfg(format!("config[{i}]: invalid property \"{v}\""))),
                    }
                }
            }
            for host in hl.iter() {
                let rank = match index.get(&host) {
                    Some(&r) => r,
                    None => {
                        let r = hostmap.len() as u32;
                        index.insert(host.clone(), r);
                        hostmap.push(host.clone());
                        r
                    }
                };
                rs.add_node(Node::new(rank, Some(&host), cores.clone(), gpus.clone()))
                    .map_err(|e| cfg(format!("config[{i}]: {e}")))?;
                let one = IdSet::from_range(rank, rank);
                for p in &props {
                    rs.set_property(p, &one)?;
                }
            }
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
