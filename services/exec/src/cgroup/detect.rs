//! Which cgroup layout this process lives in, read from its own
//! `/proc/self/cgroup` and `/proc/self/mountinfo`: the unified (v2)
//! hierarchy alone, v1 hierarchies (a legacy or hybrid layout), or none.
//!
//! Both files are taken as text so that fixture trees can stand in for the
//! machine's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The v1 controllers the exec service uses, one hierarchy each (several
/// may share one, as `cpu,cpuacct` often do).
pub const V1_CONTROLLERS: &[&str] = &["cpuset", "memory", "pids", "freezer", "cpuacct"];

/// Where a hierarchy is mounted, and this process's cgroup directory in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The mount point.
    pub mount: PathBuf,
    /// This process's cgroup, under the mount point.
    pub own: PathBuf,
}

impl Place {
    /// The directory of cgroup `path` (as this process sees cgroup paths)
    /// in this hierarchy.
    pub fn at(&self, path: &Path) -> PathBuf {
        let rel = path.strip_prefix("/").unwrap_or(path);
        self.mount.join(rel)
    }
}

/// The layout found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// Only the unified hierarchy.
    V2(Place),
    /// v1 hierarchies (legacy, or hybrid beside an unused unified one), by
    /// controller.
    V1(BTreeMap<String, Place>),
    /// No cgroup filesystem this process can use.
    None,
}

/// One cgroup mount: where it is, the cgroup it shows as its root, and
/// its controllers (empty for cgroup2).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    point: PathBuf,
    root: String,
    v2: bool,
    controllers: Vec<String>,
}

/// The layout described by the text of `/proc/self/cgroup` and
/// `/proc/self/mountinfo`. v1 controllers win over a unified hierarchy
/// mounted beside them: in a hybrid layout the controllers are in v1.
pub fn layout(proc_cgroup: &str, mountinfo: &str) -> Layout {
    let mounts = mounts(mountinfo);
    let mut v1 = BTreeMap::new();
    let mut v2 = None;
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_id), Some(ctls), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if ctls.is_empty() {
            v2 = mounts.iter().find(|m| m.v2).and_then(|m| {
                let own = join(m, path)?;
                Some(Place {
                    mount: m.point.clone(),
                    own,
                })
            });
            continue;
        }
        let names: Vec<&str> = ctls.split(',').collect();
        let Some(m) = mounts
            .iter()
            .find(|m| !m.v2 && names.iter().all(|n| m.controllers.iter().any(|c| c == n)))
        else {
            continue;
        };
        for name in names {
            if V1_CONTROLLERS.contains(&name)
                && let Some(own) = join(m, path)
            {
                let mount = m.point.clone();
                v1.insert(name.to_string(), Place { mount, own });
            }
        }
    }
    if !v1.is_empty() {
        Layout::V1(v1)
    } else if let Some(dir) = v2 {
        Layout::V2(dir)
    } else {
        Layout::None
    }
}

/// The directory of cgroup `path` under mount `m`, when the mount shows it
/// (a cgroup namespace or a bind mount shows only part of the hierarchy).
fn join(m: &Mount, path: &str) -> Option<PathBuf> {
    let rel = if m.root == "/" {
        path
    } else {
        path.strip_prefix(m.root.as_str())
            .filter(|r| r.is_empty() || r.starts_with('/'))?
    };
    let rel = rel.trim_start_matches('/');
    if rel.split('/').any(|c| c == "..") {
        return None;
    }
    Some(if rel.is_empty() {
        m.point.clone()
    } else {
        m.point.join(rel)
    })
}

/// The cgroup mounts of a mountinfo text (proc(5): `ID PARENT MAJ:MIN ROOT
/// POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS`).
fn mounts(mountinfo: &str) -> Vec<Mount> {
    let mut out = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = left.split(' ').collect();
        let tail: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(point), Some(fstype)) = (fields.get(3), fields.get(4), tail.first())
        else {
            continue;
        };
        let v2 = *fstype == "cgroup2";
        if !v2 && *fstype != "cgroup" {
            continue;
        }
        let controllers = tail
            .get(2)
            .map(|opts| {
                opts.split(',')
                    .filter(|o| V1_CONTROLLERS.contains(o) || *o == "cpu")
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        out.push(Mount {
            point: PathBuf::from(unescape(point)),
            root: unescape(root),
            v2,
            controllers,
        });
    }
    out
}

/// mountinfo's octal escapes (`\040` for a space) undone.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest
            .get(i + 1..i + 4)
            .and_then(|d| u8::from_str_radix(d, 8).ok());
        match code {
            Some(c) => {
                out.push(char::from(c));
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The layout of this process, from the files under `proc_root` (`/proc`).
pub fn this_process(proc_root: &Path) -> Layout {
    let read = |name: &str| std::fs::read_to_string(proc_root.join("self").join(name));
    match (read("cgroup"), read("mountinfo")) {
        (Ok(c), Ok(m)) => layout(&c, &m),
        _ => Layout::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID_MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/freezer rw,relatime shared:9 - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn a_hybrid_layout_uses_the_v1_hierarchies() {
        let cgroup = "9:name=systemd:/\n8:pids:/\n6:freezer:/\n\
                      4:memory:/svc/abc\n3:cpuset:/\n1:cpu,cpuacct:/svc\n0::/\n";
        let Layout::V1(dirs) = layout(cgroup, HYBRID_MOUNTS) else {
            panic!("not v1");
        };
        assert_eq!(
            dirs["memory"].own,
            Path::new("/sys/fs/cgroup/memory/svc/abc")
        );
        assert_eq!(
            dirs["cpuacct"].own,
            Path::new("/sys/fs/cgroup/cpu,cpuacct/svc")
        );
        assert_eq!(dirs["pids"].own, Path::new("/sys/fs/cgroup/pids"));
        assert_eq!(
            dirs["memory"].at(Path::new("/fluxgate")),
            Path::new("/sys/fs/cgroup/memory/fluxgate")
        );
        assert_eq!(dirs.len(), 5);
    }

    #[test]
    fn a_unified_layout_is_v2_and_a_namespace_root_is_stripped() {
        let mounts = "30 23 0:26 /ns /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
        let Layout::V2(place) = layout("0::/ns/fluxgate.service\n", mounts) else {
            panic!("not v2");
        };
        assert_eq!(place.own, Path::new("/sys/fs/cgroup/fluxgate.service"));
        // A cgroup outside what the mount shows cannot be used.
        assert_eq!(layout("0::/other\n", mounts), Layout::None);
    }

    #[test]
    fn no_cgroup_mount_is_none_and_escapes_are_undone() {
        assert_eq!(
            layout("0::/\n", "1 0 8:1 / / rw - ext4 /dev/sda rw\n"),
            Layout::None
        );
        let mounts = "30 23 0:26 / /tmp/a\\040b rw - cgroup2 cgroup2 rw\n";
        let Layout::V2(place) = layout("0::/x\n", mounts) else {
            panic!("not v2");
        };
        assert_eq!(place.own, Path::new("/tmp/a b/x"));
    }
}
