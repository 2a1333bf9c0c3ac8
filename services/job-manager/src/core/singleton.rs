//! The `singleton` dependency (RFC 26), as flux-core's dependency-singleton
//! plugin has it: one job of a user and job name at a time.
//!
//! Every active job with an explicit name (`attributes.system.job.name`)
//! counts for its `userid:name`. A job submitted with `singleton` while the
//! count is not 0 gets the dependency `singleton` and waits in a list. Each
//! time the count changes (a job is submitted, or goes inactive), if every
//! active job of the pair is such a waiter, the first one is released: so
//! the waiters run one after another, each once the others have ended.

use std::collections::{HashMap, VecDeque};

use fluxgate_shared::JobId;

/// A user and a job name.
pub type Key = (u32, Box<str>);

/// The description of the dependency, as flux posts it.
pub const DESCRIPTION: &str = "singleton";

/// Active named jobs and the singleton waiters, by user and name.
#[derive(Debug, Default)]
pub struct Singletons {
    /// The key of each active job that has an explicit name.
    keys: HashMap<JobId, Key>,
    /// Active jobs per key (waiters included).
    counts: HashMap<Key, usize>,
    /// Jobs waiting on `singleton`, in submission order.
    waiting: HashMap<Key, VecDeque<JobId>>,
}

impl Singletons {
    /// How many jobs of `key` are active.
    pub fn active(&self, key: &Key) -> usize {
        self.counts.get(key).copied().unwrap_or(0)
    }

    /// Job `id` waits on `singleton` for `key`.
    pub fn wait(&mut self, key: Key, id: JobId) {
        self.waiting.entry(key).or_default().push_back(id);
    }

    /// Job `id` of `userid`, named `name` (explicitly) or not, is active.
    /// The job now released, if any.
    pub fn added(&mut self, id: JobId, userid: u32, name: Option<&str>) -> Option<JobId> {
        let key: Key = (userid, name?.into());
        self.keys.insert(id, key.clone());
        *self.counts.entry(key.clone()).or_default() += 1;
        self.release(&key)
    }

    /// Job `id` went inactive. The job now released, if any.
    pub fn removed(&mut self, id: JobId) -> Option<JobId> {
        let key = self.keys.remove(&id)?;
        if let Some(list) = self.waiting.get_mut(&key) {
            list.retain(|j| *j != id);
        }
        match self.counts.get_mut(&key) {
            Some(n) if *n > 1 => *n -= 1,
            _ => {
                self.counts.remove(&key);
            }
        }
        self.release(&key)
    }

    /// The key job `id` counts under, if it has a name.
    pub fn key_of(&self, id: JobId) -> Option<&Key> {
        self.keys.get(&id)
    }

    /// When every active job of `key` waits, the first waiter goes.
    pub fn release(&mut self, key: &Key) -> Option<JobId> {
        let count = self.active(key);
        let list = self.waiting.get_mut(key)?;
        if list.len() != count {
            return None;
        }
        let first = list.pop_front();
        if list.is_empty() {
            self.waiting.remove(key);
        }
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u64) -> JobId {
        JobId::from(n)
    }

    #[test]
    fn waiters_go_one_at_a_time() {
        let mut s = Singletons::default();
        let key: Key = (100, "a".into());
        assert_eq!(s.added(id(1), 100, Some("a")), None);
        // Two singleton jobs submitted while job 1 runs.
        for j in [2, 3] {
            assert_eq!(s.active(&key), if j == 2 { 1 } else { 2 });
            s.wait(key.clone(), id(j));
            assert_eq!(s.added(id(j), 100, Some("a")), None);
        }
        // Another user's, and unnamed jobs, do not count.
        assert_eq!(s.added(id(4), 200, Some("a")), None);
        assert_eq!(s.added(id(5), 100, None), None);
        assert_eq!(s.removed(id(5)), None);
        // Job 1 ends: 2 goes; 2 ends: 3 goes.
        assert_eq!(s.removed(id(1)), Some(id(2)));
        assert_eq!(s.removed(id(2)), Some(id(3)));
        assert_eq!(s.removed(id(3)), None);
        assert_eq!(s.active(&key), 0);
    }

    #[test]
    fn a_cancelled_waiter_leaves_the_line() {
        let mut s = Singletons::default();
        let key: Key = (1, "x".into());
        s.added(id(1), 1, Some("x"));
        s.wait(key.clone(), id(2));
        s.added(id(2), 1, Some("x"));
        s.wait(key.clone(), id(3));
        s.added(id(3), 1, Some("x"));
        assert_eq!(s.removed(id(2)), None);
        assert_eq!(s.removed(id(1)), Some(id(3)));
    }
}
