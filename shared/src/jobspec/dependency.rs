//! RFC 26 dependency objects found at `attributes.system.dependencies`.

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

use super::error::{JobspecError, index, join};

/// A dependency scheme; schemes no built-in handles are kept as `Unknown`
/// so the job manager can refuse the job with flux-core's message.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DependencyScheme {
    /// Satisfied when the antecedent job started (`after` is the old name).
    AfterStart,
    /// Satisfied when the antecedent finished, whatever the result.
    AfterAny,
    /// Satisfied when the antecedent finished successfully.
    AfterOk,
    /// Satisfied when the antecedent failed after it was allocated.
    AfterNotOk,
    /// Satisfied when the antecedent ended by an exception after running.
    AfterExcept,
    /// Satisfied once the wall clock reaches `value` (seconds since epoch).
    BeginTime,
    /// Satisfied while no other active job of the user has the same name.
    Singleton,
    /// A scheme no built-in handles.
    Unknown(String),
}

impl DependencyScheme {
    /// The scheme as written in jobspec.
    pub fn as_str(&self) -> &str {
        match self {
            DependencyScheme::AfterStart => "afterstart",
            DependencyScheme::AfterAny => "afterany",
            DependencyScheme::AfterOk => "afterok",
            DependencyScheme::AfterNotOk => "afternotok",
            DependencyScheme::AfterExcept => "afterexcept",
            DependencyScheme::BeginTime => "begin-time",
            DependencyScheme::Singleton => "singleton",
            DependencyScheme::Unknown(s) => s,
        }
    }

    /// True for the schemes whose value names an antecedent job.
    pub fn names_job(&self) -> bool {
        matches!(
            self,
            DependencyScheme::AfterStart
                | DependencyScheme::AfterAny
                | DependencyScheme::AfterOk
                | DependencyScheme::AfterNotOk
                | DependencyScheme::AfterExcept
        )
    }

    fn from_name(s: &str) -> Self {
        match s {
            // flux-core still takes the deprecated `after` for afterstart.
            "after" | "afterstart" => DependencyScheme::AfterStart,
            "afterany" => DependencyScheme::AfterAny,
            "afterok" => DependencyScheme::AfterOk,
            "afternotok" => DependencyScheme::AfterNotOk,
            "afterexcept" => DependencyScheme::AfterExcept,
            "begin-time" => DependencyScheme::BeginTime,
            "singleton" => DependencyScheme::Singleton,
            other => DependencyScheme::Unknown(other.to_string()),
        }
    }
}

impl fmt::Display for DependencyScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A dependency the job manager cannot honour.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DependencyError {
    /// No built-in handles this scheme (flux-core's wording).
    #[error("dependency scheme \"{0}\" not supported")]
    UnsupportedScheme(String),
    /// begin-time needs a timestamp.
    #[error("begin-time: value {0:?} is not a time in seconds since the epoch")]
    BadBeginTime(String),
    /// The shorthand `scheme:value[?k=v&...]` could not be read.
    #[error("invalid dependency URI {0:?}: expected SCHEME:VALUE[?key=val[&key=val...]]")]
    BadUri(String),
}

/// One RFC 26 dependency object.
#[derive(Debug, Clone, PartialEq)]
pub struct Dependency {
    /// The scheme.
    pub scheme: DependencyScheme,
    /// The scheme's value (a job id for the after* schemes), as written.
    pub value: String,
    /// Scheme-specific extra keys, kept as JSON.
    pub extra: Map<String, Value>,
}

impl Dependency {
    /// Check that a built-in can handle this dependency.
    pub fn check(&self) -> Result<(), DependencyError> {
        match &self.scheme {
            DependencyScheme::Unknown(s) => Err(DependencyError::UnsupportedScheme(s.clone())),
            DependencyScheme::BeginTime => self.begin_time().map(|_| ()),
            _ => Ok(()),
        }
    }

    /// The begin-time timestamp (seconds since the epoch).
    pub fn begin_time(&self) -> Result<f64, DependencyError> {
        self.value
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|t| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| DependencyError::BadBeginTime(self.value.clone()))
    }

    /// The RFC 26 object form.
    pub fn to_value(&self) -> Value {
        let mut obj = Map::new();
        obj.insert(
            "scheme".into(),
            Value::String(self.scheme.as_str().to_string()),
        );
        obj.insert("value".into(), Value::String(self.value.clone()));
        for (k, v) in &self.extra {
            obj.insert(k.clone(), v.clone());
        }
        Value::Object(obj)
    }
}

/// The command-line shorthand `scheme:value[?key=val[&key=val...]]`
/// (`;` also separates options), as `flux submit --dependency` reads it:
/// option values that look like numbers become numbers, a repeated key a list.
impl FromStr for Dependency {
    type Err = DependencyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || DependencyError::BadUri(s.to_string());
        // As flux's URIArg: a bare word is a scheme with an empty value
        // (`singleton`).
        let (scheme, rest) = s.split_once(':').unwrap_or((s, ""));
        let (value, query) = match rest.split_once('?') {
            Some((v, q)) => (v, Some(q)),
            None => (rest, None),
        };
        if scheme.is_empty() {
            return Err(bad());
        }
        let mut extra = Map::new();
        for pair in query.into_iter().flat_map(|q| q.split(['&', ';'])) {
            if pair.is_empty() {
                continue;
            }
            let (k, v) = pair.split_once('=').ok_or_else(bad)?;
            let v = number_or_string(v);
            match extra.get_mut(k) {
                Some(Value::Array(a)) => a.push(v),
                Some(prev) => *prev = Value::Array(vec![prev.clone(), v]),
                None => {
                    extra.insert(k.to_string(), v);
                }
            }
        }
        Ok(Dependency {
            scheme: DependencyScheme::from_name(scheme),
            value: value.to_string(),
            extra,
        })
    }
}

fn number_or_string(s: &str) -> Value {
    if let Ok(i) = s.parse::<i64>() {
        return Value::from(i);
    }
    match s.parse::<f64>() {
        Ok(f) if f.is_finite() => Value::from(f),
        _ => Value::String(s.to_string()),
    }
}

/// Parse `attributes.system.dependencies`: a list of objects with string
/// `scheme` and `value` (flux-core's Python check).
pub(crate) fn parse_dependencies(v: &Value, path: &str) -> Result<Vec<Dependency>, JobspecError> {
    let list = v
        .as_array()
        .ok_or_else(|| JobspecError::wrong_type(path, "an array of dependency objects", v))?;
    list.iter()
        .enumerate()
        .map(|(i, d)| {
            let p = index(path, i);
            let obj = d
                .as_object()
                .ok_or_else(|| JobspecError::wrong_type(&p, "an object {scheme, value}", d))?;
            let field = |key: &str| -> Result<String, JobspecError> {
                match obj.get(key) {
                    Some(Value::String(s)) => Ok(s.clone()),
                    Some(other) => Err(JobspecError::wrong_type(&join(&p, key), "a string", other)),
                    None => Err(JobspecError::missing(&join(&p, key))),
                }
            };
            let scheme = field("scheme")?;
            let value = field("value")?;
            let extra = obj
                .iter()
                .filter(|(k, _)| *k != "scheme" && *k != "value")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            Ok(Dependency {
                scheme: DependencyScheme::from_name(&scheme),
                value,
                extra,
            })
        })
        .collect()
}
