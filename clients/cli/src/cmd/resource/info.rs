//! `fluxgate resource info`: one line, "N Nodes, M Cores, G GPUs", of the
//! resources in the chosen states, as `flux resource info`.

use anyhow::bail;
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
}
