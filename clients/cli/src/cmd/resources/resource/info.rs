//! `fluxgate resource info`: one line, "N Nodes, M Cores, G GPUs", of the
//! resources in the chosen states, as `flux resource info`; then, where the
//! nodes' exec services said, how they contain jobs ("Containment: v1
//! node[0-1]"; `off` is process groups only, no cgroup).

use std::collections::{BTreeMap, HashMap};

use anyhow::bail;
use fluxgate_shared::Hostlist;
use fluxgate_shared::rset::ResourceSet;

/// The instance's resources by state, as the Resource.List RPC gives them.
#[derive(Debug)]
pub struct ByState {
    /// Every resource of the instance.
    pub all: ResourceSet,
    /// Resources on nodes that are up.
    pub up: ResourceSet,
    /// Resources on nodes that are down.
    pub down: ResourceSet,
    /// Resources allocated to jobs.
    pub allocated: ResourceSet,
}

/// The union of the resources in `states` (up, down, allocated, free, all;
/// none means all, as flux's default).
pub fn select(by: &ByState, states: &[String]) -> anyhow::Result<ResourceSet> {
    if states.is_empty() {
        return Ok(by.all.clone());
    }
    let mut out = ResourceSet::new();
    for s in states {
        let part = match s.as_str() {
            "all" => by.all.clone(),
            "up" => by.up.clone(),
            "down" => by.down.clone(),
            "allocated" => by.allocated.clone(),
            "free" => by.up.diff(&by.allocated),
            other => bail!("invalid resource state {other}"),
        };
        out = out.union(&part);
    }
    Ok(out)
}

/// Flux's summary line.
pub fn summary(r: &ResourceSet) -> String {
    format!(
        "{} Nodes, {} Cores, {} GPUs",
        r.nnodes(),
        r.ncores(),
        r.ngpus()
    )
}

/// The containment line of the nodes of `r`, grouped by mode (`modes`:
/// hostname to mode); `None` when no node of `r` said.
pub fn containment(r: &ResourceSet, modes: &HashMap<String, String>) -> Option<String> {
    let mut by_mode: BTreeMap<&str, Hostlist> = BTreeMap::new();
    for host in r.nodelist()?.iter() {
        if let Some(mode) = modes.get(&host) {
            let _ = by_mode.entry(mode.as_str()).or_default().push(&host);
        }
    }
    if by_mode.is_empty() {
        return None;
    }
    let parts: Vec<String> = by_mode
        .iter()
        .map(|(mode, hosts)| format!("{mode} {}", hosts.encode()))
        .collect();
    Some(format!("Containment: {}", parts.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fluxgate_shared::IdSet;
    use fluxgate_shared::rset::Node;

    fn node(rank: u32, cores: &str, gpus: &str) -> ResourceSet {
        let n = Node::new(
            rank,
            Some(&format!("n{rank}")),
            IdSet::parse(cores).unwrap(),
            IdSet::parse(gpus).unwrap(),
        );
        ResourceSet::from_nodes([n]).unwrap()
    }

    fn by_state() -> ByState {
        let (a, b) = (node(0, "0-3", "0"), node(1, "0-3", ""));
        let alloc = node(0, "0-1", "");
        ByState {
            all: a.union(&b),
            up: a,
            down: b,
            allocated: alloc,
        }
    }

    #[test]
    fn summaries_by_state() {
        let by = by_state();
        let line = |states: &[&str]| {
            let states: Vec<String> = states.iter().map(|s| s.to_string()).collect();
            summary(&select(&by, &states).unwrap())
        };
        assert_eq!(line(&[]), "2 Nodes, 8 Cores, 1 GPUs");
        assert_eq!(line(&["up"]), "1 Nodes, 4 Cores, 1 GPUs");
        assert_eq!(line(&["free"]), "1 Nodes, 2 Cores, 1 GPUs");
        assert_eq!(line(&["allocated", "down"]), "2 Nodes, 6 Cores, 0 GPUs");
        assert!(select(&by, &["bogus".to_string()]).is_err());
    }

    #[test]
    fn the_containment_line_groups_the_selected_nodes_by_mode() {
        let by = by_state();
        let modes: HashMap<String, String> = [("n0", "v1"), ("n1", "off")]
            .into_iter()
            .map(|(h, m)| (h.to_string(), m.to_string()))
            .collect();
        assert_eq!(
            containment(&by.all, &modes).as_deref(),
            Some("Containment: off n1, v1 n0")
        );
        assert_eq!(
            containment(&by.up, &modes).as_deref(),
            Some("Containment: v1 n0")
        );
        assert_eq!(containment(&by.all, &HashMap::new()), None);
    }
}
