//! Recovery at start (flux-core `restart.c`): every stored job is replayed
//! through the same fold as live events; active jobs get `flux-restart` and
//! then the action step asks again for what they still need (a new alloc
//! request, a start with reattach for running ones). Resources held by active
//! jobs are marked allocated before anything new is scheduled. The id
//! generator resumes after the largest stored id, so ids stay unique and
//! increasing.

use std::sync::Arc;

use fluxgate_shared::JobId;
use fluxgate_shared::job::JobState;
use fluxgate_shared::jobid::FluidGenerator;

use super::inactive::InactiveJobs;
use super::output::OutputBudget;
use super::replay::{ReplayFailure, Replayed, replay_stored};
use super::scheme::Scheme;
use super::timers::Timer;
use super::{Active, Core, Inactive, Spec};
use crate::clock;
use crate::error::Error;
use crate::store::{Log, Store, StoredJob, Write};

/// Meta key of the FLUID epoch (ms since the Unix epoch), fixed at first start.
const EPOCH_KEY: &str = "fluid_epoch_ms";

/// What a reactivated job still needs once `flux-restart` is posted.
struct Resume {
    state: JobState,
    /// Outstanding dependencies, by description.
    deps: Vec<String>,
    /// Prolog or epilog started and not finished, with its description.
    interrupted: Vec<(&'static str, String)>,
    /// R's expiration, when it has one.
    expiration: Option<f64>,
}

/// What recovery found, for the log line.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Recovered {
    /// Jobs still active.
    pub active: usize,
    /// Inactive jobs.
    pub inactive: usize,
    /// Jobs whose stored eventlog could not be replayed (kept as failed).
    pub damaged: usize,
}

impl<S: Store> Core<S> {
    /// The instance's FLUID epoch: read from the store, or fixed now.
    pub(super) fn fluid_epoch(&mut self) -> Result<u64, Error> {
        if let Some(v) = self.store.meta(EPOCH_KEY)? {
            return v.parse().map_err(|_| {
                Error::Invalid(format!("store meta {EPOCH_KEY}={v:?} is not a number"))
            });
        }
        let epoch = clock::now_ms();
        self.out.writes.push(Write::Meta {
            key: EPOCH_KEY.into(),
            value: epoch.to_string(),
        });
        Ok(epoch)
    }

    /// Milliseconds since the FLUID epoch.
    pub(super) fn fluid_now(&self) -> u64 {
        clock::now_ms().saturating_sub(self.epoch_ms)
    }

    /// Replay every stored job that is not known inactive (inactive jobs
    /// stay in the store and are read on demand).
    pub(super) fn recover(&mut self) -> Result<Recovered, Error> {
        self.inactive = InactiveJobs::open(&*self.store)?;
        let stored = self.store.load_jobs()?;
        let mut found = Recovered {
            inactive: self.inactive.count() as usize,
            ..Default::default()
        };
        // Purged jobs' ids are never reused only if the newest is kept: a
        // purge takes the oldest first.
        let mut max_id = self.store.max_job_id()?.map(JobId::from);
        let lens = self.store.active_log_lens()?;
        for s in stored {
            let id = JobId::from(s.id);
            max_id = max_id.max(Some(id));
            let known = lens
                .as_ref()
                .map(|l| l.get(&s.id).copied().unwrap_or_default());
            match self.recover_one(id, s, known) {
                Ok(true) => found.active += 1,
                Ok(false) => found.inactive += 1,
                Err(e) => {
                    tracing::error!(job = %id, error = %e, "stored job cannot be replayed; kept as failed");
                    found.damaged += 1;
                }
            }
        }
        if let Some(last) = max_id {
            self.ids = FluidGenerator::resume(0, last)
                .map_err(|e| Error::Invalid(format!("job id generator: {e}")))?;
        }
        Ok(found)
    }

    /// Rebuild one job; true if it is still active.
    fn recover_one(
        &mut self,
        id: JobId,
        s: StoredJob,
        lens: Option<[u64; 2]>,
    ) -> Result<bool, ReplayFailure> {
        let Some(s) = self.unless_summarized(id, s) else {
            return Ok(false);
        };
        let replayed = replay_stored(&s).inspect_err(|e| {
            self.inactive
                .damaged(id, Inactive::damaged(s.userid, &e.to_string()));
        })?;
        if replayed.job.state() == JobState::Inactive {
            // A store of format 1 gets each summary now, so the next start
            // does not read the job at all (later formats write it with the
            // job's end).
            let inactive = replayed.to_inactive();
            self.out.writes.push(inactive.summary_write(id));
            self.inactive.retired(id, inactive);
            return Ok(false);
        }
        let resume = self.reactivate(id, replayed, lens);
        self.resume(id, resume);
        Ok(true)
    }

    /// The stored job, unless its summary says it is inactive (then it is
    /// kept as such).
    fn unless_summarized(&mut self, id: JobId, s: StoredJob) -> Option<StoredJob> {
        match s.summary.as_deref().map(Inactive::from_summary) {
            // A summary without a readable time: trust it, and write it again
            // so that the next start finds the job inactive.
            Some(Ok(inactive)) => {
                self.out.writes.push(inactive.summary_write(id));
                self.inactive.retired(id, inactive);
                None
            }
            Some(Err(e)) => {
                tracing::warn!(job = %id, error = %e, "rebuilding a job from its eventlog");
                Some(s)
            }
            None => Some(s),
        }
    }

    /// Make a replayed active job active again; what it still needs after
    /// the `flux-restart` is answered.
    fn reactivate(&mut self, id: JobId, replayed: Replayed, lens: Option<[u64; 2]>) -> Resume {
        let (t_run, nodelist) = (replayed.t_run(), replayed.nodelist());
        let perilogs = replayed.perilogs();
        let Replayed {
            job,
            jobspec,
            r,
            events,
        } = replayed;
        let mut seq = [events.len() as u64, 0, 0];
        match lens {
            Some([exec, output]) => seq[1..].copy_from_slice(&[exec, output]),
            None => {
                for (slot, l) in [(1, Log::Exec), (2, Log::Output)] {
                    seq[slot] = self.store.log_len(id.into(), l).unwrap_or(0);
                }
            }
        }
        let alloc_nnodes = r.as_ref().and_then(|r| u32::try_from(r.nnodes()).ok());
        let holds = job.has_resources();
        let expiration = r.as_ref().and_then(|r| r.expiration()).filter(|t| *t > 0.0);
        let r = r.filter(|_| holds).map(Arc::new);
        if r.is_some() {
            self.held.push(id);
        }
        let resume = Resume {
            state: job.state(),
            deps: job.dependencies().iter().cloned().collect(),
            interrupted: perilogs.interrupted,
            expiration,
        };
        // A prolog or epilog is not run twice for a job, even when a restart
        // interrupted it; an interrupted one is finished in `resume` as failed.
        let (prolog_done, epilog_done) = (
            perilogs.prolog_started || job.has_started(),
            perilogs.epilog_started,
        );
        let mut spec = Spec::of(&jobspec);
        // A duration changed by `update` is in the eventlog only.
        if let Some(d) = job
            .jobspec_updates()
            .get(super::update::DURATION_KEY)
            .and_then(serde_json::Value::as_f64)
        {
            spec.duration = d;
        }
        let mut output = OutputBudget::for_job(self.config.output.limit, &jobspec);
        if job.has_started()
            && let Err(e) = self.recount_output(id, &mut output, &events)
        {
            tracing::warn!(job = %id, error = %e, "output count not rebuilt; counting from here");
        }
        // What it used, when it finished before the restart.
        let usage = match job.wait_status() {
            Some(_) => self.stored_usage(id).map(|u| u.total),
            None => None,
        };
        self.user_jobs.added(job.userid());
        // Its tasks may be running with the credential minted before the
        // restart: it holds again from here, until the job ends.
        self.job_credentials.activate(id);
        // Waiters are lined up again in `resume`, once every job counts.
        let name = jobspec.system().job_name.as_deref();
        let _ = self.singletons.added(id, job.userid(), name);
        self.jobs.insert(
            id,
            Box::new(Active {
                job,
                spec,
                r,
                seq,
                t_run,
                nodelist,
                prolog_done,
                epilog_done,
                alloc_nnodes,
                output,
                t_estimate: None,
                memo_logged: 0,
                usage,
            }),
        );
        self.policy_job_added(id);
        resume
    }

    /// Post `flux-restart`, end what the restart interrupted, and set again
    /// the timers and dependency watches the job had.
    fn resume(&mut self, id: JobId, resume: Resume) {
        self.post(id, "flux-restart", None);
        for (which, description) in resume.interrupted {
            self.post(
                id,
                &format!("{which}-finish"),
                Self::context([
                    ("description", serde_json::Value::from(description)),
                    ("status", serde_json::Value::from(1 << 8)),
                ]),
            );
            let note = format!("{which} interrupted by a job manager restart");
            let severity = if which == "prolog" { 0 } else { 1 };
            let _ = self.raise(id, which, severity, &note, None);
        }
        if resume.state == JobState::Run
            && let Some(t) = resume.expiration
        {
            self.timers.add(t, id, Timer::Expiration);
        }
        if resume.state == JobState::Depend {
            for d in resume.deps {
                self.rewatch_dependency(id, d);
            }
        }
    }

    /// Watch again an outstanding dependency found in a replayed eventlog.
    fn rewatch_dependency(&mut self, id: JobId, description: String) {
        if description == super::singleton::DESCRIPTION {
            if let Some(key) = self.singletons.key_of(id).cloned() {
                self.singletons.wait(key.clone(), id);
                if let Some(next) = self.singletons.release(&key) {
                    self.release_singleton(next);
                }
            }
            return;
        }
        let Some((kind, value)) = description.split_once('=') else {
            return;
        };
        let scheme = match kind {
            "after-start" => Scheme::Start,
            "after-finish" => Scheme::Any,
            "after-success" => Scheme::Ok,
            "after-failure" => Scheme::NotOk,
            "after-except" => Scheme::Except,
            "begin-time" => {
                if let Ok(t) = value.parse::<f64>() {
                    self.timers.add(t, id, Timer::BeginTime { description });
                }
                return;
            }
            _ => return,
        };
        let Ok(antecedent) = value.parse::<JobId>() else {
            return;
        };
        self.watch_antecedent(id, antecedent, scheme, description);
    }

    /// Resources held by recovered jobs are taken out of the pool, once it
    /// is defined: those the jobs still hold then. A job that ended while
    /// the pool was undefined (its nodes never came back, say) freed its
    /// resources into no pool; they must not be marked now, or they would
    /// stay allocated with no job to free them.
    pub(super) fn mark_held(&mut self) {
        if self.sched.pool().is_none() {
            return;
        }
        for id in std::mem::take(&mut self.held) {
            if let Some(r) = self.jobs.get(&id).and_then(|a| a.r.clone()) {
                self.sched.mark_allocated(&r);
            }
        }
        // What a reservation reckons with: each holder's resources and end.
        let holding: Vec<_> = self
            .jobs
            .iter()
            .filter_map(|(id, a)| a.r.as_ref().map(|r| (*id, Arc::clone(r))))
            .collect();
        for (id, r) in holding {
            let end = r.expiration().filter(|t| *t > 0.0);
            self.sched.hold(id, r, end);
        }
    }
}
