//! The scheduler seat: pending jobs by priority then submit order, the
//! pool they are allocated from, the plan of what is held until when, and
//! the policy (`shared::sched::pass`: fcfs, easy or conservative) that a
//! pass runs over them.
//!
//! The head is served in order, so a large job is not starved by small
//! ones. A pass looks at most `queue_depth` jobs deep (as Slurm's
//! `bf_max_job_test`), and runs only when the queue, the pool or what
//! running jobs hold changed since the last one: no O(queue) scan per
//! event. Each blocked job a policy reserves shows its expected start as
//! `sched.t_estimate`, as Fluxion's do.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use fluxgate_shared::rset::{AllocError, AllocRequest, Constraint, Pool, job_expiration};
use fluxgate_shared::sched::{Decision, Pending, Plan, Policy, Reserve};
use fluxgate_shared::{IdSet, JobId, JobState, Jobspec, ResourceSet};
use serde_json::{Map, Value};

use super::Core;
use super::timers::Timer;
use crate::clock;
use crate::store::Store;

/// The queue of jobs asking for resources, the pool they come from, the
/// plan ahead and the policy that decides.
#[derive(Debug)]
pub struct Sched {
    queue: BTreeSet<(Reverse<u32>, JobId)>,
    priority: HashMap<JobId, u32>,
    pool: Option<Pool>,
    /// Idle nodes and free cores over time, kept with the pool by the
    /// policies that look ahead.
    plan: Option<Plan>,
    policy: Policy,
    /// Most pending jobs one pass looks at.
    queue_depth: usize,
    /// What each running job holds and until when: the plan is rebuilt
    /// from it when the inventory is replaced.
    holding: HashMap<JobId, (Arc<ResourceSet>, Option<f64>)>,
    /// Something changed since the last pass: a pass over the same queue,
    /// pool and plan would decide nothing new.
    changed: bool,
    /// Jobs whose expected start is shown.
    estimated: Vec<JobId>,
}

impl Sched {
    /// A first-fit scheduler in strict order with no inventory yet: jobs
    /// wait until it is defined.
    pub fn new() -> Self {
        Self::with_policy(Policy::Fcfs, 1000)
    }

    /// A scheduler deciding by `policy`, looking `queue_depth` jobs deep.
    pub fn with_policy(policy: Policy, queue_depth: usize) -> Self {
        Sched {
            queue: BTreeSet::new(),
            priority: HashMap::new(),
            pool: None,
            plan: None,
            policy,
            queue_depth: queue_depth.max(1),
            holding: HashMap::new(),
            changed: true,
            estimated: Vec::new(),
        }
    }

    /// Job `id` holds `r` until `end` (`None`: it has no time limit), as
    /// found at recovery or moved by an update.
    pub fn hold(&mut self, id: JobId, r: Arc<ResourceSet>, end: Option<f64>) {
        let end = end.filter(|t| t.is_finite() && *t > 0.0);
        if let Some(plan) = &mut self.plan {
            plan.start(id.into(), &r, end);
        }
        self.holding.insert(id, (r, end));
        self.changed = true;
    }

    /// Job `id` was started by a pass on `r` until `end`: the plan has it
    /// already.
    fn granted(&mut self, id: JobId, r: Arc<ResourceSet>, end: Option<f64>) {
        let end = end.filter(|t| t.is_finite() && *t > 0.0);
        self.holding.insert(id, (r, end));
    }

    /// Job `id` no longer holds resources.
    pub fn release_hold(&mut self, id: JobId) {
        self.holding.remove(&id);
        if let Some(plan) = &mut self.plan {
            plan.end(id.into());
        }
        self.changed = true;
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

    /// The inventory changed: the blocked head may fit now.
    pub fn unstall(&mut self) {
        self.changed = true;
    }

    /// Replace the inventory (resource-define); everything starts free and down.
    pub fn define(&mut self, inventory: ResourceSet) {
        let mut pool = Pool::new(inventory);
        let all = pool.ranks().clone();
        pool.set_up(&all, false);
        // Strict order never looks ahead: it keeps no plan.
        self.plan = (self.policy.depth() > 0).then(|| {
            let mut plan = Plan::new(&pool);
            for (id, (r, end)) in &self.holding {
                plan.start((*id).into(), r, *end);
            }
            plan
        });
        self.pool = Some(pool);
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
            let (nodes, cores) = pool.set_up(ranks, up);
            let sign = if up { 1 } else { -1 };
            if let Some(plan) = &mut self.plan {
                plan.grow(sign * nodes as i64, sign * cores as i64);
            }
        }
        self.changed = true;
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
        let queued = match self.priority.remove(&id) {
            Some(p) => self.queue.remove(&(Reverse(p), id)),
            None => false,
        };
        // Its reservation goes: jobs behind it may start now.
        self.changed |= queued;
        queued
    }

    /// The job is gone: drop any request it had.
    pub fn forget(&mut self, id: JobId) {
        self.dequeue(id);
    }

    /// The job to try next: highest priority, then lowest id.
    pub fn head(&self) -> Option<JobId> {
        self.queue.first().map(|(_, id)| *id)
    }

    /// Run the policy over the queue at `now`, if anything changed since
    /// the last pass; `pending` says what each queued job asks (`None`:
    /// skip it). Jobs started or refused leave the queue; the pool and
    /// plan hold what was started.
    pub fn pass<'a>(
        &mut self,
        now: f64,
        mut pending: impl FnMut(JobId) -> Option<Pending<'a>>,
    ) -> Vec<Decision> {
        let Some(pool) = &mut self.pool else {
            return Vec::new();
        };
        if !std::mem::take(&mut self.changed) {
            return Vec::new();
        }
        let mut looked = 0;
        let jobs = self
            .queue
            .iter()
            .filter_map(|(_, id)| pending(*id))
            .take(self.queue_depth)
            .inspect(|_| looked += 1);
        let decisions = fluxgate_shared::sched::pass(
            self.policy,
            Reserve::ToDepth,
            self.plan.as_mut(),
            pool,
            now,
            jobs,
        );
        let mut moved = false;
        for d in &decisions {
            if let Decision::Start { id, .. } | Decision::Refuse { id, .. } = d {
                let id = JobId::from(*id);
                if let Some(p) = self.priority.remove(&id) {
                    self.queue.remove(&(Reverse(p), id));
                }
                moved = true;
            }
        }
        // Cut off at the depth with jobs started: those beyond it get
        // their turn in the next pass.
        self.changed = moved && looked >= self.queue_depth;
        decisions
    }

    /// Return `r` to the pool; ranks that have left the inventory are skipped.
    pub fn free(&mut self, r: &ResourceSet) -> Result<(), AllocError> {
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

    /// Run a scheduling pass: start what the policy starts, refuse what
    /// can never fit, and show the expected start of the jobs it reserved.
    pub(super) fn schedule(&mut self) {
        let now = clock::now();
        let instance = self.instance_expiration();
        // Jobs found not to be asking after all, and requests that are not valid.
        let mut stale: Vec<JobId> = Vec::new();
        let mut invalid: Vec<(JobId, String)> = Vec::new();
        let jobs = &self.jobs;
        let decisions = self.sched.pass(now, |id| {
            let Some(active) = jobs.get(&id).filter(|a| a.job.state() == JobState::Sched) else {
                stale.push(id);
                return None;
            };
            let req = match &active.spec.request {
                Ok(r) => r,
                Err(e) => {
                    invalid.push((id, e.to_string()));
                    return None;
                }
            };
            // Inside an instance that expires, a job must end before it does.
            match job_expiration(now, active.spec.duration, instance) {
                Ok(end) => Some(Pending {
                    id: id.into(),
                    req,
                    duration: end.map(|t| (t - now).max(0.0)),
                }),
                Err(e) => {
                    invalid.push((id, e.to_string()));
                    None
                }
            }
        });
        for id in stale {
            self.sched.dequeue(id);
        }
        for (id, why) in invalid {
            self.sched.dequeue(id);
            self.alloc_exception(id, &why);
        }
        let mut estimated = Vec::new();
        for d in decisions {
            match d {
                Decision::Start { id, r } => {
                    let id = JobId::from(id);
                    let duration = self.jobs.get(&id).map_or(0.0, |a| a.spec.duration);
                    let expiration = job_expiration(now, duration, instance).unwrap_or(None);
                    self.grant(id, r, now, expiration);
                }
                Decision::Refuse { id, error } => {
                    self.alloc_exception(JobId::from(id), &error.to_string());
                }
                Decision::Estimate { id, t } => {
                    let id = JobId::from(id);
                    if let Some(active) = self.jobs.get_mut(&id) {
                        active.t_estimate = Some(t);
                        estimated.push(id);
                    }
                }
            }
        }
        // Jobs reserved before and not now no longer have an estimate.
        for old in std::mem::replace(&mut self.sched.estimated, estimated) {
            if !self.sched.estimated.contains(&old)
                && let Some(active) = self.jobs.get_mut(&old)
            {
                active.t_estimate = None;
            }
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
        self.sched.granted(id, Arc::clone(&r), expiration);
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

    fn seat(policy: Policy) -> Sched {
        let mut s = Sched::with_policy(policy, 1000);
        let inventory = pool_of(2);
        let all = inventory.ranks();
        s.define(inventory);
        s.set_up(&all, true);
        s
    }

    fn whole(n: u32) -> AllocRequest {
        let mut r = AllocRequest::slots(n, 4);
        r.nnodes = n;
        r.exclusive = true;
        r
    }

    #[test]
    fn fcfs_grants_in_order_and_passes_again_only_after_a_change() {
        let mut s = seat(Policy::Fcfs);
        assert_eq!(s.policy(), "fcfs");
        let (a, b) = (JobId::from(1u64), JobId::from(2u64));
        s.enqueue(a, 16);
        s.enqueue(b, 16);
        let (two, one) = (whole(2), whole(1));
        let ask = |id: JobId| {
            Some(Pending {
                id: id.into(),
                req: if id == a { &two } else { &one },
                duration: None,
            })
        };
        let out = s.pass(0.0, ask);
        let Decision::Start { id, r } = &out[0] else {
            panic!("{out:?}");
        };
        assert_eq!((JobId::from(*id), r.ranks()), (a, IdSet::from_range(0, 1)));
        assert_eq!(out.len(), 1, "b waits: {out:?}");
        assert_eq!(s.head(), Some(b));
        s.granted(a, Arc::new(r.clone()), None);
        // Nothing changed: no pass.
        assert!(s.pass(0.0, ask).is_empty());
        let r = r.clone();
        s.free(&r).unwrap();
        s.release_hold(a);
        let out = s.pass(1.0, ask);
        assert!(
            matches!(out[..], [Decision::Start { id: 2, .. }]),
            "{out:?}"
        );
        assert_eq!(s.head(), None);
    }

    #[test]
    fn a_redefined_inventory_keeps_what_running_jobs_hold() {
        let mut s = seat(Policy::Easy);
        let a = JobId::from(1u64);
        s.enqueue(a, 16);
        let one = whole(1);
        let out = s.pass(0.0, |id| {
            Some(Pending {
                id: id.into(),
                req: &one,
                duration: Some(100.0),
            })
        });
        let Decision::Start { r, .. } = &out[0] else {
            panic!("{out:?}");
        };
        s.granted(a, Arc::new(r.clone()), Some(100.0));
        // The same inventory again, all up: the plan still has job a until 100.
        let inventory = pool_of(2);
        let all = inventory.ranks();
        s.define(inventory);
        s.mark_allocated(r);
        s.set_up(&all, true);
        let (b, c) = (JobId::from(2u64), JobId::from(3u64));
        s.enqueue(b, 16);
        s.enqueue(c, 16);
        let two = whole(2);
        let out = s.pass(10.0, |id| {
            Some(Pending {
                id: id.into(),
                req: if id == b { &two } else { &one },
                duration: Some(200.0),
            })
        });
        assert_eq!(
            out,
            [Decision::Estimate { id: 2, t: 100.0 }],
            "c would delay b"
        );
    }
}
