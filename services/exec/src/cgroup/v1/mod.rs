//! A job's cgroup in v1 hierarchies (legacy and hybrid layouts): one
//! directory per hierarchy, the limits through the v1 files, the
//! whole-tree kill through the freezer.
//!
//! A job costs the kernel, for each task, the spawning thread moved into
//! each hierarchy and back, and a directory in each: made and removed, or
//! an emptied one of an earlier job renamed ([`idle`]). What does not
//! change from job to job is read or opened once, in [`Parent`]: the
//! parent's cpuset, whether swap is accounted, and the service's own
//! `tasks` files (a thread goes home by one write, no path walked).

pub mod idle;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rustix::fs::{Mode, OFlags};

use super::{Limits, Oom, Usage, fs};

/// How long a freeze may take before the signals go out anyway.
const FREEZE_WAIT: Duration = Duration::from_millis(200);

/// Directories by controller (several controllers may share one).
pub type Dirs = BTreeMap<String, PathBuf>;

/// Make the child `name` of each parent directory; a cpuset child gets its
/// parent's CPUs and memory nodes, without which no process may join it.
pub fn make_children(parents: &Dirs, name: &str) -> io::Result<Dirs> {
    let mut made: Vec<PathBuf> = Vec::new();
    let mut dirs = Dirs::new();
    for (ctl, parent) in parents {
        let dir = parent.join(name);
        if !made.contains(&dir) {
            fs::make_dir(&dir)?;
            if ctl == "cpuset" {
                fs::write(&dir, "cpuset.cpus", &fs::read(parent, "cpuset.cpus")?)?;
                fs::write(&dir, "cpuset.mems", &fs::read(parent, "cpuset.mems")?)?;
            }
            made.push(dir.clone());
        }
        dirs.insert(ctl.clone(), dir);
    }
    Ok(dirs)
}

/// Where jobs are made, and what every job's cgroup needs of it.
#[derive(Debug)]
pub struct Parent {
    /// The directories jobs are made in, by controller.
    dirs: Dirs,
    /// The service's own cgroups, by controller.
    home: Dirs,
    /// The `tasks` file of each distinct home directory, open for writing
    /// (`None` where it cannot be opened: written by path then).
    home_tasks: BTreeMap<PathBuf, Option<File>>,
    /// The parent's `cpuset.cpus` and `cpuset.mems`, when it has a cpuset.
    cpuset: Option<(String, String)>,
    /// Swap is accounted (`memory.memsw.limit_in_bytes` exists).
    memsw: bool,
    /// Each directory jobs are made in, open (`O_PATH`): a job's
    /// directories are renamed and written relative to it, one path
    /// component walked rather than the whole mount path.
    dir_fds: BTreeMap<PathBuf, OwnedFd>,
    /// Emptied job cgroups kept for the next jobs.
    idle: idle::Pool,
    /// Names idle cgroups.
    idle_names: AtomicU64,
}

impl Parent {
    /// The parent directories `dirs` of jobs, for a service whose own
    /// cgroups are `home`.
    pub fn new(dirs: Dirs, home: Dirs) -> io::Result<Parent> {
        let cpuset = match dirs.get("cpuset") {
            Some(d) => Some((fs::read(d, "cpuset.cpus")?, fs::read(d, "cpuset.mems")?)),
            None => None,
        };
        let memsw = dirs
            .get("memory")
            .is_some_and(|d| d.join("memory.memsw.limit_in_bytes").exists());
        let home_tasks = home
            .values()
            .map(|d| {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(d.join("tasks"));
                (d.clone(), f.ok())
            })
            .collect();
        let dir_fds = dirs
            .values()
            .filter_map(|d| {
                let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
                let fd = rustix::fs::open(d, flags, Mode::empty()).ok()?;
                Some((d.clone(), fd))
            })
            .collect();
        Ok(Parent {
            dir_fds,
            dirs,
            home,
            home_tasks,
            cpuset,
            memsw,
            idle: idle::Pool::default(),
            idle_names: AtomicU64::new(0),
        })
    }

    /// Remove the idle cgroups (at the service's end).
    pub fn drain_idle(&self) {
        for cgroup in self.idle.drain() {
            if let Err(e) = remove_dirs(&cgroup.dirs) {
                tracing::warn!(error = %e, "cannot remove an idle job cgroup");
            }
        }
    }

    /// The directories jobs are made in.
    pub fn dirs(&self) -> &Dirs {
        &self.dirs
    }

    /// The open parent of the job directory `dir`, and `dir`'s name in it.
    fn at<'a>(&self, dir: &'a Path) -> Option<(&OwnedFd, &'a OsStr)> {
        Some((self.dir_fds.get(dir.parent()?)?, dir.file_name()?))
    }

    /// Write `value` to the file `name` of the job directory `dir`.
    fn write(&self, dir: &Path, name: &str, value: &str) -> io::Result<()> {
        let Some((parent, job)) = self.at(dir) else {
            return fs::write(dir, name, value);
        };
        let path = Path::new(job).join(name);
        // As `std::fs::write` opens (an interface file always exists; a
        // fixture's may not yet).
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC;
        let written = rustix::fs::openat(parent, &path, flags, Mode::from_raw_mode(0o644))
            .and_then(|fd| rustix::io::write(&fd, value.as_bytes()))
            .map(drop)
            .map_err(io::Error::from);
        written.map_err(|e| io::Error::new(e.kind(), format!("{}/{name}: {e}", dir.display())))
    }

    /// The trimmed text of the file `name` of the job directory `dir`.
    fn read(&self, dir: &Path, name: &str) -> io::Result<String> {
        let Some((parent, job)) = self.at(dir) else {
            return fs::read(dir, name);
        };
        let path = Path::new(job).join(name);
        let mut text = String::new();
        rustix::fs::openat(
            parent,
            &path,
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(io::Error::from)
        .and_then(|fd| File::from(fd).read_to_string(&mut text))
        .map_err(|e| io::Error::new(e.kind(), format!("{}/{name}: {e}", dir.display())))?;
        Ok(text.trim().to_string())
    }

    /// The number in the file `name` of the job directory `dir`.
    fn number(&self, dir: &Path, name: &str) -> Option<u64> {
        self.read(dir, name).ok()?.parse().ok()
    }

    /// The value of `key` in the file `name` of `key value` lines.
    fn keyed(&self, dir: &Path, name: &str, key: &str) -> Option<u64> {
        fs::key_in(&self.read(dir, name).ok()?, key)
    }

    /// Rename the job directory `dir` to `name`, beside it.
    fn rename(&self, dir: &Path, name: &str) -> io::Result<()> {
        let renamed = match self.at(dir) {
            Some((parent, from)) => {
                rustix::fs::renameat(parent, from, parent, name).map_err(io::Error::from)
            }
            None => std::fs::rename(dir, dir.with_file_name(name)),
        };
        renamed.map_err(|e| io::Error::new(e.kind(), format!("{} -> {name}: {e}", dir.display())))
    }

    /// The controllers a job with `limits` has a directory in: no pids
    /// hierarchy without a pids limit, and no cpuset of its own for a job
    /// that holds every CPU the service has (one directory less a job, and
    /// two thread moves a task).
    fn shape(&self, limits: &Limits) -> BTreeSet<&str> {
        let whole_cpuset = match (&limits.cpus, &self.cpuset) {
            (None, _) => true,
            (Some(cpus), Some((parent, _))) => cpus == parent,
            (Some(_), None) => false,
        };
        self.dirs
            .keys()
            .map(String::as_str)
            .filter(|ctl| !(*ctl == "pids" && limits.pids.is_none()))
            .filter(|ctl| !(*ctl == "cpuset" && whole_cpuset))
            .collect()
    }

    /// Move the calling thread `tid` back to the service's cgroup of `ctl`.
    fn go_home(&self, ctl: &str, tid: &str) -> io::Result<()> {
        let Some(home) = self.home.get(ctl) else {
            return Ok(());
        };
        match self.home_tasks.get(home) {
            Some(Some(f)) => f
                .write_at(tid.as_bytes(), 0)
                .map(drop)
                .map_err(|e| io::Error::new(e.kind(), format!("{}/tasks: {e}", home.display()))),
            _ => fs::write(home, "tasks", tid),
        }
    }
}

/// One job's cgroup.
#[derive(Debug)]
pub struct Job {
    dirs: Dirs,
    /// Where it was made, and where a thread that spawned a task inside
    /// goes back to.
    parent: Arc<Parent>,
    /// What its files hold it to.
    limits: Limits,
}

impl Job {
    /// Make the job's cgroup `name` under `parent` with `limits`: an idle
    /// one of the same shape renamed, or new directories.
    pub fn create(parent: &Arc<Parent>, name: &str, limits: &Limits) -> io::Result<Job> {
        if let Some(job) = Job::from_idle(parent, name, limits) {
            return Ok(job);
        }
        let shape = parent.shape(limits);
        let mut job = Job {
            dirs: Dirs::new(),
            parent: Arc::clone(parent),
            limits: Limits::default(),
        };
        // Removed again, whatever was made, if a step fails.
        if let Err(e) = job.make(name, &shape, limits) {
            let _ = job.remove();
            return Err(e);
        }
        Ok(job)
    }

    /// Make the directories of the controllers in `shape`, each with its
    /// limits.
    fn make(&mut self, name: &str, shape: &BTreeSet<&str>, limits: &Limits) -> io::Result<()> {
        let parent = Arc::clone(&self.parent);
        for (ctl, pdir) in &parent.dirs {
            if !shape.contains(ctl.as_str()) {
                continue;
            }
            let dir = pdir.join(name);
            // Controllers mounted together share one directory, made once.
            if !self.dirs.values().any(|d| *d == dir) {
                fs::make_dir(&dir)?;
            }
            self.dirs.insert(ctl.clone(), dir);
        }
        self.set_limits(limits)
    }

    /// An idle cgroup of the shape `limits` need, renamed `name` and given
    /// `limits` (a few writes: no directory is made); `None` when there is
    /// none, or it could not be reused (and was removed).
    pub fn from_idle(parent: &Arc<Parent>, name: &str, limits: &Limits) -> Option<Job> {
        let cgroup = parent.idle.take(&parent.shape(limits), limits)?;
        Job::reuse(parent, cgroup, name, limits)
            .inspect_err(|e| tracing::debug!(error = %e, "an idle cgroup could not be reused"))
            .ok()
    }

    /// The idle `cgroup` renamed `name`, its limits made `limits`; removed
    /// when a step fails.
    fn reuse(
        parent: &Arc<Parent>,
        cgroup: idle::Idle,
        name: &str,
        limits: &Limits,
    ) -> io::Result<Job> {
        let mut job = Job {
            dirs: cgroup.dirs,
            parent: Arc::clone(parent),
            limits: cgroup.limits,
        };
        let done = job.rename(name).and_then(|()| job.set_limits(limits));
        if let Err(e) = done {
            let _ = job.remove();
            return Err(e);
        }
        Ok(job)
    }

    /// Rename the job's directories (v1 renames a cgroup in place); on
    /// failure each directory is known by the name it has.
    fn rename(&mut self, name: &str) -> io::Result<()> {
        let mut result = Ok(());
        let mut renamed = Dirs::new();
        for (ctl, dir) in &self.dirs {
            let to = dir.with_file_name(name);
            // Controllers mounted together share one directory, renamed once.
            let shared = renamed.values().any(|d| *d == to);
            if !shared && result.is_ok() {
                result = self.parent.rename(dir, name);
            }
            let now = if shared || result.is_ok() {
                to
            } else {
                dir.clone()
            };
            renamed.insert(ctl.clone(), now);
        }
        self.dirs = renamed;
        result
    }

    /// Write the limits that differ from those the files hold.
    fn set_limits(&mut self, limits: &Limits) -> io::Result<()> {
        if let (Some(dir), Some((parent_cpus, mems))) =
            (self.dirs.get("cpuset"), &self.parent.cpuset)
        {
            // No process may join a cpuset without CPUs and memory nodes:
            // a new one gets both.
            let cpus = limits.cpus.as_deref().unwrap_or(parent_cpus);
            // A job's cpuset directory always holds CPUs of its own: none
            // recorded means it was just made.
            let fresh = self.limits.cpus.is_none();
            if fresh || self.limits.cpus.as_deref() != Some(cpus) {
                self.parent.write(dir, "cpuset.cpus", cpus)?;
            }
            if fresh {
                self.parent.write(dir, "cpuset.mems", mems)?;
            }
        }
        if let Some(dir) = self.dirs.get("memory")
            && self.limits.memory != limits.memory
        {
            write_memory(&self.parent, dir, self.limits.memory, limits.memory)?;
        }
        if let Some(dir) = self.dirs.get("pids")
            && self.limits.pids != limits.pids
        {
            let max = limits
                .pids
                .map_or_else(|| "max".to_string(), |n| n.to_string());
            self.parent.write(dir, "pids.max", &max)?;
        }
        self.limits = limits.clone();
        Ok(())
    }

    /// The distinct directories, in controller order.
    fn distinct(&self) -> Vec<&Path> {
        distinct(&self.dirs)
    }

    /// The directory whose `cgroup.procs` lists the job's processes.
    fn members_dir(&self) -> Option<&Path> {
        ["freezer", "pids", "memory", "cpuset", "cpuacct"]
            .iter()
            .find_map(|c| self.dirs.get(*c))
            .map(PathBuf::as_path)
    }

    /// Put process `pid` (and its threads) in every hierarchy's cgroup.
    pub fn place(&self, pid: i32) -> io::Result<()> {
        for dir in self.distinct() {
            self.parent.write(dir, "cgroup.procs", &pid.to_string())?;
        }
        Ok(())
    }

    /// Run `spawn` with the calling thread (only it: v1 moves single
    /// threads through `tasks`) inside the job's cgroup, so that the
    /// process it starts is born there; the thread goes home after.
    pub fn spawn_inside<T>(&self, spawn: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        let tid = nix::unistd::gettid().as_raw().to_string();
        let mut entered: Vec<&str> = Vec::new();
        let mut result = Ok(());
        for (ctl, dir) in &self.dirs {
            if entered.iter().any(|c| self.dirs[*c] == *dir) {
                continue;
            }
            result = self.parent.write(dir, "tasks", &tid);
            if result.is_err() {
                break;
            }
            entered.push(ctl);
        }
        let spawned = result.and_then(|()| spawn());
        for ctl in entered {
            if let Err(e) = self.parent.go_home(ctl, &tid) {
                tracing::error!(error = %e, "a thread cannot leave a job's cgroup");
            }
        }
        spawned
    }

    /// The processes in the job's cgroup.
    pub fn procs(&self) -> Vec<i32> {
        self.members_dir()
            .and_then(|d| self.parent.read(d, "cgroup.procs").ok())
            .map(|t| fs::pids_in(&t))
            .unwrap_or_default()
    }

    /// Send `signal` to every process of the job, frozen meanwhile so that
    /// none forks past the signal or exits and gives its pid away; how
    /// many were signalled.
    pub fn signal(&self, signal: Signal) -> usize {
        let freezer = self.dirs.get("freezer");
        if let Some(dir) = freezer {
            freeze(dir, true);
        }
        // A thread of this service may be inside for an instant while it
        // spawns a task: the service is listed, never signalled.
        let me = std::process::id() as i32;
        let pids: Vec<i32> = self.procs().into_iter().filter(|&p| p != me).collect();
        for &pid in &pids {
            let _ = kill(Pid::from_raw(pid), signal);
        }
        if let Some(dir) = freezer {
            freeze(dir, false);
        }
        pids.len()
    }

    /// CPU time and peak memory.
    pub fn usage(&self) -> Usage {
        let cpu = self.dirs.get("cpuacct");
        let ns = |name| cpu.and_then(|d| self.parent.number(d, name));
        let (user_ns, system_ns) = match (ns("cpuacct.usage_user"), ns("cpuacct.usage_sys")) {
            (Some(u), Some(s)) => (u, s),
            // Older kernels: only cpuacct.stat, in clock ticks.
            _ => {
                let ticks = |key| {
                    cpu.and_then(|d| self.parent.keyed(d, "cpuacct.stat", key))
                        .unwrap_or(0)
                        .saturating_mul(super::NS_PER_TICK)
                };
                (ticks("user"), ticks("system"))
            }
        };
        let memory = self.dirs.get("memory");
        Usage {
            user_ns,
            system_ns,
            peak_memory: memory.and_then(|d| self.parent.number(d, "memory.max_usage_in_bytes")),
        }
    }

    /// What the OOM killer did in the job.
    pub fn oom(&self) -> Oom {
        let Some(dir) = self.dirs.get("memory") else {
            return Oom::default();
        };
        // `oom_kill` (Linux 4.13); before, only that the limit was hit.
        let kills = self
            .parent
            .keyed(dir, "memory.oom_control", "oom_kill")
            .or_else(|| {
                self.parent
                    .number(dir, "memory.failcnt")
                    .map(|n| u64::from(n > 0))
            })
            .unwrap_or(0);
        if kills == 0 {
            // The usual answer, asked at every job's end: one file read.
            return Oom::default();
        }
        Oom {
            kills,
            limit: self.parent.number(dir, "memory.limit_in_bytes"),
            peak: self.parent.number(dir, "memory.max_usage_in_bytes"),
        }
    }

    /// Remove the job's directories.
    pub fn remove(&self) -> io::Result<()> {
        remove_dirs(&self.dirs)
    }

    /// The job is over and its cgroup empty: keep the cgroup for a later
    /// job when it ended clean and the service has room for it, else
    /// remove it.
    pub fn retire(&self) -> io::Result<()> {
        if !self.parent.idle.has_room() || !self.clean() {
            return self.remove();
        }
        // What the next job reads at its end starts from zero: its CPU
        // time, and its peak memory from what is still charged (at most
        // `RESIDUE_MAX`). OOM kills cannot be reset: a cgroup with any is
        // never kept.
        let mut idle = Job {
            dirs: self.dirs.clone(),
            parent: Arc::clone(&self.parent),
            limits: self.limits.clone(),
        };
        let n = self.parent.idle_names.fetch_add(1, Ordering::Relaxed);
        let reset = self
            .reset_counters()
            .and_then(|()| idle.rename(&format!("idle-{n}")));
        if let Err(e) = reset {
            tracing::debug!(error = %e, "an emptied cgroup is not kept");
            // Whichever name each directory has now.
            let _ = idle.remove();
            return self.remove();
        }
        let kept = idle::Idle {
            dirs: std::mem::take(&mut idle.dirs),
            limits: self.limits.clone(),
        };
        if let Err(cgroup) = self.parent.idle.put(kept) {
            remove_dirs(&cgroup.dirs)?;
        }
        Ok(())
    }

    /// True when the emptied cgroup can serve another job as if new: no
    /// OOM kill, thawed, little memory still charged, and no process still
    /// counted (an exited one is counted until it is reaped, which its
    /// adoptive parent may do late or never).
    fn clean(&self) -> bool {
        if self.oom().kills > 0 {
            return false;
        }
        if let Some(dir) = self.dirs.get("pids")
            && self.parent.number(dir, "pids.current") != Some(0)
        {
            return false;
        }
        if let Some(dir) = self.dirs.get("memory")
            && self
                .parent
                .number(dir, "memory.usage_in_bytes")
                .is_none_or(|n| n > idle::RESIDUE_MAX)
        {
            return false;
        }
        self.dirs.get("freezer").is_none_or(|dir| {
            self.parent
                .read(dir, "freezer.state")
                .is_ok_and(|s| s == "THAWED")
        })
    }

    /// Zero the CPU time and the peak memory.
    fn reset_counters(&self) -> io::Result<()> {
        if let Some(dir) = self.dirs.get("cpuacct") {
            self.parent.write(dir, "cpuacct.usage", "0")?;
        }
        if let Some(dir) = self.dirs.get("memory") {
            self.parent.write(dir, "memory.max_usage_in_bytes", "0")?;
        }
        Ok(())
    }
}

/// The distinct directories of `dirs` (controllers mounted together share
/// one), in controller order.
fn distinct(dirs: &Dirs) -> Vec<&Path> {
    let mut out: Vec<&Path> = Vec::new();
    for d in dirs.values() {
        if !out.contains(&d.as_path()) {
            out.push(d);
        }
    }
    out
}

/// Remove the distinct directories of `dirs`; the first error, after
/// trying every one.
fn remove_dirs(dirs: &Dirs) -> io::Result<()> {
    let mut first = Ok(());
    for dir in distinct(dirs) {
        if let Err(e) = fs::remove_dir(dir)
            && first.is_ok()
        {
            first = Err(e);
        }
    }
    first
}

/// Write a memory limit (`None`: none), swap included where swap is
/// accounted: the kernel keeps memory's limit at most memory and swap's,
/// so a limit raised is written to the pair's outer file first.
fn write_memory(parent: &Parent, dir: &Path, old: Option<u64>, new: Option<u64>) -> io::Result<()> {
    let memsw = parent.memsw;
    let value = new.map_or_else(|| "-1".to_string(), |n| n.to_string());
    let raised = match (old, new) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(o), Some(n)) => n > o,
    };
    if memsw && raised {
        parent.write(dir, "memory.memsw.limit_in_bytes", &value)?;
    }
    parent.write(dir, "memory.limit_in_bytes", &value)?;
    // Memory and swap together no more than memory: no swap.
    if memsw && !raised {
        parent.write(dir, "memory.memsw.limit_in_bytes", &value)?;
    }
    Ok(())
}

/// Freeze or thaw the cgroup of `dir`; a freeze waits (a little) until it holds.
fn freeze(dir: &Path, frozen: bool) {
    let state = if frozen { "FROZEN" } else { "THAWED" };
    if fs::write(dir, "freezer.state", state).is_err() || !frozen {
        return;
    }
    let until = Instant::now() + FREEZE_WAIT;
    while fs::read(dir, "freezer.state").is_ok_and(|s| s == "FREEZING") && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v1 fixture: one directory per hierarchy (cpu and cpuacct shared),
    /// the service's cgroup with a cpuset.
    fn fixture() -> (tempfile::TempDir, Dirs) {
        let tmp = tempfile::tempdir().unwrap();
        let mut dirs = Dirs::new();
        for (ctl, hier) in [
            ("cpuset", "cpuset"),
            ("memory", "memory"),
            ("pids", "pids"),
            ("freezer", "freezer"),
            ("cpuacct", "cpu,cpuacct"),
        ] {
            let d = tmp.path().join(hier).join("svc");
            std::fs::create_dir_all(&d).unwrap();
            dirs.insert(ctl.to_string(), d);
        }
        std::fs::write(dirs["cpuset"].join("cpuset.cpus"), "0-7\n").unwrap();
        std::fs::write(dirs["cpuset"].join("cpuset.mems"), "0\n").unwrap();
        (tmp, dirs)
    }

    #[test]
    fn a_job_gets_its_cpus_memory_without_swap_and_pids() {
        let (_tmp, parents) = fixture();
        // Swap is accounted where the parent has the file.
        std::fs::write(parents["memory"].join("memory.memsw.limit_in_bytes"), "").unwrap();
        let limits = Limits {
            cpus: Some("2-3".into()),
            memory: Some(1 << 30),
            pids: Some(100),
        };
        let parent = Arc::new(Parent::new(parents.clone(), parents.clone()).unwrap());
        let job = Job::create(&parent, "job1", &limits).unwrap();
        let read = |ctl: &str, f: &str| fs::read(&parents[ctl].join("job1"), f).unwrap();
        assert_eq!(read("cpuset", "cpuset.cpus"), "2-3");
        assert_eq!(read("cpuset", "cpuset.mems"), "0");
        assert_eq!(read("memory", "memory.limit_in_bytes"), "1073741824");
        assert_eq!(read("memory", "memory.memsw.limit_in_bytes"), "1073741824");
        assert_eq!(read("pids", "pids.max"), "100");
        job.place(4242).unwrap();
        assert_eq!(read("freezer", "cgroup.procs"), "4242");
        assert_eq!(read("cpuacct", "cgroup.procs"), "4242");
        // A shared hierarchy is one directory, written once.
        assert_eq!(job.distinct().len(), 5);
        // Without a pids limit, no pids directory.
        let job = Job::create(&parent, "job2", &Limits::default()).unwrap();
        assert!(!job.dirs.contains_key("pids"));
        // Every CPU of the parent: no cpuset of its own.
        assert!(!job.dirs.contains_key("cpuset"));
        let all = Limits {
            cpus: Some("0-7".into()),
            ..Limits::default()
        };
        let job = Job::create(&parent, "job3", &all).unwrap();
        assert!(!job.dirs.contains_key("cpuset"));
    }

    #[test]
    fn an_emptied_clean_cgroup_is_renamed_for_the_next_job() {
        let (_tmp, parents) = fixture();
        std::fs::write(parents["memory"].join("memory.memsw.limit_in_bytes"), "").unwrap();
        let parent = Arc::new(Parent::new(parents.clone(), parents.clone()).unwrap());
        let limits = Limits {
            cpus: Some("2-3".into()),
            memory: Some(1 << 30),
            pids: None,
        };
        let job = Job::create(&parent, "job-1", &limits).unwrap();
        let mem = job.dirs["memory"].clone();
        std::fs::write(mem.join("memory.usage_in_bytes"), "4096\n").unwrap();
        std::fs::write(mem.join("memory.oom_control"), "oom_kill 0\n").unwrap();
        std::fs::write(job.dirs["freezer"].join("freezer.state"), "THAWED\n").unwrap();
        job.retire().unwrap();
        // Kept under a neutral name, its counters zeroed.
        let idle = parents["memory"].join("idle-0");
        assert!(!mem.exists() && idle.is_dir());
        assert_eq!(fs::read(&idle, "memory.max_usage_in_bytes").unwrap(), "0");
        assert_eq!(
            fs::read(&parents["cpuacct"].join("idle-0"), "cpuacct.usage").unwrap(),
            "0"
        );
        // The next job of the same shape takes it, with only what differs
        // written: a memory limit raised goes to memory and swap.
        let more = Limits {
            memory: Some(2 << 30),
            ..limits.clone()
        };
        let next = Job::create(&parent, "job-2", &more).unwrap();
        assert_eq!(next.dirs["memory"], parents["memory"].join("job-2"));
        assert!(!idle.exists());
        let read = |f: &str| fs::read(&next.dirs["memory"], f).unwrap();
        assert_eq!(read("memory.limit_in_bytes"), "2147483648");
        assert_eq!(read("memory.memsw.limit_in_bytes"), "2147483648");
        assert_eq!(
            fs::read(&next.dirs["cpuset"], "cpuset.cpus").unwrap(),
            "2-3"
        );
        // A job of another shape (a pids limit) gets directories of its own.
        let pids = Limits {
            pids: Some(10),
            ..limits
        };
        let other = Job::create(&parent, "job-3", &pids).unwrap();
        assert_eq!(other.dirs["memory"], parents["memory"].join("job-3"));
    }

    #[test]
    fn a_cgroup_the_oom_killer_visited_is_not_kept() {
        let (_tmp, parents) = fixture();
        let parent = Arc::new(Parent::new(parents.clone(), parents.clone()).unwrap());
        let job = Job::create(&parent, "job-1", &Limits::default()).unwrap();
        let mem = job.dirs["memory"].clone();
        std::fs::write(mem.join("memory.usage_in_bytes"), "0\n").unwrap();
        std::fs::write(mem.join("memory.oom_control"), "oom_kill 1\n").unwrap();
        // Removal of a fixture directory with files in it fails; what
        // matters is that it is not handed to the next job.
        let _ = job.retire();
        let next = Job::create(&parent, "job-2", &Limits::default()).unwrap();
        assert!(mem.is_dir());
        assert_eq!(next.dirs["memory"], parents["memory"].join("job-2"));
        assert!(fs::read(&next.dirs["memory"], "memory.oom_control").is_err());
        // Nor one whose exited processes are still counted.
        let pids = Limits {
            pids: Some(10),
            ..Limits::default()
        };
        let job = Job::create(&parent, "job-3", &pids).unwrap();
        std::fs::write(job.dirs["memory"].join("memory.usage_in_bytes"), "0\n").unwrap();
        std::fs::write(job.dirs["pids"].join("pids.current"), "1\n").unwrap();
        std::fs::write(job.dirs["freezer"].join("freezer.state"), "THAWED\n").unwrap();
        assert!(!job.clean());
        std::fs::write(job.dirs["pids"].join("pids.current"), "0\n").unwrap();
        assert!(job.clean());
    }

    #[test]
    fn usage_and_oom_come_from_the_v1_files() {
        let (_tmp, parents) = fixture();
        let parent = Arc::new(Parent::new(parents.clone(), parents).unwrap());
        let job = Job::create(&parent, "j", &Limits::default()).unwrap();
        let (cpu, mem) = (&job.dirs["cpuacct"], &job.dirs["memory"]);
        std::fs::write(cpu.join("cpuacct.usage_user"), "1500000000\n").unwrap();
        std::fs::write(cpu.join("cpuacct.usage_sys"), "250000000\n").unwrap();
        std::fs::write(mem.join("memory.max_usage_in_bytes"), "8388608\n").unwrap();
        std::fs::write(mem.join("memory.limit_in_bytes"), "4194304\n").unwrap();
        std::fs::write(
            mem.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        )
        .unwrap();
        let u = job.usage();
        assert_eq!((u.user_ns, u.system_ns), (1_500_000_000, 250_000_000));
        assert_eq!(u.peak_memory, Some(8 << 20));
        assert_eq!(
            job.oom(),
            Oom {
                kills: 2,
                limit: Some(4 << 20),
                peak: Some(8 << 20)
            }
        );
        std::fs::remove_file(cpu.join("cpuacct.usage_user")).unwrap();
        std::fs::write(cpu.join("cpuacct.stat"), "user 300\nsystem 100\n").unwrap();
        let u = job.usage();
        assert_eq!((u.user_ns, u.system_ns), (3_000_000_000, 1_000_000_000));
    }

    #[test]
    fn signalling_freezes_reads_the_members_and_thaws() {
        let (_tmp, parents) = fixture();
        let parent = Arc::new(Parent::new(parents.clone(), parents).unwrap());
        let job = Job::create(&parent, "j", &Limits::default()).unwrap();
        // No such process: the signal goes nowhere, the freezer is thawed after.
        std::fs::write(job.dirs["freezer"].join("cgroup.procs"), "").unwrap();
        assert_eq!(job.signal(Signal::SIGTERM), 0);
        assert_eq!(
            fs::read(&job.dirs["freezer"], "freezer.state").unwrap(),
            "THAWED"
        );
    }
}
