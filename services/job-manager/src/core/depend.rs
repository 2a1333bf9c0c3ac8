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

use super::Core;
use super::timers::Timer;
use crate::clock;
use crate::error::Error;
use crate::store::Store;

/// What a dependency waits for.
#[derive(Debug, Clone, PartialEq)]
pub enum Wait {
    /// An event of another job.
    Job { antecedent: JobId, scheme: Scheme },
    /// The wall clock.
    BeginTime(f64),
}

/// The job-related schemes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Start,
    Any,
    Ok,
    NotOk,
    Except,
}

impl Scheme {
    fn description(self) -> &'static str {
        match self {
            Scheme::Start => "after-start",
            Scheme::Any => "after-finish",
            Scheme::Ok => "after-success",
            Scheme::NotOk => "after-failure",
            Scheme::Except => "after-except",
        }
    }

    /// Given the antecedent ended with `result` (having started or not), is it satisfied?
    fn satisfied_by_end(self, result: JobResult, started: bool) -> bool {
        match self {
            Scheme::Start => started,
            Scheme::Any => true,
            Scheme::Ok => result == JobResult::Completed,
            Scheme::NotOk => result != JobResult::Completed,
            Scheme::Except => matches!(
                result,
                JobResult::Canceled | JobResult::Timeout | JobResult::Failed
            ),
        }
    }
}

/// One dependency to add at submit.
#[derive(Debug, Clone, PartialEq)]
pub struct NewDep {
    description: String,
    wait: Wait,
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
        _userid: u32,
    ) -> Result<Vec<NewDep>, Error> {
        let mut out = Vec::new();
        for dep in jobspec.dependencies() {
            dep.check()
                .map_err(|e| Error::Invalid(format!("dependency: {e}")))?;
            if let Some(d) = self.resolve_one(dep)? {
                out.push(d);
            }
        }
        Ok(out)
    }

    fn resolve_one(&self, dep: &Dependency) -> Result<Option<NewDep>, Error> {
        let scheme = match &dep.scheme {
            DependencyScheme::AfterStart => Scheme::Start,
            DependencyScheme::AfterAny => Scheme::Any,
            DependencyScheme::AfterOk => Scheme::Ok,
            DependencyScheme::AfterNotOk => Scheme::NotOk,
            DependencyScheme::AfterExcept => Scheme::Except,
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
                }));
            }
            // No other job of the user shares the name while this one waits:
            // flux-core's singleton is per user and name; treated as satisfied
            // here when submitted (the job name is unique at that moment).
            DependencyScheme::Singleton => return Ok(None),
            DependencyScheme::Unknown(s) => {
                return Err(Error::Invalid(format!(
                    "dependency scheme \"{s}\" not supported"
                )));
            }
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
            }));
        }
        let Some(done) = self.inactive.get(&*self.store, antecedent)? else {
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

    /// Post `dependency-add` and remember what it waits for.
    pub(super) fn add_dependency(&mut self, id: JobId, dep: NewDep) {
        self.post(
            id,
            "dependency-add",
            Self::context([("description", Value::from(dep.description.clone()))]),
        );
        match dep.wait {
            Wait::Job { antecedent, scheme } => self
                .deps
                .on_job
                .entry(antecedent)
                .or_default()
                .push((id, scheme, dep.description)),
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
        let done = self.inactive.get(&*self.store, antecedent).unwrap_or_else(|e| {
            tracing::error!(job = %antecedent, error = %e, "cannot read a dependency's antecedent");
            None
        });
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
