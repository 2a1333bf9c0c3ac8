//! Per-job credentials: what a job's tasks present to reach their instance.
//!
//! ```text
//! Exec.Start{credential}   fgt1 token {user, uid, role: user, job: ID, exp}
//!                          signed with the instance key; the exec service
//!                          puts it in every task's environment (FLUXGATE_TOKEN)
//! accepted                 while job ID is active (not INACTIVE), until exp
//! ```
//!
//! The job's owner is the user the submit was verified as; the token makes
//! its holder that user (the instance owner only if the job is the owner's),
//! never more. It expires at the job's expiration (R's `expiration`), or
//! `auth.job_credential_ttl` after the start for a job without one, and it is
//! revoked when the job ends: the core keeps the set of jobs whose tokens are
//! live ([`ActiveJobs`]), adds a job when it sends its start (and every job
//! it recovers at a restart, so reattached tasks keep working), removes it
//! when the job becomes inactive, and the authenticator refuses a token whose
//! job is not in the set. Nothing of it is stored: a credential never enters a
//! jobspec or an eventlog.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use fluxgate_shared::JobId;
use fluxgate_shared::auth::Claims;
use fluxgate_shared::auth::token::TokenError;

/// The jobs whose credentials are accepted now, shared between the core
/// (which alone changes it) and the authenticator (which reads it per request).
#[derive(Debug, Clone, Default)]
pub struct ActiveJobs(Arc<RwLock<HashSet<u64>>>);

impl ActiveJobs {
    /// Job `id`'s credential is accepted from now on.
    pub fn insert(&self, id: JobId) {
        self.0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.as_u64());
    }

    /// Job `id` ended: its credential is refused from now on.
    pub fn remove(&self, id: JobId) {
        self.0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id.as_u64());
    }

    /// Is the credential of job `id` accepted?
    pub fn contains(&self, id: u64) -> bool {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&id)
    }
}

/// Mints job credentials and keeps the set of jobs whose credentials hold.
/// Disabled (an instance that runs open) it mints nothing and keeps no set.
#[derive(Clone, Default)]
pub struct JobCredentials {
    key: Option<Arc<[u8]>>,
    default_ttl: u64,
    active: ActiveJobs,
    names: Names,
}

/// How long an owner's login name is taken from memory before it is
/// looked up again (a rename shows in new credentials after this).
const NAME_TTL: Duration = Duration::from_secs(60);

/// Login names of job owners lately looked up: a lookup reads the account
/// database (a file, or a directory service over the network), once per
/// owner per [`NAME_TTL`] instead of once per job.
#[derive(Clone, Default)]
struct Names(Arc<Mutex<HashMap<u32, Named>>>);

/// A login name and when it was looked up.
type Named = (Arc<str>, Instant);

impl Names {
    fn cached(&self, uid: u32) -> Option<Arc<str>> {
        let names = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        names
            .get(&uid)
            .filter(|(_, at)| at.elapsed() < NAME_TTL)
            .map(|(name, _)| Arc::clone(name))
    }

    fn look_up(&self, uid: u32) -> Arc<str> {
        if let Some(name) = self.cached(uid) {
            return name;
        }
        let name: Arc<str> = super::user_name(uid).into();
        let mut names = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        names.insert(uid, (Arc::clone(&name), Instant::now()));
        name
    }
}

impl fmt::Debug for JobCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the key itself.
        f.debug_struct("JobCredentials")
            .field("enabled", &self.key.is_some())
            .field("default_ttl", &self.default_ttl)
            .finish_non_exhaustive()
    }
}

impl JobCredentials {
    /// No credentials: the instance runs open.
    pub fn disabled() -> Self {
        Self::default()
    }

    /// Credentials signed with `key`, living `default_ttl` seconds for a job
    /// without an expiration; `active` is the set the authenticator reads.
    pub fn new(key: Vec<u8>, default_ttl: u64, active: ActiveJobs) -> Self {
        JobCredentials {
            key: Some(key.into()),
            default_ttl,
            active,
            names: Names::default(),
        }
    }

    /// Job `id` is about to start (or was found running at a restart).
    pub fn activate(&self, id: JobId) {
        if self.key.is_some() {
            self.active.insert(id);
        }
    }

    /// Job `id` is inactive: its credential is refused from now on.
    pub fn revoke(&self, id: JobId) {
        if self.key.is_some() {
            self.active.remove(id);
        }
    }

    /// The credential of job `id` owned by `uid`, at time `now`, expiring at
    /// `expiration` if the job has one; empty when the instance runs open.
    /// May block to look up the owner's login name.
    pub fn mint(
        &self,
        id: JobId,
        uid: u32,
        expiration: Option<f64>,
        now: u64,
    ) -> Result<String, TokenError> {
        let Some(key) = &self.key else {
            return Ok(String::new());
        };
        let name = self.names.look_up(uid);
        Claims::job(&name, uid, id.as_u64(), now, self.expiry(expiration, now)).sign(key)
    }

    /// [`Self::mint`] without blocking: `None` when the owner's login name
    /// is not at hand and must be looked up.
    pub fn try_mint(
        &self,
        id: JobId,
        uid: u32,
        expiration: Option<f64>,
        now: u64,
    ) -> Option<Result<String, TokenError>> {
        let Some(key) = &self.key else {
            return Some(Ok(String::new()));
        };
        let name = self.names.cached(uid)?;
        Some(Claims::job(&name, uid, id.as_u64(), now, self.expiry(expiration, now)).sign(key))
    }

    fn expiry(&self, expiration: Option<f64>, now: u64) -> u64 {
        match expiration.filter(|e| e.is_finite() && *e > 0.0) {
            Some(e) => e.ceil() as u64,
            None => now.saturating_add(self.default_ttl),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fluxgate_shared::auth::token::verify;

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    #[test]
    fn a_job_credential_names_the_job_and_expires_with_it() {
        let creds = JobCredentials::new(KEY.to_vec(), 3600, ActiveJobs::default());
        let id = JobId::from(42u64);
        let t = creds.mint(id, 1001, Some(2000.4), 1000).unwrap();
        let c = verify(&t, KEY, 1500).unwrap();
        assert_eq!((c.uid, c.job, c.exp), (1001, Some(42), Some(2001)));
        let t = creds.mint(id, 1001, None, 1000).unwrap();
        assert_eq!(verify(&t, KEY, 1500).unwrap().exp, Some(4600));
    }

    #[test]
    fn minting_without_blocking_needs_the_owner_looked_up_once() {
        let creds = JobCredentials::new(KEY.to_vec(), 3600, ActiveJobs::default());
        let id = JobId::from(42u64);
        assert!(creds.try_mint(id, 1001, None, 1000).is_none());
        let blocking = creds.mint(id, 1001, None, 1000).unwrap();
        let t = creds.try_mint(id, 1001, None, 1000).unwrap().unwrap();
        assert_eq!(t, blocking);
        assert!(
            JobCredentials::disabled()
                .try_mint(id, 1001, None, 1000)
                .is_some()
        );
    }

    #[test]
    fn activation_and_revocation_change_the_shared_set() {
        let active = ActiveJobs::default();
        let creds = JobCredentials::new(KEY.to_vec(), 60, active.clone());
        let id = JobId::from(7u64);
        assert!(!active.contains(7));
        creds.activate(id);
        assert!(active.contains(7));
        creds.revoke(id);
        assert!(!active.contains(7));
    }

    #[test]
    fn an_open_instance_mints_nothing() {
        let creds = JobCredentials::disabled();
        creds.activate(JobId::from(1u64));
        assert_eq!(creds.mint(JobId::from(1u64), 0, None, 0).unwrap(), "");
        assert!(!creds.active.contains(1));
    }
}
