//! The job record and its fold over RFC 21 events.
//!
//! `Job::apply` is flux-core's `event_job_update()` (job-manager `event.c`)
//! plus the bookkeeping `job-list` keeps for `flux jobs` (result, wait
//! status, exception, memo). It is the only place job state moves, live and
//! on replay.
//!
//! Where flux-core silently ignores an event out of place, this fold rejects
//! it with a reason, so that a bug in the pipeline is caught before the event
//! is stored. The exception is the race flux-core itself produces: an action
//! posted just before a fatal exception is processed lands in CLEANUP
//! (`depend`, `priority`, `alloc`, `start`, `dependency-*`, `prolog-*`,
//! `urgency`); those are accepted there and change nothing but bookkeeping.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::context::Ctx;
use super::guards::ActionGuards;
use super::memo::Memo;
use super::state::{JobResult, JobState, WaitStatus};
use crate::eventlog::Event;

/// Why an event cannot be applied to a job in its current state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// The event is not legal in the job's state (or history).
    #[error("{event} event is not allowed in state {state}: {why}")]
    NotAllowed {
        /// The event name.
        event: String,
        /// The state the job was in.
        state: JobState,
        /// What makes it illegal.
        why: String,
    },
    /// The event's context lacks a key or holds a bad value.
    #[error("{event} event: context {key:?} {problem}")]
    BadContext {
        /// The event name.
        event: String,
        /// The offending key (or `context` for the object itself).
        key: String,
        /// What is wrong with it.
        problem: String,
    },
}

/// Why an eventlog does not replay to a job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// The eventlog holds no event at all.
    #[error("empty job eventlog: the first event must be submit")]
    Empty,
    /// Event number `line` (1-based, the eventlog line) was rejected.
    #[error("eventlog line {line}: {source}")]
    Event {
        /// 1-based position of the rejected event.
        line: usize,
        /// Why it was rejected.
        #[source]
        source: TransitionError,
    },
}

/// Job flags: the submit mask (flux-core `FLUX_JOB_*`) plus those `set-flags`
/// may add.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct JobFlags {
    /// FLUX_JOB_DEBUG (2): emit debug events.
    pub debug: bool,
    /// FLUX_JOB_WAITABLE (4): `flux job wait` will reap it.
    pub waitable: bool,
    /// FLUX_JOB_NOVALIDATE (8): jobspec validation was skipped.
    pub novalidate: bool,
    /// `set-flags` "alloc-bypass": resources come from elsewhere, no free.
    pub alloc_bypass: bool,
    /// `set-flags` "immutable": the job may no longer be updated.
    pub immutable: bool,
}

impl JobFlags {
    /// Decode the submit `flags` integer; unknown bits are kept out.
    pub fn from_submit_mask(mask: i64) -> JobFlags {
        JobFlags {
            debug: mask & 2 != 0,
            waitable: mask & 4 != 0,
            novalidate: mask & 8 != 0,
            ..JobFlags::default()
        }
    }

    /// The submit mask these flags encode.
    pub fn submit_mask(&self) -> i64 {
        i64::from(self.debug) * 2 + i64::from(self.waitable) * 4 + i64::from(self.novalidate) * 8
    }
}

/// One `exception` event.
#[derive(Debug, Clone, PartialEq)]
pub struct JobException {
    /// When it was raised.
    pub timestamp: f64,
    /// Its `type` (cancel, timeout, exec, alloc, ...).
    pub kind: String,
    /// 0 (fatal) to 7.
    pub severity: u8,
    /// Human-readable note, empty when none was given.
    pub note: String,
    /// Who raised it, when not the instance owner.
    pub userid: Option<u32>,
}

/// A job as its eventlog describes it: pure data, moved only by [`Job::apply`].
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    state: JobState,
    submitted: bool,
    invalidated: bool,
    userid: u32,
    urgency: u8,
    priority: Option<u32>,
    flags: JobFlags,
    version: Option<i64>,
    entered: Entered,
    dependencies: BTreeSet<String>,
    dependencies_used: BTreeSet<String>,
    allocated: bool,
    has_resources: bool,
    // The maps below are boxed: most jobs never have them, and a queue of a
    // million pending jobs pays for every byte of the struct.
    annotations: Option<Box<Map<String, Value>>>,
    started: bool,
    release_final: bool,
    finished: Option<WaitStatus>,
    success: bool,
    exceptions: Vec<JobException>,
    worst_exception: Option<usize>,
    first_fatal: Option<usize>,
    perilog_active: u8,
    expiration: Option<f64>,
    memo: Option<Box<Memo>>,
    jobspec_updates: Option<Box<Map<String, Value>>>,
    /// Guard flags for the action step; see [`Job::pending_actions`].
    pub guards: ActionGuards,
}

impl Default for Job {
    fn default() -> Self {
        Job::new()
    }
}

impl Job {
    /// A job before its `submit` event.
    pub fn new() -> Job {
        Job {
            state: JobState::New,
            submitted: false,
            invalidated: false,
            userid: 0,
            urgency: 16,
            priority: None,
            flags: JobFlags::default(),
            version: None,
            entered: Entered([f64::NAN; 7]),
            dependencies: BTreeSet::new(),
            dependencies_used: BTreeSet::new(),
            allocated: false,
            has_resources: false,
            annotations: None,
            started: false,
            release_final: false,
            finished: None,
            success: false,
            exceptions: Vec::new(),
            worst_exception: None,
            first_fatal: None,
            perilog_active: 0,
            expiration: None,
            memo: None,
            jobspec_updates: None,
            guards: ActionGuards::default(),
        }
    }

    /// Current state.
    pub fn state(&self) -> JobState {
        self.state
    }
    /// Submitting user (from `submit`).
    pub fn userid(&self) -> u32 {
        self.userid
    }
    /// Current urgency, 0 (held) to 31 (expedite).
    pub fn urgency(&self) -> u8 {
        self.urgency
    }
    /// Last assigned priority; `None` before the first `priority` event.
    pub fn priority(&self) -> Option<u32> {
        self.priority
    }
    /// Flags from `submit` and `set-flags`.
    pub fn flags(&self) -> JobFlags {
        self.flags
    }
    /// Eventlog format version from `submit`, when given.
    pub fn version(&self) -> Option<i64> {
        self.version
    }
    /// Submit time.
    pub fn t_submit(&self) -> Option<f64> {
        self.entered(JobState::New)
    }
    /// When the job first entered `state`.
    pub fn entered(&self, state: JobState) -> Option<f64> {
        let t = self.entered.0[state.index()];
        (!t.is_nan()).then_some(t)
    }
    /// True once `invalidate` was applied: the job is to be removed.
    pub fn is_invalidated(&self) -> bool {
        self.invalidated
    }
    /// Dependencies added and not yet removed.
    pub fn dependencies(&self) -> &BTreeSet<String> {
        &self.dependencies
    }
    /// Resources are held (after `alloc`, until `free`).
    pub fn has_resources(&self) -> bool {
        self.has_resources
    }
    /// An `alloc` was ever applied.
    pub fn was_allocated(&self) -> bool {
        self.allocated
    }
    /// Scheduler annotations from `alloc`.
    pub fn annotations(&self) -> Option<&Map<String, Value>> {
        self.annotations.as_deref()
    }
    /// The `start` event was applied.
    pub fn has_started(&self) -> bool {
        self.started
    }
    /// A `release` with `final: true` was applied.
    pub fn is_released(&self) -> bool {
        self.release_final
    }
    /// Wait status from `finish`.
    pub fn wait_status(&self) -> Option<WaitStatus> {
        self.finished
    }
    /// Every exception, in order.
    pub fn exceptions(&self) -> &[JobException] {
        &self.exceptions
    }
    /// The first fatal (severity 0) exception: the one that ended the job.
    pub fn fatal_exception(&self) -> Option<&JobException> {
        self.first_fatal.map(|i| &self.exceptions[i])
    }
    /// The most severe exception (first of equal severity), as `flux jobs`
    /// reports it.
    pub fn worst_exception(&self) -> Option<&JobException> {
        self.worst_exception.map(|i| &self.exceptions[i])
    }
    /// Prolog/epilog actions started and not yet finished.
    pub fn perilog_active(&self) -> u8 {
        self.perilog_active
    }
    /// R expiration from the last `resource-update`.
    pub fn expiration(&self) -> Option<f64> {
        self.expiration
    }
    /// The user memo object (memo events merged, nulls deleted).
    pub fn memo(&self) -> &Map<String, Value> {
        match self.memo.as_deref() {
            Some(m) => m.get(),
            None => empty_map(),
        }
    }
    /// Jobspec updates, dotted path to latest value.
    pub fn jobspec_updates(&self) -> &Map<String, Value> {
        match self.jobspec_updates.as_deref() {
            Some(m) => m,
            None => empty_map(),
        }
    }

    /// The result, once INACTIVE, as `flux jobs` (job-list) computes it:
    /// COMPLETED when `finish` had status 0 before any fatal exception,
    /// otherwise from the most severe exception's type (cancel, timeout),
    /// otherwise FAILED.
    pub fn result(&self) -> Option<JobResult> {
        if self.state != JobState::Inactive {
            return None;
        }
        if self.success {
            return Some(JobResult::Completed);
        }
        Some(match self.worst_exception().map(|e| e.kind.as_str()) {
            Some("cancel") => JobResult::Canceled,
            Some("timeout") => JobResult::Timeout,
            _ => JobResult::Failed,
        })
    }

    /// The `flux jobs` ST column: the result code once inactive, else the
    /// state letter.
    pub fn status_abbrev(&self) -> &'static str {
        match self.result() {
            Some(r) => r.abbrev(),
            None => match self.state {
                JobState::New => "N",
                JobState::Depend => "D",
                JobState::Priority => "P",
                JobState::Sched => "S",
                JobState::Run => "R",
                JobState::Cleanup => "C",
                JobState::Inactive => "I",
            },
        }
    }

    /// Apply the jobspec updates to a jobspec object in place, creating
    /// intermediate objects as flux-core's `jpath_set()` does.
    pub fn apply_jobspec_updates(&self, jobspec: &mut Value) {
        apply_jobspec_updates(self.jobspec_updates(), jobspec);
    }

    fn enter(&mut self, state: JobState, timestamp: f64) {
        self.state = state;
        let slot = &mut self.entered.0[state.index()];
        if slot.is_nan() {
            *slot = timestamp;
        }
    }

    fn deny(&self, event: &Event, why: impl Into<String>) -> TransitionError {
        TransitionError::NotAllowed {
            event: event.name.to_string(),
            state: self.state,
            why: why.into(),
        }
    }

    fn require(&self, event: &Event, allowed: &[JobState]) -> Result<(), TransitionError> {
        if allowed.contains(&self.state) {
            return Ok(());
        }
        let names: Vec<&str> = allowed.iter().map(|s| s.name()).collect();
        Err(self.deny(event, format!("allowed only in {}", names.join(", "))))
    }

    /// Apply one event. On error the job is unchanged.
    ///
    /// Unknown event names (and `debug.*`) are accepted and change nothing,
    /// so that logs written by newer versions replay.
    pub fn apply(&mut self, event: &Event) -> Result<(), TransitionError> {
        use JobState::*;
        let ctx = Ctx::of(event);
        let ts = event.timestamp;
        let name = event.name.as_str();

        if !self.submitted && name != "submit" {
            return Err(self.deny(event, "the first event must be submit"));
        }
        if self.invalidated {
            return Err(self.deny(event, "the job was invalidated and is being removed"));
        }
        if self.state == Inactive {
            return Err(self.deny(event, "the job is inactive; its eventlog is closed"));
        }

        match name {
            "submit" => self.on_submit(event, &ctx, ts),
            "validate" => self.on_validate(event, ts),
            "invalidate" => self.on_invalidate(event),
            "dependency-add" | "dependency-remove" => self.on_dependency(event, &ctx, name),
            "depend" => self.on_depend(event, ts),
            "priority" => self.on_priority(event, &ctx, ts),
            "urgency" => self.on_urgency(event, &ctx, ts),
            "flux-restart" => self.on_restart(event, ts),
            "jobspec-update" => self.on_jobspec_update(event, &ctx, ts),
            "resource-update" => self.on_resource_update(event, &ctx),
            "alloc" => self.on_alloc(event, &ctx, ts),
            "prolog-start" | "prolog-finish" => self.on_prolog(event, &ctx, name),
            "epilog-start" | "epilog-finish" => self.on_epilog(event, &ctx, name),
            "start" => self.on_start(event),
            "release" => self.on_release(event, &ctx),
            "finish" => self.on_finish(event, &ctx, ts),
            "free" => self.on_free(event),
            "clean" => self.on_clean(event, ts),
            "exception" => self.on_exception(event, &ctx, ts),
            "memo" => self.on_memo(&ctx),
            "set-flags" => self.on_set_flags(event, &ctx),
            _ => Ok(()),
        }
    }

    /// Submission: the first event.
    fn on_submit(&mut self, event: &Event, ctx: &Ctx, ts: f64) -> Result<(), TransitionError> {
        use JobState::*;
        if self.submitted {
            return Err(self.deny(event, "the job was already submitted"));
        }
        let urgency = ctx.int("urgency", 0, 31)?;
        let userid = ctx.int("userid", 0, i64::from(u32::MAX))?;
        let flags = ctx.int("flags", 0, i64::from(i32::MAX))?;
        let version = ctx.opt_int("version", 0, i64::MAX)?;
        self.urgency = urgency as u8;
        self.userid = userid as u32;
        self.flags = JobFlags::from_submit_mask(flags);
        self.version = version;
        self.submitted = true;
        self.enter(New, ts);
        Ok(())
    }

    /// Submission: the job is valid; it waits for its dependencies.
    fn on_validate(&mut self, event: &Event, ts: f64) -> Result<(), TransitionError> {
        use JobState::*;
        self.require(event, &[New])?;
        self.enter(Depend, ts);
        Ok(())
    }

    /// Submission: the job is refused and will be removed.
    fn on_invalidate(&mut self, event: &Event) -> Result<(), TransitionError> {
        use JobState::*;
        self.require(event, &[New])?;
        self.invalidated = true;
        Ok(())
    }

    /// Dependencies: one more outstanding, or one fewer.
    fn on_dependency(
        &mut self,
        event: &Event,
        ctx: &Ctx,
        name: &str,
    ) -> Result<(), TransitionError> {
        use JobState::*;
        let desc = ctx.string("description")?;
        if self.state == Cleanup {
            return Ok(());
        }
        self.require(event, &[New, Depend])?;
        if name == "dependency-add" {
            if self.dependencies_used.contains(desc) {
                return Err(self.deny(event, format!("dependency {desc:?} was already added once")));
            }
            self.dependencies_used.insert(desc.to_string());
            self.dependencies.insert(desc.to_string());
        } else if !self.dependencies.remove(desc) {
            return Err(self.deny(event, format!("dependency {desc:?} is not outstanding")));
        }
        Ok(())
    }

    /// Dependencies: none outstanding; on to PRIORITY.
    fn on_depend(&mut self, event: &Event, ts: f64) -> Result<(), TransitionError> {
        use JobState::*;
        if self.state == Cleanup {
            return Ok(());
        }
        self.require(event, &[Depend])?;
        if !self.dependencies.is_empty() {
            return Err(self.deny(
                event,
                format!(
                    "{} dependencies outstanding: {}",
                    self.dependencies.len(),
                    self.dependencies
                        .iter()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        self.guards.depend_posted = false;
        self.enter(Priority, ts);
        Ok(())
    }

    /// Priority: a priority is set; on to SCHED.
    fn on_priority(&mut self, event: &Event, ctx: &Ctx, ts: f64) -> Result<(), TransitionError> {
        use JobState::*;
        let priority = ctx.int("priority", 0, i64::from(u32::MAX))? as u32;
        if self.state == Cleanup {
            return Ok(());
        }
        self.require(event, &[Priority, Sched])?;
        self.priority = Some(priority);
        self.guards.priority_requested = false;
        if self.state == Priority {
            self.enter(Sched, ts);
        }
        Ok(())
    }

    /// Priority: the urgency changed; a new priority is needed.
    fn on_urgency(&mut self, event: &Event, ctx: &Ctx, ts: f64) -> Result<(), TransitionError> {
        use JobState::*;
        let urgency = ctx.int("urgency", 0, 31)? as u8;
        ctx.opt_int("userid", 0, i64::from(u32::MAX))?;
        self.require(event, &[New, Depend, Priority, Sched, Cleanup])?;
        self.urgency = urgency;
        self.back_to_priority(ts);
        Ok(())
    }

    /// Priority: the instance restarted; a new priority is needed.
    fn on_restart(&mut self, _event: &Event, ts: f64) -> Result<(), TransitionError> {
        self.back_to_priority(ts);
        Ok(())
    }

    /// Priority: the jobspec changed; a new priority is needed.
    fn on_jobspec_update(
        &mut self,
        event: &Event,
        ctx: &Ctx,
        ts: f64,
    ) -> Result<(), TransitionError> {
        let updates = ctx.object()?;
        if updates.is_empty() {
            return Err(TransitionError::BadContext {
                event: event.name.to_string(),
                key: "context".into(),
                problem: "must hold at least one update".into(),
            });
        }
        for (k, v) in updates {
            self.jobspec_updates
                .get_or_insert_default()
                .insert(k.clone(), v.clone());
        }
        self.back_to_priority(ts);
        Ok(())
    }

    /// Resources: the allocation's expiration moved.
    fn on_resource_update(&mut self, event: &Event, ctx: &Ctx) -> Result<(), TransitionError> {
        use JobState::*;
        let expiration = ctx.number("expiration")?;
        self.require(event, &[Run, Cleanup])?;
        if !self.allocated {
            return Err(self.deny(event, "the job has no resources to update"));
        }
        self.expiration = Some(expiration);
        Ok(())
    }

    /// Resources: allocated; on to RUN.
    fn on_alloc(&mut self, event: &Event, ctx: &Ctx, ts: f64) -> Result<(), TransitionError> {
        use JobState::*;
        self.require(event, &[Sched, Cleanup])?;
        if self.has_resources {
            return Err(self.deny(event, "resources are already allocated"));
        }
        if let Some(Value::Object(a)) = ctx.get("annotations").map(|m| m.to_value()) {
            self.annotations = Some(Box::new(a));
        }
        self.allocated = true;
        self.has_resources = true;
        self.guards.alloc_requested = false;
        if self.state == Sched {
            self.enter(Run, ts);
        }
        Ok(())
    }

    /// Execution: a prolog action started or finished.
    fn on_prolog(&mut self, event: &Event, ctx: &Ctx, name: &str) -> Result<(), TransitionError> {
        use JobState::*;
        ctx.string("description")?;
        let finish = name == "prolog-finish";
        if finish {
            ctx.int("status", i64::from(i32::MIN), i64::from(i32::MAX))?;
        }
        self.require(event, &[Run, Cleanup])?;
        if self.started {
            return Err(self.deny(event, "the job shells were already started"));
        }
        self.perilog_step(event, finish)?;
        Ok(())
    }

    /// Execution: an epilog action started or finished.
    fn on_epilog(&mut self, event: &Event, ctx: &Ctx, name: &str) -> Result<(), TransitionError> {
        use JobState::*;
        ctx.string("description")?;
        let finish = name == "epilog-finish";
        if finish {
            ctx.int("status", i64::from(i32::MIN), i64::from(i32::MAX))?;
        }
        self.require(event, &[Cleanup])?;
        self.perilog_step(event, finish)?;
        Ok(())
    }

    /// Execution: the job shells started.
    fn on_start(&mut self, event: &Event) -> Result<(), TransitionError> {
        use JobState::*;
        self.require(event, &[Run, Cleanup])?;
        if !self.allocated {
            return Err(self.deny(event, "the job was never allocated resources"));
        }
        if self.started {
            return Err(self.deny(event, "the job shells were already started"));
        }
        self.started = true;
        Ok(())
    }

    /// Execution: resources released, the last time with `final`.
    fn on_release(&mut self, event: &Event, ctx: &Ctx) -> Result<(), TransitionError> {
        use JobState::*;
        ctx.string("ranks")?;
        let fin = ctx.boolean("final")?;
        self.require(event, &[Run, Cleanup])?;
        if !self.allocated {
            return Err(self.deny(event, "the job was never allocated resources"));
        }
        if self.release_final {
            return Err(self.deny(event, "resources were already released (final)"));
        }
        // flux-core before the event queue rejected a final release in
        // RUN: the exec system releases everything only after finish.
        if fin && self.state == Run {
            return Err(self.deny(event, "a final release must follow finish"));
        }
        if fin {
            self.release_final = true;
            self.guards.start_pending = false;
        }
        Ok(())
    }

    /// Execution: the job's tasks finished; on to CLEANUP.
    fn on_finish(&mut self, event: &Event, ctx: &Ctx, ts: f64) -> Result<(), TransitionError> {
        use JobState::*;
        let status = ctx.int("status", i64::from(i32::MIN), i64::from(i32::MAX))? as i32;
        self.require(event, &[Run, Cleanup])?;
        if !self.allocated {
            return Err(self.deny(event, "the job was never allocated resources"));
        }
        if self.finished.is_some() {
            return Err(self.deny(event, "the job already finished"));
        }
        self.finished = Some(WaitStatus(status));
        if status == 0 && self.first_fatal.is_none() {
            self.success = true;
        }
        if self.state == Run {
            self.enter(Cleanup, ts);
        }
        Ok(())
    }

    /// Resources: returned to the scheduler.
    fn on_free(&mut self, event: &Event) -> Result<(), TransitionError> {
        use JobState::*;
        self.require(event, &[Cleanup])?;
        if !self.has_resources {
            return Err(self.deny(event, "the job holds no resources"));
        }
        self.has_resources = false;
        self.guards.free_posted = false;
        Ok(())
    }

    /// End: cleanup is done; the job is INACTIVE.
    fn on_clean(&mut self, event: &Event, ts: f64) -> Result<(), TransitionError> {
        use JobState::*;
        self.require(event, &[Cleanup])?;
        if self.has_resources {
            return Err(self.deny(event, "resources were not freed yet"));
        }
        if self.perilog_active > 0 {
            return Err(self.deny(
                event,
                format!(
                    "{} prolog/epilog actions still running",
                    self.perilog_active
                ),
            ));
        }
        self.guards.clean_posted = false;
        self.enter(Inactive, ts);
        Ok(())
    }

    /// Exceptions: recorded; a fatal one sends the job to CLEANUP.
    fn on_exception(&mut self, event: &Event, ctx: &Ctx, ts: f64) -> Result<(), TransitionError> {
        use JobState::*;
        let kind = ctx.string("type")?;
        let severity = ctx.int("severity", 0, 7)? as u8;
        let note = ctx.opt_string("note")?.unwrap_or("");
        let userid = ctx.opt_int("userid", 0, i64::from(u32::MAX))?;
        if self.state == New && severity == 0 {
            return Err(self.deny(event, "a fatal exception cannot be raised before validate"));
        }
        self.exceptions.push(JobException {
            timestamp: ts,
            kind: kind.to_string(),
            severity,
            note: note.to_string(),
            userid: userid.map(|u| u as u32),
        });
        let idx = self.exceptions.len() - 1;
        let worse = self.worst_exception().is_none_or(|w| severity < w.severity);
        if worse {
            self.worst_exception = Some(idx);
        }
        if severity == 0 {
            if self.first_fatal.is_none() {
                self.first_fatal = Some(idx);
            }
            // flux-core: the scheduler could not reinstate the
            // allocation after a restart, so nothing is held.
            if kind == "scheduler-restart" {
                self.has_resources = false;
            }
            if self.state != Cleanup {
                self.enter(Cleanup, ts);
            }
        }
        Ok(())
    }

    /// Annotations: the user's memo is updated.
    fn on_memo(&mut self, ctx: &Ctx) -> Result<(), TransitionError> {
        // Read before the memo is made, so a refused event changes nothing.
        let update = ctx.context()?;
        self.memo.get_or_insert_default().update(update);
        Ok(())
    }

    /// Annotations: job flags are set.
    fn on_set_flags(&mut self, event: &Event, ctx: &Ctx) -> Result<(), TransitionError> {
        let names = ctx.string_array("flags")?;
        let mut flags = self.flags;
        for f in names {
            match f {
                "debug" => flags.debug = true,
                "alloc-bypass" => flags.alloc_bypass = true,
                "immutable" => flags.immutable = true,
                other => {
                    return Err(TransitionError::BadContext {
                        event: event.name.to_string(),
                        key: "flags".into(),
                        problem: format!(
                            "holds unknown flag {other:?} (known: debug, alloc-bypass, immutable)"
                        ),
                    });
                }
            }
        }
        self.flags = flags;
        Ok(())
    }

    /// flux-core moves a SCHED job back to PRIORITY when its urgency or
    /// jobspec changes, or after a restart, so that a new priority is set.
    fn back_to_priority(&mut self, ts: f64) {
        if self.state == JobState::Sched {
            self.guards.priority_requested = false;
            self.enter(JobState::Priority, ts);
        }
    }

    fn perilog_step(&mut self, event: &Event, finish: bool) -> Result<(), TransitionError> {
        if finish {
            self.perilog_active = self.perilog_active.saturating_sub(1);
        } else {
            self.perilog_active = self
                .perilog_active
                .checked_add(1)
                .ok_or_else(|| self.deny(event, "too many prolog/epilog actions running"))?;
        }
        Ok(())
    }
}

/// Replay a whole eventlog from the start.
pub fn replay<'a>(events: impl IntoIterator<Item = &'a Event>) -> Result<Job, ReplayError> {
    let mut job = Job::new();
    let mut seen = 0usize;
    for (i, ev) in events.into_iter().enumerate() {
        seen += 1;
        job.apply(ev).map_err(|source| ReplayError::Event {
            line: i + 1,
            source,
        })?;
    }
    if seen == 0 {
        return Err(ReplayError::Empty);
    }
    Ok(job)
}

/// First time in each state; NaN until entered (a timestamp is never NaN),
/// which halves the array against `Option<f64>`. Equal when bit for bit equal.
#[derive(Clone, Copy)]
struct Entered([f64; 7]);

impl PartialEq for Entered {
    fn eq(&self, other: &Self) -> bool {
        self.0
            .iter()
            .zip(&other.0)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    }
}

impl std::fmt::Debug for Entered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|t| (!t.is_nan()).then_some(*t)))
            .finish()
    }
}

/// The map of a job that has none (no memo, no jobspec updates).
fn empty_map() -> &'static Map<String, Value> {
    static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);
    &EMPTY
}

/// Apply `jobspec-update` keys (dotted paths) to a jobspec object in place,
/// creating intermediate objects as flux-core's `jpath_set()` does.
pub fn apply_jobspec_updates(updates: &Map<String, Value>, jobspec: &mut Value) {
    for (path, value) in updates {
        set_dotted(jobspec, path, value.clone());
    }
}

fn set_dotted(root: &mut Value, path: &str, value: Value) {
    let mut cur = root;
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let Value::Object(map) = cur else { return };
        if parts.peek().is_none() {
            map.insert(part.to_string(), value);
            return;
        }
        cur = map
            .entry(part.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
    }
}
