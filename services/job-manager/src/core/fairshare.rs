//! Priority (flux's priority plugin step) and, with accounting enabled,
//! usage and fair share as flux-accounting's `mf_priority` computes them.
//!
//! Without accounting the priority is the urgency (flux-core's default
//! plugin). With it, each association (bank and user) has a decayed usage
//! in core-seconds: a job's cores times its run time, added when it ends;
//! running jobs count up to now whenever fair share is computed. Fair share
//! is computed again (O(associations)) when a job ends, and pending jobs'
//! priorities (O(pending jobs)) on the next tick after a job ended and every
//! `accounting.recompute_interval`: never per event. A changed priority is
//! a `priority` event and a re-sort in the scheduler's queue, as a change
//! of urgency is.
//!
//! Usage survives restarts in the store's meta rows: one per association
//! ([`USAGE_KEY`]`.BANK.UID` = "core-seconds time"), written when it
//! changes, and an index of the associations ([`INDEX_KEY`]).

use std::collections::{BTreeMap, HashMap};

use fluxgate_shared::JobId;
use fluxgate_shared::job::JobState;
use fluxgate_shared::policy::{self, Association, Factors, Usage};
use serde_json::Value;

use super::pipeline::priority_of;
use super::{Active, Core};
use crate::clock;
use crate::error::Error;
use crate::store::{Store, Write};

/// Meta key prefix of each association's usage.
pub const USAGE_KEY: &str = "accounting.usage";
/// Meta key of the list of associations with stored usage.
pub const INDEX_KEY: &str = "accounting.index";

/// One association, as `fluxgate accounting show` prints it.
#[derive(Debug, Clone, PartialEq)]
pub struct AccountRow {
    /// Bank ("" when none).
    pub bank: String,
    /// User id.
    pub userid: u32,
    /// Decayed usage now, core-seconds.
    pub usage: f64,
    /// The user's shares.
    pub shares: f64,
    /// Fair share, 0-1.
    pub fairshare: f64,
}

/// Usage and fair share of every association.
#[derive(Debug, Default)]
pub struct Accounts {
    usage: BTreeMap<(String, u32), Usage>,
    /// Associations whose usage is in the store.
    stored: std::collections::BTreeSet<(String, u32)>,
    fairshare: HashMap<(String, u32), f64>,
    /// Pending jobs' priorities are owed a recomputation.
    owed: bool,
    /// When they were last recomputed.
    last: f64,
}

impl Accounts {
    /// An association with active jobs: it takes part in fair share;
    /// true when it is new (fair share is then owed a recomputation).
    pub fn seen(&mut self, bank: &str, user: u32) -> bool {
        let key = (bank.to_string(), user);
        if self.usage.contains_key(&key) {
            return false;
        }
        self.usage.insert(key, Usage::default());
        true
    }
}

fn usage_key(bank: &str, user: u32) -> String {
    format!("{USAGE_KEY}.{bank}.{user}")
}

impl<S: Store> Core<S> {
    /// Read stored usage (before jobs are replayed, whose priorities need it).
    pub(super) fn restore_usage(&mut self) -> Result<(), Error> {
        if self.site.accounting.is_none() {
            return Ok(());
        }
        let index: Vec<(String, u32)> = match self.store.meta(INDEX_KEY)? {
            Some(text) => serde_json::from_str(&text).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "stored usage index unreadable; usage starts at zero");
                Vec::new()
            }),
            None => Vec::new(),
        };
        for (bank, user) in index {
            let Some(text) = self.store.meta(&usage_key(&bank, user))? else {
                continue;
            };
            let mut parts = text.split_whitespace().map(str::parse::<f64>);
            if let (Some(Ok(value)), Some(Ok(t))) = (parts.next(), parts.next()) {
                self.accounts
                    .usage
                    .insert((bank.clone(), user), Usage { value, t });
                self.accounts.stored.insert((bank, user));
            }
        }
        self.compute_fairshare(clock::now());
        Ok(())
    }

    /// The priority a job gets now (flux's priority plugin step).
    pub(super) fn priority_for(&self, id: JobId) -> u32 {
        let Some(a) = self.jobs.get(&id) else {
            return priority_of(16);
        };
        let urgency = a.job.urgency();
        let Some(acct) = &self.site.accounting else {
            return priority_of(urgency);
        };
        let bank = acct.bank_of(a.job.userid(), a.spec.bank.as_deref());
        let key = (bank.to_string(), a.job.userid());
        let factors = Factors {
            fairshare: self.accounts.fairshare.get(&key).copied().unwrap_or(1.0),
            queue: a
                .spec
                .queue
                .as_deref()
                .and_then(|q| acct.queue_priority.get(q))
                .copied()
                .unwrap_or(0),
            bank: acct.banks.get(bank).map_or(0, |b| b.priority),
            urgency,
            age: policy::age(
                a.job.t_submit().unwrap_or_default(),
                clock::now(),
                acct.age_max,
            ),
        };
        acct.weights.priority(&factors)
    }

    /// Fair share of every association from usage now (and running jobs').
    pub(super) fn compute_fairshare(&mut self, now: f64) {
        let Some(acct) = &self.site.accounting else {
            return;
        };
        let mut running: HashMap<(String, u32), f64> = HashMap::new();
        for a in self.jobs.values() {
            if let (Some(t), Some(r)) = (a.t_run, &a.r) {
                let bank = acct.bank_of(a.job.userid(), a.spec.bank.as_deref());
                *running
                    .entry((bank.to_string(), a.job.userid()))
                    .or_default() += r.ncores() as f64 * (now - t).max(0.0);
            }
        }
        let assocs: Vec<Association> = self
            .accounts
            .usage
            .iter()
            .map(|((bank, user), u)| Association {
                bank: bank.clone(),
                user: *user,
                shares: acct.shares(*user),
                usage: u.at(now, acct.half_life)
                    + running.get(&(bank.clone(), *user)).copied().unwrap_or(0.0),
            })
            .collect();
        let bank_shares: BTreeMap<String, f64> = acct
            .banks
            .iter()
            .map(|(k, v)| (k.clone(), v.shares))
            .collect();
        let f = policy::fairshare(&assocs, &bank_shares);
        self.accounts.fairshare = assocs
            .into_iter()
            .zip(f)
            .map(|(a, f)| ((a.bank, a.user), f))
            .collect();
    }

    /// A job ended: its core-seconds are added to its association's usage
    /// (stored in this batch) and fair share is computed again.
    pub(super) fn account_job_end(&mut self, a: &Active) {
        let Some(acct) = &self.site.accounting else {
            return;
        };
        let now = clock::now();
        let bank = acct
            .bank_of(a.job.userid(), a.spec.bank.as_deref())
            .to_string();
        let half_life = acct.half_life;
        let user = a.job.userid();
        let used = match (a.t_run, &a.r) {
            (Some(t), Some(r)) => r.ncores() as f64 * (now - t).max(0.0),
            (Some(t), None) => a.spec.ncores as f64 * (now - t).max(0.0),
            _ => 0.0,
        };
        let key = (bank.clone(), user);
        if used > 0.0 {
            let u = self.accounts.usage.entry(key.clone()).or_default();
            u.add(used, now, half_life);
            let value = format!("{} {}", u.value, u.t);
            self.out.writes.push(Write::Meta {
                key: usage_key(&bank, user),
                value,
            });
            if self.accounts.stored.insert(key) {
                let index: Vec<&(String, u32)> = self.accounts.stored.iter().collect();
                if let Ok(value) = serde_json::to_string(&index) {
                    self.out.writes.push(Write::Meta {
                        key: INDEX_KEY.into(),
                        value,
                    });
                }
            }
        }
        self.compute_fairshare(now);
        self.accounts.owed = true;
    }

    /// On each tick: recompute pending jobs' priorities when a job ended
    /// since the last time, or every `recompute_interval`.
    pub(super) fn accounting_tick(&mut self) {
        let Some(acct) = &self.site.accounting else {
            return;
        };
        let now = clock::now();
        if !self.accounts.owed && now - self.accounts.last < acct.recompute_interval {
            return;
        }
        self.compute_fairshare(now);
        self.reprioritize_all(now);
    }

    /// Post a new priority for every job in SCHED whose priority changed,
    /// and re-sort it (flux-core's `reprioritize_all`).
    pub(super) fn reprioritize_all(&mut self, now: f64) {
        self.accounts.owed = false;
        self.accounts.last = now;
        let changed: Vec<(JobId, u32)> = self
            .jobs
            .iter()
            .filter(|(_, a)| a.job.state() == JobState::Sched && a.job.urgency() != 0)
            .filter_map(|(id, a)| {
                let p = self.priority_for(*id);
                (a.job.priority() != Some(p)).then_some((*id, p))
            })
            .collect();
        for (id, p) in changed {
            self.post(
                id,
                "priority",
                Self::context([("priority", Value::from(p))]),
            );
            self.requeue(id);
        }
        self.out.resched = true;
    }

    /// Every association's usage, shares and fair share, for `accounting show`.
    pub(super) fn account_rows(&mut self) -> Vec<AccountRow> {
        let Some(acct) = self.site.accounting.clone() else {
            return Vec::new();
        };
        let now = clock::now();
        self.compute_fairshare(now);
        self.accounts
            .usage
            .iter()
            .map(|((bank, user), u)| AccountRow {
                bank: bank.clone(),
                userid: *user,
                usage: u.at(now, acct.half_life),
                shares: acct.shares(*user),
                fairshare: self
                    .accounts
                    .fairshare
                    .get(&(bank.clone(), *user))
                    .copied()
                    .unwrap_or(1.0),
            })
            .collect()
    }
}
