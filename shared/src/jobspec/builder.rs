//! Build version 1 jobspecs the way `flux run` / `flux submit` do, key for
//! key and in the same key order (flux-core `JobspecV1.from_command` then
//! the CLI's `--dependency`, `-S`, `-o` handling).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::Jobspec;
use super::attributes::{DurationError, parse_fsd};
use super::dependency::Dependency;
use super::error::JobspecError;

/// Why the builder could not make a jobspec from its options.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BuildError {
    /// No command was given.
    #[error("job command and arguments are missing")]
    NoCommand,
    /// A count option is zero.
    #[error("{0} must be an integer >= 1")]
    ZeroCount(&'static str),
    /// `-x` without `-N`.
    #[error("exclusive can only be set with a node count")]
    ExclusiveWithoutNodes,
    /// More nodes than tasks.
    #[error("node count must not be greater than task count")]
    MoreNodesThanTasks,
    /// `-t` value unreadable.
    #[error(transparent)]
    Duration(#[from] DurationError),
    /// A `-S`/`-o` key that does not fit the jobspec tree.
    #[error("cannot set {key}: {reason}")]
    SetAttr {
        /// The key as given.
        key: String,
        /// Why not.
        reason: String,
    },
    /// A per-resource request flux refuses (flux's words).
    #[error("{0}")]
    PerResource(String),
    /// The result is not a valid version 1 jobspec.
    #[error(transparent)]
    Invalid(#[from] JobspecError),
}

/// Options of `flux run`/`flux submit` that shape the jobspec.
#[derive(Debug, Clone, Default)]
pub struct JobspecBuilder {
    command: Vec<String>,
    nnodes: Option<u64>,
    ntasks: Option<u64>,
    cores_per_task: Option<u64>,
    gpus_per_task: Option<u64>,
    exclusive: Option<bool>,
    duration: Option<f64>,
    environment: Option<BTreeMap<String, String>>,
    cwd: Option<String>,
    rlimits: Option<Map<String, Value>>,
    env_expand: BTreeMap<String, String>,
    name: Option<String>,
    input: Option<String>,
    output: Option<String>,
    error: Option<String>,
    queue: Option<String>,
    bank: Option<String>,
    dependencies: Vec<Dependency>,
    setattrs: Vec<(String, Value)>,
    setopts: Vec<(String, Value)>,
    signal: Option<Value>,
    label_io: bool,
    unbuffered: bool,
    constraints: Option<Value>,
    files: Vec<(String, Value)>,
    per_resource: Option<PerResource>,
    nest_options: Vec<(String, Value)>,
    nest_files: Vec<(String, Value)>,
}

/// flux's per-resource request (`--cores`, `--tasks-per-node`,
/// `--tasks-per-core`, `--gpus-per-node`, `JobspecV1.per_resource`):
/// cores or nodes, and how many tasks to start on each node or core.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PerResource {
    /// `--cores`: total cores.
    pub ncores: Option<u64>,
    /// `-N`: nodes.
    pub nnodes: Option<u64>,
    /// `("node", n)` for `--tasks-per-node`, `("core", n)` for `--tasks-per-core`.
    pub tasks_per: Option<(&'static str, u64)>,
    /// `--gpus-per-node`.
    pub gpus_per_node: Option<u64>,
    /// Nodes exclusively.
    pub exclusive: bool,
}

impl JobspecBuilder {
    /// Start from the command and its arguments.
    pub fn new<I, S>(command: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        JobspecBuilder {
            command: command.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// `-N`: number of nodes.
    pub fn nodes(mut self, n: u64) -> Self {
        self.nnodes = Some(n);
        self
    }

    /// `-n`: number of tasks.
    pub fn ntasks(mut self, n: u64) -> Self {
        self.ntasks = Some(n);
        self
    }

    /// `-c`: cores per task.
    pub fn cores_per_task(mut self, n: u64) -> Self {
        self.cores_per_task = Some(n);
        self
    }

    /// `-g`: GPUs per task.
    pub fn gpus_per_task(mut self, n: u64) -> Self {
        self.gpus_per_task = Some(n);
        self
    }

    /// `-x` (or an explicit no: `-N` alone implies exclusive).
    pub fn exclusive(mut self, yes: bool) -> Self {
        self.exclusive = Some(yes);
        self
    }

    /// `-t` in seconds.
    pub fn duration_secs(mut self, secs: f64) -> Self {
        self.duration = Some(secs);
        self
    }

    /// `-t` as a Flux Standard Duration (`"2s"`, `"1.5h"`).
    pub fn duration(mut self, fsd: &str) -> Result<Self, BuildError> {
        self.duration = Some(parse_fsd(fsd)?);
        Ok(self)
    }

    /// The environment of the tasks (omitted from the jobspec when unset).
    pub fn environment(mut self, env: BTreeMap<String, String>) -> Self {
        self.environment = Some(env);
        self
    }

    /// Working directory.
    pub fn cwd(mut self, cwd: impl Into<String>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// Variables the job shell sets from `{{tag}}` templates
    /// (`shell.options.env-expand`, what `--env=VAR={{...}}` writes).
    pub fn env_expand(mut self, vars: BTreeMap<String, String>) -> Self {
        self.env_expand = vars;
        self
    }

    /// Resource limits to propagate (`shell.options.rlimit`).
    pub fn rlimits(mut self, rlimits: Map<String, Value>) -> Self {
        self.rlimits = Some(rlimits);
        self
    }

    /// `--signal`: the `signal` shell option, as [`super::signal_option`] gives it.
    pub fn signal(mut self, signal: Value) -> Self {
        self.signal = Some(signal);
        self
    }

    /// `--label-io`: label lines of output written to a file with the task rank.
    pub fn label_io(mut self, yes: bool) -> Self {
        self.label_io = yes;
        self
    }

    /// `--unbuffered`: no output buffering, short batch timeouts.
    pub fn unbuffered(mut self, yes: bool) -> Self {
        self.unbuffered = yes;
        self
    }

    /// `--requires`: the RFC 31 constraint object.
    pub fn constraints(mut self, c: Value) -> Self {
        self.constraints = Some(c);
        self
    }

    /// `--add-file`: an RFC 37 file object under `attributes.system.files`.
    pub fn add_file(mut self, name: impl Into<String>, file: Value) -> Self {
        self.files.push((name.into(), file));
        self
    }

    /// Ask for resources per node or core rather than per task.
    pub fn per_resource(mut self, p: PerResource) -> Self {
        self.per_resource = Some(p);
        self
    }

    /// `--job-name`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// `--input` file.
    pub fn input(mut self, path: impl Into<String>) -> Self {
        self.input = Some(path.into());
        self
    }

    /// `--output` file.
    pub fn output(mut self, path: impl Into<String>) -> Self {
        self.output = Some(path.into());
        self
    }

    /// `--error` file.
    pub fn error(mut self, path: impl Into<String>) -> Self {
        self.error = Some(path.into());
        self
    }

    /// `-q`: queue.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// `-B`: bank.
    pub fn bank(mut self, bank: impl Into<String>) -> Self {
        self.bank = Some(bank.into());
        self
    }

    /// `--dependency`.
    pub fn dependency(mut self, dep: Dependency) -> Self {
        self.dependencies.push(dep);
        self
    }

    /// `-S key=value` with a JSON value; keys without `attributes.`,
    /// `system.` or `user.` go under `attributes.system`.
    pub fn setattr(mut self, key: impl Into<String>, value: Value) -> Self {
        self.setattrs.push((key.into(), value));
        self
    }

    /// `-S KEY[=VAL]` as typed on the command line.
    pub fn setattr_kv(self, kv: &str) -> Self {
        let (k, v) = parse_keyval(kv);
        self.setattr(k, v)
    }

    /// `-o KEY[=VAL]`: a job shell option.
    pub fn setopt(mut self, key: impl Into<String>, value: Value) -> Self {
        self.setopts.push((key.into(), value));
        self
    }

    /// A shell option of a nested instance's jobspec (`per-resource.type`,
    /// `mpi`, `exit-timeout`, alloc's `pty.interactive`): set where flux's
    /// `from_nest_command` sets it, before the options `-o` and the others
    /// add, so keys come out in flux's order and `-o` still wins.
    pub fn nest_option(mut self, key: impl Into<String>, value: Value) -> Self {
        self.nest_options.push((key.into(), value));
        self
    }

    /// A file of a nested instance's jobspec (`conf.json`, batch's
    /// `script`), first in `attributes.system.files`, as flux adds them.
    pub fn nest_file(mut self, name: impl Into<String>, file: Value) -> Self {
        self.nest_files.push((name.into(), file));
        self
    }

    /// `-o KEY[=VAL]` as typed on the command line.
    pub fn setopt_kv(self, kv: &str) -> Self {
        let (k, v) = parse_keyval(kv);
        self.setopt(k, v)
    }

    /// The jobspec JSON, not yet validated.
    pub fn to_value(&self) -> Result<Value, BuildError> {
        if self.command.is_empty() {
            return Err(BuildError::NoCommand);
        }
        for (what, v) in [
            ("node count", self.nnodes),
            ("task count", self.ntasks),
            ("cores per task", self.cores_per_task),
        ] {
            if v == Some(0) {
                return Err(BuildError::ZeroCount(what));
            }
        }
        let (resource, count) = match &self.per_resource {
            Some(p) => per_resource_shape(p)?,
            None => self.task_shape()?,
        };
        let mut root = Map::new();
        root.insert("resources".into(), json!([resource]));
        root.insert(
            "tasks".into(),
            json!([{"command": self.command, "slot": "task", "count": count}]),
        );
        let duration = match self.duration {
            Some(d) => json!(d),
            None => json!(0),
        };
        let mut system = Map::new();
        system.insert("duration".into(), duration);
        if let Some((kind, n)) = self.per_resource.as_ref().and_then(|p| p.tasks_per) {
            system.insert(
                "shell".into(),
                json!({"options": {"per-resource": {"type": kind, "count": n}}}),
            );
        }
        root.insert("attributes".into(), json!({ "system": system }));
        root.insert("version".into(), json!(1));
        let mut root = Value::Object(root);
        self.set_options(&mut root)?;
        Ok(root)
    }

    /// The resources and task count of a per-task request (`-N`, `-n`,
    /// `-c`, `-g`), as flux's `JobspecV1.from_command`.
    fn task_shape(&self) -> Result<(Value, Value), BuildError> {
        // `-N` without `-n`: one task per node, nodes exclusive (flux CLI).
        let (ntasks, exclusive) = match (self.ntasks, self.nnodes) {
            (Some(n), _) => (n, self.exclusive.unwrap_or(false)),
            (None, Some(nodes)) => (nodes, self.exclusive.unwrap_or(true)),
            (None, None) => (1, self.exclusive.unwrap_or(false)),
        };
        if exclusive && self.nnodes.is_none() {
            return Err(BuildError::ExclusiveWithoutNodes);
        }
        let mut slot_with =
            vec![json!({"type": "core", "count": self.cores_per_task.unwrap_or(1)})];
        if let Some(g) = self.gpus_per_task.filter(|g| *g > 0) {
            slot_with.push(json!({"type": "gpu", "count": g}));
        }
        let (resource, count) = match self.nnodes {
            Some(nodes) => {
                if nodes > ntasks {
                    return Err(BuildError::MoreNodesThanTasks);
                }
                let count = if ntasks % nodes == 0 {
                    json!({"per_slot": 1})
                } else {
                    // Uneven spread: some slots stay empty, as in flux-core.
                    json!({"total": ntasks})
                };
                let mut node = Map::new();
                node.insert("type".into(), json!("node"));
                node.insert("count".into(), json!(nodes));
                if exclusive {
                    node.insert("exclusive".into(), json!(true));
                }
                node.insert(
                    "with".into(),
                    json!([slot(ntasks.div_ceil(nodes), slot_with)]),
                );
                (Value::Object(node), count)
            }
            None => (slot(ntasks, slot_with), json!({"per_slot": 1})),
        };
        Ok((resource, count))
    }

    /// Everything but the resources, in the order flux-core sets it
    /// (`_set_extra_options`, then `apply_options`), so keys come out in
    /// flux's order.
    fn set_options(&self, root: &mut Value) -> Result<(), BuildError> {
        let mut set = |key: &str, value: Value| set_path(root, key, value);
        if let Some(env) = &self.environment {
            set("attributes.system.environment", json!(env))?;
        }
        if let Some(cwd) = &self.cwd {
            set("attributes.system.cwd", json!(cwd))?;
        }
        if let Some(name) = &self.name {
            set("attributes.system.job.name", json!(name))?;
        }
        let stdio = [
            ("input.stdin", &self.input, false),
            ("output.stdout", &self.output, self.label_io),
            ("output.stderr", &self.error, self.label_io),
        ];
        for (stream, path, label) in stdio {
            // "kvs" and "none" mean the default: no file.
            if let Some(p) = path.as_ref().filter(|p| *p != "kvs" && *p != "none") {
                let mut file = json!({"type": "file", "path": p});
                if label {
                    file["label"] = json!(true);
                }
                set(&format!("attributes.system.shell.options.{stream}"), file)?;
            }
        }
        if self.unbuffered {
            let opts = "attributes.system.shell.options";
            set(&format!("{opts}.output.stdout.buffer.type"), json!("none"))?;
            set(&format!("{opts}.output.stderr.buffer.type"), json!("none"))?;
            set(&format!("{opts}.output.batch-timeout"), json!(0.05))?;
            set(&format!("{opts}.input.batch-timeout"), json!(0.0))?;
        }
        if let Some(q) = &self.queue {
            set("attributes.system.queue", json!(q))?;
        }
        if let Some(b) = &self.bank {
            set("attributes.system.bank", json!(b))?;
        }
        for (key, value) in &self.nest_options {
            set(
                &format!("attributes.system.shell.options.{key}"),
                value.clone(),
            )?;
        }
        if !self.nest_files.is_empty() {
            let files: Map<String, Value> = self.nest_files.iter().cloned().collect();
            set("attributes.system.files", Value::Object(files))?;
        }
        if !self.env_expand.is_empty() {
            let vars: Map<String, Value> = self
                .env_expand
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect();
            set(
                "attributes.system.shell.options.env-expand",
                Value::Object(vars),
            )?;
        }
        if let Some(r) = &self.rlimits {
            set(
                "attributes.system.shell.options.rlimit",
                Value::Object(r.clone()),
            )?;
        }
        if let Some(sig) = &self.signal {
            set("attributes.system.shell.options.signal", sig.clone())?;
        }
        if !self.dependencies.is_empty() {
            let deps: Vec<Value> = self.dependencies.iter().map(Dependency::to_value).collect();
            set("attributes.system.dependencies", Value::Array(deps))?;
        }
        if let Some(c) = &self.constraints {
            set("attributes.system.constraints", c.clone())?;
        }
        for (key, value) in &self.setopts {
            set(
                &format!("attributes.system.shell.options.{key}"),
                value.clone(),
            )?;
        }
        for (key, value) in &self.setattrs {
            set(&attr_key(key), value.clone())?;
        }
        for (name, file) in &self.files {
            let files = root
                .pointer_mut("/attributes/system")
                .and_then(Value::as_object_mut)
                .map(|sys| sys.entry("files").or_insert_with(|| json!({})))
                .and_then(Value::as_object_mut)
                .ok_or_else(|| BuildError::SetAttr {
                    key: "attributes.system.files".into(),
                    reason: "it is not an object".into(),
                })?;
            files.insert(name.clone(), file.clone());
        }
        Ok(())
    }

    /// Build and validate the jobspec.
    pub fn build(&self) -> Result<Jobspec, BuildError> {
        Ok(Jobspec::from_value(self.to_value()?)?)
    }
}

/// The resources and task count of a per-resource request, as flux's
/// `JobspecV1.per_resource` makes them, with its error words.
fn per_resource_shape(p: &PerResource) -> Result<(Value, Value), BuildError> {
    let err = |m: &str| Err(BuildError::PerResource(m.to_string()));
    if p.ncores == Some(0) {
        return err("ncores must be an integer >= 1");
    }
    if p.gpus_per_node.is_some() && p.nnodes.is_none() {
        return err("gpus_per_node must be specified with nnodes");
    }
    if p.nnodes == Some(0) {
        return err("nnodes must be an integer >= 1");
    }
    if p.nnodes.is_none() && p.exclusive {
        return Err(BuildError::ExclusiveWithoutNodes);
    }
    let (nslots, slot_size) = match (p.nnodes, p.ncores) {
        (Some(nodes), Some(cores)) => {
            if cores < nodes {
                return err("number of cores cannot be less than nnodes");
            }
            if cores % nodes != 0 {
                return err("number of cores must be evenly divisible by node count");
            }
            (1, cores / nodes)
        }
        (None, Some(cores)) => (cores, 1),
        (Some(_), None) if !p.exclusive => {
            return err("Specifying nnodes also requires ncores or exclusive");
        }
        (Some(_), None) => (1, 1),
        (None, None) => return err("must specify node or core count with per_resource"),
    };
    let mut children = vec![json!({"type": "core", "count": slot_size})];
    if let Some(g) = p.gpus_per_node.filter(|g| *g > 0) {
        children.push(json!({"type": "gpu", "count": g}));
    }
    let slot = slot(nslots, children);
    let resource = match p.nnodes {
        Some(nodes) => {
            let mut node = Map::new();
            node.insert("type".into(), json!("node"));
            node.insert("count".into(), json!(nodes));
            if p.exclusive {
                node.insert("exclusive".into(), json!(true));
            }
            node.insert("with".into(), json!([slot]));
            Value::Object(node)
        }
        None => slot,
    };
    Ok((resource, json!({"per_slot": 1})))
}

fn slot(count: u64, with: Vec<Value>) -> Value {
    // Key order as flux-core's `_create_slot` writes it: label last.
    json!({"type": "slot", "count": count, "with": with, "label": "task"})
}

/// flux-core's `_attr_key_prepend`.
fn attr_key(key: &str) -> String {
    if key.starts_with("attributes.") {
        key.to_string()
    } else if key.starts_with("user.") || key.starts_with("system.") {
        format!("attributes.{key}")
    } else {
        format!("attributes.system.{key}")
    }
}

/// `KEY[=VAL]`: VAL is JSON when it parses as JSON, else a string; no VAL
/// means 1 (flux-core's `parse_jobspec_keyval` and `-o` handling).
fn parse_keyval(kv: &str) -> (String, Value) {
    match kv.split_once('=') {
        Some((k, v)) => (
            k.to_string(),
            serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_string())),
        ),
        None => (kv.to_string(), json!(1)),
    }
}

/// Set a dotted path, creating objects on the way (flux `set_treedict`).
fn set_path(root: &mut Value, key: &str, value: Value) -> Result<(), BuildError> {
    let err = |reason: &str| BuildError::SetAttr {
        key: key.to_string(),
        reason: reason.to_string(),
    };
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(err("empty component in the dotted key"));
    }
    let (last, dirs) = parts.split_last().ok_or_else(|| err("empty key"))?;
    let mut cur = root;
    for dir in dirs {
        let obj = cur
            .as_object_mut()
            .ok_or_else(|| err(&format!("{dir:?} is inside a value that is not an object")))?;
        cur = obj.entry(dir.to_string()).or_insert_with(|| json!({}));
    }
    let obj = cur
        .as_object_mut()
        .ok_or_else(|| err("its parent is a value that is not an object"))?;
    obj.insert(last.to_string(), value);
    Ok(())
}
