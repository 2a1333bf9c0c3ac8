//! The limits of one job's cgroup on this node: its cores, its share of
//! the node's memory (or less, as the job asks), and the site's pids cap.

use fluxgate_shared::{IdSet, Jobspec};
use serde_json::Value;

use fluxgate_shared::size;

use super::{Limits, Policy};

/// What this node has: its memory and how many cores it serves.
#[derive(Debug, Clone)]
pub struct Node {
    /// Memory, bytes (0 when unknown).
    pub memory: u64,
    /// Cores the service offers to jobs (over all the nodes it serves).
    pub cores: u64,
    /// CPUs this machine lets the service use.
    pub usable_cpus: IdSet,
}

/// A job's `-o cgroup.memory.max=SIZE`: `None` when not given, an error
/// note when it is not a size.
pub fn requested_memory(jobspec: &Jobspec) -> Result<Option<u64>, String> {
    let v = jobspec
        .shell_options()
        .get("cgroup")
        .and_then(|c| c.get("memory"))
        .and_then(|m| m.get("max"));
    let bytes = match v {
        None => return Ok(None),
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => size::parse(s),
        Some(_) => None,
    };
    bytes
        .filter(|&b| b > 0)
        .map(Some)
        .ok_or_else(|| format!("cgroup.memory.max {v:?} is not a size such as 512M", v = v))
}

/// The limits of a job holding `cores` (ids, over its ranks on this node,
/// `count` of them) that asked for `requested` bytes at most.
pub fn for_job(
    policy: &Policy,
    node: &Node,
    cores: &IdSet,
    count: u64,
    requested: Option<u64>,
) -> Limits {
    let cpus = cores.intersection(&node.usable_cpus);
    let share = match policy.memory_per_core {
        Some(per_core) => Some(per_core.saturating_mul(count)),
        None if node.memory > 0 && node.cores > 0 => {
            Some((u128::from(node.memory) * u128::from(count) / u128::from(node.cores)) as u64)
        }
        None => None,
    };
    let share = share.map(|s| {
        if node.memory > 0 {
            s.min(node.memory)
        } else {
            s
        }
    });
    // Lower only: a job never gets more than the site gives it.
    let memory = match (share, requested) {
        (Some(s), Some(r)) => Some(s.min(r)),
        (s, r) => s.or(r),
    };
    Limits {
        cpus: (!cpus.is_empty()).then(|| cpus.to_string()),
        memory: memory.filter(|&m| m > 0),
        pids: policy.pids_max,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> Node {
        Node {
            memory: 8 << 30,
            cores: 4,
            usable_cpus: IdSet::from_range(0, 3),
        }
    }

    #[test]
    fn the_default_is_the_nodes_memory_shared_by_cores() {
        let l = for_job(
            &Policy::default(),
            &node(),
            &IdSet::from_range(1, 2),
            2,
            None,
        );
        assert_eq!(l.cpus.as_deref(), Some("1-2"));
        assert_eq!(l.memory, Some(4 << 30));
        assert_eq!(l.pids, None);
    }

    #[test]
    fn a_job_may_ask_for_less_never_more_and_the_site_may_fix_a_rate() {
        let p = Policy::default();
        let one = IdSet::from_range(0, 0);
        assert_eq!(
            for_job(&p, &node(), &one, 1, Some(1 << 20)).memory,
            Some(1 << 20)
        );
        assert_eq!(
            for_job(&p, &node(), &one, 1, Some(64 << 30)).memory,
            Some(2 << 30)
        );
        let p = Policy {
            memory_per_core: Some(1 << 30),
            pids_max: Some(512),
            ..Policy::default()
        };
        let l = for_job(&p, &node(), &one, 1, None);
        assert_eq!((l.memory, l.pids), (Some(1 << 30), Some(512)));
    }

    #[test]
    fn cores_the_machine_lacks_leave_the_cpuset_alone() {
        let l = for_job(
            &Policy::default(),
            &node(),
            &IdSet::from_range(8, 9),
            2,
            None,
        );
        assert_eq!(l.cpus, None);
    }

    #[test]
    fn the_job_option_is_a_flux_size() {
        let spec = |opt: Value| {
            let mut v = serde_json::json!({
                "version": 1,
                "resources": [{"type": "slot", "count": 1, "label": "task",
                               "with": [{"type": "core", "count": 1}]}],
                "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
                "attributes": {"system": {"duration": 0, "shell": {"options": {}}}}
            });
            v["attributes"]["system"]["shell"]["options"]["cgroup"] = opt;
            Jobspec::from_value(v).unwrap()
        };
        let got = requested_memory(&spec(serde_json::json!({"memory": {"max": "64M"}})));
        assert_eq!(got, Ok(Some(64 << 20)));
        assert!(requested_memory(&spec(serde_json::json!({"memory": {"max": "lots"}}))).is_err());
        assert_eq!(requested_memory(&spec(serde_json::json!({}))), Ok(None));
    }
}
