//! The job pipeline: one task owns every job and moves it through RFC 21.
//!
//! Protocol of the core loop (as flux-core's job-manager reactor, one thread):
//! a [`Msg`] arrives, the handler posts events to jobs ([`Core::post`] applies
//! each through `shared::job::Job::apply`, the same fold replay uses, and
//! queues its line for the store), then the action step runs for every job
//! touched until nothing more is owed. At the end of the message the queued
//! writes go to the store as one batch together with the effects that must
//! wait for durability (replies, watcher notifications, exec starts, signals);
//! the committer runs those effects, in order, once the batch is on disk. So a
//! client or an exec service never sees an event that a crash could lose.

pub mod bounds;
mod commit;
mod depend;
pub mod effect;
mod exec;
mod fairshare;
mod gauges;
mod hold;
mod inactive;
mod inactive_job;
mod keys;
mod list;
mod nodes;
pub mod output;
mod perilog;
mod pipeline;
mod purge;
pub mod queues;
mod quiesce;
mod reads;
mod replay;
mod resource;
mod restart;
pub mod sched;
mod scheme;
mod singleton;
mod store_read;
mod submit;
mod summary;
mod timers;
mod update;
pub mod usage;
mod wait;

use std::collections::HashMap;
use std::sync::Arc;

use fluxgate_shared::job::usage::Total;
use fluxgate_shared::job::{Job, JobState};
use fluxgate_shared::jobid::FluidGenerator;
use fluxgate_shared::rset::AllocRequest;
use fluxgate_shared::{Event, JobId, Jobspec, ResourceSet};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use crate::clock;
use crate::config::Config;
use crate::error::Error;
use crate::hub::{HUB_LINE_MAX, Published};
use crate::store::{Log, Store, Write};
use crate::values::{Severity, Urgency};

pub use crate::exec_link::ExecMsg;
pub use commit::{Carrier, Committer};
pub use depend::Antecedents;
pub use effect::{Answer, Effect, Reply};
pub use fairshare::AccountRow;
pub use inactive::Inactive;
pub use list::{JobInfo, ListFilter, merge as merge_listings, stored_inactive};
pub use nodes::{Heartbeats, HelloJobs, JoinRefused, NodeInfo, NodeMsg, Nodes};
pub use queues::{QueueAction, QueueRequest, QueueStatus};
pub use quiesce::Quiet;
pub use resource::{ResourceMsg, ResourceView};
pub use restart::Recovered;
pub use store_read::{ReadCarrier, ReadDone, StoreRead};
pub use submit::SubmitArgs;

/// Capacity of the core's inbox: callers wait when the core is this far behind.
pub const INBOX_CAPACITY: usize = 16_384;

/// A request to the core.
#[derive(Debug)]
pub enum Msg {
    /// Enqueue validated jobs.
    Submit {
        jobs: Vec<SubmitArgs>,
        reply: oneshot::Sender<Vec<Result<JobId, Error>>>,
    },
    /// Raise an exception (cancel is type `cancel`, severity 0).
    Raise {
        id: JobId,
        kind: String,
        severity: Severity,
        note: String,
        userid: u32,
        reply: oneshot::Sender<Result<(), Error>>,
    },
    /// Signal a running job's tasks.
    Kill {
        id: JobId,
        signum: i32,
        reply: oneshot::Sender<Result<(), Error>>,
    },
    /// Change a pending job's urgency; answers the old one.
    Urgency {
        id: JobId,
        urgency: Urgency,
        userid: u32,
        reply: oneshot::Sender<Result<u8, Error>>,
    },
    /// Set or clear memo keys.
    Memo {
        id: JobId,
        memo: Map<String, Value>,
        reply: oneshot::Sender<Result<(), Error>>,
    },
    /// List jobs.
    List {
        filter: ListFilter,
        reply: oneshot::Sender<Vec<JobInfo>>,
    },
    /// Is the job known, and is it still active?
    Lookup {
        id: JobId,
        reply: oneshot::Sender<Result<Option<bool>, Error>>,
    },
    /// Where the leader exec service of a job whose tasks have started
    /// listens: the one to ask for their processes.
    TasksLeader {
        id: JobId,
        reply: oneshot::Sender<Result<String, Error>>,
    },
    /// Wait for a waitable job (any when `None`).
    Wait {
        id: Option<JobId>,
        reply: oneshot::Sender<Result<WaitResult, Error>>,
    },
    /// Answer once no job runs, or none is active (`queue idle`/`drain`).
    Quiesce {
        what: Quiet,
        reply: oneshot::Sender<Result<(), Error>>,
    },
    /// Queue control and status (RFC 33): one queue, or all.
    Queue {
        request: QueueRequest,
        reply: oneshot::Sender<Result<Vec<QueueStatus>, Error>>,
    },
    /// Usage, shares and fair share of each association.
    Accounts {
        reply: oneshot::Sender<Vec<AccountRow>>,
    },
    /// Something from an exec start stream.
    Exec(ExecMsg),
    /// Something from a node join stream.
    Node(NodeMsg),
    /// A resource request.
    Resource(ResourceMsg),
    /// Remove old inactive jobs; answers how many (would be) purged.
    Purge {
        age_limit: Option<f64>,
        num_limit: Option<u64>,
        force: bool,
        batch: usize,
        reply: oneshot::Sender<Result<u64, Error>>,
    },
    /// Change jobspec attributes (`flux update`); answers a running job's new expiration.
    Update {
        id: JobId,
        updates: Map<String, Value>,
        reply: oneshot::Sender<Result<Option<f64>, Error>>,
    },
    /// A prolog or epilog command ended with this wait status.
    Perilog {
        id: JobId,
        which: effect::Which,
        status: i32,
    },
}

/// What `Wait` answers.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitResult {
    /// The job waited for.
    pub id: JobId,
    /// True when it completed successfully.
    pub success: bool,
    /// Why not, as `flux job wait` prints it.
    pub error: String,
}

/// An active job: its fold plus what the pipeline needs to act.
#[derive(Debug)]
pub struct Active {
    /// The RFC 21 fold of its eventlog.
    pub job: Job,
    /// What the pipeline needs of its jobspec (the jobspec stays in the store).
    pub spec: Spec,
    /// Allocated resources, from `alloc` until `free`.
    pub r: Option<Arc<ResourceSet>>,
    /// Lines in each log so far (eventlog, exec.eventlog, output).
    pub seq: [u64; 3],
    /// Start time (the `start` event), for listing.
    pub t_run: Option<f64>,
    /// Nodes allocated (kept after free, for listing).
    pub nodelist: String,
    /// The prolog was started for this job (or none is needed any more).
    pub prolog_done: bool,
    /// The epilog was started for this job.
    pub epilog_done: bool,
    /// Nodes allocated, once allocated (kept after free, for listing).
    pub alloc_nnodes: Option<u32>,
    /// Its output so far against its limit.
    pub output: output::OutputBudget,
    /// When a pending job is expected to start (its reservation), shown
    /// as `sched.t_estimate`.
    pub t_estimate: Option<f64>,
    /// Bytes of memos posted to its eventlog (counted from its submit, or
    /// from the job manager's restart).
    pub memo_logged: u64,
    /// What it used over its nodes, once its exec services reported it
    /// (at `finish`), for listings; the per-node detail is in the store.
    pub usage: Option<Total>,
}

/// What the pipeline keeps of a job's jobspec while the job is active; the
/// jobspec itself is in the store (exec starts read it from there), so a
/// queue of many pending jobs costs little memory.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Job name, for listings.
    pub name: Box<str>,
    /// Tasks asked for.
    pub ntasks: u32,
    /// Nodes asked for (flux-core's jj count; 0 when not given).
    pub nnodes: u32,
    /// The resources to allocate, or why they cannot be asked for.
    pub request: Result<AllocRequest, Box<str>>,
    /// Time limit in seconds; 0 is none.
    pub duration: f64,
    /// Its queue (`attributes.system.queue`), once defaults are applied.
    pub queue: Option<Arc<str>>,
    /// The bank it names (`attributes.system.bank`).
    pub bank: Option<Arc<str>>,
    /// Cores asked for, for usage and listing.
    pub ncores: u64,
}

impl Spec {
    /// What is kept of `jobspec`.
    pub fn of(jobspec: &Jobspec) -> Spec {
        Spec {
            name: jobspec.job_name().into(),
            ntasks: u32::try_from(jobspec.ntasks()).unwrap_or(u32::MAX),
            nnodes: u32::try_from(jobspec.jj_counts().nnodes).unwrap_or(u32::MAX),
            request: sched::request(jobspec).map_err(String::into_boxed_str),
            duration: jobspec.duration(),
            queue: jobspec.queue().map(Arc::from),
            bank: jobspec.system().bank.as_deref().map(Arc::from),
            ncores: jobspec
                .nslots()
                .saturating_mul(jobspec.cores_per_slot().max(1)),
        }
    }
}

/// Writes and after-commit effects gathered while one message is handled.
#[derive(Default)]
struct Outbox {
    writes: Vec<Write>,
    effects: Vec<Effect>,
    touched: Vec<JobId>,
    /// Something changed that may let the head of the queue run.
    resched: bool,
}

/// The job pipeline's state; owned by one task.
pub struct Core<S> {
    /// The durable store: written through the committer, read at recovery.
    store: Arc<S>,
    config: Arc<Config>,
    /// Active jobs. Boxed: the map's slots stay small however large an active job is,
    /// so a queue of a million pending jobs does not double in place.
    jobs: HashMap<JobId, Box<Active>>,
    /// Inactive jobs: recent ones in memory, the rest in the store.
    inactive: inactive::InactiveJobs,
    ids: FluidGenerator,
    epoch_ms: u64,
    /// Resources recovered jobs hold, marked allocated once the pool exists.
    held: Vec<JobId>,
    /// Writes and effects of the message being handled.
    out: Outbox,
    /// The queue and scheduler seat, with its policy.
    sched: sched::Sched,
    /// Dependencies between jobs (RFC 26).
    deps: depend::Depends,
    /// Active named jobs and the `singleton` waiters.
    singletons: singleton::Singletons,
    /// Time limits, begin times and start deadlines.
    timers: timers::Timers,
    /// Where exec services listen; starts waiting for their nodes.
    exec: exec::ExecLinks,
    /// Membership: which exec service serves which rank.
    nodes: Nodes,
    /// The resource module's state (RFC 44 state, eventlog, acquirer).
    res: resource::Resources,
    /// The site's queues, limits and accounting, read at start.
    site: Arc<crate::policy::SitePolicy>,
    /// Each queue's enabled and started state (RFC 33).
    queues: queues::QueueSeat,
    /// Jobs in SCHED kept from the scheduler (stopped queue, a limit), and
    /// what each user and bank holds against its limits.
    holds: hold::Holds,
    /// Usage and fair share (when accounting is enabled).
    accounts: fairshare::Accounts,
    /// Requests waiting for jobs to end (`flux job wait`).
    waiters: wait::Waiters,
    /// Requests waiting for no job to run, or none to be active.
    quiescers: quiesce::Quiescers,
    /// Mints each started job's credential and revokes it when the job ends.
    job_credentials: crate::auth::JobCredentials,
    /// Active jobs per user, for `[policy.limits] max_active_jobs`.
    user_jobs: bounds::ActiveCounts,
    /// Store reads in flight, whose answers come back to the loop.
    reads: reads::Reads,
    /// Purges under way and waiting.
    purges: purge::Purges,
    /// Heartbeats the join streams heard, taken each tick.
    beats: nodes::Heartbeats,
    /// Idempotency keys of the jobs in memory.
    keys: keys::Keys,
}

impl<S> std::fmt::Debug for Core<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field("active", &self.jobs.len())
            .field("inactive", &self.inactive.count())
            .finish()
    }
}

impl<S: Store> Core<S> {
    /// A core over `store` with the given inventory; `job_credentials` mints
    /// each started job's credential and revokes it when the job ends.
    pub fn new(
        store: Arc<S>,
        config: Arc<Config>,
        inventory: Option<ResourceSet>,
        nodes: Nodes,
        job_credentials: crate::auth::JobCredentials,
    ) -> Result<Self, Error> {
        let ids = FluidGenerator::new(0, 0)
            .map_err(|e| Error::Invalid(format!("job id generator: {e}")))?;
        let site = Arc::new(
            crate::policy::SitePolicy::load(&config).map_err(|e| Error::Invalid(e.to_string()))?,
        );
        let mut sched = sched::Sched::with_policy(config.sched.policy(), config.sched.queue_depth);
        let hosts = nodes
            .hosts()
            .or_else(|| inventory.as_ref().and_then(|r| r.nodelist()));
        let method = inventory
            .is_some()
            .then(|| config.resource.define_method().to_string());
        if let Some(inventory) = inventory {
            // Configured targets are down until their exec service joins.
            sched.define(inventory);
        }
        let mut core = Core {
            store,
            config,
            jobs: HashMap::new(),
            inactive: Default::default(),
            ids,
            epoch_ms: 0,
            held: Vec::new(),
            out: Outbox::default(),
            sched,
            deps: depend::Depends::default(),
            singletons: singleton::Singletons::default(),
            timers: timers::Timers::default(),
            exec: exec::ExecLinks::default(),
            nodes,
            res: resource::Resources::default(),
            queues: queues::QueueSeat::default(),
            holds: hold::Holds::default(),
            accounts: fairshare::Accounts::default(),
            site,
            waiters: wait::Waiters::default(),
            quiescers: quiesce::Quiescers::default(),
            job_credentials,
            user_jobs: Default::default(),
            keys: Default::default(),
            reads: Default::default(),
            purges: Default::default(),
            beats: Default::default(),
        };
        core.epoch_ms = core.fluid_epoch()?;
        // Before jobs are replayed: they are held or prioritized by these.
        core.restore_queues()?;
        core.restore_usage()?;
        let found = core.recover()?;
        tracing::info!(
            active = found.active,
            inactive = found.inactive,
            damaged = found.damaged,
            "jobs recovered from the store"
        );
        core.resource_start(hosts, method.as_deref());
        core.load_stored_properties();
        core.apply_stored_properties();
        core.mark_held();
        core.run_actions();
        Ok(core)
    }

    /// Run until `stop` is cancelled (or the inbox closes); batches go to
    /// `committer` in order. The core holds a sender to its own inbox (for exec
    /// streams it starts), so the inbox alone never closes.
    pub async fn run(
        mut self,
        mut inbox: mpsc::Receiver<Msg>,
        committer: Committer,
        stop: tokio_util::sync::CancellationToken,
    ) {
        let period = std::time::Duration::from_secs_f64(
            self.config.resource.heartbeat_interval.clamp(0.05, 60.0),
        );
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let Some(mut answers) = self.reads.take_answers() else {
            tracing::error!("the core's loop was started twice");
            return;
        };
        loop {
            enum Wake<L> {
                Msg(Msg),
                Loaded(L),
                Timer,
                Tick,
            }
            let wake = tokio::select! {
                msg = inbox.recv() => match msg {
                    Some(msg) => Wake::Msg(msg),
                    None => break,
                },
                Some(answer) = answers.recv() => Wake::Loaded(answer),
                _ = self.timers.next_deadline() => Wake::Timer,
                _ = tick.tick() => Wake::Tick,
                _ = stop.cancelled() => break,
            };
            match wake {
                Wake::Msg(msg) => self.handle(msg),
                Wake::Loaded(answer) => self.loaded(answer),
                Wake::Timer => self.fire_timers(),
                Wake::Tick => {
                    self.take_heartbeats();
                    self.accounting_tick();
                    self.check_torpid();
                    self.check_detached();
                    self.purge_by_config();
                    self.run_actions();
                    self.set_gauges();
                }
            }
            // Take whatever else is already waiting into the same batch: fewer,
            // larger commits under load, no added latency when idle.
            let mut extra = 0;
            while extra < 1024 {
                match inbox.try_recv() {
                    Ok(msg) => self.handle(msg),
                    Err(_) => break,
                }
                extra += 1;
            }
            self.flush(&committer).await;
        }
        self.flush(&committer).await;
    }

    fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Submit { jobs, reply } => {
                let results = jobs.into_iter().map(|j| self.submit(j)).collect();
                self.reply(reply, results);
            }
            Msg::Raise {
                id,
                kind,
                severity,
                note,
                userid,
                reply,
            } => {
                let r = self.raise(id, &kind, severity.get(), &note, Some(userid));
                self.answer(reply, r);
            }
            Msg::Kill { id, signum, reply } => {
                let r = self.kill(id, signum);
                self.answer(reply, r);
            }
            Msg::Urgency {
                id,
                urgency,
                userid,
                reply,
            } => {
                let r = self.set_urgency(id, urgency, userid);
                self.answer(reply, r);
            }
            Msg::Memo { id, memo, reply } => {
                let r = self.memo(id, memo);
                self.answer(reply, r);
            }
            Msg::List { filter, reply } => {
                // Answered once what the listing reflects is durable.
                let jobs = self.list(&filter);
                self.reply(reply, jobs);
            }
            Msg::Lookup { id, reply } => {
                if self.jobs.contains_key(&id) {
                    let _ = reply.send(Ok(Some(true)));
                } else {
                    self.is_inactive_then(id, store_read::NotActive::Lookup(reply));
                }
            }
            Msg::TasksLeader { id, reply } => {
                let r = self.tasks_leader(id);
                self.answer(reply, r);
            }
            Msg::Wait { id, reply } => self.wait(id, reply),
            Msg::Quiesce { what, reply } => self.quiesce(what, reply),
            Msg::Queue { request, reply } => {
                let r = self.queue_request(request);
                self.reply(reply, r);
            }
            Msg::Accounts { reply } => {
                let rows = self.account_rows();
                let _ = reply.send(rows);
            }
            Msg::Exec(m) => self.exec_msg(m),
            Msg::Node(m) => self.node_msg(m),
            Msg::Resource(m) => self.resource_msg(m),
            Msg::Perilog { id, which, status } => self.end_perilog(id, which, status),
            Msg::Update { id, updates, reply } => {
                let r = self.update(id, updates);
                self.answer(reply, r);
            }
            Msg::Purge {
                age_limit,
                num_limit,
                force,
                batch,
                reply,
            } => self.purge(purge::PurgeAsk {
                age_limit,
                num_limit,
                force,
                batch,
                reply: Some(reply),
            }),
        }
        self.run_actions();
    }

    /// Queue an effect to run once everything posted so far is durable.
    fn effect(&mut self, effect: Effect) {
        self.out.effects.push(effect);
    }

    /// Answer `to` with `value` once everything posted so far is durable.
    fn reply<T>(&mut self, to: oneshot::Sender<T>, value: T)
    where
        Answer<T>: Into<Reply>,
    {
        self.effect(Effect::Reply(Answer { to, value }.into()));
    }

    /// As [`Core::reply`]; a request on a job that is not active is told
    /// whether the job is inactive or unknown, once the store is read.
    fn answer<T: Send + std::fmt::Debug + 'static>(
        &mut self,
        to: oneshot::Sender<Result<T, Error>>,
        value: Result<T, Error>,
    ) where
        Answer<Result<T, Error>>: Into<Reply>,
    {
        match value {
            Err(Error::NotActive(id)) => {
                self.is_inactive_then(id, store_read::NotActive::Refuse(Box::new(to)));
            }
            value => self.reply(to, value),
        }
    }

    /// Append an event to a job's log: apply it (main log), queue the write and
    /// the notification. An event the fold rejects is a bug in the pipeline: it
    /// is logged and dropped, never stored.
    fn post(&mut self, id: JobId, name: &str, context: Option<Map<String, Value>>) -> bool {
        let event = Event::new(clock::now(), name, context);
        let Some(active) = self.jobs.get_mut(&id) else {
            tracing::error!(job = %id, event = name, "event for a job that is not active");
            return false;
        };
        if let Err(e) = active.job.apply(&event) {
            tracing::error!(job = %id, error = %e, "event rejected by the state machine");
            return false;
        }
        let line = event.to_json();
        Self::queue_line(&mut self.out, active, id, Log::Main, line);
        self.out.touched.push(id);
        true
    }

    /// Append a line the exec service produced to the exec or output log.
    fn append_line(&mut self, id: JobId, log: Log, line: String) {
        let Some(active) = self.jobs.get_mut(&id) else {
            return;
        };
        Self::queue_line(&mut self.out, active, id, log, line);
    }

    fn queue_line(out: &mut Outbox, active: &mut Active, id: JobId, log: Log, line: String) {
        let slot = match log {
            Log::Main => 0,
            Log::Exec => 1,
            Log::Output => 2,
            // Not an eventlog: nobody watches it, nothing is numbered.
            Log::Usage => {
                out.writes.push(Write::Append {
                    id: id.into(),
                    log,
                    line,
                });
                return;
            }
        };
        let seq = active.seq[slot];
        active.seq[slot] += 1;
        let shared: Option<Arc<str>> =
            (line.len() <= HUB_LINE_MAX).then(|| Arc::from(line.as_str()));
        out.writes.push(Write::Append {
            id: id.into(),
            log,
            line,
        });
        out.effects.push(Effect::Publish(Published::Line {
            id,
            log,
            seq,
            line: shared,
        }));
    }

    async fn flush(&mut self, committer: &Committer) {
        if self.out.writes.is_empty() && self.out.effects.is_empty() {
            return;
        }
        let mut out = std::mem::take(&mut self.out);
        out.effects.extend(self.inactive.end_flush());
        committer.send(&*self.store, out.writes, out.effects).await;
    }

    fn context(
        pairs: impl IntoIterator<Item = (&'static str, Value)>,
    ) -> Option<Map<String, Value>> {
        Some(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    /// Job `id` if it is active; else [`Error::NotActive`], which
    /// [`Core::answer`] turns into inactive or unknown.
    fn active(&self, id: JobId) -> Result<&Active, Error> {
        self.jobs.get(&id).map(|a| &**a).ok_or(Error::NotActive(id))
    }

    /// Post an exception; severity 0 ends the job (RFC 21).
    fn raise(
        &mut self,
        id: JobId,
        kind: &str,
        severity: u8,
        note: &str,
        userid: Option<u32>,
    ) -> Result<(), Error> {
        if kind.is_empty() || kind.chars().any(|c| c.is_whitespace()) {
            return Err(Error::Invalid(format!(
                "exception type {kind:?} must be a non-empty word"
            )));
        }
        bounds::check_note("exception note", note)?;
        if kind.len() > 64 {
            return Err(Error::Invalid(format!(
                "exception type is {} bytes, over the limit of 64 bytes",
                kind.len()
            )));
        }
        // In CLEANUP a further exception is recorded only, as flux-core does.
        let state = self.active(id)?.job.state();
        let running = state == JobState::Run;
        if self.post_exception(id, kind, severity, note, userid) && severity == 0 && running {
            self.exec_exception(id, kind, note);
        }
        Ok(())
    }

    /// Post an `exception` event (context keys as flux-core writes them); the
    /// raiser is the instance owner when `userid` is `None`.
    fn post_exception(
        &mut self,
        id: JobId,
        kind: &str,
        severity: u8,
        note: &str,
        userid: Option<u32>,
    ) -> bool {
        let ctx = Self::context([
            ("type", Value::from(kind)),
            ("severity", Value::from(severity)),
            ("note", Value::from(note)),
            (
                "userid",
                Value::from(userid.unwrap_or(self.config.owner_uid)),
            ),
        ]);
        self.post(id, "exception", ctx)
    }

    fn kill(&mut self, id: JobId, signum: i32) -> Result<(), Error> {
        if !(1..65).contains(&signum) {
            return Err(Error::Invalid(format!(
                "signal {signum} is not a valid signal number"
            )));
        }
        let active = self.active(id)?;
        if active.job.state() != JobState::Run {
            return Err(Error::WrongState(format!(
                "job {id} is not running (state {})",
                active.job.state()
            )));
        }
        self.exec_kill(id, signum);
        Ok(())
    }

    fn set_urgency(&mut self, id: JobId, urgency: Urgency, userid: u32) -> Result<u8, Error> {
        let active = self.active(id)?;
        if !active.job.state().is_pending() {
            return Err(Error::WrongState(format!(
                "job {id} is not pending; urgency can only change before it runs"
            )));
        }
        let old = active.job.urgency();
        self.post(
            id,
            "urgency",
            Self::context([
                ("userid", Value::from(userid)),
                ("urgency", Value::from(urgency.get())),
            ]),
        );
        self.reprioritize(id);
        Ok(old)
    }

    fn memo(&mut self, id: JobId, memo: Map<String, Value>) -> Result<(), Error> {
        let active = self.active(id)?;
        if memo.is_empty() {
            return Err(Error::Invalid("memo must have at least one key".into()));
        }
        bounds::check_memo_total(active.job.memo(), &memo)?;
        let size = serde_json::to_string(&memo).map_or(0, |t| t.len());
        bounds::check_memo_history(active.memo_logged, size)?;
        self.post(id, "memo", Some(memo));
        if let Some(active) = self.jobs.get_mut(&id) {
            active.memo_logged += size as u64;
        }
        Ok(())
    }

    /// A job reached INACTIVE: keep its summary, answer waiters, tell watchers.
    fn retire(&mut self, id: JobId) {
        self.close_output(id);
        // The job's credential ends with it, before anyone hears it ended.
        self.job_credentials.revoke(id);
        let Some(active) = self.jobs.remove(&id) else {
            return;
        };
        self.keys.forget(id);
        self.user_jobs.removed(active.job.userid());
        self.policy_job_ended(id, &active);
        self.sched.forget(id);
        self.timers.cancel(id);
        self.exec.undefer(id);
        let mut inactive = Inactive::from_job(
            &active.job,
            &active.spec,
            active.t_run,
            active.alloc_nnodes,
            &active.nodelist,
            clock::now,
        );
        inactive.usage = active.usage;
        self.answer_waiters(id, &mut inactive);
        if fluxgate_setup::otlp::enabled() {
            self.effect(Effect::JobSpan(Box::new(effect::JobSpan {
                id,
                job: active.job.clone(),
                inactive: inactive.clone(),
            })));
        }
        let (result, started) = (inactive.result, inactive.t_run.is_some());
        self.out.writes.push(inactive.summary_write(id));
        self.inactive.retired(id, inactive);
        self.antecedent_changed(id, Some((result, started)));
        if let Some(next) = self.singletons.removed(id) {
            self.release_singleton(next);
        }
        self.effect(Effect::Publish(Published::Inactive { id }));
        self.answer_quiet();
    }
}

#[cfg(test)]
mod tests;
