//! RFC 26 dependencies: `dependency-add` at submit, `dependency-remove` when
//! satisfied, a `dependency` exception when they never can be.
//!
//! Descriptions follow flux-core's dependency-after plugin
//! (`after-success=ƒID` for afterok, and so on), since scripts match on them.

use std::collections::HashMap;

use fluxgate_shared::job::{JobResult, JobState};
use fluxgate_shared::jobspec::{Dependency, DependencyScheme};
use fluxgate_shared::{JobId, Jobspec};
use serde_json::Value;

use super::inactive::Known;
use super::scheme::Scheme;
use super::timers::Timer;
use super::{Core, Inactive};
use crate::clock;
use crate::error::Error;
use crate::store::{Store, StoreError};

/// What a dependency waits for.
#[derive(Debug, Clone, PartialEq)]
pub enum Wait {
    /// An event of another job.
    Job { antecedent: JobId, scheme: Scheme },
    /// The wall clock.
    BeginTime(f64),
    /// No other active job of this user and name (`singleton`).
    Singleton(super::singleton::Key),
}

/// One dependency to add at submit.
#[derive(Debug, Clone, PartialEq)]
pub struct NewDep {
    description: String,
    wait: Wait,
    /// Decided only once the store has been read (see [`Antecedents`]).
    ask_store: bool,
}

/// What the store said, when the submission was read, of the jobs its
/// dependencies name: the core never reads the store on its task, so the
/// edge reads the antecedents a submission names before handing it over.
#[derive(Debug, Clone, Default)]
pub struct Antecedents(HashMap<JobId, Stored>);

/// One antecedent as the store had it.
#[derive(Debug, Clone)]
enum Stored {
    /// Not in the store.
    Absent,
    /// Stored without a summary: it was active.
    Active,
    /// Inactive, with its summary.
    Inactive(Inactive),
}

impl Antecedents {
    /// Read from `store` the jobs `jobspec`'s dependencies name (blocks: for
    /// the blocking pool). Ids that do not parse are left to the core,
    /// which refuses them with the reason.
    pub fn read(store: &impl Store, jobspec: &Jobspec) -> Result<Antecedents, StoreError> {
        let mut found = HashMap::new();
        for dep in jobspec.dependencies() {
            if scheme_of(&dep.scheme).is_none() {
                continue;
            }
            let Ok(id) = JobId::parse(&dep.value) else {
                continue;
            };
            if found.contains_key(&id) {
                continue;
            }
            let stored = match store.summary(id.into())? {
                None => Stored::Absent,
                Some(None) => Stored::Active,
                Some(Some(text)) => {
                    Stored::Inactive(super::inactive::read_summary(store, id, &text)?)
                }
            };
            found.insert(id, stored);
        }
        Ok(Antecedents(found))
    }

    /// Does `jobspec` name another job, so that the store must be read first?
    pub fn needed(jobspec: &Jobspec) -> bool {
        jobspec
            .dependencies()
            .iter()
            .any(|d| scheme_of(&d.scheme).is_some())
    }
}

/// The job-related scheme of a dependency, if it is one.
fn scheme_of(scheme: &DependencyScheme) -> Option<Scheme> {
    Some(match scheme {
        DependencyScheme::AfterStart => Scheme::Start,
        DependencyScheme::AfterAny => Scheme::Any,
        DependencyScheme::AfterOk => Scheme::Ok,
        DependencyScheme::AfterNotOk => Scheme::NotOk,
        DependencyScheme::AfterExcept => Scheme::Except,
        _ => return None,
    })
}

/// Outstanding dependencies by antecedent.
#[derive(Debug, Default)]
pub struct Depends {
    on_job: HashMap<JobId, Vec<(JobId, Scheme, String)>>,
}

impl<S: Store> Core<S> {
    /// Check a jobspec's dependencies; the ones still outstanding come back.
    pub(super) fn resolve_dependencies(
        &self,
        jobspec: &Jobspec,
        stored: &Antecedents,
        userid: u32,
    ) -> Result<Vec<NewDep>, Error> {
        let mut out = Vec::new();
        for dep in jobspec.dependencies() {
            dep.check()
                .map_err(|e| Error::Invalid(format!("dependency: {e}")))?;
            if dep.scheme == DependencyScheme::Singleton {
                out.extend(self.resolve_singleton(jobspec, userid)?);
                continue;
            }
            if let Some(d) = self.resolve_one(dep, stored)? {
                out.push(d);
            }
        }
        Ok(out)
    }

    fn resolve_one(&self, dep: &Dependency, stored: &Antecedents) -> Result<Option<NewDep>, Error> {
        let scheme = match &dep.scheme {
            DependencyScheme::BeginTime => {
                let t = dep
                    .begin_time()
                    .map_err(|e| Error::Invalid(format!("dependency: {e}")))?;
                if t <= clock::now() {
                    return Ok(None);
                }
                return Ok(Some(NewDep {
                    description: format!("begin-time={t:.3}"),
                    wait: Wait::BeginTime(t),
                    ask_store: false,
                }));
            }
            DependencyScheme::Singleton => return Ok(None),
            DependencyScheme::Unknown(s) => {
                return Err(Error::Invalid(format!(
                    "dependency scheme \"{s}\" not supported"
                )));
            }
            other => match scheme_of(other) {
                Some(scheme) => scheme,
                None => return Ok(None),
            },
        };
        let antecedent = JobId::parse(&dep.value)
            .map_err(|e| Error::Invalid(format!("dependency {}:{}: {e}", dep.scheme, dep.value)))?;
        let description = format!("{}={antecedent}", scheme.description());
        if let Some(active) = self.jobs.get(&antecedent) {
            if scheme == Scheme::Start && active.job.has_started() {
                return Ok(None);
            }
            return Ok(Some(NewDep {
                description,
                wait: Wait::Job { antecedent, scheme },
                ask_store: false,
            }));
        }
        let done = match self.inactive.known(antecedent) {
            Known::Inactive(done) => Some(done),
            Known::Gone => None,
            Known::AskStore => match stored.0.get(&antecedent) {
                Some(Stored::Inactive(done)) => Some(done.clone()),
                Some(Stored::Absent) => None,
                // It ended since the store was read, or it was not read:
                // decided once the store is read again.
                Some(Stored::Active) | None => {
                    return Ok(Some(NewDep {
                        description,
                        wait: Wait::Job { antecedent, scheme },
                        ask_store: true,
                    }));
                }
            },
        };
        let Some(done) = done else {
            return Err(Error::Invalid(format!(
                "dependency {}:{}: job {antecedent} not found",
                dep.scheme, dep.value
            )));
        };
        if scheme.satisfied_by_end(done.result, done.t_run.is_some()) {
            Ok(None)
        } else {
            Err(Error::Invalid(format!(
                "dependency {}:{} can never be satisfied: job {antecedent} ended {}",
                dep.scheme,
                dep.value,
                done.result.name()
            )))
        }
    }

    /// `singleton`: refused without an explicit job name (flux's words);
    /// satisfied at once when no job of the user has the name.
    fn resolve_singleton(&self, jobspec: &Jobspec, userid: u32) -> Result<Option<NewDep>, Error> {
        let Some(name) = jobspec.system().job_name.as_deref() else {
            return Err(Error::Invalid("singleton jobs require a job name".into()));
        };
        let key: super::singleton::Key = (userid, name.into());
        if self.singletons.active(&key) == 0 {
            return Ok(None);
        }
        Ok(Some(NewDep {
            description: super::singleton::DESCRIPTION.into(),
            wait: Wait::Singleton(key),
            ask_store: false,
        }))
    }

    /// A `singleton` waiter's turn came.
    pub(super) fn release_singleton(&mut self, id: JobId) {
        self.remove_dependency(id, super::singleton::DESCRIPTION.into());
    }

    /// Post `dependency-add` and remember what it waits for.
    pub(super) fn add_dependency(&mut self, id: JobId, dep: NewDep) {
        self.post(
            id,
            "dependency-add",
            Self::context([("description", Value::from(dep.description.clone()))]),
        );
        match dep.wait {
            Wait::Job { antecedent, scheme } if dep.ask_store => {
                self.watch_antecedent(id, antecedent, scheme, dep.description);
            }
            Wait::Job { antecedent, scheme } => self
                .deps
                .on_job
                .entry(antecedent)
                .or_default()
                .push((id, scheme, dep.description)),
            Wait::Singleton(key) => self.singletons.wait(key, id),
            Wait::BeginTime(t) => self.timers.add(
                t,
                id,
                Timer::BeginTime {
                    description: dep.description,
                },
            ),
        }
    }

    /// Watch `antecedent` for a dependency of `id` found at restart; decided at
    /// once when the antecedent is already past the point that matters.
    pub(super) fn watch_antecedent(
        &mut self,
        id: JobId,
        antecedent: JobId,
        scheme: Scheme,
        description: String,
    ) {
        if let Some(a) = self.jobs.get(&antecedent) {
            if scheme == Scheme::Start && a.job.has_started() {
                self.remove_dependency(id, description);
            } else {
                self.deps
                    .on_job
                    .entry(antecedent)
                    .or_default()
                    .push((id, scheme, description));
            }
            return;
        }
        match self.inactive.known(antecedent) {
            Known::Inactive(done) => {
                self.antecedent_ended(id, antecedent, description, scheme, Some(done))
            }
            Known::Gone => self.antecedent_ended(id, antecedent, description, scheme, None),
            Known::AskStore => self.read_antecedent(id, antecedent, scheme, description),
        }
    }

    /// The store said how `antecedent` ended (if it is stored): decide the
    /// dependency of `id` on it, unless memory learnt better meanwhile.
    pub(super) fn antecedent_read(
        &mut self,
        id: JobId,
        antecedent: JobId,
        scheme: Scheme,
        description: String,
        done: Result<Option<Inactive>, StoreError>,
    ) {
        let done = match self.inactive.known(antecedent) {
            Known::Inactive(j) => Some(j),
            Known::Gone => None,
            Known::AskStore => done.unwrap_or_else(|e| {
                tracing::error!(job = %antecedent, error = %e, "cannot read a dependency's antecedent");
                None
            }),
        };
        self.antecedent_ended(id, antecedent, description, scheme, done);
    }

    /// Decide a dependency of `id` on `antecedent`, which is not active:
    /// ended as `done`, or unknown.
    fn antecedent_ended(
        &mut self,
        id: JobId,
        antecedent: JobId,
        description: String,
        scheme: Scheme,
        done: Option<Inactive>,
    ) {
        let Some(done) = done else {
            let note = format!("dependency {description}: job {antecedent} not found");
            let _ = self.raise(id, "dependency", 0, &note, None);
            return;
        };
        let (result, started) = (done.result, done.t_run.is_some());
        if scheme.satisfied_by_end(result, started) {
            self.remove_dependency(id, description);
        } else {
            let note = format!(
                "dependency {description} can never be satisfied: job {antecedent} ended {}",
                result.name()
            );
            let _ = self.raise(id, "dependency", 0, &note, None);
        }
    }

    /// A begin-time came.
    pub(super) fn begin_time_reached(&mut self, id: JobId, description: String) {
        self.remove_dependency(id, description);
    }

    fn remove_dependency(&mut self, id: JobId, description: String) {
        let waiting = self
            .jobs
            .get(&id)
            .is_some_and(|a| a.job.state() == JobState::Depend);
        if waiting {
            self.post(
                id,
                "dependency-remove",
                Self::context([("description", Value::from(description))]),
            );
        }
    }

    /// An antecedent started (`ended` is `None`), or became inactive with a
    /// result after it had started or not.
    pub(super) fn antecedent_changed(
        &mut self,
        antecedent: JobId,
        ended: Option<(JobResult, bool)>,
    ) {
        let Some(list) = self.deps.on_job.remove(&antecedent) else {
            return;
        };
        let (result, started) = match ended {
            None => (None, true),
            Some((result, started)) => (Some(result), started),
        };
        let mut keep = Vec::new();
        for (id, scheme, description) in list {
            match result {
                None if scheme == Scheme::Start => self.remove_dependency(id, description),
                None => keep.push((id, scheme, description)),
                Some(result) => {
                    if scheme.satisfied_by_end(result, started) {
                        self.remove_dependency(id, description);
                    } else if self.jobs.contains_key(&id) {
                        let note = format!(
                            "dependency {description} can never be satisfied: job {antecedent} ended {}",
                            result.name()
                        );
                        let _ = self.raise(id, "dependency", 0, &note, None);
                    }
                }
            }
        }
        if !keep.is_empty() {
            self.deps.on_job.insert(antecedent, keep);
        }
    }
}
