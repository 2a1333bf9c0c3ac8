//! Reading and writing cgroup interface files: one value a file, or
//! `key value` lines (`cpu.stat`, `memory.events`, `memory.oom_control`).

use std::io;
use std::path::Path;

/// Write `value` to the interface file `name` of `dir`, saying which on error.
pub fn write(dir: &Path, name: &str, value: &str) -> io::Result<()> {
    let path = dir.join(name);
    std::fs::write(&path, value)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// The trimmed text of `name` in `dir`.
pub fn read(dir: &Path, name: &str) -> io::Result<String> {
    let path = dir.join(name);
    std::fs::read_to_string(&path)
        .map(|s| s.trim().to_string())
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// The number in `name` of `dir`, `None` when the file is missing or holds
/// something else (`max`).
pub fn number(dir: &Path, name: &str) -> Option<u64> {
    read(dir, name).ok()?.parse().ok()
}

/// The value of `key` in a file of `key value` lines.
pub fn keyed(dir: &Path, name: &str, key: &str) -> Option<u64> {
    key_in(&read(dir, name).ok()?, key)
}

/// The value of `key` in the text of a file of `key value` lines.
pub fn key_in(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// The pids in the `cgroup.procs` of `dir` (none when it cannot be read,
/// as when the cgroup is gone).
pub fn procs(dir: &Path) -> Vec<i32> {
    read(dir, "cgroup.procs")
        .map(|t| pids_in(&t))
        .unwrap_or_default()
}

/// The pids of the text of a `cgroup.procs`, one a line.
pub fn pids_in(text: &str) -> Vec<i32> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// Make the directory of a cgroup; one left from an earlier run is reused.
pub fn make_dir(dir: &Path) -> io::Result<()> {
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        other => other.map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display()))),
    }
}

/// Remove a cgroup's directory (its files go with it); gone already is fine.
pub fn remove_dir(dir: &Path) -> io::Result<()> {
    match std::fs::remove_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other.map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display()))),
    }
}
