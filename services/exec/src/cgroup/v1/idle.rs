//! Emptied v1 job cgroups kept for the next jobs: a v1 cgroup costs the
//! kernel a directory made (its interface files populated) and removed,
//! with deferred work after, in every hierarchy, which is most of what
//! containing a short job costs. A job whose cgroup ended clean (empty,
//! no OOM kill, little memory still charged) hands it back here under a
//! neutral name; the next job of the same shape renames it after itself
//! and rewrites only the limits that differ.

use std::collections::BTreeSet;
use std::sync::Mutex;

use super::Dirs;
use crate::cgroup::Limits;

/// Most idle cgroups kept: enough for the jobs a node starts while others
/// end; each costs the kernel a few tens of KB.
pub const IDLE_MAX: usize = 32;

/// Memory still charged to an emptied cgroup (kernel objects its
/// processes left: dentries, inodes, page cache) above which it is removed
/// rather than reused, so that a job's peak memory carries at most this
/// much of the jobs before it.
pub const RESIDUE_MAX: u64 = 1 << 20;

/// One idle cgroup: its directories by controller and the limits written
/// in them.
#[derive(Debug)]
pub struct Idle {
    /// Directories by controller, under their idle name.
    pub dirs: Dirs,
    /// The limits its files hold.
    pub limits: Limits,
}

impl Idle {
    /// The controllers it has a directory in.
    fn shape(&self) -> BTreeSet<&str> {
        self.dirs.keys().map(String::as_str).collect()
    }
}

/// The idle cgroups of one service.
#[derive(Debug, Default)]
pub struct Pool {
    idle: Mutex<Vec<Idle>>,
}

impl Pool {
    /// An idle cgroup with a directory in exactly the controllers `shape`,
    /// preferring one whose limits are `limits` (no file to rewrite).
    pub fn take(&self, shape: &BTreeSet<&str>, limits: &Limits) -> Option<Idle> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let fits = |i: &Idle| i.shape() == *shape;
        let at = idle
            .iter()
            .position(|i| fits(i) && i.limits == *limits)
            .or_else(|| idle.iter().position(fits))?;
        Some(idle.swap_remove(at))
    }

    /// True when one more idle cgroup would be kept.
    pub fn has_room(&self) -> bool {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).len() < IDLE_MAX
    }

    /// Keep `cgroup` for a later job; given back when there is no room.
    pub fn put(&self, cgroup: Idle) -> Result<(), Idle> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() >= IDLE_MAX {
            return Err(cgroup);
        }
        idle.push(cgroup);
        Ok(())
    }

    /// Every idle cgroup, the pool left empty (at the service's end).
    pub fn drain(&self) -> Vec<Idle> {
        std::mem::take(&mut *self.idle.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn idle(ctls: &[&str], memory: Option<u64>) -> Idle {
        Idle {
            dirs: ctls
                .iter()
                .map(|c| (c.to_string(), PathBuf::from(format!("/{c}/idle"))))
                .collect(),
            limits: Limits {
                memory,
                ..Limits::default()
            },
        }
    }

    #[test]
    fn a_cgroup_is_taken_by_shape_and_same_limits_first() {
        let pool = Pool::default();
        pool.put(idle(&["memory", "freezer"], Some(1))).unwrap();
        pool.put(idle(&["memory", "freezer"], Some(2))).unwrap();
        pool.put(idle(&["memory", "freezer", "pids"], Some(2)))
            .unwrap();
        let shape: BTreeSet<&str> = ["freezer", "memory"].into();
        let want = Limits {
            memory: Some(2),
            ..Limits::default()
        };
        let got = pool.take(&shape, &want).unwrap();
        assert_eq!((got.dirs.len(), got.limits.memory), (2, Some(2)));
        // Another shape's is never given; the same shape's with other
        // limits is.
        assert_eq!(pool.take(&shape, &want).unwrap().limits.memory, Some(1));
        assert!(pool.take(&shape, &want).is_none());
        assert_eq!(pool.drain().len(), 1);
    }

    #[test]
    fn the_pool_keeps_at_most_its_bound() {
        let pool = Pool::default();
        for _ in 0..IDLE_MAX {
            assert!(pool.has_room());
            pool.put(idle(&["memory"], None)).unwrap();
        }
        assert!(!pool.has_room());
        assert!(pool.put(idle(&["memory"], None)).is_err());
    }
}
