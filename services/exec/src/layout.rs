//! Where a job's tasks run: how many on each rank of R, their global task
//! ranks, and the cores and gpus each may use.
//!
//! Tasks are spread as flux-core's job shell (`rcalc`) spreads them: each task
//! goes to the rank with the most free slots left (a slot being
//! `cores-per-slot` cores of the rank; ties go to the lower rank), then task
//! ranks are numbered contiguously in rank order. A node-exclusive jobspec
//! therefore still gets one task per requested slot, not one per core of R.

use fluxgate_shared::taskmap::tasks_per_node;
use fluxgate_shared::{IdSet, Jobspec, ResourceSet};

/// Why tasks cannot be placed on R.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// R lists no ranks.
    #[error("R has no execution targets")]
    EmptyR,
    /// The jobspec asks for no tasks.
    #[error("the jobspec starts no tasks (task count 0)")]
    NoTasks,
    /// More tasks than a u32 can number.
    #[error("the jobspec asks for {0} tasks, more than can be numbered")]
    TooManyTasks(u64),
}

/// The tasks of one rank of R.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankTasks {
    /// The execution target (broker rank) in R.
    pub rank: u32,
    /// Position of the rank in R (the job shell rank).
    pub shell_rank: u32,
    /// Hostname from R's nodelist, if R has one.
    pub hostname: Option<String>,
    /// Allocated core ids on this rank.
    pub cores: Vec<u32>,
    /// Allocated gpu ids on this rank.
    pub gpus: Vec<u32>,
    /// Global rank of this rank's first task.
    pub first_task: u32,
    /// Number of tasks on this rank.
    pub ntasks: u32,
}

impl RankTasks {
    /// Global task ranks on this rank.
    pub fn task_ranks(&self) -> std::ops::Range<u32> {
        self.first_task..self.first_task + self.ntasks
    }
}

/// All tasks of a job over R.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Ranks of R in ascending order, each with its tasks.
    pub ranks: Vec<RankTasks>,
    /// Total tasks.
    pub ntasks: u32,
}

impl Layout {
    /// Place the jobspec's tasks on R.
    pub fn new(jobspec: &Jobspec, r: &ResourceSet) -> Result<Layout, LayoutError> {
        let nodes = r.nodes();
        if nodes.is_empty() {
            return Err(LayoutError::EmptyR);
        }
        let counts = match per_resource(jobspec) {
            Some((kind, n)) => per_resource_counts(nodes, kind, n)?,
            None => slot_counts(jobspec, nodes)?,
        };
        let ntasks = counts.iter().map(|&c| u64::from(c)).sum::<u64>();
        let ntasks = u32::try_from(ntasks).map_err(|_| LayoutError::TooManyTasks(ntasks))?;
        if ntasks == 0 {
            return Err(LayoutError::NoTasks);
        }
        // Free slots may go negative: more tasks than slots oversubscribe evenly.
        let mut next = 0;
        let ranks = nodes
            .iter()
            .zip(counts)
            .enumerate()
            .map(|(i, (node, count))| {
                let rt = RankTasks {
                    rank: node.rank(),
                    shell_rank: i as u32,
                    hostname: node.hostname().map(str::to_string),
                    cores: node.cores().iter().collect(),
                    gpus: node.gpus().iter().collect(),
                    first_task: next,
                    ntasks: count,
                };
                next += count;
                rt
            })
            .collect();
        Ok(Layout { ranks, ntasks })
    }

    /// The ranks of R.
    pub fn rank_set(&self) -> IdSet {
        self.ranks.iter().map(|r| r.rank).collect()
    }

    /// The entry for broker rank `rank`.
    pub fn rank(&self, rank: u32) -> Option<&RankTasks> {
        self.ranks.iter().find(|r| r.rank == rank)
    }

    /// The first rank of R, whose shell Flux calls the leader.
    pub fn leader_rank(&self) -> u32 {
        self.ranks.first().map(|r| r.rank).unwrap_or(0)
    }
}

/// The shell option `per-resource` (flux's `--tasks-per-node`,
/// `--tasks-per-core`, and batch and alloc's one broker per node): the
/// resource type and how many tasks each one gets (default 1).
fn per_resource(jobspec: &Jobspec) -> Option<(&str, u64)> {
    let opt = jobspec.shell_options().get("per-resource")?;
    let kind = opt.get("type")?.as_str()?;
    let count = opt.get("count").and_then(|c| c.as_u64()).unwrap_or(1);
    Some((kind, count))
}

/// Tasks per node under `per-resource`: `count` per node, or per core of
/// the node (as flux's shell, over the cores R gives the node).
fn per_resource_counts(
    nodes: &[fluxgate_shared::rset::Node],
    kind: &str,
    count: u64,
) -> Result<Vec<u32>, LayoutError> {
    nodes
        .iter()
        .map(|n| {
            let each = match kind {
                "core" => count.saturating_mul(n.cores().count()),
                _ => count,
            };
            u32::try_from(each).map_err(|_| LayoutError::TooManyTasks(each))
        })
        .collect()
}

/// Tasks per node of a slot-based count: each task to the node with the
/// most free slots left (ties to the lower rank), as flux's `rcalc`.
fn slot_counts(
    jobspec: &Jobspec,
    nodes: &[fluxgate_shared::rset::Node],
) -> Result<Vec<u32>, LayoutError> {
    let total = jobspec.ntasks();
    let ntasks = u32::try_from(total).map_err(|_| LayoutError::TooManyTasks(total))?;
    let per_slot = jobspec.cores_per_slot().max(1);
    let slots: Vec<u64> = nodes.iter().map(|n| n.cores().count() / per_slot).collect();
    tasks_per_node(&slots, u64::from(ntasks))
        .into_iter()
        .map(|c| u32::try_from(c).map_err(|_| LayoutError::TooManyTasks(c)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cores task `local_id` of `rank` is bound to under
    /// `cpu-affinity=per-task`.
    fn cores_of(rank: &RankTasks, local_id: u32) -> Vec<u32> {
        crate::affinity::share(&rank.cores, rank.ntasks, local_id)
    }

    fn jobspec(resources: &str, count: &str) -> Jobspec {
        let text = format!(
            r#"{{"version":1,"resources":{resources},"tasks":[{{"command":["true"],"slot":"task","count":{count}}}],"attributes":{{"system":{{"duration":0}}}}}}"#
        );
        Jobspec::parse(&text).unwrap()
    }

    const SLOT1: &str =
        r#"[{"type":"slot","count":1,"label":"task","with":[{"type":"core","count":1}]}]"#;

    #[test]
    fn node_exclusive_job_gets_one_task_per_slot_not_per_core() {
        // The golden `flux run -N2 hostname`: R has two 2-core nodes, 2 tasks.
        let js = jobspec(
            r#"[{"type":"node","count":2,"exclusive":true,"with":[{"type":"slot","count":1,"label":"task","with":[{"type":"core","count":1}]}]}]"#,
            r#"{"per_slot":1}"#,
        );
        let r = ResourceSet::parse(
            r#"{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0-1"}}],"nodelist":["vm,vm"]}}"#,
        )
        .unwrap();
        let l = Layout::new(&js, &r).unwrap();
        assert_eq!(l.ntasks, 2);
        assert_eq!(
            l.ranks
                .iter()
                .map(|r| (r.rank, r.first_task, r.ntasks))
                .collect::<Vec<_>>(),
            [(0, 0, 1), (1, 1, 1)]
        );
        assert_eq!(l.ranks[1].hostname.as_deref(), Some("vm"));
        assert_eq!(cores_of(&l.ranks[0], 0), [0, 1]);
    }

    #[test]
    fn per_resource_places_tasks_per_node_or_core() {
        let text = |opt: &str| {
            format!(
                r#"{{"version":1,"resources":[{{"type":"node","count":2,"exclusive":true,"with":[{{"type":"slot","count":1,"label":"task","with":[{{"type":"core","count":1}}]}}]}}],"tasks":[{{"command":["true"],"slot":"task","count":{{"per_slot":1}}}}],"attributes":{{"system":{{"duration":0,"shell":{{"options":{{"per-resource":{opt}}}}}}}}}}}"#
            )
        };
        let r = ResourceSet::parse(
            r#"{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0-3"}},{"rank":"1","children":{"core":"0-1"}}]}}"#,
        )
        .unwrap();
        let counts = |opt: &str| {
            let l = Layout::new(&Jobspec::parse(&text(opt)).unwrap(), &r).unwrap();
            l.ranks.iter().map(|r| r.ntasks).collect::<Vec<_>>()
        };
        // batch and alloc: one broker per node.
        assert_eq!(counts(r#"{"type":"node"}"#), [1, 1]);
        assert_eq!(counts(r#"{"type":"node","count":3}"#), [3, 3]);
        assert_eq!(counts(r#"{"type":"core","count":1}"#), [4, 2]);
    }

    #[test]
    fn total_count_fills_larger_ranks_first_and_numbers_in_rank_order() {
        let js = jobspec(SLOT1, r#"{"total":5}"#);
        let r = ResourceSet::parse(
            r#"{"version":1,"execution":{"R_lite":[{"rank":"3","children":{"core":"0-1"}},{"rank":"5","children":{"core":"0-3"}}]}}"#,
        )
        .unwrap();
        let l = Layout::new(&js, &r).unwrap();
        let got: Vec<_> = l
            .ranks
            .iter()
            .map(|r| (r.rank, r.first_task, r.ntasks))
            .collect();
        assert_eq!(got, [(3, 0, 2), (5, 2, 3)]);
        assert_eq!(l.leader_rank(), 3);
        assert_eq!(l.rank_set().to_string(), "3,5");
        let r5 = l.rank(5).unwrap();
        assert_eq!(r5.task_ranks(), 2..5);
        assert_eq!(cores_of(r5, 0), [0]);
        assert_eq!(cores_of(r5, 2), [2, 3]);
    }

    #[test]
    fn more_tasks_than_cores_share_cores_round_robin() {
        let js = jobspec(SLOT1, r#"{"total":3}"#);
        let r = ResourceSet::parse(
            r#"{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"4"}}]}}"#,
        )
        .unwrap();
        let l = Layout::new(&js, &r).unwrap();
        assert_eq!(l.ranks[0].ntasks, 3);
        assert_eq!(cores_of(&l.ranks[0], 2), [4]);
    }

    #[test]
    fn empty_r_is_refused() {
        let js = jobspec(SLOT1, r#"{"per_slot":1}"#);
        let r = ResourceSet::parse(r#"{"version":1,"execution":{"R_lite":[]}}"#).unwrap();
        assert_eq!(Layout::new(&js, &r), Err(LayoutError::EmptyR));
    }
}
