//! The job shell's options (`attributes.system.shell.options`, set with
//! `-o`/`--setopt`) as flux-core's shell and its plugins read them
//! (flux-shell-options(7)): typed, with flux's defaults, a clear error for a
//! bad value of a known option, and the names nobody knows kept for the
//! warning the job's stderr gets.

use serde_json::{Map, Value};

use super::attributes::parse_fsd;
use crate::idset::IdSet;

/// Every option name flux-core's shell, its plugins and its submission
/// commands write, and Fluxgate's own (`cgroup`): known, even where this
/// shell does nothing with them.
const KNOWN: &[&str] = &[
    "cgroup",
    "coprocess",
    "coprocess-kill-timeout",
    "cpu-affinity",
    "env-expand",
    "exit-on-error",
    "exit-timeout",
    "gpu-affinity",
    "hwloc",
    "initrc",
    "input",
    "mpi",
    "nosetpgrp",
    "oom",
    "output",
    "per-resource",
    "pmi",
    "pmi-simple",
    "pty",
    "rexec-shutdown-timeout",
    "rlimit",
    "signal",
    "stage-in",
    "stop-tasks-in-exec",
    "sysmon",
    "taskmap",
    "userrc",
    "verbose",
];

/// flux's default grace after the first task exits: 30 s.
pub const DEFAULT_EXIT_TIMEOUT: f64 = 30.0;

/// A known option with a value it cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("shell option {option}: {message}")]
pub struct ShellOptionError {
    /// The option, dotted (`cpu-affinity`, `pty.ranks`).
    pub option: String,
    /// What is wrong with its value.
    pub message: String,
}

fn bad(option: &str, message: impl Into<String>) -> ShellOptionError {
    ShellOptionError {
        option: option.to_string(),
        message: message.into(),
    }
}

/// How tasks are bound to the job's CPUs or GPUs on a node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Affinity {
    /// Every task gets all of the job's CPUs (GPUs) on its node (flux's default).
    #[default]
    On,
    /// Nothing is bound (no `CUDA_VISIBLE_DEVICES` for GPUs).
    Off,
    /// The node's CPUs (GPUs) shared out evenly among its tasks.
    PerTask,
    /// Task i (local) gets the i-th set, wrapping around.
    Map(Vec<IdSet>),
}

/// Which tasks get a pty, and what it is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pty {
    /// The task ranks with a pty; `None` for all.
    pub ranks: Option<IdSet>,
    /// What the pty shows goes into the job's output.
    pub capture: bool,
    /// Driven by `run`/`attach` with the caller's terminal.
    pub interactive: bool,
}

impl Pty {
    /// Whether task `task` gets a terminal: those `pty.ranks` names, and
    /// task 0 whenever the terminal is interactive (flux adds it, since
    /// only task 0's terminal can be driven).
    pub fn gives(&self, task: u32) -> bool {
        (self.interactive && task == 0) || self.ranks.as_ref().is_none_or(|r| r.contains(task))
    }

    /// Whether what task `task`'s terminal shows is recorded in the job's
    /// output. As flux's shell (`pty.c`): every terminal is, but the
    /// interactive one (task 0's) only with `pty.capture`; without it that
    /// output is shown live to the attached client and not stored.
    pub fn captures(&self, task: u32) -> bool {
        self.capture || !(self.interactive && task == 0)
    }
}

/// Where the tasks' standard input comes from (`input.stdin`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Input {
    /// /dev/null: a job submitted without input (flux would wait for
    /// `attach`; Fluxgate gives such a job no input at all).
    #[default]
    Null,
    /// Forwarded by `run` or `job attach` (`input.stdin.type=service`).
    Service,
    /// Read from this file as the job's owner (`--input=FILE`).
    File(String),
}

/// A signal sent some time before the job's expiration (`--signal`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WarnSignal {
    /// The signal number.
    pub signum: i32,
    /// Seconds before the expiration.
    pub timeleft: f64,
}

/// The shell options, typed.
#[derive(Debug, Clone, PartialEq)]
pub struct ShellOptions {
    /// The PMI-1 simple wire protocol is served.
    pub pmi: bool,
    /// CPU binding.
    pub cpu_affinity: Affinity,
    /// GPU visibility.
    pub gpu_affinity: Affinity,
    /// Grace after the first task exits before the job is ended; `None`: none.
    pub exit_timeout: Option<f64>,
    /// End the job at once when the first task to exit failed.
    pub exit_on_error: bool,
    /// The warning signal before expiration.
    pub signal: Option<WarnSignal>,
    /// Ptys, when asked for.
    pub pty: Option<Pty>,
    /// Output written through without line buffering.
    pub unbuffered: bool,
    /// The tasks' standard input.
    pub input: Input,
    /// Option names this shell does not know, for the job's warning.
    pub unknown: Vec<String>,
}

impl Default for ShellOptions {
    fn default() -> Self {
        ShellOptions {
            pmi: true,
            cpu_affinity: Affinity::On,
            gpu_affinity: Affinity::On,
            exit_timeout: Some(DEFAULT_EXIT_TIMEOUT),
            exit_on_error: false,
            signal: None,
            pty: None,
            unbuffered: false,
            input: Input::Null,
            unknown: Vec::new(),
        }
    }
}

impl ShellOptions {
    /// Read the options object of a jobspec.
    pub fn parse(options: &Map<String, Value>) -> Result<ShellOptions, ShellOptionError> {
        let mut unknown: Vec<String> = options
            .keys()
            .filter(|k| !KNOWN.contains(&k.as_str()))
            .cloned()
            .collect();
        unknown.sort();
        let mut s = ShellOptions {
            unknown,
            ..ShellOptions::default()
        };
        if let Some(v) = options.get("pmi") {
            s.pmi = pmi_enabled(v)?;
        }
        if let Some(v) = options.get("cpu-affinity") {
            s.cpu_affinity = affinity("cpu-affinity", v)?;
        }
        if let Some(v) = options.get("gpu-affinity") {
            s.gpu_affinity = affinity("gpu-affinity", v)?;
        }
        if let Some(v) = options.get("exit-timeout") {
            s.exit_timeout = exit_timeout(v)?;
        }
        if let Some(v) = options.get("exit-on-error") {
            s.exit_on_error = truthy(v);
        }
        if let Some(v) = options.get("signal") {
            s.signal = Some(signal(v)?);
        }
        if let Some(v) = options.get("pty") {
            s.pty = pty(v)?;
        }
        if let Some(v) = options.get("input").and_then(|i| i.get("stdin")) {
            s.input = input(v)?;
        }
        s.unbuffered = ["stdout", "stderr"].iter().any(|stream| {
            options
                .get("output")
                .and_then(|o| o.get(stream))
                .and_then(|o| o.get("buffer"))
                .and_then(|b| b.get("type"))
                .and_then(Value::as_str)
                == Some("none")
        });
        Ok(s)
    }

    /// The warning for the job's stderr naming the unknown options, if any.
    pub fn unknown_warning(&self) -> Option<String> {
        if self.unknown.is_empty() {
            return None;
        }
        let list: Vec<String> = self.unknown.iter().map(|o| format!("-o {o}")).collect();
        Some(format!(
            "fluxgate-shell: unknown option {}\n",
            list.join(", ")
        ))
    }
}

/// An option given bare (`-o exit-on-error`) is 1; false, 0 and "0" turn it off.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !matches!(s.as_str(), "0" | "false" | "off" | "no"),
        Value::Null => false,
        _ => true,
    }
}

/// flux-core: enabled only if `pmi=LIST` names `simple` (or `pmi1`,
/// `pmi2`, its aliases); `off`, `none` or another list turn it off.
fn pmi_enabled(v: &Value) -> Result<bool, ShellOptionError> {
    let list = v
        .as_str()
        .ok_or_else(|| bad("pmi", "expected a comma-separated list of PMI services"))?;
    Ok(list
        .split(',')
        .any(|m| matches!(m.trim(), "simple" | "pmi1" | "pmi2")))
}

fn affinity(option: &str, v: &Value) -> Result<Affinity, ShellOptionError> {
    let text = match v {
        Value::String(s) => s.as_str(),
        // `-o cpu-affinity` alone.
        Value::Number(_) | Value::Bool(true) => "on",
        _ => return Err(bad(option, "expected on, off, per-task or map:LIST")),
    };
    // Leading `verbose,` and `dry-run,` change only what is logged.
    let mode = text
        .split(',')
        .find(|w| !matches!(*w, "verbose" | "dry-run"))
        .unwrap_or("on");
    match mode {
        "on" => Ok(Affinity::On),
        "off" => Ok(Affinity::Off),
        "per-task" => Ok(Affinity::PerTask),
        m => match m.strip_prefix("map:") {
            Some(list) => map_list(option, list),
            None => Err(bad(
                option,
                format!("invalid value {m:?}: expected on, off, per-task or map:LIST"),
            )),
        },
    }
}

/// `map:LIST`: sets separated by `;`, each an idset (`0-1`) or a hex mask (`0x3`).
fn map_list(option: &str, list: &str) -> Result<Affinity, ShellOptionError> {
    let mut sets = Vec::new();
    for entry in list.split(';') {
        let entry = entry.trim();
        let set = match entry.strip_prefix("0x") {
            Some(hex) => {
                let mask = u128::from_str_radix(hex, 16)
                    .map_err(|_| bad(option, format!("invalid mask {entry:?} in map")))?;
                (0..128u32).filter(|b| mask & (1u128 << b) != 0).collect()
            }
            None => entry
                .parse::<IdSet>()
                .map_err(|_| bad(option, format!("invalid set {entry:?} in map")))?,
        };
        sets.push(set);
    }
    if sets.is_empty() {
        return Err(bad(option, "map: needs at least one set"));
    }
    Ok(Affinity::Map(sets))
}

fn input(v: &Value) -> Result<Input, ShellOptionError> {
    match v.get("type").and_then(Value::as_str) {
        Some("service") => Ok(Input::Service),
        Some("file") => match v.get("path").and_then(Value::as_str) {
            Some(p) if !p.is_empty() => Ok(Input::File(p.to_string())),
            _ => Err(bad("input.stdin.path", "a file input needs a path")),
        },
        Some(other) => Err(bad(
            "input.stdin.type",
            format!("invalid type {other:?}: expected service or file"),
        )),
        None => Err(bad("input.stdin.type", "expected service or file")),
    }
}

fn exit_timeout(v: &Value) -> Result<Option<f64>, ShellOptionError> {
    let seconds = match v {
        Value::String(s) if s == "none" => return Ok(None),
        Value::String(s) => parse_fsd(s).map_err(|e| bad("exit-timeout", e.to_string()))?,
        Value::Number(n) => n.as_f64().unwrap_or(-1.0),
        _ => -1.0,
    };
    if seconds.is_nan() || seconds < 0.0 {
        return Err(bad("exit-timeout", "expected none or a duration"));
    }
    Ok(Some(seconds))
}

/// `signal` as flux's `--signal` writes it (`{"signum":10,"timeleft":60}`);
/// a bare `-o signal` is SIGUSR1 60 s before the end.
fn signal(v: &Value) -> Result<WarnSignal, ShellOptionError> {
    let Some(obj) = v.as_object() else {
        if truthy(v) {
            return Ok(WarnSignal {
                signum: 10,
                timeleft: 60.0,
            });
        }
        return Err(bad("signal", "expected {signum, timeleft}"));
    };
    let signum = match obj.get("signum") {
        None => 10,
        Some(n) => n
            .as_i64()
            .filter(|n| (1..=64).contains(n))
            .map(|n| n as i32)
            .ok_or_else(|| bad("signal.signum", "expected a signal number from 1 to 64"))?,
    };
    let timeleft = match obj.get("timeleft") {
        None => 60.0,
        Some(Value::String(s)) => {
            parse_fsd(s).map_err(|e| bad("signal.timeleft", e.to_string()))?
        }
        Some(t) => t
            .as_f64()
            .filter(|t| *t >= 0.0)
            .ok_or_else(|| bad("signal.timeleft", "expected a duration"))?,
    };
    Ok(WarnSignal { signum, timeleft })
}

/// `-o pty` (every task, captured), `-o pty.interactive` (task 0, not
/// captured unless `pty.capture`), `pty.ranks`.
fn pty(v: &Value) -> Result<Option<Pty>, ShellOptionError> {
    let Some(obj) = v.as_object() else {
        return Ok(truthy(v).then_some(Pty {
            ranks: None,
            capture: true,
            interactive: false,
        }));
    };
    let interactive = obj.get("interactive").is_some_and(truthy);
    let capture = match obj.get("capture") {
        Some(c) => truthy(c),
        None => !interactive,
    };
    let ranks = match obj.get("ranks") {
        None if interactive => Some(IdSet::from_range(0, 0)),
        None => None,
        Some(Value::String(s)) if s == "all" => None,
        Some(Value::String(s)) => Some(
            s.parse::<IdSet>()
                .map_err(|_| bad("pty.ranks", format!("invalid idset {s:?}")))?,
        ),
        Some(Value::Number(n)) => {
            let r = n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| bad("pty.ranks", "expected a task rank"))?;
            Some(IdSet::from_range(r, r))
        }
        Some(_) => return Err(bad("pty.ranks", "expected all, a rank or an idset")),
    };
    Ok(Some(Pty {
        ranks,
        capture,
        interactive,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<ShellOptions, ShellOptionError> {
        ShellOptions::parse(v.as_object().unwrap())
    }

    #[test]
    fn defaults_are_flux_s() {
        let s = parse(json!({})).unwrap();
        assert!(s.pmi);
        assert_eq!(s.cpu_affinity, Affinity::On);
        assert_eq!(s.exit_timeout, Some(30.0));
        assert!(s.unknown_warning().is_none());
    }

    #[test]
    fn known_values_are_read() {
        let s = parse(json!({
            "pmi": "off", "cpu-affinity": "verbose,per-task",
            "gpu-affinity": "map:0;1-2;0x8", "exit-timeout": "none",
            "exit-on-error": 1, "signal": {"signum": 12, "timeleft": "2m"},
            "pty": {"interactive": 1},
            "output": {"stdout": {"buffer": {"type": "none"}}}
        }))
        .unwrap();
        assert!(!s.pmi);
        assert_eq!(s.cpu_affinity, Affinity::PerTask);
        let ids = |t: &str| t.parse::<IdSet>().unwrap();
        assert_eq!(
            s.gpu_affinity,
            Affinity::Map(vec![ids("0"), ids("1-2"), ids("3")])
        );
        assert_eq!(s.exit_timeout, None);
        assert!(s.exit_on_error);
        assert_eq!(
            s.signal,
            Some(WarnSignal {
                signum: 12,
                timeleft: 120.0
            })
        );
        let pty = s.pty.unwrap();
        assert!(pty.interactive && !pty.capture);
        assert_eq!(pty.ranks, Some(ids("0")));
        assert!(s.unbuffered);
    }

    #[test]
    fn only_an_interactive_terminal_goes_uncaptured_and_only_task_0_s() {
        // {options, [(task, gets a terminal, its output recorded)]}, as
        // flux's shell decides them.
        for (v, want) in [
            (json!({"pty": 1}), [(0, true, true), (1, true, true)]),
            (
                json!({"pty": {"interactive": 1}}),
                [(0, true, false), (1, false, true)],
            ),
            (
                json!({"pty": {"interactive": 1, "capture": 1}}),
                [(0, true, true), (1, false, true)],
            ),
            (
                json!({"pty": {"interactive": 1, "ranks": "1"}}),
                [(0, true, false), (1, true, true)],
            ),
            (
                json!({"pty": {"interactive": 1, "ranks": "all"}}),
                [(0, true, false), (1, true, true)],
            ),
            (
                json!({"pty": {"ranks": "1"}}),
                [(0, false, true), (1, true, true)],
            ),
        ] {
            let pty = parse(v.clone()).unwrap().pty.unwrap();
            for (task, gives, captures) in want {
                assert_eq!(pty.gives(task), gives, "{v} task {task}");
                assert_eq!(pty.captures(task), captures, "{v} task {task}");
            }
        }
    }

    #[test]
    fn bad_values_of_known_options_are_errors() {
        for (v, words) in [
            (json!({"cpu-affinity": "sideways"}), "cpu-affinity"),
            (json!({"gpu-affinity": "map:x"}), "gpu-affinity"),
            (json!({"exit-timeout": "soon"}), "exit-timeout"),
            (json!({"signal": {"signum": 99}}), "signal.signum"),
            (json!({"pty": {"ranks": "a-b"}}), "pty.ranks"),
            (json!({"pmi": 3}), "pmi"),
        ] {
            let e = parse(v).unwrap_err();
            assert!(e.to_string().contains(words), "{e}");
        }
    }

    #[test]
    fn unknown_options_are_named() {
        let s = parse(json!({"foo": 1, "verbose": 2, "bar": {"x": 1}})).unwrap();
        assert_eq!(s.unknown, ["bar", "foo"]);
        assert_eq!(
            s.unknown_warning().unwrap(),
            "fluxgate-shell: unknown option -o bar, -o foo\n"
        );
    }
}
