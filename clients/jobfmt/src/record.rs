//! A job as flux-jobs(1) fields see it (flux-core `flux.job.info.JobInfo`),
//! built from the listing RPC's `JobSummary`. Attributes the summary does not
//! carry (cwd, project, bank, ncores, ranks, duration, expiration, t_priority,
//! t_sched, t_cleanup, dependencies) take flux's defaults for an attribute
//! job-list did not return: `""` or `0.0`. `instance.*` fields come from
//! what the caller read from the job's own instance, if it runs one.

use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;
use fluxgate_shared::JobState;
use fluxgate_shared::job::usage::Total;
use fluxgate_shared::job::{JobResult, WaitStatus, returncode_reason};
use fluxgate_shared::policy::format_fsd_py;
use serde_json::Value as Json;

use crate::instance::InstanceInfo;
use crate::pyfmt::Value;

/// One job of the listing, with what its fields need to be computed.
#[derive(Debug, Clone)]
pub struct JobRecord {
    /// The listing RPC's summary.
    pub job: pb::JobSummary,
    /// The submitter's user name (the uid when it has none).
    pub username: String,
    /// Now, in seconds since the epoch (runtime of running jobs).
    pub now: f64,
    /// The id in F58 as this terminal prints it.
    pub f58: String,
    annotations: Json,
    /// What the instance this job runs reports, when it runs one.
    instance: Option<InstanceInfo>,
    /// What the job used, once it has ended in cgroups.
    usage: Option<Total>,
    /// Fields read from the job's own documents, when the format asks.
    details: Option<crate::details::JobDetails>,
}

impl JobRecord {
    /// Wrap `job`; `f58` is its id as the caller's locale prints it.
    pub fn new(job: pb::JobSummary, username: String, f58: String, now: f64) -> JobRecord {
        let annotations = serde_json::from_str(&job.annotations).unwrap_or(Json::Null);
        JobRecord {
            job,
            username,
            now,
            f58,
            annotations,
            instance: None,
            usage: None,
            details: None,
        }
    }

    /// The record with what the job used (`cpu_time`, `max_rss`).
    pub fn with_details(self, details: crate::details::JobDetails) -> JobRecord {
        JobRecord {
            details: Some(details),
            ..self
        }
    }

    /// The same record with what the job used.
    pub fn with_usage(self, usage: Total) -> JobRecord {
        JobRecord {
            usage: Some(usage),
            ..self
        }
    }

    /// The record with the `instance.*` fields of the instance it runs.
    pub fn with_instance(self, info: InstanceInfo) -> JobRecord {
        JobRecord {
            instance: Some(info),
            ..self
        }
    }

    fn state(&self) -> Option<JobState> {
        self.job.state.parse().ok()
    }

    fn result(&self) -> Option<JobResult> {
        if self.state() != Some(JobState::Inactive) {
            return None;
        }
        self.job.result.parse().ok()
    }

    fn pending(&self) -> bool {
        self.state().is_some_and(JobState::is_pending)
    }

    fn runtime(&self) -> f64 {
        let j = &self.job;
        // flux uses t_cleanup - t_run; the summary has no t_cleanup, and an
        // inactive job's t_inactive follows cleanup closely.
        match self.state() {
            _ if j.t_run <= 0.0 => 0.0,
            Some(JobState::Inactive) => (j.t_inactive - j.t_run).max(0.0),
            _ => (self.now - j.t_run).max(0.0),
        }
    }

    fn status(&self, short: bool) -> String {
        match (self.state(), self.result()) {
            (Some(JobState::Inactive), Some(r)) if short => r.abbrev().into(),
            (Some(JobState::Inactive), Some(r)) => r.name().into(),
            (Some(JobState::Inactive), None) => String::new(),
            (Some(s), _) if short => s.letter().to_string(),
            (Some(s), _) => s.name().into(),
            (None, _) => String::new(),
        }
    }

    fn returncode(&self) -> Value {
        match (self.job.waitstatus, self.result()) {
            (Some(ws), _) => Value::Int(i64::from(WaitStatus(ws).returncode())),
            (None, Some(JobResult::Canceled)) => Value::Int(-128),
            (None, Some(JobResult::Failed)) => Value::Int(1),
            (None, _) => Value::empty(),
        }
    }

    fn exception_occurred(&self) -> Value {
        if !self.job.exception_type.is_empty() {
            Value::Bool(true)
        } else if self.state() == Some(JobState::Inactive) {
            Value::Bool(false)
        } else {
            Value::empty()
        }
    }

    fn annotation(&self, path: &str) -> Value {
        let mut v = &self.annotations;
        for k in path.split('.').filter(|k| !k.is_empty()) {
            match v.get(k) {
                Some(x) => v = x,
                None => return Value::empty(),
            }
        }
        json_value(v)
    }

    fn contextual_info(&self) -> Value {
        let j = &self.job;
        let s = match self.state() {
            Some(JobState::Priority) => "priority-wait".into(),
            Some(JobState::Depend) => "depends:".into(),
            Some(JobState::Sched) => match self.annotation("sched.t_estimate").as_f64() {
                Some(t) if t - self.now < 0.0 => "eta:now".into(),
                Some(t) => format!("eta:{}", format_fsd_py(t - self.now)),
                None if j.urgency == 0 => "held".into(),
                None if j.priority == 0 => "priority-hold".into(),
                // Why the job waits, when something says (a limit's name).
                None => match self.annotation("sched.reason_pending") {
                    Value::Str(reason) => reason,
                    _ => String::new(),
                },
            },
            _ => j.nodelist.clone(),
        };
        Value::Str(s)
    }

    fn inactive_reason(&self) -> Value {
        let j = &self.job;
        let s = match self.result() {
            None => String::new(),
            Some(JobResult::Canceled)
                if j.exception_type == "cancel" && !j.exception_note.is_empty() =>
            {
                format!("Canceled: {}", j.exception_note)
            }
            Some(JobResult::Canceled) => "Canceled".into(),
            Some(JobResult::Timeout) => "Timeout".into(),
            // The summary's exception is the first fatal one (severity 0).
            Some(JobResult::Failed)
                if !j.exception_type.is_empty() && j.exception_type != "exec" =>
            {
                let note = if j.exception_note.is_empty() {
                    String::new()
                } else {
                    format!(" note={}", j.exception_note)
                };
                format!("Exception: type={}{note}", j.exception_type)
            }
            Some(JobResult::Failed) => match self.returncode() {
                Value::Int(rc) => {
                    i32::try_from(rc).map_or_else(|_| format!("Exit {rc}"), returncode_reason)
                }
                rc => format!("Exit {}", rc.to_py_str()),
            },
            Some(_) => format!("Exit {}", self.returncode().to_py_str()),
        };
        Value::Str(s)
    }

    fn id(&self, enc: &str) -> Value {
        let id = JobId::from(self.job.id);
        Value::Str(match enc {
            "f58" => self.f58.clone(),
            "f58plain" => id.to_f58_ascii(),
            "hex" => id.to_hex(),
            "dothex" => id.to_dothex(),
            "kvs" => id.to_kvs(),
            "words" => id.to_words(),
            "emoji" => id.to_emoji(),
            _ => self.job.id.to_string(),
        })
    }
}

/// A JSON annotation as Python would print it.
fn json_value(v: &Json) -> Value {
    match v {
        Json::String(s) => Value::Str(s.clone()),
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(0.0)),
        },
        Json::Null => Value::Str("None".into()),
        Json::Object(m) if m.is_empty() => Value::empty(),
        Json::Object(_) => Value::Str(py_json(v)),
        Json::Array(_) => Value::Str(py_repr(v)),
    }
}

/// `json.dumps(v)`: `", "` and `": "` separators, non-ASCII escaped.
fn py_json(v: &Json) -> String {
    match v {
        Json::Object(m) => {
            let parts: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{}: {}", py_json_str(k), py_json(v)))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        Json::Array(a) => format!("[{}]", a.iter().map(py_json).collect::<Vec<_>>().join(", ")),
        Json::String(s) => py_json_str(s),
        Json::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => crate::template::py_float(n.as_f64().unwrap_or(0.0)),
        },
        other => other.to_string(),
    }
}

fn py_json_str(s: &str) -> String {
    let mut out = String::from('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for u in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{u:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Python `repr()` of a list or scalar from JSON (a list annotation's `str`).
fn py_repr(v: &Json) -> String {
    match v {
        Json::Array(a) => format!("[{}]", a.iter().map(py_repr).collect::<Vec<_>>().join(", ")),
        Json::String(s) => format!("'{s}'"),
        Json::Object(m) => {
            let parts: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("'{k}': {}", py_repr(v)))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        other => json_value(other).to_py_str(),
    }
}

/// The field names flux-jobs(1) accepts and their column headers; `None`
/// for an unknown field. `annotations.*`, `sched.*`, `user.*` and
/// `instance.*` are open-ended, as in flux.
pub fn heading(field: &str) -> Option<String> {
    let h = match field {
        "id" | "id.dec" | "id.hex" | "id.f58" | "id.f58plain" | "id.emoji" | "id.kvs"
        | "id.words" | "id.dothex" => "JOBID",
        "userid" => "UID",
        "username" | "user" => "USER",
        "urgency" => "URG",
        "priority" => "PRI",
        "state" | "state_emoji" => "STATE",
        "state_single" => "S",
        "name" => "NAME",
        "cwd" => "CWD",
        "queue" => "QUEUE",
        "project" => "PROJECT",
        "bank" => "BANK",
        "ntasks" => "NTASKS",
        "ncores" => "NCORES",
        "duration" => "DURATION",
        "nnodes" => "NNODES",
        "expiration" => "EXPIRATION",
        "t_remaining" => "T_REMAINING",
        "ranks" => "RANKS",
        "nodelist" => "NODELIST",
        "success" => "SUCCESS",
        "result" | "result_emoji" => "RESULT",
        "result_abbrev" => "RS",
        "t_submit" => "T_SUBMIT",
        "t_depend" => "T_DEPEND",
        "t_priority" => "T_PRIORITY",
        "t_sched" => "T_SCHED",
        "t_run" => "T_RUN",
        "t_cleanup" => "T_CLEANUP",
        "t_inactive" => "T_INACTIVE",
        "runtime" => "RUNTIME",
        "status" | "status_emoji" => "STATUS",
        "status_abbrev" => "ST",
        "waitstatus" => "WSTATUS",
        "returncode" => "RC",
        "exception.occurred" => "EXCEPTION-OCCURRED",
        "exception.severity" => "EXCEPTION-SEVERITY",
        "exception.type" => "EXCEPTION-TYPE",
        "exception.note" => "EXCEPTION-NOTE",
        "annotations" => "ANNOTATIONS",
        "dependencies" => "DEPENDENCIES",
        "contextual_info" => "INFO",
        "contextual_time" => "TIME",
        "inactive_reason" => "INACTIVE-REASON",
        "cpu_time" => "CPU_TIME",
        "max_rss" => "MAX_RSS",
        "annotations.sched.t_estimate" | "sched.t_estimate" => "T_ESTIMATE",
        "annotations.sched.reason_pending" | "sched.reason_pending" => "REASON",
        "annotations.sched.resource_summary" | "sched.resource_summary" => "RESOURCES",
        "sched" => "SCHED",
        "uri" | "uri.local" => "URI",
        "instance.stats.total" => "NJOBS",
        "instance.utilization" => "CORE%",
        "instance.gpu_utilization" => "GPU%",
        "instance.progress" => "PROG",
        "instance.resources.all.ncores" => "CORES",
        "instance.resources.all.ngpus" => "GPUS",
        "instance.resources.all.nnodes" => "NODES",
        "instance.resources.up.ncores"
        | "instance.resources.up.ngpus"
        | "instance.resources.up.nnodes" => "UP",
        "instance.resources.down.ncores"
        | "instance.resources.down.ngpus"
        | "instance.resources.down.nnodes" => "DOWN",
        "instance.resources.allocated.ncores"
        | "instance.resources.allocated.ngpus"
        | "instance.resources.allocated.nnodes" => "USED",
        "instance.resources.free.ncores"
        | "instance.resources.free.ngpus"
        | "instance.resources.free.nnodes" => "FREE",
        _ => return open_heading(field),
    };
    Some(h.into())
}

fn open_heading(field: &str) -> Option<String> {
    if let Some(rest) = field.strip_prefix("annotations.") {
        return Some(rest.to_uppercase());
    }
    if field.starts_with("sched.") || field.starts_with("user.") {
        return Some(field.to_uppercase());
    }
    // Any other instance field: its name upper-cased, without a leading
    // RESOURCES. (so `instance.stats` is STATS).
    if let Some(rest) = field.strip_prefix("instance.") {
        let h = rest.to_uppercase();
        return Some(match h.strip_prefix("RESOURCES.") {
            Some(r) => r.to_string(),
            None => h,
        });
    }
    None
}

fn state_emoji(letter: char) -> &'static str {
    match letter {
        'N' => "\u{1f381}",
        'D' => "\u{1f6d1}",
        'P' => "\u{1f6a6}",
        'S' => "\u{1f4c5}",
        'R' => "\u{1f3c3}",
        'C' => "\u{1f5d1}",
        _ => "\u{1f480}",
    }
}

fn result_emoji(r: Option<JobResult>) -> &'static str {
    match r {
        Some(JobResult::Completed) => "\u{1f600}",
        Some(JobResult::Failed) => "\u{1f4a9}",
        Some(JobResult::Canceled) => "\u{1f4a5}",
        Some(JobResult::Timeout) => "\u{231b}",
        // flux prints an ideographic space for no result.
        None => "\u{3000}",
    }
}

fn time(t: f64) -> Value {
    Value::Float(if t > 0.0 { t } else { 0.0 })
}

impl crate::template::Record for JobRecord {
    /// A field as a person sees it: user strings (names, notes, annotations)
    /// may hold control or bidi characters, which are escaped so they cannot
    /// drive the terminal; widths and truncation then count the escaped form.
    fn field(&self, name: &str) -> Value {
        match self.raw_field(name) {
            Value::Str(s) => match crate::printable(&s) {
                std::borrow::Cow::Borrowed(_) => Value::Str(s),
                std::borrow::Cow::Owned(escaped) => Value::Str(escaped),
            },
            other => other,
        }
    }
}

impl JobRecord {
    /// A field read from the job's documents (flux's defaults without them).
    fn detail(&self, name: &str) -> Value {
        let d = self.details.clone().unwrap_or_default();
        let s = |x: &str| Value::Str(x.to_string());
        match name {
            "cwd" => s(&d.cwd),
            "project" => s(&d.project),
            "bank" => s(&d.bank),
            "ncores" => d.ncores.map_or_else(Value::empty, |n| {
                Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
            }),
            "ranks" => s(&d.ranks),
            "duration" => Value::Float(d.duration),
            "expiration" => Value::Float(d.expiration),
            "t_priority" => time(d.t_priority),
            "t_sched" => time(d.t_sched),
            "t_cleanup" => time(d.t_cleanup),
            // flux's DependencyList prints comma-separated.
            "dependencies" => s(&d.dependencies.join(",")),
            _ => Value::empty(),
        }
    }

    /// A field's value as stored.
    fn raw_field(&self, name: &str) -> Value {
        let j = &self.job;
        let s = |x: &str| Value::Str(x.to_string());
        match name {
            "id" => Value::JobId(j.id, self.f58.clone()),
            n if n.starts_with("id.") => self.id(&n[3..]),
            "userid" => Value::Int(i64::from(j.userid)),
            "username" => s(&self.username),
            "urgency" => Value::Int(i64::from(j.urgency)),
            // job-list has no priority before the PRIORITY state.
            "priority" if matches!(self.state(), Some(JobState::New | JobState::Depend)) => {
                Value::empty()
            }
            // An inactive job keeps its last priority, as in flux: the
            // summary has none, its eventlog does.
            "priority"
                if let Some(p) = self
                    .details
                    .as_ref()
                    .filter(|_| matches!(self.state(), Some(JobState::Inactive)))
                    .and_then(|d| d.priority) =>
            {
                Value::Int(i64::from(p))
            }
            "priority" => Value::Int(i64::try_from(j.priority).unwrap_or(i64::MAX)),
            "state" => s(self.state().map(JobState::name).unwrap_or("")),
            "state_single" => Value::Str(
                self.state()
                    .map(|x| x.letter().to_string())
                    .unwrap_or_default(),
            ),
            "state_emoji" => s(state_emoji(
                self.state().map(JobState::letter).unwrap_or('I'),
            )),
            "name" => s(&j.name),
            "queue" => s(&j.queue),
            "ntasks" => Value::Int(i64::from(j.ntasks)),
            // Zero nodes means not yet known (no -N, not yet allocated).
            "nnodes" if j.nnodes == 0 => Value::empty(),
            "nnodes" => Value::Int(i64::from(j.nnodes)),
            "nodelist" => s(&j.nodelist),
            "cwd" | "project" | "bank" | "ncores" | "ranks" | "duration" | "expiration"
            | "t_priority" | "t_sched" | "t_cleanup" | "dependencies" => self.detail(name),
            "t_remaining" => Value::Float(0.0),
            "success" => match self.result() {
                Some(r) => Value::Bool(r == JobResult::Completed),
                None => Value::empty(),
            },
            "result" => s(self.result().map(JobResult::name).unwrap_or("")),
            "result_abbrev" => s(self.result().map(JobResult::abbrev).unwrap_or("")),
            "result_emoji" => s(result_emoji(self.result())),
            "t_submit" => time(j.t_submit),
            // The depend state is entered at submission, once validated.
            "t_depend" => time(j.t_submit),
            "t_run" => time(j.t_run),
            "t_inactive" => time(j.t_inactive),
            "runtime" => Value::Float(self.runtime()),
            "status" => Value::Str(self.status(false)),
            "status_abbrev" => Value::Str(self.status(true)),
            "status_emoji" => match self.state() {
                Some(JobState::Inactive) => s(result_emoji(self.result())),
                st => s(state_emoji(st.map(JobState::letter).unwrap_or('I'))),
            },
            "waitstatus" => j
                .waitstatus
                .map(|w| Value::Int(i64::from(w)))
                .unwrap_or_else(Value::empty),
            "returncode" => self.returncode(),
            "exception.occurred" => self.exception_occurred(),
            "exception.severity" if j.exception_type.is_empty() => Value::empty(),
            "exception.severity" => Value::Int(0),
            "exception.type" => s(&j.exception_type),
            "exception.note" => s(&j.exception_note),
            "annotations" => self.annotation(""),
            n if n.starts_with("annotations.") => self.annotation(&n["annotations.".len()..]),
            "sched" | "user" => self.annotation(name),
            n if n.starts_with("sched.") || n.starts_with("user.") => self.annotation(n),
            "uri" | "uri.local" => self.annotation("user.uri"),
            "contextual_info" => self.contextual_info(),
            "contextual_time" if self.pending() => Value::Float(0.0),
            "contextual_time" => Value::Float(self.runtime()),
            "inactive_reason" => self.inactive_reason(),
            // Empty where the job's nodes did not contain it in cgroups.
            "cpu_time" => self
                .usage
                .map_or_else(Value::empty, |u| Value::Float(u.cpu_time())),
            "max_rss" => self.usage.map_or_else(Value::empty, |u| {
                Value::Int(i64::try_from(u.max_rss).unwrap_or(i64::MAX))
            }),
            // A job that runs no instance has none of these, as in flux.
            n if n.starts_with("instance.") => self
                .instance
                .as_ref()
                .and_then(|i| i.field(&n["instance.".len()..]))
                .unwrap_or_else(Value::empty),
            // cwd, project, bank, ncores, ranks, dependencies: not in the
            // summary; flux's default for a missing attribute.
            _ => Value::empty(),
        }
    }
}
