//! Queues and the policy applied to a job at submit (RFC 33; flux-core's
//! `flux-config-queues(5)` and `flux-config-policy(5)`).
//!
//! With no `[queues]` table there is one anonymous queue and a job naming a
//! queue is refused. With one, every queue is named and a job must name one
//! (or get `policy.jobspec.defaults.system.queue`). At submit, in flux's
//! order (the ingest frobnicator's `defaults` and `constraints`, then the
//! job manager's queue check and its `limit-job-size` and `limit-duration`
//! validators): the queue and duration defaults are filled in, the queue is
//! checked, its `requires` become a constraint of the job, and the job's
//! size and duration are checked against the queue's limits, which override
//! the instance's key by key. The messages are flux's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::fsd::{Fsd, format_fsd};
use crate::jobspec::{Jobspec, JobspecError};
use crate::rset::validate_property_name;

/// `policy.jobspec.defaults.system`: values filled into a job that has none.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct SystemDefaults {
    /// Time limit of a job that asks for none (or for 0).
    pub duration: Option<Fsd>,
    /// Queue of a job that names none (instance-wide table only).
    pub queue: Option<String>,
}

/// `policy.jobspec.defaults`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct JobspecDefaults {
    /// `system` attributes.
    pub system: SystemDefaults,
}

/// `policy.jobspec`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct JobspecPolicy {
    /// Defaults of jobspec attributes.
    pub defaults: JobspecDefaults,
}

/// Node, core and gpu counts of a job-size limit; -1 is unlimited, unset
/// leaves the instance's value (flux's rule: a queue may set -1 to lift an
/// instance-wide limit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct SizeCounts {
    /// Nodes.
    pub nnodes: Option<i64>,
    /// Cores.
    pub ncores: Option<i64>,
    /// GPUs.
    pub ngpus: Option<i64>,
}

/// `policy.limits.job-size`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct JobSize {
    /// Smallest job.
    pub min: SizeCounts,
    /// Largest job.
    pub max: SizeCounts,
}

/// `policy.limits` of a queue (the instance's table has more keys, kept by
/// the job manager's configuration).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueLimits {
    /// Longest time limit a job may ask for; 0 is unlimited.
    pub duration: Option<Fsd>,
    /// Job sizes.
    #[serde(rename = "job-size")]
    pub job_size: JobSize,
}

/// A policy table: `[policy]`, or `[queues.NAME.policy]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyTable {
    /// Jobspec defaults.
    pub jobspec: JobspecPolicy,
    /// Limits checked at submit.
    pub limits: QueueLimits,
}

/// `[queues.NAME]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueConfig {
    /// Resource properties the queue's jobs require (and-ed).
    pub requires: Option<Vec<String>>,
    /// The queue's policy, over the instance's.
    pub policy: PolicyTable,
}

/// A queue or policy table that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyConfigError {
    /// The default queue is not one of the queues.
    #[error("default queue '{0}' must be in [queues]")]
    DefaultQueue(String),
    /// A size limit below -1.
    #[error("{key}: size must be -1 (unlimited), or >= 0")]
    Size {
        /// The dotted key.
        key: String,
    },
    /// A queue name that cannot be one.
    #[error("queue name {0:?} must be a non-empty word")]
    Name(String),
    /// A `requires` entry that is not a property name.
    #[error("queues.{queue}.requires: {reason}")]
    Requires {
        /// The queue.
        queue: String,
        /// What is wrong.
        reason: String,
    },
}

/// Why a job is refused at submit; the messages are flux's.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum IngestError {
    /// The job names a queue that is not configured.
    #[error("Invalid queue '{0}' specified")]
    InvalidQueue(String),
    /// Queues are configured, the job names none and there is no default.
    #[error("no queue specified")]
    NoQueue,
    /// The job's size is past a job-size limit.
    #[error(
        "requested {resource} ({value}) {} policy limit of {limit}{}",
        if *over { "exceeds" } else { "is under" },
        for_queue(queue)
    )]
    Size {
        /// `nnodes`, `ncores` or `ngpus`.
        resource: &'static str,
        /// What the job asks for.
        value: u64,
        /// The limit.
        limit: i64,
        /// Over a maximum (else under a minimum).
        over: bool,
        /// The job's queue, when named.
        queue: Option<String>,
    },
    /// The job's time limit is past the duration limit.
    #[error(
        "requested duration ({}) exceeds policy limit of {}{}",
        if *requested == 0.0 { "unlimited".to_string() } else { format_fsd(*requested, 2) },
        format_fsd(*limit, 2),
        for_queue(queue)
    )]
    Duration {
        /// Seconds asked for; 0 is unlimited.
        requested: f64,
        /// The limit in seconds.
        limit: f64,
        /// The job's queue, when named.
        queue: Option<String>,
    },
    /// The jobspec with defaults and constraints applied is not valid.
    #[error(transparent)]
    Jobspec(#[from] JobspecError),
}

fn for_queue(queue: &Option<String>) -> String {
    queue
        .as_deref()
        .map(|q| format!(" for queue {q}"))
        .unwrap_or_default()
}

/// The policy that applies to the jobs of one queue (or of the anonymous
/// queue): the queue's keys over the instance's.
#[derive(Debug, Clone, PartialEq)]
pub struct Effective {
    /// Default time limit; `None`: none.
    pub default_duration: Option<f64>,
    /// Longest time limit; `None`: unlimited.
    pub duration_limit: Option<f64>,
    /// Smallest nodes, cores, gpus (-1 or unset: no minimum).
    pub min: [i64; 3],
    /// Largest nodes, cores, gpus (-1: unlimited).
    pub max: [i64; 3],
    /// Properties the queue's jobs require.
    pub requires: Vec<String>,
}

impl Default for Effective {
    fn default() -> Self {
        Effective {
            default_duration: None,
            duration_limit: None,
            min: [-1; 3],
            max: [-1; 3],
            requires: Vec::new(),
        }
    }
}

impl Effective {
    fn of(general: &PolicyTable, queue: Option<&QueueConfig>) -> Effective {
        let pick = |f: fn(&PolicyTable) -> Option<i64>| {
            queue
                .and_then(|q| f(&q.policy))
                .or_else(|| f(general))
                .unwrap_or(-1)
        };
        let duration = queue
            .and_then(|q| q.policy.limits.duration)
            .or(general.limits.duration)
            .map(|d| d.0)
            .filter(|d| *d > 0.0);
        let default_duration = queue
            .and_then(|q| q.policy.jobspec.defaults.system.duration)
            .or(general.jobspec.defaults.system.duration)
            .map(|d| d.0)
            .filter(|d| *d > 0.0);
        Effective {
            default_duration,
            duration_limit: duration,
            min: [
                pick(|p| p.limits.job_size.min.nnodes),
                pick(|p| p.limits.job_size.min.ncores),
                pick(|p| p.limits.job_size.min.ngpus),
            ],
            max: [
                pick(|p| p.limits.job_size.max.nnodes),
                pick(|p| p.limits.job_size.max.ncores),
                pick(|p| p.limits.job_size.max.ngpus),
            ],
            requires: queue.and_then(|q| q.requires.clone()).unwrap_or_default(),
        }
    }

    /// Does anything apply to a job at all?
    fn is_empty(&self) -> bool {
        self.default_duration.is_none()
            && self.duration_limit.is_none()
            && self.min.iter().chain(&self.max).all(|l| *l < 0)
            && self.requires.is_empty()
    }

    /// Refuse a job of `counts` (nodes, cores, gpus) and `duration` (0:
    /// unlimited) past these limits, as flux's validators do, in their order.
    fn check(
        &self,
        counts: [u64; 3],
        duration: f64,
        queue: Option<&str>,
    ) -> Result<(), IngestError> {
        const NAMES: [&str; 3] = ["nnodes", "ncores", "ngpus"];
        let size = |i: usize, limit: i64, over: bool| IngestError::Size {
            resource: NAMES[i],
            value: counts[i],
            limit,
            over,
            queue: queue.map(str::to_string),
        };
        for (i, &limit) in self.max.iter().enumerate() {
            if limit >= 0 && counts[i] > limit.unsigned_abs() {
                return Err(size(i, limit, true));
            }
        }
        for (i, &limit) in self.min.iter().enumerate() {
            if limit >= 0 && counts[i] < limit.unsigned_abs() {
                return Err(size(i, limit, false));
            }
        }
        if let Some(limit) = self.duration_limit
            && (duration == 0.0 || duration > limit)
        {
            return Err(IngestError::Duration {
                requested: duration,
                limit,
                queue: queue.map(str::to_string),
            });
        }
        Ok(())
    }
}

/// The configured queues and the policy of each, checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Queues {
    /// The anonymous queue's policy (the instance's), when no queue is named.
    general: Effective,
    /// Named queues.
    named: BTreeMap<String, Effective>,
    /// `policy.jobspec.defaults.system.queue`.
    default: Option<String>,
}

impl Queues {
    /// Check the instance's `[policy]` and the `[queues]` table.
    pub fn new(
        general: &PolicyTable,
        queues: &BTreeMap<String, QueueConfig>,
    ) -> Result<Queues, PolicyConfigError> {
        check_sizes("policy.limits.job-size", &general.limits.job_size)?;
        let mut named = BTreeMap::new();
        for (name, q) in queues {
            if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(PolicyConfigError::Name(name.clone()));
            }
            check_sizes(
                &format!("queues.{name}.policy.limits.job-size"),
                &q.policy.limits.job_size,
            )?;
            for prop in q.requires.iter().flatten() {
                validate_property_name(prop).map_err(|e| PolicyConfigError::Requires {
                    queue: name.clone(),
                    reason: e.to_string(),
                })?;
            }
            named.insert(name.clone(), Effective::of(general, Some(q)));
        }
        let default = general.jobspec.defaults.system.queue.clone();
        if let Some(d) = &default
            && !named.contains_key(d)
        {
            return Err(PolicyConfigError::DefaultQueue(d.clone()));
        }
        Ok(Queues {
            general: Effective::of(general, None),
            named,
            default,
        })
    }

    /// Are queues named (a `[queues]` table)?
    pub fn is_named(&self) -> bool {
        !self.named.is_empty()
    }

    /// The names of the configured queues, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.named.keys().map(String::as_str)
    }

    /// Is `name` a configured queue?
    pub fn contains(&self, name: &str) -> bool {
        self.named.contains_key(name)
    }

    /// The default queue, when one is configured.
    pub fn default_queue(&self) -> Option<&str> {
        self.default.as_deref()
    }

    /// The policy of queue `name` (`None`: the anonymous queue).
    pub fn effective(&self, name: Option<&str>) -> Option<&Effective> {
        match name {
            None => Some(&self.general),
            Some(n) => self.named.get(n),
        }
    }

    /// Apply this policy to a submitted job: the new jobspec when defaults
    /// or constraints were added, `None` when it stays as it is; or why it
    /// is refused.
    pub fn ingest(&self, jobspec: &Jobspec) -> Result<Option<Jobspec>, IngestError> {
        // The common case, one anonymous queue and no policy, costs nothing.
        if !self.is_named() && self.general.is_empty() {
            return match jobspec.queue() {
                Some(q) => Err(IngestError::InvalidQueue(q.to_string())),
                None => Ok(None),
            };
        }
        let named = jobspec.queue().map(str::to_string);
        let queue = named.clone().or_else(|| self.default.clone());
        let policy = match &queue {
            None if self.is_named() => return Err(IngestError::NoQueue),
            None => &self.general,
            Some(q) => self
                .named
                .get(q)
                .ok_or_else(|| IngestError::InvalidQueue(q.clone()))?,
        };
        let mut system = Map::new();
        if named.is_none()
            && let Some(q) = &queue
        {
            system.insert("queue".into(), Value::from(q.as_str()));
        }
        let mut duration = jobspec.duration();
        if duration == 0.0
            && let Some(d) = policy.default_duration
        {
            duration = d;
            system.insert("duration".into(), json!(d));
        }
        if !policy.requires.is_empty() {
            system.insert(
                "constraints".into(),
                with_requires(jobspec.constraints(), &policy.requires),
            );
        }
        let jj = jobspec.jj_counts();
        let counts = [
            jj.nnodes,
            jj.nslots.saturating_mul(jj.slot_size),
            jj.nslots.saturating_mul(jj.slot_gpus),
        ];
        policy.check(counts, duration, queue.as_deref())?;
        if system.is_empty() {
            return Ok(None);
        }
        let mut value = jobspec.as_value().clone();
        if let Some(sys) = system_of(&mut value) {
            sys.extend(system);
        }
        Ok(Some(Jobspec::from_value(value)?))
    }
}

/// Check that every size in `size` is -1 or more.
fn check_sizes(prefix: &str, size: &JobSize) -> Result<(), PolicyConfigError> {
    for (which, counts) in [("min", &size.min), ("max", &size.max)] {
        for (name, v) in [
            ("nnodes", counts.nnodes),
            ("ncores", counts.ncores),
            ("ngpus", counts.ngpus),
        ] {
            if v.is_some_and(|v| v < -1) {
                return Err(PolicyConfigError::Size {
                    key: format!("{prefix}.{which}.{name}"),
                });
            }
        }
    }
    Ok(())
}

/// The job's constraints with the queue's properties and-ed in, as flux's
/// `constraints` frobnicator does: added to a top-level `properties` list
/// when there is one, else `and`-ed with what the job asked.
fn with_requires(current: Option<&Map<String, Value>>, requires: &[String]) -> Value {
    let Some(current) = current.filter(|c| !c.is_empty()) else {
        return json!({ "properties": requires });
    };
    if let Some(Value::Array(props)) = current.get("properties") {
        let mut props = props.clone();
        for p in requires {
            if !props.iter().any(|v| v.as_str() == Some(p)) {
                props.push(Value::from(p.as_str()));
            }
        }
        let mut out = current.clone();
        out.insert("properties".into(), Value::Array(props));
        return Value::Object(out);
    }
    json!({ "and": [Value::Object(current.clone()), { "properties": requires }] })
}

/// `attributes.system` of a jobspec value, made when missing.
fn system_of(value: &mut Value) -> Option<&mut Map<String, Value>> {
    let attrs = value
        .as_object_mut()?
        .entry("attributes")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()?;
    attrs
        .entry("system")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(nodes: u32, cores: u32, extra: &str) -> Jobspec {
        let node_level = if nodes > 0 {
            format!(
                r#"[{{"type":"node","count":{nodes},"with":[{{"type":"slot","count":1,"label":"task","with":[{{"type":"core","count":{cores}}}]}}]}}]"#
            )
        } else {
            format!(
                r#"[{{"type":"slot","count":1,"label":"task","with":[{{"type":"core","count":{cores}}}]}}]"#
            )
        };
        let extra = if extra.contains("duration") {
            extra.to_string()
        } else if extra.is_empty() {
            r#""duration":0"#.to_string()
        } else {
            format!(r#""duration":0,{extra}"#)
        };
        let attributes = format!(r#"{{"system":{{{extra}}}}}"#);
        Jobspec::parse(&format!(
            r#"{{"version":1,"resources":{node_level},"tasks":[{{"command":["true"],"slot":"task","count":{{"per_slot":1}}}}],"attributes":{attributes}}}"#
        ))
        .unwrap()
    }

    fn config(text: &str) -> (PolicyTable, BTreeMap<String, QueueConfig>) {
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct File {
            policy: PolicyTable,
            queues: BTreeMap<String, QueueConfig>,
        }
        let f: File = serde_json::from_str(text).unwrap();
        (f.policy, f.queues)
    }

    fn queues(text: &str) -> Queues {
        let (general, named) = config(text);
        Queues::new(&general, &named).unwrap()
    }

    /// The flux-config-policy(5) example, as JSON.
    const EXAMPLE: &str = r#"{
        "policy": {"jobspec": {"defaults": {"system": {"duration": "1h", "queue": "batch"}}},
                   "limits": {"duration": "4h", "job-size": {"max": {"nnodes": 8, "ngpus": 4}}}},
        "queues": {"debug": {"requires": ["debug"],
                             "policy": {"limits": {"duration": "30m", "job-size": {"max": {"ngpus": -1}}}}},
                   "batch": {"requires": ["batch"]}}
    }"#;

    #[test]
    fn without_queues_or_policy_nothing_changes_and_no_queue_may_be_named() {
        let q = Queues::default();
        assert_eq!(q.ingest(&job(1, 1, "")).unwrap(), None);
        assert_eq!(
            q.ingest(&job(1, 1, r#""queue":"batch""#))
                .unwrap_err()
                .to_string(),
            "Invalid queue 'batch' specified"
        );
    }

    #[test]
    fn the_default_queue_its_duration_and_its_requires_are_filled_in() {
        let q = queues(EXAMPLE);
        let got = q.ingest(&job(1, 1, "")).unwrap().unwrap();
        assert_eq!(got.queue(), Some("batch"));
        assert_eq!(got.duration(), 3600.0);
        assert_eq!(
            Value::Object(got.constraints().unwrap().clone()),
            json!({"properties": ["batch"]})
        );
        // Asked for: kept, and-ed with what the job asked.
        let got = q
            .ingest(&job(
                1,
                1,
                r#""queue":"debug","duration":60,"constraints":{"hostlist":["n1"]}"#,
            ))
            .unwrap()
            .unwrap();
        assert_eq!(got.duration(), 60.0);
        assert_eq!(
            Value::Object(got.constraints().unwrap().clone()),
            json!({"and": [{"hostlist": ["n1"]}, {"properties": ["debug"]}]})
        );
        let got = q
            .ingest(&job(1, 1, r#""constraints":{"properties":["ssd"]}"#))
            .unwrap()
            .unwrap();
        assert_eq!(
            Value::Object(got.constraints().unwrap().clone()),
            json!({"properties": ["ssd", "batch"]})
        );
    }

    #[test]
    fn limits_are_refused_with_flux_messages() {
        let q = queues(EXAMPLE);
        for (spec, want) in [
            (
                job(9, 1, ""),
                "requested nnodes (9) exceeds policy limit of 8 for queue batch",
            ),
            (
                job(1, 1, r#""queue":"debug","duration":3600"#),
                "requested duration (1h) exceeds policy limit of 30m for queue debug",
            ),
            (
                job(1, 1, r#""duration":18000"#),
                "requested duration (5h) exceeds policy limit of 4h for queue batch",
            ),
            (
                job(1, 1, r#""queue":"gold""#),
                "Invalid queue 'gold' specified",
            ),
        ] {
            assert_eq!(q.ingest(&spec).unwrap_err().to_string(), want);
        }
        // A queue lifts the instance's gpu limit; debug's 30m default is
        // the instance's 1h, past its own limit.
        let err = q.ingest(&job(1, 1, r#""queue":"debug""#)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "requested duration (1h) exceeds policy limit of 30m for queue debug"
        );
    }

    #[test]
    fn minimums_and_unlimited_durations() {
        let q = queues(
            r#"{"policy": {"limits": {"duration": "1h", "job-size": {"min": {"nnodes": 2}}}}}"#,
        );
        assert_eq!(
            q.ingest(&job(1, 1, r#""duration":60"#))
                .unwrap_err()
                .to_string(),
            "requested nnodes (1) is under policy limit of 2"
        );
        assert_eq!(
            q.ingest(&job(2, 1, "")).unwrap_err().to_string(),
            "requested duration (unlimited) exceeds policy limit of 1h"
        );
        assert_eq!(q.ingest(&job(2, 3, r#""duration":60"#)).unwrap(), None);
    }

    #[test]
    fn queues_without_a_default_need_a_name() {
        let q = queues(r#"{"queues": {"a": {}, "b": {}}}"#);
        assert_eq!(
            q.ingest(&job(1, 1, "")).unwrap_err().to_string(),
            "no queue specified"
        );
        assert_eq!(q.ingest(&job(1, 1, r#""queue":"a""#)).unwrap(), None);
        assert!(q.is_named());
        assert_eq!(q.names().collect::<Vec<_>>(), ["a", "b"]);
    }

    #[test]
    fn bad_tables_are_refused() {
        let (g, n) = config(r#"{"policy": {"jobspec": {"defaults": {"system": {"queue": "x"}}}}}"#);
        assert_eq!(
            Queues::new(&g, &n).unwrap_err().to_string(),
            "default queue 'x' must be in [queues]"
        );
        let (g, n) = config(
            r#"{"queues": {"a": {"policy": {"limits": {"job-size": {"max": {"nnodes": -2}}}}}}}"#,
        );
        assert_eq!(
            Queues::new(&g, &n).unwrap_err().to_string(),
            "queues.a.policy.limits.job-size.max.nnodes: size must be -1 (unlimited), or >= 0"
        );
        let (g, n) = config(r#"{"queues": {"a": {"requires": ["a|b"]}}}"#);
        assert!(Queues::new(&g, &n).is_err());
        assert!(
            serde_json::from_str::<QueueConfig>(r#"{"hosts": "node[0-1]"}"#).is_err(),
            "keys not supported are refused, not ignored"
        );
    }

    #[test]
    fn effective_policy_per_queue() {
        let q = queues(EXAMPLE);
        let debug = q.effective(Some("debug")).unwrap();
        assert_eq!(debug.duration_limit, Some(1800.0));
        assert_eq!(debug.default_duration, Some(3600.0));
        assert_eq!(debug.max, [8, -1, -1]);
        assert_eq!(q.effective(Some("batch")).unwrap().max, [8, -1, 4]);
        assert_eq!(q.default_queue(), Some("batch"));
        assert!(q.effective(Some("nope")).is_none());
    }
}
