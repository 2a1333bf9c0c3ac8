//! `fluxgate submit` and `fluxgate run`: build a jobspec from flux's options
//! (through `JobspecBuilder`), submit it, and for `run` attach to it.
//!
//! `submit` prints each job's F58 id; with `--cc IDSET` it submits one copy
//! per id (with `{cc}` in the command, `--output` and `--error` replaced by
//! the id and `FLUX_JOB_CC` set in the job's environment), in batches through
//! `SubmitMany`, with a progress bar when `--progress` is given.
//! `--wait` waits for every job and exits with the largest exit code, as
//! `flux submit --wait` does.

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::IdSet;
use fluxgate_shared::JobId;
use fluxgate_shared::jobspec::{
    CREDENTIAL_VARIABLES, Dependency, JobspecBuilder, NamePattern, PerResource, filtered_rlimits,
    signal_option,
};
use serde_json::{Value, json};

use crate::client::{self, Instance};
use crate::cmd::jobs::attach;
use crate::cmd::jobs::attach::stdin::Ranks;
use crate::cmd::jobs::submit::copies::{CopyOpts, progress_bar};

mod begin_time;
pub mod copies;
mod env_rules;
mod files;
pub mod jobspec;

use env_rules::EnvRules;

pub(crate) use files::python_os_error;
use files::soft_rlimit;

/// The options `submit` and `run` share, as flux's names them.
#[derive(Debug, Clone, clap::Args)]
pub struct JobOpts {
    /// Number of nodes to allocate.
    #[arg(short = 'N', long = "nodes", value_name = "N", value_parser = parse_count)]
    nodes: Option<Count>,
    /// Number of tasks to start.
    #[arg(short = 'n', long = "ntasks", value_name = "N", value_parser = parse_count)]
    ntasks: Option<Count>,
    /// Number of cores to allocate per task.
    #[arg(short = 'c', long = "cores-per-task", value_name = "N", value_parser = parse_count)]
    cores_per_task: Option<Count>,
    /// Number of GPUs to allocate per task.
    #[arg(short = 'g', long = "gpus-per-task", value_name = "N", value_parser = parse_count)]
    gpus_per_task: Option<Count>,
    /// Request a total number of cores.
    #[arg(long = "cores", value_name = "N", value_parser = parse_count)]
    cores: Option<Count>,
    /// Force number of tasks per node.
    #[arg(long = "tasks-per-node", value_name = "N", value_parser = parse_count)]
    tasks_per_node: Option<Count>,
    /// Force number of tasks per core.
    #[arg(long = "tasks-per-core", value_name = "N", value_parser = parse_count)]
    tasks_per_core: Option<Count>,
    /// Request a number of GPUs per node with --nodes.
    #[arg(long = "gpus-per-node", value_name = "N", value_parser = parse_count)]
    gpus_per_node: Option<Count>,
    /// With -N, allocate nodes exclusively.
    #[arg(short = 'x', long = "exclusive")]
    exclusive: bool,
    /// Time limit in Flux standard duration, e.g. 2m, 1.5h.
    #[arg(short = 't', long = "time-limit", value_name = "MIN|FSD")]
    time_limit: Option<String>,
    /// Set job urgency (0-31), hold=0, default=16, expedite=31.
    #[arg(long, value_name = "N")]
    urgency: Option<String>,
    /// Set job dependency (scheme:value[?key=val]).
    #[arg(long = "dependency", value_name = "DEPENDENCY")]
    dependency: Vec<String>,
    /// Set job attribute ATTR (prefix with user. or system.; default system.).
    #[arg(short = 'S', long = "setattr", value_name = "ATTR=VAL")]
    setattr: Vec<String>,
    /// Set shell option OPT; -o opt=VAL sets it to VAL (JSON when it parses).
    #[arg(short = 'o', long = "setopt", value_name = "OPT")]
    setopt: Vec<String>,
    /// `--env`, `--env-remove` and `--env-file`, in their order.
    #[command(flatten)]
    env: EnvRules,
    /// Control how soft resource limits are propagated to the job
    /// (-PATTERN: not this one, NAME: the current limit, NAME=VALUE).
    #[arg(long = "rlimit", value_name = "RULE")]
    rlimit: Vec<String>,
    /// Set minimum start time as offset in FSD (e.g. +1h) or an absolute TIME.
    #[arg(long = "begin-time", value_name = "+FSD|TIME")]
    begin_time: Vec<String>,
    /// Schedule delivery of signal SIG at a defined TIME before job
    /// expiration. Default SIG is SIGUSR1, default TIME is 60s.
    #[arg(long = "signal", value_name = "[SIG][@TIME]")]
    signal: Option<String>,
    /// Add a file at PATH with optional NAME (and NAME:PERMS) to the
    /// jobspec, extracted to {{tmpdir}}/NAME.
    #[arg(long = "add-file", value_name = "[NAME=]PATH")]
    add_file: Vec<String>,
    /// Disable buffering of input and output.
    #[arg(short = 'u', long = "unbuffered")]
    unbuffered: bool,
    /// Add rank labels to stdout, stderr lines.
    #[arg(short = 'l', long = "label-io")]
    label_io: bool,
    /// Set the working directory of the tasks.
    #[arg(long, value_name = "DIR")]
    cwd: Option<String>,
    /// Redirect job stdout to FILENAME.
    #[arg(long, value_name = "FILENAME")]
    output: Option<String>,
    /// Redirect job stderr to FILENAME.
    #[arg(long, value_name = "FILENAME")]
    error: Option<String>,
    /// Redirect job stdin from FILENAME.
    #[arg(long, value_name = "FILENAME")]
    input: Option<String>,
    /// Set an alternate job name.
    #[arg(long = "job-name", value_name = "NAME")]
    job_name: Option<String>,
    /// Submit a job to a specific named queue.
    #[arg(short = 'q', long = "queue", value_name = "NAME")]
    queue: Option<String>,
    /// Submit a job to a specific named bank.
    #[arg(short = 'B', long = "bank", value_name = "BANK")]
    bank: Option<String>,
    /// Require nodes matching an RFC 35 query: properties (`^prop`:
    /// without it), `host:HOSTLIST`, `rank:IDSET`, joined by `and`, `or`,
    /// `not`, `-term` and parentheses.
    #[arg(long = "requires", value_name = "CONSTRAINT")]
    requires: Vec<String>,
    /// Set submission flags (debug, waitable, novalidate), comma separated.
    #[arg(long, value_name = "FLAGS", value_delimiter = ',')]
    flags: Vec<String>,
    /// What batch and alloc add as flux's `from_nest_command` does.
    #[arg(skip)]
    nest: Nest,
}

/// The shell options and files of a nested instance's jobspec.
#[derive(Debug, Clone, Default)]
struct Nest {
    options: Vec<(String, Value)>,
    files: Vec<(String, Value)>,
}

/// Arguments of `fluxgate submit`.
#[derive(Debug, clap::Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    opts: JobOpts,
    #[command(flatten)]
    copy: CopyOpts,
    /// Print the jobspec JSON instead of submitting, and exit.
    #[arg(long = "dry-run")]
    dry_run: bool,
    /// Command and arguments.
    #[arg(required = true, trailing_var_arg = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// Arguments of `fluxgate run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    opts: JobOpts,
    /// Print the jobspec JSON instead of running the job, and exit.
    #[arg(long = "dry-run")]
    dry_run: bool,
    /// Command and arguments.
    #[arg(required = true, trailing_var_arg = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// A count option (-N, -n, -c, -g). Kept as text, as flux keeps it, so
/// that bulksubmit can fill a replacement field in it (`-n {.p2}`); any
/// other text must be a number, and the filled text is checked again when
/// the jobspec is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Count(String);

/// clap's value parser for [`Count`]: a number, or text with a `{`.
fn parse_count(s: &str) -> Result<Count, String> {
    if !s.contains('{') {
        s.parse::<u64>().map_err(|e| e.to_string())?;
    }
    Ok(Count(s.to_string()))
}

impl Count {
    /// The number, or an error naming `flag` (`--ntasks`).
    fn value(&self, flag: &str) -> anyhow::Result<u64> {
        self.0
            .parse()
            .map_err(|_| anyhow!("{flag}: invalid count {:?} (a number is needed)", self.0))
    }
}

impl From<u64> for Count {
    fn from(n: u64) -> Count {
        Count(n.to_string())
    }
}

/// One option bulksubmit fills: a single value (if given), or a list.
enum Fillable<'a> {
    One(Option<&'a mut String>),
    Many(&'a mut Vec<String>),
}

impl<'a> Fillable<'a> {
    /// A count option's text.
    fn count(c: &'a mut Option<Count>) -> Self {
        Fillable::One(c.as_mut().map(|c| &mut c.0))
    }

    /// Every text of the option.
    fn texts(self) -> Vec<&'a mut String> {
        match self {
            Fillable::One(v) => v.into_iter().collect(),
            Fillable::Many(v) => v.iter_mut().collect(),
        }
    }
}

/// A list of strings as Python's `repr` prints it, as flux's dry-run shows
/// a list option.
fn python_list(items: &[String]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|s| {
            let q = if s.contains('\'') && !s.contains('"') {
                '"'
            } else {
                '\''
            };
            let mut out = String::with_capacity(s.len() + 2);
            out.push(q);
            for c in s.chars() {
                if c == '\\' || c == q {
                    out.push('\\');
                }
                out.push(c);
            }
            out.push(q);
            out
        })
        .collect();
    format!("[{}]", quoted.join(", "))
}

/// Urgency names flux accepts.
pub fn parse_urgency(s: &str) -> anyhow::Result<u32> {
    match s {
        "hold" => Ok(0),
        "default" => Ok(16),
        "expedite" => Ok(31),
        n => {
            n.parse::<u32>().ok().filter(|u| *u <= 31).ok_or_else(|| {
                anyhow!("urgency must be 0-31, hold, default or expedite (got {s:?})")
            })
        }
    }
}

/// `--flags`: the submit flags flux knows, as the request's bits.
pub fn parse_flags(flags: &[String]) -> anyhow::Result<u32> {
    let mut bits = 0;
    for f in flags.iter().filter(|f| !f.is_empty()) {
        bits |= match f.as_str() {
            "debug" => pb::SubmitFlag::Debug as u32,
            "waitable" => pb::SubmitFlag::Waitable as u32,
            "novalidate" => pb::SubmitFlag::Novalidate as u32,
            other => bail!("--flags: unknown flag {other}"),
        };
    }
    Ok(bits)
}

/// `-t`: a bare number is minutes (flux's rule), else an FSD.
fn time_limit_fsd(t: &str) -> String {
    if t.parse::<f64>().is_ok() {
        format!("{t}m")
    } else {
        t.to_string()
    }
}

impl JobOpts {
    /// The options bulksubmit fills from its inputs, as flux does (its
    /// `Xcmd.mutable_args` that Fluxgate has), each with the prefix flux's
    /// `bulksubmit --dry-run` shows it with, in flux's order.
    fn fillable(&mut self) -> Vec<(&'static str, Fillable<'_>)> {
        vec![
            ("-q", Fillable::One(self.queue.as_mut())),
            ("-B", Fillable::One(self.bank.as_mut())),
            ("-n", Fillable::count(&mut self.ntasks)),
            ("-N", Fillable::count(&mut self.nodes)),
            ("-c", Fillable::count(&mut self.cores_per_task)),
            ("-g", Fillable::count(&mut self.gpus_per_task)),
            ("--cores=", Fillable::count(&mut self.cores)),
            (
                "--tasks-per-node=",
                Fillable::count(&mut self.tasks_per_node),
            ),
            (
                "--tasks-per-core=",
                Fillable::count(&mut self.tasks_per_core),
            ),
            ("--gpus-per-node=", Fillable::count(&mut self.gpus_per_node)),
            ("-t", Fillable::One(self.time_limit.as_mut())),
            // As in flux, --env-remove and --env-file are --env rules.
            ("--env=", Fillable::Many(&mut self.env.0)),
            ("--urgency=", Fillable::One(self.urgency.as_mut())),
            ("-o ", Fillable::Many(&mut self.setopt)),
            ("--setattr=", Fillable::Many(&mut self.setattr)),
            ("--job-name=", Fillable::One(self.job_name.as_mut())),
            ("--input=", Fillable::One(self.input.as_mut())),
            ("--output=", Fillable::One(self.output.as_mut())),
            ("--error=", Fillable::One(self.error.as_mut())),
            ("--dependency=", Fillable::Many(&mut self.dependency)),
            ("--requires=", Fillable::Many(&mut self.requires)),
            ("--cwd=", Fillable::One(self.cwd.as_mut())),
            ("--flags=", Fillable::Many(&mut self.flags)),
            ("--begin-time=", Fillable::Many(&mut self.begin_time)),
            ("--signal=", Fillable::One(self.signal.as_mut())),
        ]
    }

    /// A copy with `f` applied to the options bulksubmit fills.
    pub(crate) fn map_text<E>(
        &self,
        mut f: impl FnMut(&str) -> Result<String, E>,
    ) -> Result<JobOpts, E> {
        let mut o = self.clone();
        for (_, v) in o.fillable() {
            for v in v.texts() {
                *v = f(v)?;
            }
        }
        Ok(o)
    }

    /// The text of the options bulksubmit fills (those given).
    pub(crate) fn fillable_texts(&self) -> Vec<String> {
        let mut o = self.clone();
        o.fillable()
            .into_iter()
            .flat_map(|(_, v)| v.texts().into_iter().map(|t| t.clone()))
            .collect()
    }

    /// The filled options whose text differs from `orig`'s (this being
    /// `orig.map_text(..)`), as flux's `bulksubmit --dry-run` shows them:
    /// `-n4`, `--output=a.out`, a list option as Python prints a list
    /// (`--env=['A=1']`); empty ones are left out, as flux does.
    pub(crate) fn changed_from(&self, orig: &JobOpts) -> Vec<String> {
        let (mut new, mut old) = (self.clone(), orig.clone());
        new.fillable()
            .into_iter()
            .zip(old.fillable())
            .filter_map(|((flag, new), (_, old))| match (new, old) {
                (Fillable::One(new), Fillable::One(old)) => {
                    let new = new.filter(|v| !v.is_empty())?;
                    (Some(&*new) != old.as_deref()).then(|| format!("{flag}{new}"))
                }
                (Fillable::Many(new), Fillable::Many(old)) => {
                    (!new.is_empty() && new != old).then(|| format!("{flag}{}", python_list(new)))
                }
                _ => None,
            })
            .collect()
    }

    /// The jobspec JSON text for `command`, with `{cc}` replaced by `cc`.
    fn jobspec(&self, command: &[String], cc: Option<(u32, bool)>) -> anyhow::Result<String> {
        let subst = |s: &str| match cc {
            Some((id, _)) => s.replace("{cc}", &id.to_string()),
            None => s.to_string(),
        };
        let command: Vec<String> = command.iter().map(|a| subst(a)).collect();
        let mut b = self.shape(JobspecBuilder::new(command))?;
        if let Some(t) = &self.time_limit {
            b = b.duration(&time_limit_fsd(t))?;
        }
        let (mut env, expand) = filtered_environment(std::env::vars(), &[], &self.env.0)?;
        if let Some((id, true)) = cc {
            env.insert("FLUX_JOB_CC".into(), id.to_string());
        }
        b = b.environment(env).env_expand(expand);
        let cwd = match &self.cwd {
            Some(c) => c.clone(),
            None => std::env::current_dir()
                .context("cannot read the current directory (pass --cwd)")?
                .to_string_lossy()
                .into_owned(),
        };
        b = b.cwd(cwd);
        if let Some(n) = &self.job_name {
            b = b.name(n);
        }
        if let Some(o) = &self.output {
            b = b.output(subst(o));
        }
        if let Some(e) = &self.error {
            b = b.error(subst(e));
        }
        if let Some(i) = &self.input {
            b = b.input(i);
        }
        if let Some(q) = &self.queue {
            b = b.queue(q);
        }
        if let Some(bank) = &self.bank {
            b = b.bank(bank);
        }
        for (key, value) in &self.nest.options {
            b = b.nest_option(key, value.clone());
        }
        for (name, file) in &self.nest.files {
            b = b.nest_file(name, file.clone());
        }
        let b = self.shell_and_attributes(b)?;
        let value = b.to_value()?;
        // Validate here so a bad option is reported before anything is sent.
        b.build()?;
        Ok(value.to_string())
    }

    /// The resources: per task (`-n`, `-c`, `-g`), or, with `--cores`,
    /// `--tasks-per-node`, `--tasks-per-core` or `--gpus-per-node`, per
    /// node or core, with flux's checks and words.
    fn shape(&self, mut b: JobspecBuilder) -> anyhow::Result<JobspecBuilder> {
        let count = |c: &Option<Count>, flag: &str| c.as_ref().map(|c| c.value(flag)).transpose();
        let nodes = count(&self.nodes, "--nodes")?;
        let tasks_per_node = count(&self.tasks_per_node, "--tasks-per-node")?;
        let tasks_per_core = count(&self.tasks_per_core, "--tasks-per-core")?;
        let gpus_per_node = count(&self.gpus_per_node, "--gpus-per-node")?;
        let cores = count(&self.cores, "--cores")?;
        let tasks_per = match (tasks_per_node, tasks_per_core) {
            (Some(_), Some(_)) => {
                bail!("Do not specify both the number of tasks per node and per core")
            }
            (Some(0), _) => bail!("--tasks-per-node must be >= 1"),
            (_, Some(0)) => bail!("--tasks-per-core must be >= 1"),
            (Some(n), None) => Some(("node", n)),
            (None, Some(n)) => Some(("core", n)),
            (None, None) => None,
        };
        if gpus_per_node.is_some_and(|g| g > 0) && nodes.is_none_or(|n| n == 0) {
            bail!("--gpus-per-node requires --nodes");
        }
        if tasks_per.is_some() || gpus_per_node.is_some() || cores.is_some() {
            let gpus_per_task = count(&self.gpus_per_task, "--gpus-per-task")?;
            if self.ntasks.is_some()
                || self.cores_per_task.is_some()
                || gpus_per_task.is_some_and(|g| g > 0)
            {
                bail!(
                    "Per-resource options can't be used with per-task options. \
                     (See --help for details)"
                );
            }
            return Ok(b.per_resource(PerResource {
                ncores: cores,
                nnodes: nodes,
                tasks_per,
                gpus_per_node,
                // As flux: -N without --cores asks for whole nodes.
                exclusive: self.exclusive || (nodes.is_some_and(|n| n > 0) && cores.is_none()),
            }));
        }
        if let Some(n) = nodes {
            b = b.nodes(n);
        }
        if let Some(n) = &self.ntasks {
            b = b.ntasks(n.value("--ntasks")?);
        }
        if let Some(n) = &self.cores_per_task {
            b = b.cores_per_task(n.value("--cores-per-task")?);
        }
        if let Some(n) = &self.gpus_per_task {
            b = b.gpus_per_task(n.value("--gpus-per-task")?);
        }
        if self.exclusive {
            b = b.exclusive(true);
        }
        Ok(b)
    }

    /// The options that become shell options and attributes after the
    /// standard ones, as flux's `apply_options` adds them: output labels
    /// and buffering, rlimits, the signal, dependencies (and
    /// `--begin-time`), constraints, `-o`, `-S`, then `--add-file`.
    fn shell_and_attributes(&self, mut b: JobspecBuilder) -> anyhow::Result<JobspecBuilder> {
        b = b.label_io(self.label_io).unbuffered(self.unbuffered);
        // As flux, no limits (`--rlimit=-*`) means no option at all.
        let rlimits = filtered_rlimits(soft_rlimit, &self.rlimit)?;
        if !rlimits.is_empty() {
            b = b.rlimits(rlimits);
        }
        // As flux, an empty --signal= asks for nothing.
        if let Some(sig) = self.signal.as_deref().filter(|s| !s.is_empty()) {
            b = b.signal(signal_option(sig)?);
        }
        let begin = self
            .begin_time
            .iter()
            .map(|t| begin_time::dependency(t))
            .collect::<anyhow::Result<Vec<_>>>()?;
        for d in self.dependency.iter().chain(&begin) {
            let dep: Dependency = d.parse().map_err(|e| anyhow!("--dependency={d}: {e}"))?;
            b = b.dependency(dep);
        }
        if !self.requires.is_empty() {
            // As flux: the options joined by spaces are one RFC 35 query.
            let c = fluxgate_shared::rset::requires_constraint(&self.requires)
                .map_err(|e| anyhow!("--requires='{}': {e}", self.requires.join(" ")))?;
            b = b.constraints(c);
        }
        for kv in &self.setopt {
            b = b.setopt_kv(kv);
        }
        for kv in &self.setattr {
            b = b.setattr_kv(kv);
        }
        for arg in &self.add_file {
            let (name, file) = files::fileref(arg)?;
            b = b.add_file(name, file);
        }
        Ok(b)
    }

    /// The submit request for `command`, with `{cc}` replaced by `cc`.
    pub(crate) fn request(
        &self,
        command: &[String],
        cc: Option<(u32, bool)>,
    ) -> anyhow::Result<pb::SubmitRequest> {
        if self.label_io {
            // Read by `run`'s attach, which labels each line of output.
            attach::label_io();
        }
        Ok(pb::SubmitRequest {
            jobspec: self.jobspec(command, cc)?,
            urgency: self.urgency.as_deref().map(parse_urgency).transpose()?,
            flags: parse_flags(&self.flags)?,
            ..Default::default()
        })
    }
}

/// What makes an instance job a batch or an alloc job.
#[derive(Debug, Clone, Default)]
pub struct InstanceJob<'a> {
    /// The default job name (batch's script name; alloc has none).
    pub name: Option<&'a str>,
    /// The default output file (batch's `flux-{{id}}.out`).
    pub output: Option<&'a str>,
    /// The batch script, put in `attributes.system.files.script` (RFC 37).
    pub script: Option<&'a str>,
    /// alloc from a terminal: task 0 gets a pty (`pty.interactive`).
    pub interactive: bool,
    /// `--conf`: the child's configuration, as the RFC 37 file object of
    /// `conf.json`.
    pub conf: Option<Value>,
}

impl JobOpts {
    /// The submit request of an instance job, shaped as flux's
    /// `from_nest_command`: `-n` slots (or, without it, one slot per node
    /// of `-N`, nodes exclusive; one of them is needed), one task per
    /// node (`per-resource.type=node`, tasks `per_slot: 1`), shell options
    /// `mpi=none` and `exit-timeout=none` (an instance's brokers do not end
    /// together), the script in the files attribute. The command is
    /// Fluxgate's own instance task.
    pub fn instance_request(
        &self,
        command: &[String],
        job: &InstanceJob<'_>,
    ) -> anyhow::Result<pb::SubmitRequest> {
        let mut opts = self.clone();
        if opts.ntasks.is_none() {
            let nodes = opts
                .nodes
                .clone()
                .context("Number of slots to allocate must be specified")?;
            opts.ntasks = Some(nodes);
            opts.exclusive = true;
        }
        if opts.job_name.is_none() {
            opts.job_name = job.name.map(str::to_string);
        }
        if opts.output.is_none() {
            opts.output = job.output.map(str::to_string);
        }
        if let Some(text) = job.script
            && !text.starts_with("#!")
        {
            bail!(
                "{} does not appear to start with '#!'",
                opts.job_name.as_deref().unwrap_or("script")
            );
        }
        // Where flux's from_nest_command sets them: before the user's -o,
        // which may change them, and before --add-file's files.
        let mut options = vec![
            ("per-resource.type".to_string(), json!("node")),
            ("mpi".to_string(), json!("none")),
            ("exit-timeout".to_string(), json!("none")),
        ];
        if job.interactive {
            options.push(("pty.interactive".into(), json!(1)));
        }
        let mut files = Vec::new();
        if let Some(conf) = &job.conf {
            files.push(("conf.json".to_string(), conf.clone()));
        }
        if let Some(text) = job.script {
            files.push((
                "script".to_string(),
                fluxgate_shared::jobspec::content_fileref(text, 0o700),
            ));
        }
        opts.nest = Nest { options, files };
        opts.request(command, None)
    }
}

/// flux's environment rules: start from the whole environment, then apply
/// each `--env-remove` pattern, then each `--env` rule in order: `-PATTERN`
/// removes, `VAR=VAL` sets (with `$VAR` expanded), a glob PATTERN or a VAR
/// name copies the matching variables the job does not have yet from the
/// submitting environment, `^FILE` applies the rules of FILE, one a line
/// (`--env-file`). Unlike flux, credentials (`FLUXGATE_TOKEN`) are never
/// copied: the jobspec is stored, and a job gets its own credential when
/// it starts. A value holding a `{{tag}}` template goes, as flux's, to
/// the second map: the job shell renders it (`shell.options.env-expand`).
pub fn filtered_environment(
    environ: impl Iterator<Item = (String, String)>,
    removes: &[String],
    rules: &[String],
) -> anyhow::Result<(BTreeMap<String, String>, BTreeMap<String, String>)> {
    let is_credential = |k: &str| CREDENTIAL_VARIABLES.contains(&k);
    // Dropped from the source too, so that no rule copies or expands them.
    let source: BTreeMap<String, String> = environ.filter(|(k, _)| !is_credential(k)).collect();
    let mut env = source.clone();
    let all: Vec<String> = removes
        .iter()
        .map(|r| format!("-{r}"))
        .chain(rules.iter().cloned())
        .collect();
    let mut expand = BTreeMap::new();
    apply_env_rules(&mut env, &mut expand, &source, &all, 0)?;
    env.retain(|k, _| !is_credential(k));
    expand.retain(|k, _| !is_credential(k));
    Ok((env, expand))
}

/// How deep `^FILE` rules may include one another (a file naming itself
/// would otherwise never end).
const ENV_FILE_DEPTH: usize = 16;

/// Apply `rules` to `env` in order (see [`filtered_environment`]).
fn apply_env_rules(
    env: &mut BTreeMap<String, String>,
    expand: &mut BTreeMap<String, String>,
    source: &BTreeMap<String, String>,
    rules: &[String],
    depth: usize,
) -> anyhow::Result<()> {
    for rule in rules {
        if let Some(pat) = rule.strip_prefix('-') {
            let pat = name_pattern(pat)?;
            env.retain(|k, _| !pat.matches(k));
        } else if let Some(file) = rule.strip_prefix('^') {
            if depth >= ENV_FILE_DEPTH {
                bail!("--env: {file}: environment files nested too deep");
            }
            let lines = read_env_file(file)?;
            apply_env_rules(env, expand, source, &lines, depth + 1)?;
        } else if let Some((k, v)) = rule.split_once('=')
            && v.contains("{{")
        {
            expand.insert(k.to_string(), v.to_string());
        } else if let Some((k, v)) = rule.split_once('=') {
            let v = expand_vars(v, env, source);
            env.insert(k.to_string(), v);
        } else {
            let pat = name_pattern(rule)?;
            for (k, v) in source.iter().filter(|(k, _)| pat.matches(k)) {
                env.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
    Ok(())
}

/// An `--env` rule's name pattern: a glob, or `/REGEX/`.
fn name_pattern(pat: &str) -> anyhow::Result<NamePattern> {
    NamePattern::parse(pat).map_err(|e| anyhow!("--env: {e}"))
}

/// The rules of an `--env-file` (`~` expanded), each line stripped, as
/// flux reads it; an unreadable file is flux's `--env:` error.
fn read_env_file(file: &str) -> anyhow::Result<Vec<String>> {
    let path = match (file.strip_prefix("~/"), std::env::var("HOME")) {
        (Some(rest), Ok(home)) => format!("{home}/{rest}"),
        _ => file.to_string(),
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| anyhow!("--env: {}", python_os_error(&e, &path)))?;
    Ok(text.lines().map(|l| l.trim().to_string()).collect())
}

fn expand_vars(
    v: &str,
    env: &BTreeMap<String, String>,
    source: &BTreeMap<String, String>,
) -> String {
    let lookup = |name: &str| {
        env.get(name)
            .or_else(|| source.get(name))
            .cloned()
            .unwrap_or_default()
    };
    let mut out = String::new();
    let mut chars = v.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        let mut name = String::new();
        if chars.peek() == Some(&'{') {
            chars.next();
            for c in chars.by_ref() {
                if c == '}' {
                    break;
                }
                name.push(c);
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_ascii_alphanumeric() || c == '_' {
                    name.push(c);
                    chars.next();
                } else {
                    break;
                }
            }
        }
        if name.is_empty() {
            out.push('$');
        } else {
            out.push_str(&lookup(&name));
        }
    }
    out
}

/// Submit one request. It always carries an idempotency key, and a try
/// whose answer was lost (no answer in time, a broken connection, a
/// standby's refusal during a failover) is made again with the same key:
/// the job manager answers the job the first try made, so a retry never
/// makes a second job.
pub async fn submit_one(inst: &mut Instance, mut req: pb::SubmitRequest) -> anyhow::Result<JobId> {
    if req.idempotency_key.is_empty() {
        req.idempotency_key = client::idempotency_key();
    }
    let deadline = tokio::time::Instant::now() + inst.retry_window();
    loop {
        match inst.jobs.submit(req.clone()).await {
            Ok(resp) => return Ok(JobId::from(resp.into_inner().id)),
            Err(status)
                if client::is_retryable(&status) && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                // A new connection (to whichever job manager leads now);
                // one that cannot be made yet is tried again.
                if let Err(e) = inst.reconnect().await
                    && tokio::time::Instant::now() >= deadline
                {
                    return Err(e);
                }
            }
            Err(status) => return Err(client::status_error(status)),
        }
    }
}

/// Run `fluxgate submit`.
pub fn run_submit(args: SubmitArgs) -> anyhow::Result<ExitCode> {
    let copies = args.copy.copies()?;
    if args.dry_run {
        return dry_run(&args, copies.as_ref());
    }
    // Copies are built a batch at a time, so a huge --cc range costs the
    // memory of one batch, not of every request at once.
    let single = match &copies {
        Some(_) => None,
        None => Some(args.opts.request(&args.command, None)?),
    };
    client::block_on(async {
        let mut inst = client::connect().await?;
        let total = copies.as_ref().map_or(1, |(ids, _)| ids.count());
        let bar = progress_bar(args.copy.progress, total, "submitting");
        // Ids are kept only when they are waited for.
        let mut ids = Vec::new();
        let mut failed = false;
        if let Some(req) = single {
            let id = submit_one(&mut inst, req).await?;
            ids.push(id);
            args.copy.print_id(&bar, id);
        } else if let Some((set, env)) = &copies {
            let mut copy_ids = set.iter();
            loop {
                let batch = copy_ids
                    .by_ref()
                    .take(1000)
                    .map(|id| args.opts.request(&args.command, Some((id, *env))))
                    .collect::<anyhow::Result<Vec<_>>>()?;
                if batch.is_empty() {
                    break;
                }
                let resp = inst
                    .jobs
                    .submit_many(pb::SubmitManyRequest { jobs: batch })
                    .await
                    .map_err(client::status_error)?
                    .into_inner();
                let mut accepted = 0;
                for r in resp.results {
                    match r.result {
                        Some(pb::submit_result::Result::Id(id)) => {
                            accepted += 1;
                            let id = JobId::from(id);
                            if args.copy.wait {
                                ids.push(id);
                            }
                            args.copy.print_id(&bar, id);
                        }
                        Some(pb::submit_result::Result::Error(e)) => {
                            bar.suspend(|| {
                                eprintln!("fluxgate-submit: {}", crate::output::printable(&e))
                            });
                            failed = true;
                        }
                        None => failed = true,
                    }
                    bar.inc(1);
                }
                // A batch refused whole (queue stopped, limits) would be
                // followed by more of the same: stop here.
                if accepted == 0 {
                    break;
                }
            }
        }
        bar.finish_and_clear();
        let code = args
            .copy
            .wait_all(&mut inst, &ids, if failed { 1 } else { 0 })
            .await?;
        Ok(ExitCode::from(code.clamp(0, 255) as u8))
    })?
}

/// `--dry-run`: print each jobspec (one per copy with --cc/--bcc) as one
/// line of JSON, as flux does, without contacting the instance.
fn dry_run(args: &SubmitArgs, copies: Option<&(IdSet, bool)>) -> anyhow::Result<ExitCode> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match copies {
        None => writeln!(out, "{}", args.opts.jobspec(&args.command, None)?)?,
        Some((set, env)) => {
            for id in set.iter() {
                writeln!(
                    out,
                    "{}",
                    args.opts.jobspec(&args.command, Some((id, *env)))?
                )?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Run `fluxgate run`: submit, then stream output and exit as the job did.
///
/// As flux's: `--input=RANKS` (an idset, or `all`) sends this process's
/// stdin to those tasks only, `--input=FILE` has the job read FILE, and
/// otherwise stdin goes to every task; the jobspec then asks for the input
/// service (`input.stdin.type=service`), which a job from `submit` lacks.
pub fn run_run(mut args: RunArgs) -> anyhow::Result<ExitCode> {
    let ranks = match args.opts.input.as_deref() {
        Some("all") => Some(String::new()),
        Some(v) if v.parse::<IdSet>().is_ok() => Some(v.to_string()),
        Some(_) => None,
        None => Some(String::new()),
    };
    if ranks.is_some() {
        args.opts.input = None;
    }
    let mut req = args.opts.request(&args.command, None)?;
    if ranks.is_some() {
        req.jobspec = with_input_service(&req.jobspec)?;
    }
    if args.dry_run {
        println!("{}", req.jobspec);
        return Ok(ExitCode::SUCCESS);
    }
    // `-o pty.interactive`: this terminal drives task 0's.
    let terminal = fluxgate_shared::Jobspec::parse(&req.jobspec)
        .ok()
        .and_then(|j| j.shell().ok())
        .and_then(|o| o.pty)
        .is_some_and(|p| p.interactive);
    let stdin = ranks.map(|r| attach::StdinTo {
        ranks: Ranks(r),
        quiet: false,
        terminal,
    });
    client::block_on(async {
        let mut inst = client::connect().await?;
        let id = submit_one(&mut inst, req).await?;
        attach::attach(&mut inst, id, stdin).await
    })?
}

/// The jobspec with the input service asked for.
pub(crate) fn with_input_service(jobspec: &str) -> anyhow::Result<String> {
    let mut v: Value = serde_json::from_str(jobspec)?;
    set_shell_option(&mut v, &["input", "stdin"], json!({"type": "service"}))?;
    Ok(serde_json::to_string(&v)?)
}

/// Set `attributes.system.shell.options.PATH` in a jobspec.
fn set_shell_option(jobspec: &mut Value, path: &[&str], value: Value) -> anyhow::Result<()> {
    let mut at = jobspec
        .pointer_mut("/attributes/system")
        .context("the jobspec has no attributes.system")?;
    let (last, parents) = path.split_last().context("an empty shell option")?;
    for key in ["shell", "options"].iter().chain(parents) {
        at = at
            .as_object_mut()
            .with_context(|| format!("{key}'s parent in the jobspec is not an object"))?
            .entry(key.to_string())
            .or_insert_with(|| json!({}));
    }
    at.as_object_mut()
        .with_context(|| format!("the parent of shell option {last} is not an object"))?
        .insert(last.to_string(), value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Iterator<Item = (String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn env_rules_follow_flux() {
        let base = [
            ("HOME", "/h"),
            ("PATH", "/bin"),
            ("FOO_A", "1"),
            ("FOO_B", "2"),
        ];
        let all = filtered_environment(env(&base), &[], &[]).unwrap().0;
        assert_eq!(all.len(), 4);
        let only_home = filtered_environment(env(&base), &[], &["-*".into(), "HOME".into()])
            .unwrap()
            .0;
        assert_eq!(only_home.keys().collect::<Vec<_>>(), ["HOME"]);
        let no_foo = filtered_environment(env(&base), &["FOO_*".into()], &[])
            .unwrap()
            .0;
        assert_eq!(no_foo.keys().collect::<Vec<_>>(), ["HOME", "PATH"]);
        let (_, expand) =
            filtered_environment(env(&base), &[], &["T={{tmpdir}}/x".into()]).unwrap();
        assert_eq!(expand.get("T").map(String::as_str), Some("{{tmpdir}}/x"));
        let set = filtered_environment(env(&base), &[], &["X=$HOME/x".into()])
            .unwrap()
            .0;
        assert_eq!(set["X"], "/h/x");
        // `/REGEX/` as flux's filter_dict: matched at the start of the name.
        let no_foo = filtered_environment(env(&base), &["/^FOO_[AB]$/".into()], &[])
            .unwrap()
            .0;
        assert_eq!(no_foo.keys().collect::<Vec<_>>(), ["HOME", "PATH"]);
        let no_p = filtered_environment(env(&base), &["/P".into()], &[])
            .unwrap()
            .0;
        assert_eq!(no_p.keys().collect::<Vec<_>>(), ["FOO_A", "FOO_B", "HOME"]);
        let foo_only = filtered_environment(env(&base), &[], &["-*".into(), "/FOO".into()])
            .unwrap()
            .0;
        assert_eq!(foo_only.keys().collect::<Vec<_>>(), ["FOO_A", "FOO_B"]);
        let bad = filtered_environment(env(&base), &["/a(/".into()], &[]).unwrap_err();
        assert!(
            bad.to_string()
                .starts_with("--env: invalid regular expression /a(/")
        );
    }

    #[test]
    fn the_token_is_never_copied() {
        let base = [("HOME", "/h"), ("FLUXGATE_TOKEN", "secret")];
        let all = filtered_environment(env(&base), &[], &[]).unwrap().0;
        assert_eq!(all.keys().collect::<Vec<_>>(), ["HOME"]);
        // Not by name, by glob, by setting it, nor by expanding it.
        let rules = [
            "-*".to_string(),
            "FLUXGATE_*".into(),
            "FLUXGATE_TOKEN".into(),
            "COPY=$FLUXGATE_TOKEN".into(),
            "FLUXGATE_TOKEN=x".into(),
        ];
        let picked = filtered_environment(env(&base), &[], &rules).unwrap().0;
        assert_eq!(picked.get("COPY").map(String::as_str), Some(""));
        assert!(picked.values().all(|v| !v.contains("secret")));
        assert!(!picked.contains_key("FLUXGATE_TOKEN"));
    }

    #[test]
    fn globs() {
        use fluxgate_shared::jobspec::glob_match;
        assert!(glob_match("FOO_*", "FOO_A"));
        assert!(!glob_match("FOO_*", "XFOO_A"));
        assert!(glob_match("F?O", "FOO"));
        assert!(glob_match("[A-C]X", "BX"));
        assert!(!glob_match("[!A-C]X", "BX"));
    }

    #[derive(Debug, clap::Parser)]
    struct Opts {
        #[command(flatten)]
        opts: JobOpts,
    }

    fn instance_spec(args: &[&str]) -> Value {
        let mut argv = vec!["batch"];
        argv.extend_from_slice(args);
        let o = <Opts as clap::Parser>::try_parse_from(argv).unwrap();
        let job = InstanceJob {
            name: Some("steps.sh"),
            output: Some("flux-{{id}}.out"),
            script: Some("#!/bin/sh\nhostname\n"),
            interactive: false,
            conf: None,
        };
        let req = o.opts.instance_request(&["prog".into()], &job).unwrap();
        serde_json::from_str(&req.jobspec).unwrap()
    }

    #[test]
    fn instance_jobs_are_flux_nested_jobs() {
        let v = instance_spec(&["-N2", "--add-file=x=a\\n"]);
        assert_eq!(v["tasks"][0]["count"], json!({"per_slot": 1}));
        assert_eq!(v["resources"][0]["type"], "node");
        assert_eq!(v["resources"][0]["count"], 2);
        assert_eq!(v["resources"][0]["exclusive"], true);
        let sys = &v["attributes"]["system"];
        assert_eq!(
            sys["shell"]["options"]["per-resource"],
            json!({"type": "node"})
        );
        assert_eq!(sys["shell"]["options"]["mpi"], "none");
        assert_eq!(sys["shell"]["options"]["exit-timeout"], "none");
        assert_eq!(sys["environment"].get("FLUXGATE_URI"), None);
        assert_eq!(sys["job"]["name"], "steps.sh");
        assert_eq!(
            sys["shell"]["options"]["output"]["stdout"]["path"],
            "flux-{{id}}.out"
        );
        let files: Vec<&String> = sys["files"].as_object().unwrap().keys().collect();
        assert_eq!(files, ["script", "x"]);
        assert_eq!(sys["files"]["script"]["data"], "#!/bin/sh\nhostname\n");
        assert_eq!(sys["files"]["script"]["mode"], 0o100700);
        // -n slots without -N: not exclusive.
        let v = instance_spec(&["-n2", "-c2"]);
        assert_eq!(v["resources"][0]["type"], "slot");
        assert_eq!(v["resources"][0]["count"], 2);
        // -o after the defaults wins.
        let v = instance_spec(&["-N1", "-o", "exit-timeout=30"]);
        assert_eq!(
            v["attributes"]["system"]["shell"]["options"]["exit-timeout"],
            30
        );
        // --requires becomes an RFC 31 constraint.
        let v = instance_spec(&["-N1", "--requires=ssd"]);
        assert_eq!(
            v["attributes"]["system"]["constraints"],
            json!({"properties": ["ssd"]})
        );
        // Neither -N nor -n: flux's words.
        let o = <Opts as clap::Parser>::try_parse_from(["alloc"]).unwrap();
        let err = o
            .opts
            .instance_request(&["prog".into()], &InstanceJob::default())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Number of slots to allocate must be specified"
        );
    }

    #[test]
    fn counts_are_numbers_or_templates() {
        assert_eq!(parse_count("4"), Ok(Count("4".into())));
        assert_eq!(parse_count("{.p2}"), Ok(Count("{.p2}".into())));
        assert!(parse_count("x").is_err());
        assert!(parse_count("-1").is_err());
        // A template left unfilled (submit, not bulksubmit) is named.
        let o = <Opts as clap::Parser>::try_parse_from(["submit", "-n", "{x}"]).unwrap();
        let err = o.opts.request(&["prog".into()], None).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"--ntasks: invalid count "{x}" (a number is needed)"#
        );
    }

    #[test]
    fn urgency_names() {
        assert_eq!(parse_urgency("hold").unwrap(), 0);
        assert_eq!(parse_urgency("expedite").unwrap(), 31);
        assert_eq!(parse_urgency("7").unwrap(), 7);
        assert!(parse_urgency("32").is_err());
    }
}
