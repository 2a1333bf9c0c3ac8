//! The gate in front of the scheduler seat: a job in SCHED that asks for
//! resources is handed to the seat (`request_alloc`) unless its queue is
//! stopped or one of its user's or bank's soft limits (`max_running_jobs`,
//! `max_nodes`) would be passed; then it is held here, with the reason
//! `jobs` shows, until the queue starts or the user's or bank's jobs end.
//!
//! flux-core keeps a stopped queue's jobs out of the scheduler the same way
//! (`queue.c`, dequeue on stop, enqueue on start); flux-accounting holds a
//! job past a limit with a dependency named after the limit. Here the job
//! stays in SCHED and nothing is written: holds are rebuilt at restart, as
//! every alloc request is.
//!
//! A job counts against its user's and bank's limits from the moment it is
//! handed to the seat until it ends (or its request is withdrawn before it
//! got resources). With no limit configured nothing is counted.

use std::cmp::Reverse;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use fluxgate_shared::JobId;
use fluxgate_shared::job::JobState;
use fluxgate_shared::policy::{self, Held, Load};

use super::{Active, Core};
use crate::error::Error;
use crate::store::Store;

/// Why a job in SCHED is not with the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Its queue is stopped.
    QueueStopped,
    /// A soft limit of its user or bank.
    Limit(Held),
}

/// What a job counts against its user's and bank's limits.
#[derive(Debug, Clone)]
struct Charge {
    user: u32,
    bank: Option<Arc<str>>,
    nodes: u64,
}

/// Held jobs and what each user and bank holds.
#[derive(Debug, Default)]
pub struct Holds {
    held: HashMap<JobId, Hold>,
    /// Jobs held by a limit, by user and by bank: those to look at when the
    /// user's or bank's jobs end.
    by_user: HashMap<u32, HashSet<JobId>>,
    by_bank: HashMap<Arc<str>, HashSet<JobId>>,
    charges: HashMap<JobId, Charge>,
    users: HashMap<u32, Load>,
    banks: HashMap<Arc<str>, Load>,
}

impl Holds {
    /// Why `id` is held, if it is.
    pub fn reason(&self, id: JobId) -> Option<Hold> {
        self.held.get(&id).copied()
    }

    fn unhold(&mut self, id: JobId, user: u32, bank: Option<&Arc<str>>) -> Option<Hold> {
        let hold = self.held.remove(&id)?;
        if let Some(set) = self.by_user.get_mut(&user) {
            set.remove(&id);
        }
        if let Some(set) = bank.and_then(|b| self.by_bank.get_mut(b)) {
            set.remove(&id);
        }
        Some(hold)
    }

    fn load_mut(&mut self, user: u32, bank: Option<&Arc<str>>) -> (&mut Load, Option<&mut Load>) {
        let u = self.users.entry(user).or_default();
        let b = bank.map(|b| self.banks.entry(Arc::clone(b)).or_default());
        (u, b)
    }

    /// Count `id` as running for `user` and `bank`, with `nodes` nodes.
    fn charge(&mut self, id: JobId, user: u32, bank: Option<Arc<str>>, nodes: u64) {
        let (u, b) = self.load_mut(user, bank.as_ref());
        u.running += 1;
        u.nodes += nodes;
        if let Some(b) = b {
            b.running += 1;
            b.nodes += nodes;
        }
        self.charges.insert(id, Charge { user, bank, nodes });
    }

    /// Stop counting `id` as running; its charge, if it was counted.
    fn uncharge(&mut self, id: JobId) -> Option<Charge> {
        let c = self.charges.remove(&id)?;
        let (u, b) = self.load_mut(c.user, c.bank.as_ref());
        u.running = u.running.saturating_sub(1);
        u.nodes = u.nodes.saturating_sub(c.nodes);
        if let Some(b) = b {
            b.running = b.running.saturating_sub(1);
            b.nodes = b.nodes.saturating_sub(c.nodes);
        }
        Some(c)
    }

    /// What `jobs` shows for a held job: the limit's name.
    pub(super) fn hold_reason(&self, id: JobId) -> Option<&'static str> {
        match self.reason(id)? {
            Hold::Limit(h) => Some(h.name()),
            Hold::QueueStopped => None,
        }
    }
}

impl<S: Store> Core<S> {
    /// The bank a job counts against: the one it names, else its user's
    /// default bank in the accounting table.
    pub(super) fn bank_of(&self, a: &Active) -> Option<Arc<str>> {
        if let Some(b) = &a.spec.bank {
            return Some(Arc::clone(b));
        }
        let acct = self.site.accounting.as_ref()?;
        let b = acct.bank_of(a.job.userid(), None);
        (!b.is_empty()).then(|| Arc::from(b))
    }

    /// Nodes a job counts against `max_nodes`: what it asked for, at least one.
    fn nodes_of(a: &Active) -> u64 {
        u64::from(a.alloc_nnodes.unwrap_or(a.spec.nnodes).max(1))
    }

    /// Refuse a submission of `user` past a hard limit (`max_active_jobs`
    /// of the user or bank, or a job larger than `max_nodes`).
    pub(super) fn admit_submission(
        &self,
        user: u32,
        bank: Option<&str>,
        nodes: u64,
    ) -> Result<(), Error> {
        let limits = &self.site.limits;
        if !limits.is_set() {
            return Ok(());
        }
        let user_load = self.holds.users.get(&user).copied().unwrap_or_default();
        let bank = bank.map(|b| {
            (
                b,
                limits.bank(b).copied().unwrap_or_default(),
                self.holds.banks.get(b).copied().unwrap_or_default(),
            )
        });
        policy::admit_submit(
            limits.user(user),
            &user_load,
            bank.as_ref().map(|(n, l, load)| (*n, l, load)),
            nodes.max(1),
        )
        .map_err(|e| Error::Exhausted(e.to_string()))
    }

    /// A job became active (submitted or recovered): count it, and charge
    /// it when it holds resources already (recovered while running).
    pub(super) fn policy_job_added(&mut self, id: JobId) {
        let Some(a) = self.jobs.get(&id) else {
            return;
        };
        if let Some(acct) = &self.site.accounting {
            let bank = acct
                .bank_of(a.job.userid(), a.spec.bank.as_deref())
                .to_string();
            // A new association shifts every other's rank: O(associations), once.
            if self.accounts.seen(&bank, a.job.userid()) {
                self.compute_fairshare(crate::clock::now());
            }
        }
        let Some(a) = self.jobs.get(&id) else {
            return;
        };
        if !self.site.limits.is_set() {
            return;
        }
        let (user, bank, holds) = (a.job.userid(), self.bank_of(a), a.job.has_resources());
        let nodes = Self::nodes_of(a);
        let (u, b) = self.holds.load_mut(user, bank.as_ref());
        u.active += 1;
        if let Some(b) = b {
            b.active += 1;
        }
        if holds {
            self.holds.charge(id, user, bank, nodes);
        }
    }

    /// The job asks for resources (SCHED, priority above 0): hand it to the
    /// seat, or hold it.
    pub(super) fn admit_alloc(&mut self, id: JobId) {
        let Some(a) = self.jobs.get(&id) else {
            return;
        };
        if !self.queues.started(a.spec.queue.as_deref()) {
            self.holds.held.insert(id, Hold::QueueStopped);
            return;
        }
        if self.site.limits.is_set() {
            let (user, bank, nodes) = (a.job.userid(), self.bank_of(a), Self::nodes_of(a));
            let limits = &self.site.limits;
            let user_load = self.holds.users.get(&user).copied().unwrap_or_default();
            let bank_limits = bank.as_deref().and_then(|b| limits.bank(b));
            let bank_load = bank
                .as_ref()
                .and_then(|b| self.holds.banks.get(b))
                .copied()
                .unwrap_or_default();
            let held = policy::hold(
                limits.user(user),
                &user_load,
                bank_limits.map(|l| (l, &bank_load)),
                nodes,
            );
            if let Some(held) = held {
                self.holds.held.insert(id, Hold::Limit(held));
                self.holds.by_user.entry(user).or_default().insert(id);
                if let Some(b) = bank {
                    self.holds.by_bank.entry(b).or_default().insert(id);
                }
                return;
            }
            self.holds.charge(id, user, bank, nodes);
        }
        self.request_alloc(id);
    }

    /// The job no longer asks for resources (exception, urgency 0): out of
    /// the seat or the holds; a job that never got resources stops counting.
    pub(super) fn withdraw_alloc(&mut self, id: JobId) {
        let (user, bank, holds) = match self.jobs.get(&id) {
            Some(a) => (a.job.userid(), self.bank_of(a), a.job.has_resources()),
            None => return,
        };
        self.holds.unhold(id, user, bank.as_ref());
        self.cancel_alloc(id);
        if !holds && let Some(c) = self.holds.uncharge(id) {
            self.release_limits(c.user, c.bank);
        }
    }

    /// A job ended: it no longer counts, and jobs its limits held may go.
    pub(super) fn policy_job_ended(&mut self, id: JobId, a: &Active) {
        self.account_job_end(a);
        if !self.site.limits.is_set() {
            return;
        }
        let bank = self.bank_of(a);
        self.holds.unhold(id, a.job.userid(), bank.as_ref());
        let (u, b) = self.holds.load_mut(a.job.userid(), bank.as_ref());
        u.active = u.active.saturating_sub(1);
        if let Some(b) = b {
            b.active = b.active.saturating_sub(1);
        }
        if let Some(c) = self.holds.uncharge(id) {
            self.release_limits(c.user, c.bank);
        }
    }

    /// Jobs of `user` or `bank` held by a limit: admit again, highest
    /// priority first, until one of them is held by the user's limit again.
    fn release_limits(&mut self, user: u32, bank: Option<Arc<str>>) {
        let mut candidates: Vec<JobId> = self
            .holds
            .by_user
            .get(&user)
            .into_iter()
            .flatten()
            .chain(
                bank.as_ref()
                    .and_then(|b| self.holds.by_bank.get(b))
                    .into_iter()
                    .flatten(),
            )
            .copied()
            .collect();
        if candidates.is_empty() {
            return;
        }
        candidates.sort_by_key(|id| {
            let p = self
                .jobs
                .get(id)
                .and_then(|a| a.job.priority())
                .unwrap_or(0);
            (Reverse(p), *id)
        });
        candidates.dedup();
        for id in candidates {
            let (u, b) = match self.jobs.get(&id) {
                Some(a) if a.job.state() == JobState::Sched => (a.job.userid(), self.bank_of(a)),
                _ => {
                    self.holds.held.remove(&id);
                    continue;
                }
            };
            if self.holds.unhold(id, u, b.as_ref()).is_none() {
                continue;
            }
            self.admit_alloc(id);
            if matches!(
                self.holds.reason(id),
                Some(Hold::Limit(Held::UserRunningJobs))
            ) && u == user
            {
                break;
            }
        }
        self.out.resched = true;
    }

    /// Queue `queue` stopped: withdraw its jobs' requests from the seat and
    /// hold them. O(active jobs), on an administrator's request.
    pub(super) fn hold_queue(&mut self, queue: Option<&str>) {
        let ids: Vec<JobId> = self
            .jobs
            .iter()
            .filter(|(id, a)| {
                a.job.state() == JobState::Sched
                    && a.job.guards.alloc_requested
                    && a.spec.queue.as_deref() == queue
                    && !self.holds.held.contains_key(id)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.cancel_alloc(id);
            if let Some(c) = self.holds.uncharge(id) {
                self.release_limits(c.user, c.bank);
            }
            self.holds.held.insert(id, Hold::QueueStopped);
        }
    }

    /// Queue `queue` started: its held jobs ask again, oldest first.
    pub(super) fn release_queue(&mut self, queue: Option<&str>) {
        let mut ids: Vec<JobId> = self
            .holds
            .held
            .iter()
            .filter(|(id, h)| {
                **h == Hold::QueueStopped
                    && self
                        .jobs
                        .get(id)
                        .is_some_and(|a| a.spec.queue.as_deref() == queue)
            })
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        for id in ids {
            self.holds.held.remove(&id);
            self.admit_alloc(id);
        }
        self.out.resched = true;
    }
}
