//! Site policy keys: queues (`[queues.NAME]`), the instance's `[policy]`
//! defaults and limits, per-user and per-bank limits (`[limits.users.*]`,
//! `[limits.banks.*]`) and accounting (`[accounting]`: fair share and the
//! multi-factor priority). The rules they feed live in
//! `fluxgate_shared::policy`; docs/SCHEDULING.md describes every key.
//!
//! Tables of named things (a queue, a user, a bank) are keys of their own
//! for `--set` and the environment: `queues.batch.requires=batch,ssd`,
//! `limits.users.alice.max_running_jobs=2`, `accounting.users.alice.shares=10`.

use std::collections::BTreeMap;

use fluxgate_setup::layered::SetError;
use fluxgate_setup::layered::value::{bad, count, parsed};
use fluxgate_shared::policy::{AssocLimits, Fsd, QueueConfig, Weights};
use serde::{Deserialize, Serialize};

use super::Config;

/// Seven days: flux-accounting's `priority_decay_half_life` default, and
/// Slurm's `PriorityMaxAge` default used for the age factor.
pub const WEEK: f64 = 7.0 * 86_400.0;

/// `[accounting]`: fair share and the multi-factor priority.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AccountingConfig {
    /// Priority by flux-accounting's multi-factor formula, with usage kept
    /// per user and bank; unset, the priority is the urgency (flux-core's
    /// default priority plugin).
    pub enabled: bool,
    /// Usage halves every this long (flux-accounting's name).
    pub priority_decay_half_life: Fsd,
    /// A job that has waited this long gets the whole age factor.
    pub age_max: Fsd,
    /// Pending jobs' priorities are recomputed this often (and soon after
    /// a job ends).
    pub recompute_interval: Fsd,
    /// Weight of each priority factor.
    pub weights: Weights,
    /// Shares and default bank per user name.
    pub users: BTreeMap<String, UserAccount>,
    /// Shares and priority factor per bank.
    pub banks: BTreeMap<String, BankAccount>,
    /// Priority factor per queue.
    pub queues: BTreeMap<String, QueueAccount>,
}

impl Default for AccountingConfig {
    fn default() -> Self {
        AccountingConfig {
            enabled: false,
            priority_decay_half_life: Fsd(WEEK),
            age_max: Fsd(WEEK),
            recompute_interval: Fsd(60.0),
            weights: Weights::default(),
            users: BTreeMap::new(),
            banks: BTreeMap::new(),
            queues: BTreeMap::new(),
        }
    }
}

/// `[accounting.users.NAME]`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct UserAccount {
    /// The user's shares within its bank (default 1: all equal).
    pub shares: f64,
    /// The bank of the user's jobs that name none.
    pub bank: Option<String>,
}

impl Default for UserAccount {
    fn default() -> Self {
        UserAccount {
            shares: 1.0,
            bank: None,
        }
    }
}

/// `[accounting.banks.NAME]`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct BankAccount {
    /// The bank's shares among banks (default 1).
    pub shares: f64,
    /// The bank's priority factor.
    pub priority: i64,
}

impl Default for BankAccount {
    fn default() -> Self {
        BankAccount {
            shares: 1.0,
            priority: 0,
        }
    }
}

/// `[accounting.queues.NAME]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct QueueAccount {
    /// The queue's priority factor.
    pub priority: i64,
}

/// A duration in flux's standard form (`30m`, `1h`).
pub(super) fn fsd(key: &str, v: &str) -> Result<Fsd, SetError> {
    parsed(key, v, "a duration such as 30m or 1h")
}

/// A job size limit (`policy.limits.job-size.*`): a count, or -1 for none.
pub(super) fn job_size(key: &str, v: &str) -> Result<Option<i64>, SetError> {
    v.parse::<i64>()
        .ok()
        .filter(|n| *n >= -1)
        .map(Some)
        .ok_or_else(|| bad(key, "a count, or -1 for unlimited"))
}

fn integer(key: &str, v: &str) -> Result<i64, SetError> {
    parsed(key, v, "an integer")
}

fn shares(key: &str, v: &str) -> Result<f64, SetError> {
    v.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .ok_or_else(|| bad(key, "a non-negative number"))
}

/// A limit of `[limits.users.*]` or `[limits.banks.*]`; 0 clears it.
fn assoc_limit(l: &mut AssocLimits, field: &str, key: &str, v: &str) -> Result<(), SetError> {
    let n: u64 = count(key, v)?;
    let slot = match field {
        "max_running_jobs" => &mut l.max_running_jobs,
        "max_active_jobs" => &mut l.max_active_jobs,
        "max_nodes" => &mut l.max_nodes,
        _ => return Err(SetError::UnknownKey(key.to_string())),
    };
    *slot = (n > 0).then_some(n);
    Ok(())
}

/// Split `rest` (what follows a table prefix) into a name and one of
/// `fields`, longest field first, so that a name may hold dots.
fn named<'a>(rest: &'a str, fields: &[&'a str]) -> Option<(&'a str, &'a str)> {
    fields.iter().find_map(|f| {
        rest.strip_suffix(f)
            .and_then(|n| n.strip_suffix('.'))
            .filter(|n| !n.is_empty())
            .map(|n| (n, *f))
    })
}

/// The per-queue keys: `queues.NAME.<field>`.
const QUEUE_FIELDS: &[&str] = &[
    "policy.jobspec.defaults.system.duration",
    "policy.limits.job-size.min.nnodes",
    "policy.limits.job-size.min.ncores",
    "policy.limits.job-size.min.ngpus",
    "policy.limits.job-size.max.nnodes",
    "policy.limits.job-size.max.ncores",
    "policy.limits.job-size.max.ngpus",
    "policy.limits.duration",
    "requires",
];

fn set_queue(q: &mut QueueConfig, field: &str, key: &str, v: &str) -> Result<(), SetError> {
    let p = &mut q.policy;
    match field {
        "requires" => {
            q.requires = Some(
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect(),
            )
        }
        "policy.limits.duration" => p.limits.duration = Some(fsd(key, v)?),
        "policy.jobspec.defaults.system.duration" => {
            p.jobspec.defaults.system.duration = Some(fsd(key, v)?)
        }
        _ => set_size(&mut p.limits.job_size, field, key, v)?,
    }
    Ok(())
}

fn set_size(
    s: &mut fluxgate_shared::policy::JobSize,
    field: &str,
    key: &str,
    v: &str,
) -> Result<(), SetError> {
    let tail = field
        .strip_prefix("policy.limits.job-size.")
        .ok_or_else(|| SetError::UnknownKey(key.to_string()))?;
    let (which, count) = tail
        .split_once('.')
        .ok_or_else(|| SetError::UnknownKey(key.to_string()))?;
    let counts = match which {
        "min" => &mut s.min,
        "max" => &mut s.max,
        _ => return Err(SetError::UnknownKey(key.to_string())),
    };
    let slot = match count {
        "nnodes" => &mut counts.nnodes,
        "ncores" => &mut counts.ncores,
        "ngpus" => &mut counts.ngpus,
        _ => return Err(SetError::UnknownKey(key.to_string())),
    };
    *slot = job_size(key, v)?;
    Ok(())
}

/// Keys of named tables: queues, limits per user and bank, accounts.
pub(super) fn set_named(c: &mut Config, key: &str, v: &str) -> Option<Result<(), SetError>> {
    const LIMITS: &[&str] = &["max_running_jobs", "max_active_jobs", "max_nodes"];
    if let Some(rest) = key.strip_prefix("queues.") {
        let (name, field) = named(rest, QUEUE_FIELDS)?;
        let q = c.queues.entry(name.to_string()).or_default();
        return Some(set_queue(q, field, key, v));
    }
    if let Some(rest) = key.strip_prefix("limits.users.") {
        let (name, field) = named(rest, LIMITS)?;
        let l = c.limits.users.entry(name.to_string()).or_default();
        return Some(assoc_limit(l, field, key, v));
    }
    if let Some(rest) = key.strip_prefix("limits.banks.") {
        let (name, field) = named(rest, LIMITS)?;
        let l = c.limits.banks.entry(name.to_string()).or_default();
        return Some(assoc_limit(l, field, key, v));
    }
    let a = &mut c.accounting;
    if let Some(rest) = key.strip_prefix("accounting.users.") {
        let (name, field) = named(rest, &["shares", "bank"])?;
        let u = a.users.entry(name.to_string()).or_default();
        return Some(match field {
            "shares" => shares(key, v).map(|s| u.shares = s),
            _ => {
                u.bank = Some(v.to_string());
                Ok(())
            }
        });
    }
    if let Some(rest) = key.strip_prefix("accounting.banks.") {
        let (name, field) = named(rest, &["shares", "priority"])?;
        let b = a.banks.entry(name.to_string()).or_default();
        return Some(match field {
            "shares" => shares(key, v).map(|s| b.shares = s),
            _ => integer(key, v).map(|p| b.priority = p),
        });
    }
    if let Some(rest) = key.strip_prefix("accounting.queues.") {
        let (name, _) = named(rest, &["priority"])?;
        let q = a.queues.entry(name.to_string()).or_default();
        return Some(integer(key, v).map(|p| q.priority = p));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_tables_are_set_key_by_key() {
        let mut c = Config::default();
        for (k, v) in [
            ("queues.batch.requires", "batch, ssd"),
            ("queues.batch.policy.limits.job-size.max.nnodes", "4"),
            ("queues.debug.policy.limits.duration", "30m"),
            ("queues.debug.policy.jobspec.defaults.system.duration", "5m"),
            ("policy.jobspec.defaults.system.queue", "batch"),
            ("policy.limits.job-size.min.ncores", "1"),
            ("limits.users.alice.max_running_jobs", "2"),
            ("limits.users.default.max_nodes", "3"),
            ("limits.banks.physics.max_active_jobs", "10"),
            ("accounting.users.alice.shares", "10"),
            ("accounting.users.alice.bank", "physics"),
            ("accounting.banks.physics.priority", "2"),
            ("accounting.queues.batch.priority", "1"),
            ("accounting.weights.age", "500"),
        ] {
            c.set(k, v).unwrap_or_else(|e| panic!("{k}: {e}"));
        }
        let batch = &c.queues["batch"];
        assert_eq!(
            batch.requires.as_deref(),
            Some(&["batch".to_string(), "ssd".into()][..])
        );
        assert_eq!(batch.policy.limits.job_size.max.nnodes, Some(4));
        assert_eq!(c.queues["debug"].policy.limits.duration, Some(Fsd(1800.0)));
        assert_eq!(c.limits.users["alice"].max_running_jobs, Some(2));
        assert_eq!(c.limits.users["default"].max_nodes, Some(3));
        assert_eq!(c.limits.banks["physics"].max_active_jobs, Some(10));
        assert_eq!(c.accounting.users["alice"].shares, 10.0);
        assert_eq!(c.accounting.users["alice"].bank.as_deref(), Some("physics"));
        assert_eq!(c.accounting.banks["physics"].priority, 2);
        assert_eq!(c.accounting.queues["batch"].priority, 1);
        assert_eq!(c.accounting.weights.age, 500);
        assert!(c.set("queues.batch.hosts", "x").is_err());
        assert!(
            c.set("queues.batch.policy.limits.job-size.max.nnodes", "-2")
                .is_err()
        );
        assert!(c.set("limits.users.alice.max_jobs", "1").is_err());
    }

    #[test]
    fn the_file_reads_as_flux_spells_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jm.toml");
        std::fs::write(
            &path,
            r#"
[queues.debug]
requires = ["debug"]
policy.limits.duration = "30m"

[queues.batch]
policy.limits.job-size.max.nnodes = 16

[policy.jobspec.defaults.system]
duration = "1h"
queue = "batch"

[policy.limits]
duration = "4h"
job-size.max.ngpus = 4
max_active_jobs = 100

[limits.users.default]
max_running_jobs = 4

[accounting]
enabled = true
priority_decay_half_life = "1d"

[accounting.weights]
fairshare = 1000

[accounting.users.alice]
shares = 2
"#,
        )
        .unwrap();
        let c = Config::load(Some(&path)).unwrap();
        assert_eq!(c.queues.len(), 2);
        assert_eq!(
            c.policy.jobspec.defaults.system.queue.as_deref(),
            Some("batch")
        );
        assert_eq!(c.policy.limits.duration, Some(Fsd(4.0 * 3600.0)));
        assert_eq!(c.policy.limits.job_size.max.ngpus, Some(4));
        assert_eq!(c.policy.limits.max_active_jobs, 100);
        assert_eq!(c.limits.users["default"].max_running_jobs, Some(4));
        assert!(c.accounting.enabled);
        assert_eq!(c.accounting.priority_decay_half_life, Fsd(86400.0));
        assert_eq!(c.accounting.weights.fairshare, 1000);
        assert_eq!(c.accounting.weights.queue, 10_000);
        assert_eq!(c.accounting.users["alice"].shares, 2.0);
    }
}
