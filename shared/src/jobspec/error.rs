//! Why a jobspec was refused: every error names the field (as a path such as
//! `resources[0].with[0].count`) and what is wrong with it.

use serde_json::Value;

/// A jobspec that could not be read or does not follow RFC 14 / RFC 25.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JobspecError {
    /// The input is bigger than [`Limits::max_bytes`](super::Limits).
    #[error("jobspec is {size} bytes, more than the limit of {limit} bytes")]
    TooLarge {
        /// Size of the input in bytes.
        size: usize,
        /// The limit in force.
        limit: usize,
    },
    /// The document nests deeper than [`Limits::max_depth`](super::Limits).
    #[error("jobspec nests objects and arrays more than {limit} levels deep")]
    TooDeep {
        /// The limit in force.
        limit: usize,
    },
    /// The YAML's anchors and aliases expand past
    /// [`alias_budget`](super::alias_budget) for its size (an alias bomb).
    #[error(
        "jobspec YAML expands aliases past {limit} nodes or bytes, the bound for a \
         {size}-byte document: write repeated parts out instead of aliasing them"
    )]
    AliasExpansion {
        /// The replay bound in force.
        limit: usize,
        /// Size of the input in bytes.
        size: usize,
    },
    /// The text is not YAML (or is YAML that has no JSON form).
    #[error("jobspec is not valid YAML: {0}")]
    Yaml(String),
    /// The text is not JSON.
    #[error("jobspec is not valid JSON: {0}")]
    Json(String),
    /// A required key is absent.
    #[error("{path}: required key is missing")]
    Missing {
        /// Where the key should be, e.g. `tasks[0].slot`.
        path: String,
    },
    /// A key that is not allowed at this place.
    #[error("{path}: unknown key, not allowed here")]
    UnknownKey {
        /// The offending key with its path, e.g. `attributes.foo`.
        path: String,
    },
    /// A value of the wrong JSON type.
    #[error("{path}: must be {expected}, got {found}")]
    WrongType {
        /// The field.
        path: String,
        /// What was expected, e.g. "an integer".
        expected: &'static str,
        /// The JSON type that was found, e.g. "string".
        found: &'static str,
    },
    /// A value of the right type that breaks a rule.
    #[error("{path}: {reason}")]
    Invalid {
        /// The field.
        path: String,
        /// The rule that is broken.
        reason: String,
    },
    /// Valid RFC 14, but outside what jobspec version 1 (RFC 25) allows.
    #[error("{path}: not allowed in jobspec version 1: {reason}")]
    NotV1 {
        /// The field.
        path: String,
        /// What version 1 requires.
        reason: String,
    },
}

impl JobspecError {
    /// The field path the error is about, if it is about one field.
    pub fn path(&self) -> Option<&str> {
        match self {
            JobspecError::Missing { path }
            | JobspecError::UnknownKey { path }
            | JobspecError::WrongType { path, .. }
            | JobspecError::Invalid { path, .. }
            | JobspecError::NotV1 { path, .. } => Some(path),
            _ => None,
        }
    }

    pub(crate) fn wrong_type(path: &str, expected: &'static str, found: &Value) -> Self {
        JobspecError::WrongType {
            path: display_path(path),
            expected,
            found: json_kind(found),
        }
    }

    pub(crate) fn invalid(path: &str, reason: impl Into<String>) -> Self {
        JobspecError::Invalid {
            path: display_path(path),
            reason: reason.into(),
        }
    }

    pub(crate) fn not_v1(path: &str, reason: impl Into<String>) -> Self {
        JobspecError::NotV1 {
            path: display_path(path),
            reason: reason.into(),
        }
    }

    pub(crate) fn missing(path: &str) -> Self {
        JobspecError::Missing {
            path: display_path(path),
        }
    }

    pub(crate) fn unknown_key(path: &str) -> Self {
        JobspecError::UnknownKey {
            path: display_path(path),
        }
    }
}

/// The root of the document has an empty path; show it as `jobspec`.
fn display_path(path: &str) -> String {
    if path.is_empty() {
        "jobspec".to_string()
    } else {
        path.to_string()
    }
}

/// The JSON type of a value, as error messages name it.
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `parent.key`, or `key` at the root.
pub(crate) fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// `parent[index]`.
pub(crate) fn index(parent: &str, i: usize) -> String {
    format!("{parent}[{i}]")
}
