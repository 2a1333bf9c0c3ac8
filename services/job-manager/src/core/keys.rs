//! Idempotency keys of the jobs in memory: a submit retried before its
//! first try was stored finds the job here; once stored, the gRPC edge
//! finds it in the store (`Store::job_by_key`).

use std::collections::HashMap;

use fluxgate_shared::JobId;

/// Keys of active jobs, by owner and key and by job.
#[derive(Debug, Default)]
pub struct Keys {
    by_key: HashMap<(u32, String), JobId>,
    by_job: HashMap<JobId, (u32, String)>,
}

impl Keys {
    /// The job `userid` submitted with `key`, if it is in memory.
    pub fn get(&self, userid: u32, key: &str) -> Option<JobId> {
        self.by_key.get(&(userid, key.to_string())).copied()
    }

    /// Remember that `id` was submitted by `userid` with `key`.
    pub fn insert(&mut self, userid: u32, key: String, id: JobId) {
        self.by_key.insert((userid, key.clone()), id);
        self.by_job.insert(id, (userid, key));
    }

    /// The job left memory (it is stored and inactive).
    pub fn forget(&mut self, id: JobId) {
        if let Some(k) = self.by_job.remove(&id) {
            self.by_key.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_per_owner_and_forgotten_with_the_job() {
        let mut keys = Keys::default();
        keys.insert(5, "k".into(), JobId::from(10));
        assert_eq!(keys.get(5, "k"), Some(JobId::from(10)));
        assert_eq!(keys.get(6, "k"), None);
        keys.forget(JobId::from(10));
        assert_eq!(keys.get(5, "k"), None);
    }
}
