//! The site policy, read once from the configuration at start: queues,
//! limits per user and bank, and accounting, with user names resolved to
//! uids. The core and the submit edge share it; the rules themselves are
//! the pure functions of `fluxgate_shared::policy`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use fluxgate_shared::Jobspec;
use fluxgate_shared::policy::{AssocLimits, PolicyConfigError, Queues, Weights};

use crate::config::{BankAccount, Config, UserAccount};
use crate::error::Error;

/// The user key of `[limits.users.default]`.
pub const DEFAULT_USER: &str = "default";

/// Why the site policy cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SitePolicyError {
    /// A queue or policy table.
    #[error(transparent)]
    Queues(#[from] PolicyConfigError),
    /// A value that cannot be used.
    #[error("{key}: {reason}")]
    Value {
        /// The dotted key.
        key: String,
        /// What is wrong.
        reason: String,
    },
}

/// Accounting, when enabled: fair share and the multi-factor priority.
#[derive(Debug, Clone, PartialEq)]
pub struct Accounting {
    /// Factor weights.
    pub weights: Weights,
    /// Usage half-life, seconds.
    pub half_life: f64,
    /// Wait that gets the whole age factor, seconds.
    pub age_max: f64,
    /// Seconds between recomputations of pending jobs' priorities.
    pub recompute_interval: f64,
    /// Shares and default bank per uid.
    pub users: HashMap<u32, UserAccount>,
    /// Shares and priority factor per bank.
    pub banks: BTreeMap<String, BankAccount>,
    /// Priority factor per queue.
    pub queue_priority: HashMap<String, i64>,
}

impl Accounting {
    /// The bank of a job of `user` that names `bank` (or none): "" when
    /// neither the job nor the user's account names one.
    pub fn bank_of<'a>(&'a self, user: u32, bank: Option<&'a str>) -> &'a str {
        bank.or_else(|| self.users.get(&user).and_then(|u| u.bank.as_deref()))
            .unwrap_or("")
    }

    /// `user`'s shares within its bank.
    pub fn shares(&self, user: u32) -> f64 {
        self.users.get(&user).map_or(1.0, |u| u.shares)
    }
}

/// Limits per user and bank.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AssocTable {
    /// Per uid.
    pub users: HashMap<u32, AssocLimits>,
    /// Users without an entry.
    pub default_user: AssocLimits,
    /// Per bank.
    pub banks: HashMap<String, AssocLimits>,
}

impl AssocTable {
    /// The limits of `user`.
    pub fn user(&self, user: u32) -> &AssocLimits {
        self.users.get(&user).unwrap_or(&self.default_user)
    }

    /// The limits of `bank`, when it has any.
    pub fn bank(&self, bank: &str) -> Option<&AssocLimits> {
        self.banks.get(bank)
    }

    /// Is any limit configured?
    pub fn is_set(&self) -> bool {
        self.default_user.is_set()
            || self.users.values().any(AssocLimits::is_set)
            || self.banks.values().any(AssocLimits::is_set)
    }
}

/// Everything the site configured about queues, limits and accounting.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SitePolicy {
    /// Queues and the policy applied at submit.
    pub queues: Queues,
    /// Limits per user and bank.
    pub limits: AssocTable,
    /// Accounting, when enabled.
    pub accounting: Option<Accounting>,
    /// Every bank a job may name.
    pub banks: BTreeSet<String>,
}

/// The uid of a configured user name: a number is a uid; otherwise the
/// system's account database is asked (once, at start).
fn uid_of(name: &str) -> Option<u32> {
    if let Ok(uid) = name.parse() {
        return Some(uid);
    }
    nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .map(|u| u.uid.as_raw())
}

/// `table` keyed by uid; names the system does not know are logged and left out.
fn by_uid<T: Clone>(what: &str, table: &BTreeMap<String, T>) -> HashMap<u32, T> {
    let mut out = HashMap::new();
    for (name, v) in table {
        if what == "limits.users" && name == DEFAULT_USER {
            continue;
        }
        match uid_of(name) {
            Some(uid) => {
                out.insert(uid, v.clone());
            }
            None => tracing::warn!(user = %name, "{what}.{name}: no such user; entry ignored"),
        }
    }
    out
}

fn duration(key: &str, secs: f64) -> Result<f64, SitePolicyError> {
    if secs.is_finite() && secs > 0.0 {
        Ok(secs)
    } else {
        Err(SitePolicyError::Value {
            key: key.into(),
            reason: "must be a positive, finite duration".into(),
        })
    }
}

impl SitePolicy {
    /// Read the site policy of `config`.
    pub fn load(config: &Config) -> Result<SitePolicy, SitePolicyError> {
        let queues = Queues::new(&config.policy.table(), &config.queues)?;
        let limits = AssocTable {
            users: by_uid("limits.users", &config.limits.users),
            default_user: config
                .limits
                .users
                .get(DEFAULT_USER)
                .copied()
                .unwrap_or_default(),
            banks: config
                .limits
                .banks
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
        };
        let a = &config.accounting;
        let mut banks: BTreeSet<String> = config.limits.banks.keys().cloned().collect();
        banks.extend(a.banks.keys().cloned());
        banks.extend(a.users.values().filter_map(|u| u.bank.clone()));
        let accounting = if a.enabled {
            Some(Accounting {
                weights: a.weights,
                half_life: duration(
                    "accounting.priority_decay_half_life",
                    a.priority_decay_half_life.0,
                )?,
                age_max: duration("accounting.age_max", a.age_max.0)?,
                recompute_interval: duration(
                    "accounting.recompute_interval",
                    a.recompute_interval.0,
                )?,
                users: by_uid("accounting.users", &a.users),
                banks: a.banks.clone(),
                queue_priority: a
                    .queues
                    .iter()
                    .map(|(k, v)| (k.clone(), v.priority))
                    .collect(),
            })
        } else {
            None
        };
        Ok(SitePolicy {
            queues,
            limits,
            accounting,
            banks,
        })
    }

    /// A submitted job with the policy applied (flux's ingest and validate
    /// steps that need no job manager state): `None` when it stays as it
    /// is, or why it is refused.
    pub fn ingest(&self, jobspec: &Jobspec) -> Result<Option<Jobspec>, Error> {
        if let Some(bank) = jobspec.system().bank.as_deref()
            && !self.banks.contains(bank)
        {
            return Err(Error::Invalid(format!("bank '{bank}' is not configured")));
        }
        self.queues
            .ingest(jobspec)
            .map_err(|e| Error::Invalid(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_to_uids_and_unknown_banks_are_refused() {
        let mut c = Config::default();
        c.set("limits.users.4242.max_running_jobs", "1").unwrap();
        c.set("limits.users.default.max_running_jobs", "5").unwrap();
        c.set("limits.users.no-such-user-here.max_running_jobs", "1")
            .unwrap();
        c.set("accounting.enabled", "true").unwrap();
        c.set("accounting.users.4242.bank", "physics").unwrap();
        let p = SitePolicy::load(&c).unwrap();
        assert_eq!(p.limits.user(4242).max_running_jobs, Some(1));
        assert_eq!(p.limits.user(7).max_running_jobs, Some(5));
        assert_eq!(p.limits.users.len(), 1);
        let a = p.accounting.as_ref().unwrap();
        assert_eq!(a.bank_of(4242, None), "physics");
        assert_eq!(a.bank_of(4242, Some("chem")), "chem");
        assert_eq!(a.bank_of(7, None), "");
        let spec = Jobspec::parse(
            r#"{"version":1,"resources":[{"type":"slot","count":1,"label":"task","with":[{"type":"core","count":1}]}],"tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],"attributes":{"system":{"duration":0,"bank":"chem"}}}"#,
        )
        .unwrap();
        assert_eq!(
            p.ingest(&spec).unwrap_err().to_string(),
            "bank 'chem' is not configured"
        );
    }
}
