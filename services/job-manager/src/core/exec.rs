//! The job manager's side of RFC 32: start requests out, responses in.
//!
//! `start_exec` runs in the action step and only queues an
//! [`Effect::ExecStart`]; the committer hands it to the exec link
//! ([`crate::exec_link::ExecLink`], gRPC in `crate::exec_client`) once the
//! `alloc` (or `flux-restart`) before it is durable. The link turns the
//! response stream into [`ExecMsg`]s on the core's inbox (its [`ExecSink`]):
//!   start -> `start`; release -> `release`; exception -> `exception`;
//!   finish -> `finish`; exec/output lines -> appended to `exec.eventlog` /
//!   `output`.
//!
//! A session that breaks before the job's final release leaves the job
//! *detached*: its tasks may still run (a partition, not a crash), so its
//! resources are kept. Once the job's first node answers again the job is
//! reattached (the node replays how it went, its real `finish` included);
//! once every silent node of the job has fenced itself (its exec service
//! kills its jobs when cut off, see `fluxgate_shared::resource::liveness`)
//! the job fails with `node-failure`, its nodes that still answer are told
//! to end their part, and it is released on its behalf once they say they
//! have (`ExecMsg::PartGone`). Never before: no node's cores are given to
//! another job while the old tasks may run there.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use fluxgate_shared::{Event, JobId, JobState};
use serde_json::Value;
use tokio::sync::mpsc;

use super::effect::Effect;
use super::timers::Timer;
use super::{Core, Msg};
use crate::error::Error;
use crate::exec_link::{ExecMsg, ExecSink, StartJob};
use crate::store::{Log, Store};

/// The core's inbox is where its exec link delivers.
impl ExecSink for mpsc::Sender<Msg> {
    async fn deliver(&self, msg: ExecMsg) -> bool {
        self.send(Msg::Exec(msg)).await.is_ok()
    }

    async fn closed(&self) {
        mpsc::Sender::closed(self).await
    }
}

/// The exec side of the core: where each rank's exec service listens, and
/// the jobs whose start waits for the services of their nodes to join.
#[derive(Debug, Default)]
pub struct ExecLinks {
    addr: HashMap<u32, String>,
    deferred: BTreeSet<JobId>,
    detached: BTreeSet<JobId>,
    /// Jobs ended on fenced nodes whose other nodes were told to end their
    /// part: released once each of these ranks no longer runs it.
    ending: BTreeMap<JobId, BTreeSet<u32>>,
}

impl ExecLinks {
    /// `rank` is served at `addr`.
    pub fn set(&mut self, rank: u32, addr: String) {
        self.addr.insert(rank, addr);
    }

    /// `rank` is gone.
    pub fn remove(&mut self, rank: u32) {
        self.addr.remove(&rank);
    }

    /// Where `rank` is served.
    pub fn get(&self, rank: u32) -> Option<&str> {
        self.addr.get(&rank).map(String::as_str)
    }

    /// `id`'s start waits for nodes; false if it already did.
    pub fn defer(&mut self, id: JobId) -> bool {
        self.deferred.insert(id)
    }

    /// `id`'s start waits no more; false if it did not.
    pub fn undefer(&mut self, id: JobId) -> bool {
        self.deferred.remove(&id)
    }

    /// Jobs whose start waits for nodes.
    pub fn deferred(&self) -> impl Iterator<Item = JobId> + '_ {
        self.deferred.iter().copied()
    }

    /// `id`'s exec session broke before its end: false if it already had,
    /// or if the job already waits for its other nodes to end it.
    pub fn detach(&mut self, id: JobId) -> bool {
        !self.ending.contains_key(&id) && self.detached.insert(id)
    }

    /// `id` is reattached, or ended; false if it was not detached.
    pub fn reattached(&mut self, id: JobId) -> bool {
        self.detached.remove(&id)
    }

    /// Jobs whose exec session broke before their end.
    pub fn detached(&self) -> Vec<JobId> {
        self.detached.iter().copied().collect()
    }

    /// `id` is released once none of `ranks` runs it any more.
    pub fn await_gone(&mut self, id: JobId, ranks: BTreeSet<u32>) {
        self.ending.insert(id, ranks);
    }

    /// `rank` no longer runs `id`: true when that was the last one awaited.
    pub fn part_gone(&mut self, id: JobId, rank: u32) -> bool {
        let Some(ranks) = self.ending.get_mut(&id) else {
            return false;
        };
        ranks.remove(&rank);
        if ranks.is_empty() {
            self.ending.remove(&id);
            return true;
        }
        false
    }

    /// The jobs awaited and the ranks each still waits for.
    pub fn ending(&self) -> Vec<(JobId, Vec<u32>)> {
        self.ending
            .iter()
            .map(|(id, r)| (*id, r.iter().copied().collect()))
            .collect()
    }
}

impl<S: Store> Core<S> {
    pub(super) fn start_exec(&mut self, id: JobId, reattach: bool) {
        let Some(active) = self.jobs.get(&id) else {
            return;
        };
        let Some(r) = active.r.clone() else {
            tracing::error!(job = %id, "start owed but the job holds no resources");
            return;
        };
        let mut peers = BTreeMap::new();
        let mut missing = Vec::new();
        for node in r.nodes() {
            match self.exec.get(node.rank()) {
                Some(addr) => {
                    peers.insert(node.rank(), addr.to_string());
                }
                None => missing.push(format!(
                    "rank {} ({})",
                    node.rank(),
                    node.hostname().unwrap_or("unknown host")
                )),
            }
        }
        if !missing.is_empty() {
            // After a restart the exec services rejoin on their own time: wait
            // for them (bounded), rather than declaring the job lost. The start
            // guard stays set, so the start is not owed again until a node joins.
            if self.exec.defer(id) {
                let wait = self.rejoin_wait();
                tracing::info!(job = %id, waiting = %missing.join(", "), "start waits for nodes to join");
                self.timers
                    .add(crate::clock::now() + wait, id, Timer::StartDeadline);
            }
            return;
        }
        if self.exec.undefer(id) {
            self.timers.cancel_kind(id, &Timer::StartDeadline);
        }
        let leader = r.nodes().first().map(|n| n.rank()).unwrap_or(0);
        let Some(leader_addr) = peers.get(&leader).cloned() else {
            return;
        };
        // The job's credential holds from its start request until it ends.
        self.job_credentials.activate(id);
        let job = StartJob {
            id,
            userid: active.job.userid(),
            jobspec_updates: active.job.jobspec_updates().clone(),
            r: r.to_json_string(),
            reattach,
            leader: leader_addr,
            peers,
            expiration: r.expiration(),
            credentials: self.job_credentials.clone(),
        };
        self.effect(Effect::ExecStart(Box::new(job)));
    }

    /// Forward a fatal exception to the running job's exec service.
    pub(super) fn exec_exception(&mut self, id: JobId, kind: &str, note: &str) {
        let Some(addr) = self.leader_addr(id) else {
            return;
        };
        self.effect(Effect::ExecKill {
            addr,
            id,
            kind: kind.to_string(),
            note: note.to_string(),
        });
    }

    /// Signal a running job's tasks, once what is queued before is durable.
    pub(super) fn exec_kill(&mut self, id: JobId, signum: i32) {
        if let Some(addr) = self.leader_addr(id) {
            self.effect(Effect::ExecSignal { addr, id, signum });
        }
    }

    /// Tell the job's leader exec service its new expiration, once the
    /// `resource-update` is durable.
    pub(super) fn exec_expiration(&mut self, id: JobId, expiration: f64) {
        if let Some(addr) = self.leader_addr(id) {
            self.effect(Effect::ExecExpiration {
                addr,
                id,
                expiration,
            });
        }
    }

    /// Where the leader exec service of job `id` listens, once the job's
    /// tasks have started and until they have ended: the one that lists
    /// their processes (`JobManager.Tasks`).
    pub(super) fn tasks_leader(&self, id: JobId) -> Result<String, Error> {
        let active = self.active(id)?;
        let state = active.job.state();
        if state.is_pending() || state == JobState::New {
            return Err(Error::WrongState(format!(
                "job {id} has not started yet (state {state}): its tasks have no processes \
                 until its start event"
            )));
        }
        if state != JobState::Run {
            return Err(Error::WrongState(format!(
                "job {id} is no longer running (state {state}): its tasks have ended"
            )));
        }
        if !active.job.has_started() {
            return Err(Error::WrongState(format!(
                "job {id} is still starting: its tasks have no processes until its start event"
            )));
        }
        self.leader_addr(id).ok_or_else(|| {
            Error::Unavailable(format!(
                "the exec service of job {id}'s first node is not connected; \
                 ask again once it has rejoined"
            ))
        })
    }

    fn leader_addr(&self, id: JobId) -> Option<String> {
        let r = self.jobs.get(&id)?.r.as_ref()?;
        let leader = r.nodes().first()?.rank();
        self.exec.get(leader).map(str::to_string)
    }

    /// Nodes joined: starts that waited for them may go now.
    pub(super) fn retry_deferred_starts(&mut self) {
        for id in self.exec.deferred() {
            if let Some(a) = self.jobs.get_mut(&id) {
                a.job.guards.start_pending = false;
            }
            self.out.touched.push(id);
        }
    }

    /// How long a start waits for its nodes to join before the job is
    /// lost: `exec.rejoin_timeout`, but never less than a node's fence and
    /// its margin, so that a node that did not come back has killed what
    /// it ran before the job's resources are released.
    pub(super) fn rejoin_wait(&self) -> f64 {
        let fence = self.config.resource.liveness().fence;
        let fenced = if fence > 0.0 {
            fence + fluxgate_shared::resource::liveness::FENCE_MARGIN
        } else {
            0.0
        };
        self.config.exec.rejoin_timeout.max(fenced)
    }

    /// A deferred start waited too long for its nodes.
    pub(super) fn start_deadline(&mut self, id: JobId) {
        if !self.exec.undefer(id) {
            return;
        }
        let note = format!(
            "nodes of the job did not join within {}s",
            self.rejoin_wait()
        );
        self.lost(id, &note);
    }

    /// The start stream is gone without a final release: end the job.
    fn lost(&mut self, id: JobId, note: &str) {
        let Some(active) = self.jobs.get(&id) else {
            return;
        };
        if active.job.fatal_exception().is_none() {
            let _ = self.raise_quiet(id, "exec", note);
        }
        self.release_gone(id);
    }

    /// Each tick: detached jobs whose first node answers again are
    /// reattached; those whose silent nodes have all fenced themselves are
    /// failed and released.
    pub(super) fn check_detached(&mut self) {
        let liveness = self.config.resource.liveness();
        let now = Instant::now();
        for id in self.exec.detached() {
            let Some(r) = self.jobs.get(&id).and_then(|a| a.r.clone()) else {
                self.exec.reattached(id);
                continue;
            };
            let lively = |rank: u32| {
                self.nodes.online().contains(rank)
                    && self.exec.get(rank).is_some()
                    && self.res.silence(rank, now) < liveness.torpid
            };
            let ranks: Vec<u32> = r.nodes().iter().map(|n| n.rank()).collect();
            if ranks.first().is_some_and(|&leader| lively(leader)) {
                self.exec.reattached(id);
                self.reattach(id);
                continue;
            }
            let silent: Vec<u32> = ranks.iter().copied().filter(|&r| !lively(r)).collect();
            if silent
                .iter()
                .all(|&r| liveness.may_reuse(self.res.silence(r, now)))
            {
                self.exec.reattached(id);
                self.fenced(id, &r, &silent);
            }
        }
        // A node told to end its part that fell silent meanwhile has fenced
        // itself once its silence is long enough: its part is gone too.
        for (id, ranks) in self.exec.ending() {
            for rank in ranks {
                if liveness.may_reuse(self.res.silence(rank, now)) && self.exec.part_gone(id, rank)
                {
                    self.release_gone(id);
                }
            }
        }
    }

    /// The jobs led from lost ranks are detached at once, as if their
    /// sessions had broken (which the transport notices only later): they
    /// are released as soon as their nodes have fenced themselves.
    pub(super) fn detach_jobs_led_on(&mut self, lost: &fluxgate_shared::IdSet) {
        let led: Vec<JobId> = self
            .jobs
            .iter()
            .filter(|(_, a)| {
                a.job.guards.start_pending
                    && a.r
                        .as_ref()
                        .and_then(|r| r.nodes().first().map(|n| n.rank()))
                        .is_some_and(|leader| lost.contains(leader))
            })
            .map(|(id, _)| *id)
            .collect();
        for id in led {
            self.exec.detach(id);
        }
    }

    /// Ask the job's first node again for detached job `id`: a running job
    /// is started again as a reattach (the action step owes it); one being
    /// torn down is reattached and told its exception again (the first may
    /// have been lost with the session).
    fn reattach(&mut self, id: JobId) {
        let Some(a) = self.jobs.get_mut(&id) else {
            return;
        };
        tracing::info!(job = %id, "reattaching to a job whose exec session broke");
        if a.job.state() == JobState::Run {
            a.job.guards.start_pending = false;
            self.out.touched.push(id);
            return;
        }
        let fatal = a
            .job
            .fatal_exception()
            .map(|e| (e.kind.clone(), e.note.clone()));
        self.start_exec(id, true);
        if let Some((kind, note)) = fatal {
            self.exec_exception(id, &kind, &note);
        }
    }

    /// Every silent node of detached job `id` has fenced itself: its tasks
    /// there are gone. The job fails (node-failure), the nodes that still
    /// answer are told to end their part, and its resources are released
    /// once they say it has ended there (`ExecMsg::PartGone`): until then
    /// their tasks may run, and their cores are not given to another job.
    fn fenced(&mut self, id: JobId, r: &fluxgate_shared::ResourceSet, silent: &[u32]) {
        let hosts: Vec<String> = r
            .nodes()
            .iter()
            .filter(|n| silent.contains(&n.rank()))
            .map(|n| {
                format!(
                    "rank {} ({})",
                    n.rank(),
                    n.hostname().unwrap_or("unknown host")
                )
            })
            .collect();
        let note = format!(
            "lost contact with {}: its exec service has killed the job's tasks there",
            hosts.join(", ")
        );
        tracing::warn!(job = %id, %note, "releasing a job of fenced nodes");
        if self
            .jobs
            .get(&id)
            .is_some_and(|a| a.job.fatal_exception().is_none())
        {
            let _ = self.post_exception(id, "node-failure", 0, &note, None);
        }
        let mut answering = BTreeSet::new();
        for node in r.nodes().iter().filter(|n| !silent.contains(&n.rank())) {
            if let Some(addr) = self.exec.get(node.rank()) {
                let addr = addr.to_string();
                self.effect(Effect::ExecKill {
                    addr: addr.clone(),
                    id,
                    kind: "node-failure".to_string(),
                    note: note.clone(),
                });
                self.effect(Effect::ExecConfirmGone {
                    addr,
                    id,
                    rank: node.rank(),
                });
                answering.insert(node.rank());
            }
        }
        if answering.is_empty() {
            self.release_gone(id);
            return;
        }
        // Still owed by exec until the answers come: the job frees nothing.
        self.exec.await_gone(id, answering);
        self.out.touched.push(id);
    }

    /// The job's processes are gone (its exec service is lost, or fenced):
    /// no start is owed any more, and a job in CLEANUP that started gets
    /// the final release its exec service can no longer send.
    fn release_gone(&mut self, id: JobId) {
        if let Some(a) = self.jobs.get_mut(&id) {
            a.job.guards.start_pending = false;
        }
        if self.jobs.get(&id).is_some_and(|a| {
            a.job.state() == JobState::Cleanup && !a.job.is_released() && a.job.has_started()
        }) {
            self.post(
                id,
                "release",
                Self::context([("ranks", Value::from("all")), ("final", Value::from(true))]),
            );
        }
        self.out.touched.push(id);
    }

    /// A severity-0 exception that did not come from (and need not go to) exec.
    fn raise_quiet(&mut self, id: JobId, kind: &str, note: &str) -> bool {
        self.post_exception(id, kind, 0, note, None)
    }

    pub(super) fn exec_msg(&mut self, msg: ExecMsg) {
        // As in the action step, every line about the job carries its id; not
        // for exec and output lines, which are many and log with the id already.
        let _span = if matches!(
            msg,
            ExecMsg::ExecLine { .. } | ExecMsg::OutputLine { .. } | ExecMsg::LiveOutputLine { .. }
        ) {
            tracing::Span::none()
        } else {
            tracing::error_span!("job", job = %msg.id())
        }
        .entered();
        match msg {
            ExecMsg::Started { id } => {
                // A node that adopted a running job after a restart says
                // `start` again, and the first may still arrive: one counts.
                if self.jobs.get(&id).is_some_and(|a| a.job.has_started()) {
                    tracing::debug!(job = %id, "start repeated by a node; already recorded");
                    return;
                }
                if self.post(id, "start", None) {
                    if let Some(a) = self.jobs.get_mut(&id) {
                        a.t_run = Some(crate::clock::now());
                    }
                    self.antecedent_changed(id, None);
                }
            }
            ExecMsg::Reattached { id } => {
                tracing::info!(job = %id, "re-attached to running job");
            }
            ExecMsg::Release { id, ranks, last } => {
                // Said again after a reattach: stored already.
                if last && self.jobs.get(&id).is_some_and(|a| a.job.is_released()) {
                    return;
                }
                self.post(
                    id,
                    "release",
                    Self::context([("ranks", Value::from(ranks)), ("final", Value::from(last))]),
                );
            }
            ExecMsg::Exception {
                id,
                kind,
                severity,
                note,
            } => {
                // Exec's text may carry what a job wrote: cut, never refused.
                let note = super::bounds::cut_note(note);
                if severity == 0 {
                    self.raise_quiet(id, &kind, &note);
                } else {
                    let _ = self.raise(id, &kind, severity, &note, None);
                }
            }
            ExecMsg::Finish { id, status, usage } => {
                // Said again after a reattach: stored already.
                if self
                    .jobs
                    .get(&id)
                    .is_some_and(|a| a.job.wait_status().is_some())
                {
                    return;
                }
                let posted = self.post(
                    id,
                    "finish",
                    Self::context([("status", Value::from(status))]),
                );
                if let (true, Some(usage)) = (posted, usage) {
                    self.record_usage(id, &usage);
                }
            }
            ExecMsg::ExecLine { id, line } => self.foreign_line(id, Log::Exec, line),
            ExecMsg::OutputLine { id, line } => self.foreign_line(id, Log::Output, line),
            ExecMsg::LiveOutputLine { id, line } => self.live_output(id, line),
            ExecMsg::PartGone { id, rank } => {
                if self.exec.part_gone(id, rank) {
                    tracing::info!(job = %id, "the job's other nodes have ended their part");
                    self.release_gone(id);
                }
            }
            ExecMsg::Lost { id, error } => {
                // Its tasks may run on: the resources stay held until the
                // node answers or has fenced itself (`check_detached`).
                if self
                    .jobs
                    .get(&id)
                    .is_some_and(|a| a.job.guards.start_pending)
                    && self.exec.detach(id)
                {
                    tracing::warn!(job = %id, %error, "lost contact with the job's exec service");
                }
            }
        }
    }

    /// A line made by an exec service: stored only if it is one valid RFC 18 event.
    fn foreign_line(&mut self, id: JobId, log: Log, line: String) {
        match Event::parse_json(&line) {
            Ok(event) if log == Log::Output => self.append_output(id, &event, line),
            Ok(_) => self.append_line(id, log, line),
            Err(e) => {
                tracing::warn!(job = %id, log = log.key(), error = %e, "dropping a malformed line from exec");
            }
        }
    }
}
