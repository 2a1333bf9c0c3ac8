//! RFC 14 canonical jobspec and RFC 25 jobspec version 1.
//!
//! Reading goes in three steps: text (YAML or JSON) to a JSON value within
//! [`Limits`]; RFC 14 checks into a typed [`CanonicalJobspec`]
//! ([`validate_any`]); version 1 checks into a [`Jobspec`], the only kind the
//! service runs. The JSON value is kept, because jobspec travels and is
//! stored as its JSON text, and [`Jobspec::to_json`] re-emits it.
//!
//! Where RFC 25 and flux-core differ, flux-core wins (noted at each rule):
//! the node vertex may carry `exclusive` (`flux run -N` writes it), `gpu`
//! may be 0, `per_slot`/`total` only need to be >= 1, and the task slot label
//! is not matched against the slot.

mod attributes;
mod builder;
mod credentials;
mod dependency;
mod error;
mod files;
mod glob;
mod input;
mod jj;
mod options;
mod resources;
mod shell;
mod tasks;

use std::collections::BTreeMap;

use serde_json::{Map, Value};

pub use attributes::{DurationError, ExecTest, SystemAttributes, parse_fsd};
pub use builder::{BuildError, JobspecBuilder, PerResource};
pub use credentials::{CREDENTIAL_VARIABLES, strip_credentials};
pub use dependency::{Dependency, DependencyError, DependencyScheme};
pub use error::JobspecError;
pub use files::{FileKind, JobFile};
pub use glob::{NamePattern, PatternError, glob_match};
pub use input::{Limits, alias_budget, check_depth, json_to_value, text_to_value, yaml_to_value};
pub use jj::{JjCounts, JjError, jj_counts};
pub use options::{
    AddFile, OptionError, RLIMIT_NAMES, content_fileref, file_fileref, fileref_data,
    filtered_rlimits, parse_add_file, signal_option,
};
pub use resources::{Count, CountOperator, CountRange, ResourceType, Vertex};
pub use shell::{Affinity, Input, Pty, ShellOptionError, ShellOptions, WarnSignal};
pub use tasks::{Task, TaskCount};

use error::join;

/// A jobspec that passed the RFC 14 rules (any version), typed.
#[derive(Debug, Clone, PartialEq)]
pub struct CanonicalJobspec {
    /// `version` (>= 1).
    pub version: u64,
    /// The resource tree.
    pub resources: Vec<Vertex>,
    /// The tasks.
    pub tasks: Vec<Task>,
    /// `attributes.system`, if present.
    pub system: Option<SystemAttributes>,
    /// `attributes.user`, as JSON.
    pub user: Option<Value>,
}

/// Check a JSON value against RFC 14 (what flux-core's Python `Jobspec`
/// accepts for any version). The value's depth must already be bounded
/// (the readers in this module do that; [`check_depth`] otherwise).
pub fn validate_any(value: &Value) -> Result<CanonicalJobspec, JobspecError> {
    let obj = value
        .as_object()
        .ok_or_else(|| JobspecError::wrong_type("", "an object", value))?;
    for key in ["version", "resources", "tasks", "attributes"] {
        if !obj.contains_key(key) {
            return Err(JobspecError::missing(key));
        }
    }
    if let Some(extra) = obj
        .keys()
        .find(|k| !matches!(k.as_str(), "version" | "resources" | "tasks" | "attributes"))
    {
        return Err(JobspecError::unknown_key(extra));
    }
    let version = match obj["version"].as_i64() {
        Some(v) if v >= 1 => v as u64,
        Some(v) => {
            return Err(JobspecError::invalid(
                "version",
                format!("must be at least 1, got {v}"),
            ));
        }
        None => {
            return Err(JobspecError::wrong_type(
                "version",
                "an integer",
                &obj["version"],
            ));
        }
    };
    let resources = resources::parse_resources(&obj["resources"])?;
    let tasks = tasks::parse_tasks(&obj["tasks"])?;
    let (system, user) = attributes::parse_attributes(&obj["attributes"])?;
    Ok(CanonicalJobspec {
        version,
        resources,
        tasks,
        system,
        user,
    })
}

impl CanonicalJobspec {
    /// Read YAML or JSON text and check RFC 14 rules, with default limits.
    pub fn parse(text: &str) -> Result<Self, JobspecError> {
        validate_any(&text_to_value(text, &Limits::default())?)
    }
}

/// A validated version 1 jobspec: what the service accepts and runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Jobspec {
    json: Value,
    canonical: CanonicalJobspec,
    system: SystemAttributes,
    shape: resources::V1Shape,
    task_count: TaskCount,
}

impl Jobspec {
    /// Read a version 1 jobspec from YAML or JSON text (JSON when it starts
    /// with `{`), with default [`Limits`].
    pub fn parse(text: &str) -> Result<Self, JobspecError> {
        Self::parse_with(text, &Limits::default())
    }

    /// [`Jobspec::parse`] with explicit limits.
    pub fn parse_with(text: &str, limits: &Limits) -> Result<Self, JobspecError> {
        Self::validated(text_to_value(text, limits)?)
    }

    /// Read JSON text only (what the submit API carries).
    pub fn from_json(text: &str) -> Result<Self, JobspecError> {
        Self::validated(json_to_value(text, &Limits::default())?)
    }

    /// Read YAML text only.
    pub fn from_yaml(text: &str) -> Result<Self, JobspecError> {
        Self::validated(yaml_to_value(text, &Limits::default())?)
    }

    /// Validate a JSON value already in memory (its depth is checked against
    /// the default limits first, so a deep value is refused, not recursed).
    pub fn from_value(json: Value) -> Result<Self, JobspecError> {
        Self::from_value_with(json, &Limits::default())
    }

    /// [`Jobspec::from_value`] with an explicit depth limit.
    pub fn from_value_with(json: Value, limits: &Limits) -> Result<Self, JobspecError> {
        input::check_depth(&json, limits)?;
        Self::validated(json)
    }

    /// Validate a value whose depth the reader already bounded.
    fn validated(json: Value) -> Result<Self, JobspecError> {
        let canonical = validate_any(&json)?;
        let (system, shape, task_count) = v1_check(&json, &canonical)?;
        Ok(Jobspec {
            json,
            canonical,
            system,
            shape,
            task_count,
        })
    }

    /// The jobspec as JSON, exactly as it was read or built.
    pub fn as_value(&self) -> &Value {
        &self.json
    }

    /// Compact JSON text (keys in their original order), as stored and sent.
    pub fn to_json(&self) -> String {
        self.json.to_string()
    }

    /// The typed RFC 14 view.
    pub fn canonical(&self) -> &CanonicalJobspec {
        &self.canonical
    }

    /// The resource tree.
    pub fn resources(&self) -> &[Vertex] {
        &self.canonical.resources
    }

    /// The one task entry of version 1.
    pub fn task(&self) -> &Task {
        &self.canonical.tasks[0]
    }

    /// argv of the tasks.
    pub fn command(&self) -> &[String] {
        &self.task().command
    }

    /// `attributes.system`, typed.
    pub fn system(&self) -> &SystemAttributes {
        &self.system
    }

    /// `attributes.user`, as JSON.
    pub fn user(&self) -> Option<&Value> {
        self.canonical.user.as_ref()
    }

    /// Nodes requested; 0 when there is no node level.
    pub fn nnodes(&self) -> u64 {
        self.shape.nnodes
    }

    /// Slots per node (or all slots when there is no node level).
    pub fn slots_per_node(&self) -> u64 {
        self.shape.slots_per_node
    }

    /// Total slots.
    pub fn nslots(&self) -> u64 {
        self.shape
            .slots_per_node
            .saturating_mul(self.shape.nnodes.max(1))
    }

    /// Cores in each slot.
    pub fn cores_per_slot(&self) -> u64 {
        self.shape.cores_per_slot
    }

    /// GPUs in each slot.
    pub fn gpus_per_slot(&self) -> u64 {
        self.shape.gpus_per_slot
    }

    /// Whole nodes requested (node vertex `exclusive`), as the simple
    /// reader defines it.
    pub fn exclusive(&self) -> bool {
        self.shape.node_exclusive
    }

    /// The slot vertex asked for exclusive allocation explicitly.
    pub fn slot_exclusive(&self) -> bool {
        self.shape.slot_exclusive
    }

    /// How the task count was given.
    pub fn task_count(&self) -> &TaskCount {
        &self.task_count
    }

    /// Total tasks to start.
    pub fn ntasks(&self) -> u64 {
        match self.task_count {
            TaskCount::PerSlot(n) => n.saturating_mul(self.nslots()),
            TaskCount::Total(n) => n,
            // Refused by the version 1 check.
            TaskCount::PerResource { .. } => 0,
        }
    }

    /// Time limit in seconds; 0 means unlimited.
    pub fn duration(&self) -> f64 {
        self.system.duration.unwrap_or(0.0)
    }

    /// Working directory, if given.
    pub fn cwd(&self) -> Option<&str> {
        self.system.cwd.as_deref()
    }

    /// Environment of the tasks (empty when not given).
    pub fn environment(&self) -> BTreeMap<String, String> {
        self.system.environment.clone().unwrap_or_default()
    }

    /// Dependencies (RFC 26).
    pub fn dependencies(&self) -> &[Dependency] {
        &self.system.dependencies
    }

    /// Constraints (RFC 31) object, if any.
    pub fn constraints(&self) -> Option<&Map<String, Value>> {
        self.system.constraints.as_ref()
    }

    /// Queue name, if given.
    pub fn queue(&self) -> Option<&str> {
        self.system.queue.as_deref()
    }

    /// Job shell options (`attributes.system.shell.options`).
    pub fn shell_options(&self) -> &Map<String, Value> {
        &self.system.shell_options
    }

    /// The files the job carries into its temporary directory.
    pub fn files(&self) -> &[JobFile] {
        &self.system.files
    }

    /// The job shell's options, typed (a bad value of a known option is an error).
    pub fn shell(&self) -> Result<ShellOptions, ShellOptionError> {
        ShellOptions::parse(&self.system.shell_options)
    }

    /// Test-execution run time, when the job asks for test execution.
    pub fn test_run_duration(&self) -> Option<f64> {
        self.system.exec_test.as_ref().and_then(|t| t.run_duration)
    }

    /// Job name: `attributes.system.job.name`, else the base name of the
    /// command, as flux-core's job-list derives it.
    pub fn job_name(&self) -> &str {
        if let Some(name) = &self.system.job_name {
            return name;
        }
        let arg0 = self
            .command()
            .first()
            .map(String::as_str)
            .unwrap_or_default();
        arg0.rsplit('/').next().unwrap_or(arg0)
    }

    /// The simple reader's summary, from the typed values.
    pub fn jj_counts(&self) -> JjCounts {
        JjCounts {
            nnodes: self.nnodes(),
            nslots: self.nslots(),
            slot_size: self.cores_per_slot(),
            slot_gpus: self.gpus_per_slot(),
            exclusive: self.exclusive(),
            duration: self.duration(),
        }
    }
}

impl serde::Serialize for Jobspec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(s)
    }
}

impl TryFrom<Value> for Jobspec {
    type Error = JobspecError;

    fn try_from(value: Value) -> Result<Self, Self::Error> {
        Jobspec::from_value(value)
    }
}

impl std::str::FromStr for Jobspec {
    type Err = JobspecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Jobspec::parse(s)
    }
}

/// RFC 25 rules on top of RFC 14, as flux-core's Python `JobspecV1` and C
/// `flux_jobspec1_check()` apply them together.
fn v1_check(
    json: &Value,
    c: &CanonicalJobspec,
) -> Result<(SystemAttributes, resources::V1Shape, TaskCount), JobspecError> {
    if c.version != 1 {
        return Err(JobspecError::not_v1(
            "version",
            format!("must be 1, got {}", c.version),
        ));
    }
    let shape = resources::v1_shape(&json["resources"], &c.resources)?;
    // RFC 25 wants one task entry; flux-core's C check reads only the first.
    if c.tasks.len() != 1 {
        return Err(JobspecError::not_v1(
            "tasks",
            format!("must hold exactly one task, got {}", c.tasks.len()),
        ));
    }
    if let Some(task) = json["tasks"][0].as_object()
        && let Some(extra) = task
            .keys()
            .find(|k| !matches!(k.as_str(), "command" | "slot" | "count"))
    {
        return Err(JobspecError::not_v1(
            &format!("tasks[0].{extra}"),
            "a task holds only command, slot and count",
        ));
    }
    let task_count = c.tasks[0].count.clone();
    if let TaskCount::PerResource { .. } = task_count {
        return Err(JobspecError::not_v1(
            "tasks[0].count.per_resource",
            "use per_slot or total",
        ));
    }
    let attrs = json["attributes"].as_object().cloned().unwrap_or_default();
    if let Some(user) = attrs.get("user")
        && user.as_object().is_none_or(Map::is_empty)
    {
        return Err(JobspecError::not_v1(
            "attributes.user",
            "if present, must be a non-empty object",
        ));
    }
    let system = c
        .system
        .clone()
        .ok_or_else(|| JobspecError::missing("attributes.system"))?;
    if attrs["system"].as_object().is_some_and(Map::is_empty) {
        return Err(JobspecError::not_v1(
            "attributes.system",
            "must not be empty",
        ));
    }
    if system.duration.is_none() {
        return Err(JobspecError::missing(&join(
            "attributes.system",
            "duration",
        )));
    }
    Ok((system, shape, task_count))
}
