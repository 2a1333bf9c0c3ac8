//! The attributes section: `system` (well-known keys typed, the rest kept
//! as JSON) and `user` (free-form JSON).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::dependency::{Dependency, parse_dependencies};
use super::error::{JobspecError, index, join};
use super::files::{JobFile, parse_files};
use crate::idset::IdSet;

/// Why a Flux Standard Duration string could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid duration {0:?}: expected a non-negative number with optional suffix ms, s, m, h or d"
)]
pub struct DurationError(pub String);

/// Parse an RFC 23 Flux Standard Duration (`"30s"`, `"2m"`, `"1.5h"`,
/// `"10ms"`, `"2d"`, `"inf"`; a bare number is seconds) into seconds.
pub fn parse_fsd(s: &str) -> Result<f64, DurationError> {
    let bad = || DurationError(s.to_string());
    let t = s.trim();
    if matches!(t.to_ascii_lowercase().as_str(), "inf" | "infinity") {
        return Ok(f64::INFINITY);
    }
    let split = t
        .find(|c: char| {
            !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')
        })
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale = match unit {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => return Err(bad()),
    };
    let n: f64 = num.parse().map_err(|_| bad())?;
    if !n.is_finite() || n < 0.0 {
        return Err(bad());
    }
    Ok(n * scale)
}

/// Options for the timer-driven test execution (no processes run), read
/// from `attributes.system.exec.test`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecTest {
    /// How long the pretend job runs, in seconds (FSD string or number).
    pub run_duration: Option<f64>,
    /// All test options as written.
    pub raw: Map<String, Value>,
}

/// `attributes.system`, with the keys the services use typed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SystemAttributes {
    /// Time limit in seconds; 0 = unlimited.
    pub duration: Option<f64>,
    /// Working directory of the tasks.
    pub cwd: Option<String>,
    /// Environment of the tasks.
    pub environment: Option<BTreeMap<String, String>>,
    /// Queue name.
    pub queue: Option<String>,
    /// Bank name.
    pub bank: Option<String>,
    /// Project name.
    pub project: Option<String>,
    /// `job.name`.
    pub job_name: Option<String>,
    /// RFC 26 dependencies (empty when the key is absent).
    pub dependencies: Vec<Dependency>,
    /// RFC 31 constraints object.
    pub constraints: Option<Map<String, Value>>,
    /// `shell.options`, as JSON.
    pub shell_options: Map<String, Value>,
    /// `exec.test`, when the job asks for test execution.
    pub exec_test: Option<ExecTest>,
    /// `files`: what the job carries into its temporary directory (RFC 37).
    pub files: Vec<JobFile>,
}

/// Parse the `attributes` object (RFC 14 level: only `system` and `user`).
pub(crate) fn parse_attributes(
    v: &Value,
) -> Result<(Option<SystemAttributes>, Option<Value>), JobspecError> {
    let obj = v
        .as_object()
        .ok_or_else(|| JobspecError::wrong_type("attributes", "an object", v))?;
    for key in obj.keys() {
        if key != "system" && key != "user" {
            return Err(JobspecError::unknown_key(&join("attributes", key)));
        }
    }
    let system = obj.get("system").map(parse_system).transpose()?;
    Ok((system, obj.get("user").cloned()))
}

fn parse_system(v: &Value) -> Result<SystemAttributes, JobspecError> {
    let path = "attributes.system";
    let obj = match v {
        Value::Object(o) => o,
        // YAML `system:` with nothing under it reads as null.
        other => return Err(JobspecError::wrong_type(path, "an object", other)),
    };
    let p = |k: &str| join(path, k);
    let string = |k: &str| -> Result<Option<String>, JobspecError> {
        match obj.get(k) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(JobspecError::wrong_type(&p(k), "a string", other)),
        }
    };
    let mut sys = SystemAttributes {
        cwd: string("cwd")?,
        queue: string("queue")?,
        bank: string("bank")?,
        project: string("project")?,
        ..SystemAttributes::default()
    };
    if let Some(d) = obj.get("duration") {
        sys.duration = Some(parse_duration_number(d, &p("duration"))?);
    }
    if let Some(env) = obj.get("environment") {
        sys.environment = Some(parse_environment(env, &p("environment"))?);
    }
    if let Some(job) = obj.get("job") {
        let jp = p("job");
        let job = job
            .as_object()
            .ok_or_else(|| JobspecError::wrong_type(&jp, "an object", job))?;
        sys.job_name = match job.get("name") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                return Err(JobspecError::wrong_type(
                    &join(&jp, "name"),
                    "a string",
                    other,
                ));
            }
        };
    }
    if let Some(deps) = obj.get("dependencies") {
        sys.dependencies = parse_dependencies(deps, &p("dependencies"))?;
    }
    if let Some(c) = obj.get("constraints") {
        let cp = p("constraints");
        check_constraint(c, &cp)?;
        sys.constraints = c.as_object().cloned();
    }
    if let Some(shell) = obj.get("shell") {
        let sp = p("shell");
        let shell = shell
            .as_object()
            .ok_or_else(|| JobspecError::wrong_type(&sp, "an object", shell))?;
        if let Some(opts) = shell.get("options") {
            sys.shell_options = opts.as_object().cloned().ok_or_else(|| {
                JobspecError::wrong_type(&join(&sp, "options"), "an object", opts)
            })?;
        }
    }
    if let Some(exec) = obj.get("exec") {
        sys.exec_test = parse_exec_test(exec, &p("exec"))?;
    }
    if let Some(files) = obj.get("files") {
        sys.files = parse_files(files, &p("files"))?;
    }
    Ok(sys)
}

fn parse_duration_number(v: &Value, path: &str) -> Result<f64, JobspecError> {
    let d = match v {
        Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
        // Version 1 carries the limit as seconds; `flux run -t 2s` converts
        // the FSD string before submitting.
        other => return Err(JobspecError::wrong_type(path, "a number of seconds", other)),
    };
    if !d.is_finite() || d < 0.0 {
        return Err(JobspecError::invalid(
            path,
            format!("must be a finite number of seconds >= 0, got {d}"),
        ));
    }
    Ok(d)
}

fn parse_environment(v: &Value, path: &str) -> Result<BTreeMap<String, String>, JobspecError> {
    let obj = v
        .as_object()
        .ok_or_else(|| JobspecError::wrong_type(path, "an object (name: value)", v))?;
    obj.iter()
        .map(|(k, val)| match val {
            Value::String(s) => Ok((k.clone(), s.clone())),
            other => Err(JobspecError::wrong_type(&join(path, k), "a string", other)),
        })
        .collect()
}

fn parse_exec_test(v: &Value, path: &str) -> Result<Option<ExecTest>, JobspecError> {
    let obj = v
        .as_object()
        .ok_or_else(|| JobspecError::wrong_type(path, "an object", v))?;
    let Some(test) = obj.get("test") else {
        return Ok(None);
    };
    let tp = join(path, "test");
    let raw = test
        .as_object()
        .cloned()
        .ok_or_else(|| JobspecError::wrong_type(&tp, "an object", test))?;
    let rp = join(&tp, "run_duration");
    let run_duration = match raw.get("run_duration") {
        None => None,
        Some(Value::String(s)) => {
            Some(parse_fsd(s).map_err(|e| JobspecError::invalid(&rp, e.to_string()))?)
        }
        Some(n @ Value::Number(_)) => Some(parse_duration_number(n, &rp)?),
        Some(other) => {
            return Err(JobspecError::wrong_type(
                &rp,
                "a duration string like \"2s\" or a number",
                other,
            ));
        }
    };
    Ok(Some(ExecTest { run_duration, raw }))
}

/// RFC 31 check as flux-core's Python validator does it. Hostlists are only
/// checked to be strings: the job manager matches them against R.
fn check_constraint(v: &Value, path: &str) -> Result<(), JobspecError> {
    // Explicit stack: constraints nest (and/or/not) and depth is bounded
    // by the input limits, but no recursion is needed.
    let mut stack: Vec<(&Value, String)> = vec![(v, path.to_string())];
    while let Some((v, path)) = stack.pop() {
        let obj = v
            .as_object()
            .ok_or_else(|| JobspecError::wrong_type(&path, "an object (RFC 31 constraint)", v))?;
        for (op, args) in obj {
            let op_path = join(&path, op);
            let nested = match op.as_str() {
                "and" | "or" | "not" => true,
                "properties" | "hostlist" | "ranks" => false,
                _ => {
                    return Err(JobspecError::invalid(
                        &op_path,
                        format!("unknown constraint operator {op:?}"),
                    ));
                }
            };
            let args = args
                .as_array()
                .ok_or_else(|| JobspecError::wrong_type(&op_path, "an array", args))?;
            for (i, arg) in args.iter().enumerate() {
                let arg_path = index(&op_path, i);
                if nested {
                    stack.push((arg, arg_path));
                    continue;
                }
                let Value::String(s) = arg else {
                    return Err(JobspecError::wrong_type(&arg_path, "a string", arg));
                };
                if op == "properties"
                    && let Some(c) = s.chars().find(|c| "&'\"`|()".contains(*c))
                {
                    return Err(JobspecError::invalid(
                        &arg_path,
                        format!("invalid character {c:?} in property {s:?}"),
                    ));
                }
                if op == "ranks" {
                    IdSet::parse(s).map_err(|e| JobspecError::invalid(&arg_path, e.to_string()))?;
                }
            }
        }
    }
    Ok(())
}
