//! Containment: every job, on every node, in a cgroup of its own under the
//! exec service's root (docs/SECURITY.md "Containment").
//!
//! [`Cgroups`] is the service's side: the layout found at start
//! ([`detect`]), the service's own directory under the configured root,
//! and the policy; it makes a [`JobCgroup`] ([`job`]) for each job, on the
//! unified hierarchy ([`v2`]) or the v1 ones ([`v1`]). Where no cgroup can
//! be written the service says so once, at WARN, and jobs run in process
//! groups only.

pub mod detect;
pub mod fs;
pub mod job;
pub mod limits;
pub mod task;
pub mod v1;
pub mod v2;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use fluxgate_shared::{IdSet, Jobspec};

use self::detect::Layout;
pub use self::job::JobCgroup;

/// Nanoseconds in a clock tick of the v1 `cpuacct.stat` (USER_HZ, 100 on Linux).
pub const NS_PER_TICK: u64 = 10_000_000;

/// What a job's cgroup holds it to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    /// `cpuset.cpus`, as the kernel writes CPU lists; the parent's when `None`.
    pub cpus: Option<String>,
    /// Memory in bytes (and no swap); unlimited when `None`.
    pub memory: Option<u64>,
    /// Most processes and threads; unlimited when `None`.
    pub pids: Option<u64>,
}

/// What a job used on a node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// CPU time in user mode, nanoseconds.
    pub user_ns: u64,
    /// CPU time in the kernel, nanoseconds.
    pub system_ns: u64,
    /// Largest memory use, bytes, where the kernel keeps it.
    pub peak_memory: Option<u64>,
}

/// What the OOM killer did in a job's cgroup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Oom {
    /// Processes it killed (1 where the kernel only says the limit was hit).
    pub kills: u64,
    /// The memory limit, bytes, when one is set.
    pub limit: Option<u64>,
    /// Largest memory use, bytes.
    pub peak: Option<u64>,
}

/// `cgroup.mode`: whether the service contains its jobs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Want {
    /// Use cgroups where they can be written, else process groups (with a warning).
    #[default]
    Auto,
    /// Process groups only.
    Off,
}

/// The containment settings (`[cgroup]` of the exec service's config).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// `cgroup.mode`.
    pub want: Want,
    /// `cgroup.root`: the cgroup (as this process sees cgroup paths) under
    /// which jobs are made; the service's own cgroup when `None`.
    pub root: Option<PathBuf>,
    /// `cgroup.memory_per_core`: a job's memory per core it holds on a node;
    /// the node's memory shared by its cores when `None`.
    pub memory_per_core: Option<u64>,
    /// `cgroup.pids_max`: most processes and threads of a job on a node.
    pub pids_max: Option<u64>,
}

/// Where the service makes its jobs' cgroups.
#[derive(Debug)]
enum Backend {
    /// v1: the service's directory in each controller's hierarchy (and
    /// what every job needs of it).
    V1(Arc<v1::Parent>),
    /// v2: the service's directory.
    V2(PathBuf),
    /// None: why.
    Off(String),
}

/// The service's cgroups: its mode, its directory, its policy.
#[derive(Debug)]
pub struct Cgroups {
    backend: Backend,
    policy: Policy,
    /// What this node has.
    node: limits::Node,
}

/// Services made in this process so far, for unique directory names.
static SERVICES: AtomicU32 = AtomicU32::new(0);

impl Cgroups {
    /// Find the layout of this machine, make the service's directory, and
    /// say at WARN (once) when jobs cannot be contained.
    /// `cores` is how many cores the service offers, over all its nodes.
    pub fn init(policy: Policy, cores: u64) -> Arc<Cgroups> {
        let node = limits::Node {
            memory: node_memory(Path::new("/proc/meminfo")).unwrap_or(0),
            cores,
            usable_cpus: usable_cpus(),
        };
        let backend = match policy.want {
            Want::Off => Backend::Off("cgroup.mode is off".into()),
            Want::Auto => {
                let layout = detect::this_process(Path::new("/proc"));
                Self::backend(&layout, policy.root.as_deref())
            }
        };
        if let Backend::Off(why) = &backend {
            tracing::warn!(
                reason = %why,
                "jobs are not contained in cgroups: no CPU, memory or process limits, \
                 no usage accounting, and a job's processes that leave its process \
                 groups (setsid) outlive it; signals go to process groups only"
            );
        }
        Arc::new(Cgroups {
            backend,
            policy,
            node,
        })
    }

    /// As [`Cgroups::init`], on a given layout and node (fixture trees).
    pub fn with_layout(policy: Policy, layout: &Layout, node: limits::Node) -> Cgroups {
        let backend = Self::backend(layout, policy.root.as_deref());
        Cgroups {
            backend,
            policy,
            node,
        }
    }

    fn backend(layout: &Layout, root: Option<&Path>) -> Backend {
        let name = format!(
            "fluxgate-exec.{}.{}",
            std::process::id(),
            SERVICES.fetch_add(1, Ordering::Relaxed)
        );
        let made = match layout {
            Layout::None => return Backend::Off("no cgroup filesystem is mounted".into()),
            Layout::V1(places) => {
                let roots = places
                    .iter()
                    .map(|(c, p)| (c.clone(), root.map_or_else(|| p.own.clone(), |r| p.at(r))))
                    .collect();
                let home = places
                    .iter()
                    .map(|(c, p)| (c.clone(), p.own.clone()))
                    .collect();
                v1::make_children(&roots, &name)
                    .and_then(|dirs| v1::Parent::new(dirs, home))
                    .map(|p| Backend::V1(Arc::new(p)))
            }
            Layout::V2(place) => {
                let r = root.map_or_else(|| place.own.clone(), |r| place.at(r));
                let dir = r.join(&name);
                v2::prepare(&r, &dir).map(|()| Backend::V2(dir))
            }
        };
        made.unwrap_or_else(|e: io::Error| Backend::Off(format!("cannot make a cgroup: {e}")))
    }

    /// `v2`, `v1`, or `off`: what the node reports.
    pub fn mode(&self) -> &'static str {
        match self.backend {
            Backend::V1(_) => "v1",
            Backend::V2(_) => "v2",
            Backend::Off(_) => "off",
        }
    }

    /// The containment settings.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// What this node has.
    pub fn node(&self) -> &limits::Node {
        &self.node
    }

    /// Why jobs are not contained here, when they are not.
    pub fn off_reason(&self) -> Option<&str> {
        match &self.backend {
            Backend::Off(why) => Some(why),
            _ => None,
        }
    }

    /// The limits of a job holding `cores` here (`count` of them over its
    /// ranks on this node); an error note when its options are wrong.
    pub fn job_limits(
        &self,
        jobspec: &Jobspec,
        cores: &IdSet,
        count: u64,
    ) -> Result<Limits, String> {
        let requested = limits::requested_memory(jobspec)?;
        Ok(limits::for_job(
            &self.policy,
            &self.node,
            cores,
            count,
            requested,
        ))
    }

    /// The cgroup of job `id` with `limits` when an emptied one can be
    /// reused at once (v1: renamed, a few files written; nothing that
    /// waits on the kernel); `None` when one must be made ([`Cgroups::job`]).
    pub fn reused_job(&self, id: u64, limits: &Limits) -> Option<Arc<JobCgroup>> {
        let Backend::V1(parent) = &self.backend else {
            return None;
        };
        let job = v1::Job::from_idle(parent, &format!("job-{id}"), limits)?;
        Some(Arc::new(JobCgroup::new(job::Backend::V1(job))))
    }

    /// Make the cgroup of job `id` with `limits`; `None` when jobs are not
    /// contained here.
    pub fn job(&self, id: u64, limits: &Limits) -> io::Result<Option<Arc<JobCgroup>>> {
        let name = format!("job-{id}");
        let job = match &self.backend {
            Backend::Off(_) => return Ok(None),
            Backend::V1(parent) => job::Backend::V1(v1::Job::create(parent, &name, limits)?),
            Backend::V2(dir) => job::Backend::V2(v2::Job::create(dir, &name, limits)?),
        };
        Ok(Some(Arc::new(JobCgroup::new(job))))
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        // Empty once every job has been removed; a leftover stays for the
        // administrator to see rather than failing anything.
        let dirs: Vec<PathBuf> = match &self.backend {
            Backend::V1(parent) => {
                parent.drain_idle();
                parent.dirs().values().cloned().collect()
            }
            Backend::V2(dir) => vec![dir.clone()],
            Backend::Off(_) => Vec::new(),
        };
        for d in dirs {
            let _ = fs::remove_dir(&d);
        }
    }
}

/// The CPUs this process may run on (its affinity mask).
pub fn usable_cpus() -> IdSet {
    use nix::sched::{CpuSet, sched_getaffinity};
    let Ok(set) = sched_getaffinity(nix::unistd::Pid::from_raw(0)) else {
        return IdSet::new();
    };
    (0..CpuSet::count())
        .filter(|&i| set.is_set(i).unwrap_or(false))
        .filter_map(|i| u32::try_from(i).ok())
        .collect()
}

/// `MemTotal` of a meminfo file, in bytes.
pub fn node_memory(meminfo: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(meminfo).ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::detect::Place;
    use super::*;

    #[test]
    fn a_writable_v1_tree_is_used_and_a_missing_one_is_off() {
        let tmp = tempfile::tempdir().unwrap();
        let mut places = BTreeMap::new();
        for c in ["memory", "pids"] {
            let own = tmp.path().join(c).join("svc");
            std::fs::create_dir_all(&own).unwrap();
            places.insert(
                c.to_string(),
                Place {
                    mount: tmp.path().join(c),
                    own,
                },
            );
        }
        let node = limits::Node {
            memory: 1 << 30,
            cores: 2,
            usable_cpus: IdSet::from_range(0, 1),
        };
        let cg = Cgroups::with_layout(Policy::default(), &Layout::V1(places.clone()), node.clone());
        assert_eq!(cg.mode(), "v1");
        let job = cg.job(7, &Limits::default()).unwrap().expect("contained");
        assert!(job.is_empty() || job.procs().is_empty());
        // A configured root that does not exist cannot be written.
        let policy = Policy {
            root: Some(PathBuf::from("/missing/root")),
            ..Policy::default()
        };
        let off = Cgroups::with_layout(policy, &Layout::V1(places), node);
        assert_eq!(off.mode(), "off");
        assert!(off.job(7, &Limits::default()).unwrap().is_none());
    }

    #[test]
    fn node_memory_is_read_from_meminfo() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("meminfo");
        std::fs::write(&p, "MemTotal:        2048 kB\nMemFree: 1 kB\n").unwrap();
        assert_eq!(node_memory(&p), Some(2 << 20));
    }
}
