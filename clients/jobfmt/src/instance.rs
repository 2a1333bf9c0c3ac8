//! The `instance.*` fields of a job that runs an instance (flux-core
//! `flux.job.info.InstanceInfo`): the child instance's job counts
//! (`instance.stats`, its job-list stats), its resources by state
//! (`instance.resources.STATE.nnodes|ncores|ngpus|nodelist|ranks`) and the
//! ratios flux derives from them (`instance.utilization`,
//! `instance.gpu_utilization`, `instance.progress`). The caller reads the
//! child instance; this file only counts and looks fields up.

use fluxgate_shared::rset::ResourceSet;

use crate::pyfmt::Value;
use crate::stats::JobCounts;

/// What one resource state of an instance holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceCounts {
    /// Nodes.
    pub nnodes: u64,
    /// Cores.
    pub ncores: u64,
    /// GPUs.
    pub ngpus: u64,
    /// The nodes' hostnames, as a hostlist.
    pub nodelist: String,
    /// The nodes' ranks, as an idset.
    pub ranks: String,
}

impl ResourceCounts {
    /// The counts of `r`.
    pub fn of(r: &ResourceSet) -> ResourceCounts {
        ResourceCounts {
            nnodes: r.nnodes() as u64,
            ncores: r.ncores(),
            ngpus: r.ngpus(),
            nodelist: r.nodelist().map(|h| h.encode()).unwrap_or_default(),
            ranks: r.ranks().to_string(),
        }
    }

    fn field(&self, name: &str) -> Option<Value> {
        let n = |x: u64| Value::Int(i64::try_from(x).unwrap_or(i64::MAX));
        Some(match name {
            "nnodes" => n(self.nnodes),
            "ncores" => n(self.ncores),
            "ngpus" => n(self.ngpus),
            "nodelist" => Value::Str(self.nodelist.clone()),
            "ranks" => Value::Str(self.ranks.clone()),
            _ => return None,
        })
    }
}

/// An instance's resources in each state flux's `SchedResourceList` has.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    /// Everything the instance has.
    pub all: ResourceCounts,
    /// On nodes that are up.
    pub up: ResourceCounts,
    /// On nodes that are down.
    pub down: ResourceCounts,
    /// Allocated to jobs.
    pub allocated: ResourceCounts,
    /// Up and not allocated.
    pub free: ResourceCounts,
}

impl Resources {
    /// The counts of the sets the Resource.List RPC returns; free is up
    /// less allocated, as flux computes it.
    pub fn of(
        all: &ResourceSet,
        up: &ResourceSet,
        down: &ResourceSet,
        allocated: &ResourceSet,
    ) -> Resources {
        Resources {
            all: ResourceCounts::of(all),
            up: ResourceCounts::of(up),
            down: ResourceCounts::of(down),
            allocated: ResourceCounts::of(allocated),
            free: ResourceCounts::of(&up.diff(allocated)),
        }
    }

    fn state(&self, name: &str) -> Option<&ResourceCounts> {
        Some(match name {
            "all" => &self.all,
            "up" => &self.up,
            "down" => &self.down,
            "allocated" => &self.allocated,
            "free" => &self.free,
            _ => return None,
        })
    }
}

/// What a job's child instance reports about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceInfo {
    /// Its jobs, by state and result.
    pub stats: JobCounts,
    /// Its resources, by state.
    pub resources: Resources,
}

impl InstanceInfo {
    /// The value of `instance.<name>`; `None` is a name flux has no value
    /// for, which prints empty.
    pub fn field(&self, name: &str) -> Option<Value> {
        let ratio = |used: u64, all: u64| (all > 0).then(|| Value::Float(used as f64 / all as f64));
        let (head, rest) = match name.split_once('.') {
            Some((h, r)) => (h, Some(r)),
            None => (name, None),
        };
        match (head, rest) {
            ("stats", None) => Some(Value::Str(self.stats.summary())),
            ("stats", Some(f)) => self
                .stats
                .field(f)
                .map(|n| Value::Int(i64::try_from(n).unwrap_or(i64::MAX))),
            ("resources", Some(r)) => {
                let (state, f) = r.split_once('.')?;
                self.resources.state(state)?.field(f)
            }
            ("utilization", None) => {
                let r = &self.resources;
                ratio(r.allocated.ncores, r.all.ncores)
            }
            ("gpu_utilization", None) => {
                let r = &self.resources;
                ratio(r.allocated.ngpus, r.all.ngpus)
            }
            ("progress", None) => ratio(self.stats.inactive, self.stats.total),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fluxgate_proto::v1 as pb;
    use fluxgate_shared::IdSet;
    use fluxgate_shared::rset::Node;

    fn job(state: &str, result: &str) -> pb::JobSummary {
        pb::JobSummary {
            state: state.into(),
            result: result.into(),
            ..Default::default()
        }
    }

    fn node(rank: u32, cores: &str, gpus: &str) -> ResourceSet {
        let n = Node::new(
            rank,
            Some(&format!("n{rank}")),
            IdSet::parse(cores).expect("cores"),
            IdSet::parse(gpus).expect("gpus"),
        );
        ResourceSet::from_nodes([n]).expect("rset")
    }

    fn info() -> InstanceInfo {
        let jobs = [
            job("NEW", ""),
            job("SCHED", ""),
            job("DEPEND", ""),
            job("RUN", ""),
            job("CLEANUP", ""),
            job("INACTIVE", "COMPLETED"),
            job("INACTIVE", "COMPLETED"),
            job("INACTIVE", "FAILED"),
            job("INACTIVE", "CANCELED"),
            job("INACTIVE", "TIMEOUT"),
        ];
        let (a, b) = (node(0, "0-3", "0-1"), node(1, "0-3", ""));
        let all = a.union(&b);
        let alloc = node(0, "0-2", "0");
        InstanceInfo {
            stats: JobCounts::count(&jobs),
            resources: Resources::of(&all, &a, &b, &alloc),
        }
    }

    #[test]
    fn stats_read_as_flux_job_stats() {
        let i = info();
        assert_eq!(i.stats.summary(), "PD:2 R:2 CD:2 F:3");
        let int = |f: &str| i.field(f);
        assert_eq!(int("stats.total"), Some(Value::Int(10)));
        assert_eq!(int("stats.inactive"), Some(Value::Int(5)));
        assert_eq!(int("stats.active"), Some(Value::Int(5)));
        assert_eq!(int("stats.failed"), Some(Value::Int(3)));
        assert_eq!(int("stats.canceled"), Some(Value::Int(1)));
        assert_eq!(int("stats"), Some(Value::Str("PD:2 R:2 CD:2 F:3".into())));
        assert_eq!(int("progress"), Some(Value::Float(0.5)));
        assert_eq!(int("stats.nosuch"), None);
    }

    #[test]
    fn resources_by_state_and_utilization() {
        let i = info();
        assert_eq!(i.field("resources.all.nnodes"), Some(Value::Int(2)));
        assert_eq!(i.field("resources.all.ncores"), Some(Value::Int(8)));
        assert_eq!(i.field("resources.allocated.ncores"), Some(Value::Int(3)));
        assert_eq!(i.field("resources.free.ncores"), Some(Value::Int(1)));
        assert_eq!(i.field("resources.free.ngpus"), Some(Value::Int(1)));
        assert_eq!(
            i.field("resources.down.nodelist"),
            Some(Value::Str("n1".into()))
        );
        assert_eq!(
            i.field("resources.all.ranks"),
            Some(Value::Str("0-1".into()))
        );
        assert_eq!(i.field("utilization"), Some(Value::Float(0.375)));
        assert_eq!(i.field("gpu_utilization"), Some(Value::Float(0.5)));
        assert_eq!(i.field("resources.nosuch.ncores"), None);
        assert_eq!(i.field("resources"), None);
    }

    #[test]
    fn empty_instances_have_no_ratios() {
        // flux prints "" rather than dividing by zero.
        let i = InstanceInfo::default();
        assert_eq!(i.field("utilization"), None);
        assert_eq!(i.field("gpu_utilization"), None);
        assert_eq!(i.field("progress"), None);
        assert_eq!(i.field("stats.total"), Some(Value::Int(0)));
    }
}
