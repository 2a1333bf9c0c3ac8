//! The scheduler seat: pending jobs by priority then submit order, and the
//! pool they are allocated from; a [`Policy`] object decides what the job at
//! the head gets ([`Fcfs`]: RFC 27's sched-simple, first fit, in process).
//!
//! The head is served in order, so a large job is not starved by small ones.
//! Under `[sched] policy = "fcfs"` nothing behind a blocked head is tried.
//! Under `easy` (the default) a blocked head gets a reservation from the
//! running jobs' time limits (`shared::sched`) and the jobs behind it that
//! cannot delay it start now (EASY backfill), at most `queue_depth` of them
//! looked at, and only when the queue or the pool changed since the last
//! pass: no O(queue) scan per event.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use fluxgate_shared::rset::{AllocError, AllocRequest, Constraint, Pool, job_expiration};
use fluxgate_shared::sched::{self as backfill, Reservation};
use fluxgate_shared::{IdSet, JobId, JobState, Jobspec, ResourceSet};
use serde_json::{Map, Value};

use super::Core;
use super::timers::Timer;
use crate::clock;
use crate::store::Store;

/// A scheduling policy: what the job at the head of the queue gets. Pure:
/// no I/O and no clock reads (a policy that needs the time takes it as an
/// argument), so it runs the same in service, in tests and in simulation.
pub trait Policy: std::fmt::Debug + Send {
    /// Its name, as configuration spells it.
    fn name(&self) -> &'static str;
    /// Resources from `pool` for job `id` asking `req`: granted, busy for
    /// now ([`AllocError::Busy`]), or never.
    fn alloc(
        &mut self,
        pool: &mut Pool,
        id: JobId,
        req: &AllocRequest,
    ) -> Result<ResourceSet, AllocError>;
    /// Resources were freed, came up or were redefined: a busy answer may
    /// change.
    fn changed(&mut self);
}

/// First come, first served, first fit (flux's sched-simple).
#[derive(Debug, Default)]
pub struct Fcfs {
    /// The head that last got Busy, while nothing has been freed or come up
    /// since: asking again could only get Busy again (a Busy answer costs a
    /// look at the whole inventory), so it waits, as sched-simple does.
    stalled: Option<JobId>,
}

impl Policy for Fcfs {
    fn name(&self) -> &'static str {
        "fcfs"
    }

    fn alloc(
        &mut self,
        pool: &mut Pool,
        id: JobId,
        req: &AllocRequest,
    ) -> Result<ResourceSet, AllocError> {
        if self.stalled == Some(id) {
            return Err(AllocError::Busy);
        }
        let answer = pool.alloc(req);
        if matches!(answer, Err(AllocError::Busy)) {
            self.stalled = Some(id);
        }
        answer
    }

    fn changed(&mut self) {
        self.stalled = None;
    }
}

/// The queue of jobs asking for resources, the pool they come from and
/// the policy that decides.
#[derive(Debug)]
pub struct Sched {
    queue: BTreeSet<(Reverse<u32>, JobId)>,
    priority: HashMap<JobId, u32>,
    pool: Option<Pool>,
    policy: Box<dyn Policy>,
    /// Running jobs with a time limit, by when it ends: what a
    /// reservation reckons with (`shared::sched`).
    ending: BTreeMap<(u64, JobId), Arc<ResourceSet>>,
    /// The key of each job in `ending`.
    ends: HashMap<JobId, u64>,
    /// Backfill behind a blocked head, looking at most this many jobs
    /// (`None`: strict order).
    backfill: Option<usize>,
    /// Something changed since the last backfill pass: a pass over the
    /// same queue and pool would find nothing new.
    changed: bool,
    /// The job whose reservation is shown (one head at a time).
    estimated: Option<JobId>,
}

/// Ordering key of a time: non-negative times order as their bits.
fn time_key(t: f64) -> u64 {
    t.max(0.0).to_bits()
}

impl Sched {
    /// A first-fit scheduler with no inventory yet: jobs wait until it is defined.
    pub fn new() -> Self {
        Self::with_policy(Box::new(Fcfs::default()))
    }

    /// A scheduler deciding by `policy`.
    pub fn with_policy(policy: Box<dyn Policy>) -> Self {
        Sched {
            queue: BTreeSet::new(),
            priority: HashMap::new(),
            pool: None,
            policy,
            ending: BTreeMap::new(),
            ends: HashMap::new(),
            backfill: None,
            changed: true,
            estimated: None,
        }
    }

    /// Backfill behind a blocked head, looking at most `depth` jobs deep
    /// (EASY); `None`: strict order.
    pub fn set_backfill(&mut self, depth: Option<usize>) {
        self.backfill = depth;
    }

    /// Job `id` holds `r` until `end` (`None`: it has no time limit).
    pub fn hold(&mut self, id: JobId, r: Arc<ResourceSet>, end: Option<f64>) {
        self.release_hold(id);
        if let Some(end) = end.filter(|t| t.is_finite() && *t > 0.0) {
            let key = time_key(end);
            self.ending.insert((key, id), r);
            self.ends.insert(id, key);
        }
        self.changed = true;
    }

    /// Job `id` no longer holds resources.
    pub fn release_hold(&mut self, id: JobId) {
        if let Some(key) = self.ends.remove(&id) {
            self.ending.remove(&(key, id));
        }
        self.changed = true;
    }

    /// Where and when the job asking `req` at the head would start: its
    /// reservation, if the time limits of the running jobs tell.
    pub fn reserve(&self, req: &AllocRequest, now: f64) -> Option<Reservation> {
        let pool = self.pool.as_ref()?;
        let ending: Vec<(f64, &ResourceSet)> = self
            .ending
            .iter()
            .map(|((key, _), r)| (f64::from_bits(*key), &**r))
            .collect();
        backfill::reserve(pool, &ending, req, now)
    }

    /// The jobs behind the head, in order, at most the backfill depth, for
    /// a backfill pass; `None` when the policy does not backfill or nothing
    /// changed since the last pass.
    pub fn behind_head(&mut self) -> Option<Vec<JobId>> {
        let depth = self.backfill?;
        if !std::mem::take(&mut self.changed) {
            return None;
        }
        Some(
            self.queue
                .iter()
                .skip(1)
                .take(depth)
                .map(|(_, id)| *id)
                .collect(),
        )
    }

    /// Backfill the queued job `id` asking `req`, ending at `end`, if it
    /// cannot delay `rsv`. Unless the answer is Busy the job leaves the queue.
    pub fn try_backfill(
        &mut self,
        id: JobId,
        req: &AllocRequest,
        end: Option<f64>,
        rsv: &Reservation,
    ) -> Result<ResourceSet, AllocError> {
        let pool = self.pool.as_mut().ok_or(AllocError::Busy)?;
        let answer = backfill::backfill(pool, req, end, rsv);
        if !matches!(answer, Err(AllocError::Busy)) {
            self.dequeue(id);
        }
        answer
    }

    /// The policy's name.
    pub fn policy(&self) -> &'static str {
        self.policy.name()
    }

    /// The pool, once the inventory is known.
    pub fn pool(&self) -> Option<&Pool> {
        self.pool.as_ref()
    }

    /// The pool, to change the inventory's properties or expiration.
    pub fn pool_mut(&mut self) -> Option<&mut Pool> {
        self.pool.as_mut()
    }

    /// The inventory changed: the stalled head may fit now.
    pub fn unstall(&mut self) {
        self.policy.changed();
        self.changed = true;
    }

    /// Replace the inventory (resource-define); everything starts free and down.
    pub fn define(&mut self, inventory: ResourceSet) {
        let mut pool = Pool::new(inventory);
        let all = pool.ranks().clone();
        pool.set_up(&all, false);
        self.pool = Some(pool);
        self.policy.changed();
        self.changed = true;
    }

    /// Take resources a recovered job holds out of the pool.
    pub fn mark_allocated(&mut self, r: &ResourceSet) {
        if let Some(pool) = &mut self.pool
            && let Err(e) = pool.mark_allocated(r)
        {
            tracing::error!(error = %e, "resources of a recovered job are not free in the pool");
        }
    }

    /// Mark targets up or down.
    pub fn set_up(&mut self, ranks: &IdSet, up: bool) {
        if let Some(pool) = &mut self.pool {
            pool.set_up(ranks, up);
        }
        if up {
            self.policy.changed();
            self.changed = true;
        }
    }

    /// Queue `id` at `priority`, or move it there if it is queued already.
    pub fn enqueue(&mut self, id: JobId, priority: u32) {
        if let Some(old) = self.priority.insert(id, priority) {
            self.queue.remove(&(Reverse(old), id));
        }
        self.queue.insert((Reverse(priority), id));
        self.changed = true;
    }

    /// Take `id` out of the queue; false if it was not queued.
    pub fn dequeue(&mut self, id: JobId) -> bool {
        match self.priority.remove(&id) {
            Some(p) => self.queue.remove(&(Reverse(p), id)),
            None => false,
        }
    }

    /// The job is gone: drop any request it had.
    pub fn forget(&mut self, id: JobId) {
        self.dequeue(id);
    }

    /// The job to try next: highest priority, then lowest id.
    pub fn head(&self) -> Option<JobId> {
        self.queue.first().map(|(_, id)| *id)
    }

    /// Allocate `req` to the queued job `id` from the pool. Unless the answer
    /// is [`AllocError::Busy`] the job leaves the queue, granted or refused;
    /// with no inventory yet every request is busy.
    pub fn try_alloc(&mut self, id: JobId, req: &AllocRequest) -> Result<ResourceSet, AllocError> {
        let pool = self.pool.as_mut().ok_or(AllocError::Busy)?;
        let answer = self.policy.alloc(pool, id, req);
        if !matches!(answer, Err(AllocError::Busy)) {
            self.dequeue(id);
        }
        answer
    }

    /// Return `r` to the pool; ranks that have left the inventory are skipped.
    pub fn free(&mut self, r: &ResourceSet) -> Result<(), AllocError> {
        self.policy.changed();
        self.changed = true;
        match &mut self.pool {
            Some(pool) => pool.free_tolerant(r),
            None => Ok(()),
        }
    }
}

impl Default for Sched {
    fn default() -> Self {
        Self::new()
    }
}

/// What a jobspec asks of the pool.
pub fn request(jobspec: &Jobspec) -> Result<AllocRequest, String> {
    let to_u32 =
        |v: u64, what: &str| u32::try_from(v).map_err(|_| format!("{what} {v} is too large"));
    let mut req = AllocRequest::slots(
        to_u32(jobspec.nslots(), "slot count")?,
        to_u32(jobspec.cores_per_slot().max(1), "cores per slot")?,
    );
    req.nnodes = to_u32(jobspec.nnodes(), "node count")?;
    req.gpus_per_slot = to_u32(jobspec.gpus_per_slot(), "gpus per slot")?;
    req.exclusive = jobspec.exclusive();
    if let Some(c) = jobspec.constraints() {
        req.constraint = Some(
            Constraint::from_json(&Value::Object(c.clone()))
                .map_err(|e| format!("constraints: {e}"))?,
        );
    }
    Ok(req)
}

impl<S: Store> Core<S> {
    /// The job's priority is known: queue it for resources.
    pub(super) fn request_alloc(&mut self, id: JobId) {
        let Some(active) = self.jobs.get(&id) else {
            return;
        };
        let priority = active.job.priority().unwrap_or(0);
        self.sched.enqueue(id, priority);
    }

    /// The job no longer wants resources (exception, urgency 0 while queued).
    pub(super) fn cancel_alloc(&mut self, id: JobId) {
        self.sched.dequeue(id);
    }

    /// Priority changed while queued: re-sort it.
    pub(super) fn requeue(&mut self, id: JobId) {
        if let Some(p) = self.jobs.get(&id).and_then(|a| a.job.priority())
            && self.sched.priority.contains_key(&id)
        {
            self.sched.enqueue(id, p);
        }
    }

    /// Allocate to the head of the queue until it does not fit.
    pub(super) fn schedule(&mut self) {
        if self.sched.pool.is_none() {
            return;
        }
        while let Some(id) = self.sched.head() {
            let Some(active) = self.jobs.get(&id) else {
                self.sched.dequeue(id);
                continue;
            };
            if active.job.state() != JobState::Sched {
                self.sched.dequeue(id);
                continue;
            }
            let req = match active.spec.request.clone() {
                Ok(r) => r,
                Err(e) => {
                    self.sched.dequeue(id);
                    self.alloc_exception(id, &e);
                    continue;
                }
            };
            let duration = active.spec.duration;
            // Inside an instance that expires, a job must end before it does.
            let now = clock::now();
            let expiration = match job_expiration(now, duration, self.instance_expiration()) {
                Ok(t) => t,
                Err(e) => {
                    self.sched.dequeue(id);
                    self.alloc_exception(id, &e.to_string());
                    continue;
                }
            };
            match self.sched.try_alloc(id, &req) {
                Ok(r) => self.grant(id, r, now, expiration),
                Err(AllocError::Busy) => {
                    self.backfill_behind(id, &req, now);
                    break;
                }
                Err(e) => self.alloc_exception(id, &e.to_string()),
            }
        }
    }

    /// The head `head` asking `head_req` is blocked: reserve its resources
    /// at the earliest time the running jobs' limits allow (shown as its
    /// `sched.t_estimate`), and start the jobs behind it that cannot delay
    /// that (EASY backfill). Does nothing under `fcfs`.
    fn backfill_behind(&mut self, head: JobId, head_req: &AllocRequest, now: f64) {
        let Some(behind) = self.sched.behind_head() else {
            return;
        };
        let rsv = self.sched.reserve(head_req, now);
        self.set_estimate(head, rsv.as_ref().map(|r| r.start));
        // Without a reservation (jobs without a time limit hold what the
        // head needs) nothing may pass it: anything could delay it.
        let Some(rsv) = rsv else {
            return;
        };
        for id in behind {
            let Some(active) = self.jobs.get(&id) else {
                continue;
            };
            if active.job.state() != JobState::Sched {
                continue;
            }
            let Ok(req) = active.spec.request.clone() else {
                continue;
            };
            let duration = active.spec.duration;
            let end = (duration > 0.0).then_some(now + duration);
            let expiration = match job_expiration(now, duration, self.instance_expiration()) {
                Ok(t) => t,
                Err(_) => continue,
            };
            match self.sched.try_backfill(id, &req, end, &rsv) {
                Ok(r) => self.grant(id, r, now, expiration),
                Err(AllocError::Busy) => {}
                Err(e) => self.alloc_exception(id, &e.to_string()),
            }
        }
    }

    /// Show a pending job's expected start (`None`: unknown), as Fluxion's
    /// `sched.t_estimate` annotation; kept in memory, not in the eventlog.
    fn set_estimate(&mut self, id: JobId, t: Option<f64>) {
        // A job that was the head before no longer has a reservation.
        if let Some(old) = self.sched.estimated.replace(id).filter(|old| *old != id)
            && let Some(active) = self.jobs.get_mut(&old)
        {
            active.t_estimate = None;
        }
        if let Some(active) = self.jobs.get_mut(&id) {
            active.t_estimate = t;
        }
    }

    /// When the instance's own resources expire (an instance inside a job of
    /// an enclosing instance): the last `resource-update`, else the
    /// expiration in the inventory R; `None` when they do not.
    pub(super) fn instance_expiration(&self) -> Option<f64> {
        self.res
            .state()
            .expiration()
            .or_else(|| self.sched.pool().and_then(|p| p.inventory().expiration()))
            .filter(|t| *t > 0.0)
    }

    fn grant(&mut self, id: JobId, mut r: ResourceSet, now: f64, expiration: Option<f64>) {
        r.set_starttime(Some(now));
        r.set_expiration(Some(expiration.unwrap_or(0.0)));
        if let Some(t) = self.jobs.get(&id).and_then(|a| a.job.t_submit()) {
            metrics::histogram!(crate::telemetry::ALLOC_LATENCY).record(clock::now() - t);
        }
        let summary = r.dumps();
        let json = r.to_json_string();
        let mut sched = Map::new();
        sched.insert("resource_summary".into(), Value::from(summary));
        let mut annotations = Map::new();
        annotations.insert("sched".into(), Value::Object(sched));
        self.out.writes.push(crate::store::Write::SetR {
            id: id.into(),
            r: json,
        });
        let r = Arc::new(r);
        self.sched.hold(id, Arc::clone(&r), expiration);
        if let Some(active) = self.jobs.get_mut(&id) {
            active.nodelist = r.nodelist().map(|h| h.encode()).unwrap_or_default();
            active.alloc_nnodes = u32::try_from(r.nnodes()).ok();
            active.t_estimate = None;
            active.r = Some(r);
        }
        if self.post(
            id,
            "alloc",
            Self::context([("annotations", Value::Object(annotations))]),
        ) && let Some(t) = expiration
        {
            self.timers.add(t, id, Timer::Expiration);
        }
    }

    fn alloc_exception(&mut self, id: JobId, why: &str) {
        let note = format!("alloc denied due to type=\"unsatisfiable\": {why}");
        let _ = self.raise(id, "alloc", 0, &note, None);
    }

    /// Return a job's resources to the pool.
    pub(super) fn free_resources(&mut self, id: JobId) {
        let r = self.jobs.get_mut(&id).and_then(|a| a.r.take());
        self.sched.release_hold(id);
        if let Some(r) = r
            && let Err(e) = self.sched.free(&r)
        {
            tracing::error!(job = %id, error = %e, "free of resources the pool does not hold");
        }
        self.timers.cancel_kind(id, &Timer::Expiration);
        self.post(id, "free", None);
    }
}

#[cfg(test)]
mod tests {
    use fluxgate_shared::rset::Node;

    use super::*;

    fn pool_of(nodes: u32) -> ResourceSet {
        ResourceSet::from_nodes((0..nodes).map(|r| {
            Node::new(
                r,
                Some(&format!("node{r}")),
                IdSet::from_range(0, 3),
                IdSet::new(),
            )
        }))
        .unwrap()
    }

    /// A policy that grants nothing.
    #[derive(Debug, Default)]
    struct Refuse;

    impl Policy for Refuse {
        fn name(&self) -> &'static str {
            "refuse"
        }
        fn alloc(
            &mut self,
            _pool: &mut Pool,
            _id: JobId,
            _req: &AllocRequest,
        ) -> Result<ResourceSet, AllocError> {
            Err(AllocError::Busy)
        }
        fn changed(&mut self) {}
    }

    fn seat(policy: Box<dyn Policy>) -> Sched {
        let mut s = Sched::with_policy(policy);
        let inventory = pool_of(2);
        let all = inventory.ranks();
        s.define(inventory);
        s.set_up(&all, true);
        s
    }

    #[test]
    fn the_seat_asks_its_policy_and_keeps_a_busy_job_queued() {
        let mut s = seat(Box::new(Refuse));
        assert_eq!(s.policy(), "refuse");
        let id = JobId::from(1u64);
        s.enqueue(id, 16);
        let req = AllocRequest::slots(1, 1);
        assert!(matches!(s.try_alloc(id, &req), Err(AllocError::Busy)));
        assert_eq!(s.head(), Some(id), "a busy job stays at the head");
    }

    #[test]
    fn fcfs_grants_first_fit_and_waits_after_busy_until_a_change() {
        let mut s = seat(Box::new(Fcfs::default()));
        assert_eq!(s.policy(), "fcfs");
        let whole = |n| {
            let mut r = AllocRequest::slots(n, 4);
            r.nnodes = n;
            r.exclusive = true;
            r
        };
        let (a, b) = (JobId::from(1u64), JobId::from(2u64));
        s.enqueue(a, 16);
        s.enqueue(b, 16);
        let got = s.try_alloc(a, &whole(2)).unwrap();
        assert_eq!(got.ranks(), IdSet::from_range(0, 1));
        assert_eq!(s.head(), Some(b));
        assert!(matches!(s.try_alloc(b, &whole(1)), Err(AllocError::Busy)));
        // Nothing changed: the stalled head is not looked at again.
        assert!(matches!(s.try_alloc(b, &whole(1)), Err(AllocError::Busy)));
        s.free(&got).unwrap();
        assert_eq!(
            s.try_alloc(b, &whole(1)).unwrap().ranks(),
            IdSet::from_range(0, 0)
        );
        assert_eq!(s.head(), None);
    }
}
