//! The values of flux's submission options that become shell options or
//! attributes, read as flux-core 0.88's `flux.job._utils` reads them:
//! `--signal=SIG@TIME`, the `--rlimit` rules over the submitter's soft
//! limits, and the `--add-file` argument. Pure: the caller gives the
//! current limits and reads the files.

use serde_json::{Map, Value, json};

use super::attributes::parse_fsd;

/// A `--signal`, `--rlimit` or `--add-file` value flux would refuse; the
/// text is flux's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct OptionError(pub String);

/// The names Python's `signal` module gives numbers on Linux.
const SIGNALS: &[(&str, i64)] = &[
    ("SIGHUP", 1),
    ("SIGINT", 2),
    ("SIGQUIT", 3),
    ("SIGILL", 4),
    ("SIGTRAP", 5),
    ("SIGABRT", 6),
    ("SIGIOT", 6),
    ("SIGBUS", 7),
    ("SIGFPE", 8),
    ("SIGKILL", 9),
    ("SIGUSR1", 10),
    ("SIGSEGV", 11),
    ("SIGUSR2", 12),
    ("SIGPIPE", 13),
    ("SIGALRM", 14),
    ("SIGTERM", 15),
    ("SIGSTKFLT", 16),
    ("SIGCHLD", 17),
    ("SIGCLD", 17),
    ("SIGCONT", 18),
    ("SIGSTOP", 19),
    ("SIGTSTP", 20),
    ("SIGTTIN", 21),
    ("SIGTTOU", 22),
    ("SIGURG", 23),
    ("SIGXCPU", 24),
    ("SIGXFSZ", 25),
    ("SIGVTALRM", 26),
    ("SIGPROF", 27),
    ("SIGWINCH", 28),
    ("SIGIO", 29),
    ("SIGPOLL", 29),
    ("SIGPWR", 30),
    ("SIGSYS", 31),
    ("SIGRTMIN", 34),
    ("SIGRTMAX", 64),
    ("SIG_DFL", 0),
    ("SIG_IGN", 1),
    // Other integers of the module that `getattr(signal, val)` finds.
    ("SIG_BLOCK", 0),
    ("SIG_UNBLOCK", 1),
    ("SIG_SETMASK", 2),
    ("NSIG", 65),
    ("ITIMER_REAL", 0),
    ("ITIMER_VIRTUAL", 1),
    ("ITIMER_PROF", 2),
];

/// flux's `decode_signal`: a number, a name (`SIGUSR1`) or a name
/// without `SIG` (`USR1`).
fn decode_signal(val: &str) -> Result<i64, String> {
    if let Ok(n) = python_int(val) {
        return Ok(n);
    }
    SIGNALS
        .iter()
        .find(|(name, _)| *name == val || name.strip_prefix("SIG") == Some(val))
        .map(|(_, n)| *n)
        .ok_or_else(|| format!("signal '{val}' is invalid"))
}

/// Python's `int(str)` for plain decimal text (spaces and `_` allowed).
fn python_int(s: &str) -> Result<i64, ()> {
    let t = s.trim();
    let digits = t.trim_start_matches(['+', '-']);
    if digits.is_empty()
        || t.len() - digits.len() > 1
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
    {
        return Err(());
    }
    t.replace('_', "").parse().map_err(|_| ())
}

/// Python's `float(str)`, for the forms a duration is typed in.
fn python_float(s: &str) -> Option<f64> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    if matches!(unsigned, "inf" | "infinity" | "nan") {
        return lower.parse().ok().or(Some(if lower.starts_with('-') {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        }));
    }
    if t.is_empty()
        || t.chars()
            .any(|c| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
    {
        return None;
    }
    t.parse().ok()
}

/// A duration as flux's `decode_duration` gives it: a number of seconds
/// when the text is a number, else an FSD (a float either way).
fn decode_duration(val: &str) -> Result<f64, String> {
    if let Some(f) = python_float(val) {
        return Ok(f);
    }
    parse_fsd(val).map_err(|_| "invalid Flux standard duration".to_string())
}

/// `--signal=[SIG][@TIME]` as flux's `parse_signal_option`: the
/// `signal` shell option, `{"signum": N, "timeleft": T}`, SIGUSR1 and 60
/// by default (an integer 60, a float when TIME is given, as flux writes).
pub fn signal_option(arg: &str) -> Result<Value, OptionError> {
    let (sig, time) = arg.split_once('@').unwrap_or((arg, ""));
    let err = |e: String| OptionError(format!("--signal={arg}: {e}"));
    let signum = if sig.is_empty() {
        10
    } else {
        decode_signal(sig).map_err(err)?
    };
    if signum <= 0 {
        return Err(err("signal must be > 0".into()));
    }
    let timeleft = if time.is_empty() {
        json!(60)
    } else {
        json!(decode_duration(time).map_err(err)?)
    };
    Ok(json!({"signum": signum, "timeleft": timeleft}))
}

/// Resource limit names as flux lists them (Python's `resource` module on
/// Linux, in its order); `ofile` is `nofile`'s old name.
pub const RLIMIT_NAMES: &[&str] = &[
    "cpu",
    "fsize",
    "data",
    "stack",
    "core",
    "nofile",
    "ofile",
    "as",
    "rss",
    "nproc",
    "memlock",
    "msgqueue",
    "nice",
    "rtprio",
    "rttime",
    "sigpending",
];

/// The limits flux does not pass on unless asked.
const RLIMIT_DEFAULT_RULES: &[&str] = &[
    "-memlock",
    "-ofile",
    "-msgqueue",
    "-nice",
    "-rtprio",
    "-rttime",
    "-sigpending",
];

/// A `--rlimit` name pattern (a shell glob, or `/REGEX/`) against a
/// limit's name; a regular expression that does not compile matches none.
fn matches(pattern: &str, name: &str) -> bool {
    super::glob::NamePattern::parse(pattern).is_ok_and(|p| p.matches(name))
}

/// `soft` as the JSON flux writes: -1 for unlimited.
fn limit_value(soft: Option<u64>) -> Value {
    match soft {
        Some(n) => json!(n),
        None => json!(-1),
    }
}

/// flux's `get_filtered_rlimits`: the submitter's soft limits (`soft`,
/// giving each of [`RLIMIT_NAMES`] its value, `None` unlimited), less the
/// ones flux leaves out by default, then the `--rlimit` rules in order
/// (each may hold several, comma separated): `-PATTERN` drops, `NAME`
/// (or a glob) takes the current limit, `NAME=VALUE` sets it.
pub fn filtered_rlimits(
    soft: impl Fn(&str) -> Option<u64>,
    rules: &[String],
) -> Result<Map<String, Value>, OptionError> {
    let current = |pattern: &str| -> Result<Vec<(String, Value)>, OptionError> {
        let found: Vec<(String, Value)> = RLIMIT_NAMES
            .iter()
            .filter(|n| matches(&pattern.to_ascii_lowercase(), n))
            .map(|n| (n.to_string(), limit_value(soft(n))))
            .collect();
        if found.is_empty() {
            return Err(OptionError(format!(
                "No corresponding rlimit matching \"{pattern}\""
            )));
        }
        Ok(found)
    };
    let mut limits: Map<String, Value> = current("*")?.into_iter().collect();
    let user = rules.iter().flat_map(|r| r.split(','));
    for rule in RLIMIT_DEFAULT_RULES.iter().copied().chain(user) {
        if let Some(pat) = rule.strip_prefix('-') {
            let pat = pat.to_ascii_lowercase();
            limits.retain(|k, _| !matches(&pat, k));
            continue;
        }
        match rule.split_once('=') {
            None => limits.extend(current(rule)?),
            Some((name, value)) => {
                let lower = name.to_ascii_lowercase();
                if !RLIMIT_NAMES.contains(&lower.as_str()) {
                    return Err(OptionError(format!("Invalid rlimit \"{name}\"")));
                }
                let v = match value {
                    "unlimited" | "infinity" | "inf" => json!(-1),
                    v => json!(
                        python_int(v)
                            .map_err(|_| OptionError(format!("Invalid value in {name}={v}")))?
                    ),
                };
                limits.insert(lower, v);
            }
        }
    }
    Ok(limits)
}

/// What an `--add-file` argument names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddFile {
    /// A file to read: its name in the jobspec and its path here.
    Path {
        /// The name under `{{tmpdir}}`.
        name: String,
        /// The file to read.
        path: String,
    },
    /// Content given on the command line (it has a newline).
    Content {
        /// The name under `{{tmpdir}}`.
        name: String,
        /// The text.
        data: String,
        /// The mode bits (0600 unless `NAME:PERMS=`).
        perms: u32,
    },
}

/// `--add-file=[NAME[:PERMS]=]PATH|DATA` as flux's `jobspec_add_file`: a
/// `\n` typed as two characters is a newline; data with a newline is
/// content, anything else a path (whose own mode is then used).
pub fn parse_add_file(arg: &str) -> Result<AddFile, OptionError> {
    let text = arg.replace("\\n", "\n");
    let (name, data) = match text.split_once('=') {
        Some((n, d)) if !d.is_empty() => (n.to_string(), d.to_string()),
        // No '=' (or nothing after it): a path only, named by its basename.
        _ => {
            let path = text.split_once('=').map_or(text.as_str(), |(n, _)| n);
            if path.contains('\n') {
                return Err(OptionError("--add-file: file name missing".into()));
            }
            let base = path.rsplit('/').next().unwrap_or(path).to_string();
            return Ok(AddFile::Path {
                name: base,
                path: path.to_string(),
            });
        }
    };
    let (name, perms) = match name.rsplit_once(':') {
        Some((n, p)) => match u32::from_str_radix(p, 8) {
            Ok(perms) => (n.to_string(), Some(perms)),
            Err(_) => (name.clone(), None),
        },
        None => (name, None),
    };
    if data.contains('\n') {
        Ok(AddFile::Content {
            name,
            data,
            perms: perms.unwrap_or(0o600),
        })
    } else {
        Ok(AddFile::Path { name, path: data })
    }
}

/// The RFC 37 file object flux's `Fileref` makes for inline content.
pub fn content_fileref(data: &str, perms: u32) -> Value {
    json!({"mode": perms | 0o100000, "data": data, "encoding": "utf-8"})
}

/// The bytes of an RFC 37 file object: its `data`, decoded as its
/// `encoding` says (`utf-8`, the default, or `base64`).
pub fn fileref_data(file: &Value) -> Result<Vec<u8>, OptionError> {
    use base64::Engine;
    let data = file
        .get("data")
        .and_then(Value::as_str)
        .ok_or_else(|| OptionError("file object has no data".into()))?;
    match file.get("encoding").and_then(Value::as_str) {
        None | Some("utf-8") => Ok(data.as_bytes().to_vec()),
        Some("base64") => base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| OptionError(format!("file object data is not base64: {e}"))),
        Some(other) => Err(OptionError(format!("unknown file encoding {other:?}"))),
    }
}

/// The RFC 37 file object flux's `Fileref` makes for a file read from
/// disk: its mode and size, its data as UTF-8 when it is, else base64.
pub fn file_fileref(mode: u32, bytes: &[u8]) -> Value {
    use base64::Engine;
    let (data, encoding) = match std::str::from_utf8(bytes) {
        Ok(s) => (s.to_string(), "utf-8"),
        Err(_) => (
            base64::engine::general_purpose::STANDARD.encode(bytes),
            "base64",
        ),
    };
    json!({"mode": mode, "size": bytes.len(), "data": data, "encoding": encoding})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_as_flux_reads_them() {
        assert_eq!(
            signal_option("").unwrap(),
            json!({"signum": 10, "timeleft": 60})
        );
        assert_eq!(
            signal_option("SIGUSR2@2m").unwrap(),
            json!({"signum": 12, "timeleft": 120.0})
        );
        assert_eq!(
            signal_option("TERM").unwrap(),
            json!({"signum": 15, "timeleft": 60})
        );
        assert_eq!(
            signal_option("@30").unwrap(),
            json!({"signum": 10, "timeleft": 30.0})
        );
        assert_eq!(
            signal_option("9@1.5").unwrap(),
            json!({"signum": 9, "timeleft": 1.5})
        );
        assert_eq!(
            signal_option("FOO").unwrap_err().0,
            "--signal=FOO: signal 'FOO' is invalid"
        );
        assert_eq!(
            signal_option("0").unwrap_err().0,
            "--signal=0: signal must be > 0"
        );
        assert_eq!(
            signal_option("@x").unwrap_err().0,
            "--signal=@x: invalid Flux standard duration"
        );
    }

    fn soft(name: &str) -> Option<u64> {
        match name {
            "core" => Some(0),
            "nofile" | "ofile" => Some(1024),
            "stack" => Some(8388608),
            "nproc" | "sigpending" => Some(63000),
            "msgqueue" => Some(819200),
            "memlock" => Some(8388608),
            "nice" | "rtprio" => Some(0),
            _ => None,
        }
    }

    #[test]
    fn rlimits_as_flux_filters_them() {
        let all = filtered_rlimits(soft, &[]).unwrap();
        assert_eq!(
            all.keys().collect::<Vec<_>>(),
            [
                "cpu", "fsize", "data", "stack", "core", "nofile", "as", "rss", "nproc"
            ]
        );
        assert_eq!(all["cpu"], json!(-1));
        assert_eq!(all["nofile"], json!(1024));
        let core = filtered_rlimits(soft, &["-*,core".into()]).unwrap();
        assert_eq!(Value::Object(core), json!({"core": 0}));
        let set =
            filtered_rlimits(soft, &["-*".into(), "core=16".into(), "nofile=inf".into()]).unwrap();
        assert_eq!(Value::Object(set), json!({"core": 16, "nofile": -1}));
        let memlock = filtered_rlimits(soft, &["-*".into(), "memlock".into()]).unwrap();
        assert_eq!(Value::Object(memlock), json!({"memlock": 8388608}));
        assert_eq!(
            filtered_rlimits(soft, &["foo".into()]).unwrap_err().0,
            "No corresponding rlimit matching \"foo\""
        );
        assert_eq!(
            filtered_rlimits(soft, &["foo=1".into()]).unwrap_err().0,
            "Invalid rlimit \"foo\""
        );
        assert_eq!(
            filtered_rlimits(soft, &["core=x".into()]).unwrap_err().0,
            "Invalid value in core=x"
        );
    }

    #[test]
    fn add_file_forms() {
        assert_eq!(
            parse_add_file("/etc/hosts").unwrap(),
            AddFile::Path {
                name: "hosts".into(),
                path: "/etc/hosts".into()
            }
        );
        assert_eq!(
            parse_add_file("h=/etc/hosts").unwrap(),
            AddFile::Path {
                name: "h".into(),
                path: "/etc/hosts".into()
            }
        );
        assert_eq!(
            parse_add_file("run.sh:0755=#!/bin/sh\\ntrue\\n").unwrap(),
            AddFile::Content {
                name: "run.sh".into(),
                data: "#!/bin/sh\ntrue\n".into(),
                perms: 0o755
            }
        );
        assert!(parse_add_file("a\\nb").is_err());
        assert_eq!(
            content_fileref("x\n", 0o600),
            json!({"mode": 33152, "data": "x\n", "encoding": "utf-8"})
        );
    }
}

#[cfg(test)]
mod fileref_tests {
    use super::*;

    #[test]
    fn file_objects_decode_both_encodings() {
        let v = content_fileref("#!/bin/sh\n", 0o700);
        assert_eq!(v["mode"], 0o100700);
        assert_eq!(fileref_data(&v).unwrap(), b"#!/bin/sh\n");
        let v = file_fileref(0o100644, &[0xff, 0, 1]);
        assert_eq!(v["encoding"], "base64");
        assert_eq!(fileref_data(&v).unwrap(), [0xff, 0, 1]);
        assert!(fileref_data(&json!({"encoding": "utf-8"})).is_err());
    }
}
