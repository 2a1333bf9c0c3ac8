//! A job's cgroup in the unified (v2) hierarchy: one directory, the
//! limits through `cpuset.cpus`, `memory.max`, `memory.swap.max` and
//! `pids.max`, the whole-tree kill through `cgroup.kill`.

use std::io;
use std::path::{Path, PathBuf};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::{Limits, Oom, Usage, fs};

/// The controllers a job's cgroup needs enabled from its parent.
const CONTROLLERS: &[&str] = &["cpuset", "memory", "pids"];
/// The leaf the service moves itself into when its own cgroup is the root
/// (v2 allows no processes in a cgroup that hands controllers down).
pub const SERVICE_LEAF: &str = "service";

/// Make `dir` (the service's) ready to hold jobs under `root`: when
/// `root` holds this process, this process moves to a leaf beside the
/// jobs; then the controllers are handed down to `dir`'s children.
pub fn prepare(root: &Path, dir: &Path) -> io::Result<()> {
    let me = std::process::id() as i32;
    if fs::procs(root).contains(&me) {
        let leaf = root.join(SERVICE_LEAF);
        fs::make_dir(&leaf)?;
        fs::write(&leaf, "cgroup.procs", &me.to_string())?;
    }
    enable(root)?;
    fs::make_dir(dir)?;
    enable(dir)
}

/// Hand the controllers `dir` has down to its children.
fn enable(dir: &Path) -> io::Result<()> {
    let have = fs::read(dir, "cgroup.controllers").unwrap_or_default();
    let want: Vec<String> = CONTROLLERS
        .iter()
        .filter(|c| have.split_whitespace().any(|h| h == **c))
        .map(|c| format!("+{c}"))
        .collect();
    if want.is_empty() {
        return Ok(());
    }
    fs::write(dir, "cgroup.subtree_control", &want.join(" "))
}

/// One job's cgroup.
#[derive(Debug)]
pub struct Job {
    dir: PathBuf,
}

impl Job {
    /// Make the job's cgroup `name` under `parent` with `limits`.
    pub fn create(parent: &Path, name: &str, limits: &Limits) -> io::Result<Job> {
        let job = Job {
            dir: parent.join(name),
        };
        fs::make_dir(&job.dir)?;
        if let Err(e) = job.limit(limits) {
            let _ = job.remove();
            return Err(e);
        }
        Ok(job)
    }

    fn limit(&self, limits: &Limits) -> io::Result<()> {
        let dir = &self.dir;
        if let Some(cpus) = &limits.cpus {
            fs::write(dir, "cpuset.cpus", cpus)?;
        }
        if let Some(bytes) = limits.memory {
            fs::write(dir, "memory.max", &bytes.to_string())?;
            // Only where the kernel accounts swap.
            if dir.join("memory.swap.max").exists() {
                fs::write(dir, "memory.swap.max", "0")?;
            }
        }
        if let Some(n) = limits.pids {
            fs::write(dir, "pids.max", &n.to_string())?;
        }
        Ok(())
    }

    /// Put process `pid` in the job's cgroup.
    pub fn place(&self, pid: i32) -> io::Result<()> {
        fs::write(&self.dir, "cgroup.procs", &pid.to_string())
    }

    /// The processes in the job's cgroup.
    pub fn procs(&self) -> Vec<i32> {
        fs::procs(&self.dir)
    }

    /// Send `signal` to every process of the job (SIGKILL through
    /// `cgroup.kill` where the kernel has it), frozen meanwhile; how many
    /// were signalled.
    pub fn signal(&self, signal: Signal) -> usize {
        if signal == Signal::SIGKILL && self.dir.join("cgroup.kill").exists() {
            let n = self.procs().len();
            if fs::write(&self.dir, "cgroup.kill", "1").is_ok() {
                return n;
            }
        }
        let freeze = self.dir.join("cgroup.freeze").exists();
        if freeze {
            let _ = fs::write(&self.dir, "cgroup.freeze", "1");
        }
        let pids = self.procs();
        for &pid in &pids {
            let _ = kill(Pid::from_raw(pid), signal);
        }
        if freeze {
            let _ = fs::write(&self.dir, "cgroup.freeze", "0");
        }
        pids.len()
    }

    /// CPU time and peak memory.
    pub fn usage(&self) -> Usage {
        let us = |key| fs::keyed(&self.dir, "cpu.stat", key).unwrap_or(0) * 1000;
        Usage {
            user_ns: us("user_usec"),
            system_ns: us("system_usec"),
            // memory.peak: Linux 5.19.
            peak_memory: fs::number(&self.dir, "memory.peak"),
        }
    }

    /// What the OOM killer did in the job.
    pub fn oom(&self) -> Oom {
        Oom {
            kills: fs::keyed(&self.dir, "memory.events", "oom_kill").unwrap_or(0),
            limit: fs::number(&self.dir, "memory.max"),
            peak: fs::number(&self.dir, "memory.peak"),
        }
    }

    /// Remove the job's directory.
    pub fn remove(&self) -> io::Result<()> {
        fs::remove_dir(&self.dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_leaves_its_root_and_hands_the_controllers_down() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let me = std::process::id();
        std::fs::write(root.join("cgroup.procs"), format!("{me}\n")).unwrap();
        std::fs::write(
            root.join("cgroup.controllers"),
            "cpuset cpu io memory pids\n",
        )
        .unwrap();
        let dir = root.join("fluxgate");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("cgroup.controllers"), "cpuset memory\n").unwrap();
        prepare(root, &dir).unwrap();
        let leaf = root.join(SERVICE_LEAF);
        assert_eq!(fs::read(&leaf, "cgroup.procs").unwrap(), me.to_string());
        assert_eq!(
            fs::read(root, "cgroup.subtree_control").unwrap(),
            "+cpuset +memory +pids"
        );
        assert_eq!(
            fs::read(&dir, "cgroup.subtree_control").unwrap(),
            "+cpuset +memory"
        );
    }

    #[test]
    fn a_job_gets_its_limits_and_swap_off() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("job7");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("memory.swap.max"), "max\n").unwrap();
        let limits = Limits {
            cpus: Some("1".into()),
            memory: Some(64 << 20),
            pids: Some(50),
        };
        let job = Job::create(tmp.path(), "job7", &limits).unwrap();
        assert_eq!(fs::read(&dir, "cpuset.cpus").unwrap(), "1");
        assert_eq!(fs::read(&dir, "memory.max").unwrap(), "67108864");
        assert_eq!(fs::read(&dir, "memory.swap.max").unwrap(), "0");
        assert_eq!(fs::read(&dir, "pids.max").unwrap(), "50");
        job.place(99).unwrap();
        assert_eq!(fs::read(&dir, "cgroup.procs").unwrap(), "99");
    }

    #[test]
    fn usage_oom_and_kill_use_the_v2_files() {
        let tmp = tempfile::tempdir().unwrap();
        let job = Job::create(tmp.path(), "j", &Limits::default()).unwrap();
        let dir = tmp.path().join("j");
        std::fs::write(
            dir.join("cpu.stat"),
            "usage_usec 3000000\nuser_usec 2000000\nsystem_usec 1000000\n",
        )
        .unwrap();
        std::fs::write(dir.join("memory.peak"), "1048576\n").unwrap();
        std::fs::write(dir.join("memory.max"), "max\n").unwrap();
        std::fs::write(
            dir.join("memory.events"),
            "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n",
        )
        .unwrap();
        let u = job.usage();
        assert_eq!((u.user_ns, u.system_ns), (2_000_000_000, 1_000_000_000));
        assert_eq!(u.peak_memory, Some(1 << 20));
        assert_eq!(
            job.oom(),
            Oom {
                kills: 1,
                limit: None,
                peak: Some(1 << 20)
            }
        );
        std::fs::write(dir.join("cgroup.kill"), "").unwrap();
        std::fs::write(dir.join("cgroup.procs"), "").unwrap();
        job.signal(Signal::SIGKILL);
        assert_eq!(fs::read(&dir, "cgroup.kill").unwrap(), "1");
    }
}
