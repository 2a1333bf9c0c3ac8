//! First stage: text (YAML or JSON) to a `serde_json::Value`, within limits.
//!
//! Jobspec is written in YAML but travels as JSON (flux-core's job-ingest
//! takes only JSON), so YAML is turned into the same JSON value Flux would
//! submit and every later rule works on JSON.

use serde_json::Value;

use super::error::JobspecError;

/// Bounds that keep a hostile jobspec from exhausting a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted input, in bytes.
    pub max_bytes: usize,
    /// Deepest accepted nesting of arrays and objects (the top object is 1).
    pub max_depth: usize,
}

impl Limits {
    /// Default input size bound: a gRPC message is 4 MiB by default, so a
    /// larger jobspec could not reach the service anyway.
    pub const DEFAULT_MAX_BYTES: usize = 4 * 1024 * 1024;
    /// Default nesting bound: real jobspecs nest about 10 levels (shell
    /// options, resource trees), 64 leaves plenty of room.
    pub const DEFAULT_MAX_DEPTH: usize = 64;
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: Self::DEFAULT_MAX_BYTES,
            max_depth: Self::DEFAULT_MAX_DEPTH,
        }
    }
}

/// The depth serde_json refuses past on its own (its recursion limit).
const SERDE_JSON_DEPTH: usize = 128;

fn check_size(text: &str, limits: &Limits) -> Result<(), JobspecError> {
    if text.len() > limits.max_bytes {
        return Err(JobspecError::TooLarge {
            size: text.len(),
            limit: limits.max_bytes,
        });
    }
    Ok(())
}

/// Read JSON text into a value.
pub fn json_to_value(text: &str, limits: &Limits) -> Result<Value, JobspecError> {
    check_size(text, limits)?;
    // A cheap bracket scan first: it bounds the depth before serde_json
    // recurses, and turns its fixed recursion limit into our error.
    if bracket_depth(text) > limits.max_depth {
        return Err(JobspecError::TooDeep {
            limit: limits.max_depth,
        });
    }
    let value: Value = serde_json::from_str(text).map_err(|e| {
        if limits.max_depth >= SERDE_JSON_DEPTH && e.to_string().contains("recursion limit") {
            JobspecError::TooDeep {
                limit: SERDE_JSON_DEPTH,
            }
        } else {
            JobspecError::Json(e.to_string())
        }
    })?;
    check_depth(&value, limits)?;
    Ok(value)
}

/// Read YAML text into the JSON value Flux would submit for it.
pub fn yaml_to_value(text: &str, limits: &Limits) -> Result<Value, JobspecError> {
    check_size(text, limits)?;
    // The YAML parser keeps its own depth budget, so deep input fails there
    // without recursing; the bracket scan is not usable on YAML.
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = limits.max_depth;
    budget.flow_nesting_limit = limits.max_depth;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    let value: Value = serde_saphyr::from_str_with_options(text, options).map_err(|e| {
        let msg = e.to_string();
        // The budget reports a depth breach; the parser's own nesting
        // guard reports a recursion limit. Both mean too deep.
        if msg.contains("depth") || msg.contains("recursion limit") {
            JobspecError::TooDeep {
                limit: limits.max_depth,
            }
        } else {
            JobspecError::Yaml(msg)
        }
    })?;
    check_depth(&value, limits)?;
    Ok(value)
}

/// Read a jobspec in either form: JSON when it starts with `{`, else YAML.
pub fn text_to_value(text: &str, limits: &Limits) -> Result<Value, JobspecError> {
    if text.trim_start().starts_with('{') {
        json_to_value(text, limits)
    } else {
        yaml_to_value(text, limits)
    }
}

/// Check the nesting depth of a value without recursion.
pub fn check_depth(value: &Value, limits: &Limits) -> Result<(), JobspecError> {
    let mut stack: Vec<(&Value, usize)> = vec![(value, 1)];
    while let Some((v, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(a) => Box::new(a.iter()),
            Value::Object(o) => Box::new(o.values()),
            _ => continue,
        };
        if depth > limits.max_depth {
            return Err(JobspecError::TooDeep {
                limit: limits.max_depth,
            });
        }
        stack.extend(children.map(|c| (c, depth + 1)));
    }
    Ok(())
}

/// Deepest bracket nesting in JSON text, skipping strings.
fn bracket_depth(text: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}
