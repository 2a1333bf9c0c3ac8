//! The simple reader a basic scheduler uses (flux-core `libjob/jj.c`): it
//! walks any-version jobspec JSON and sums up nodes, slots, cores and GPUs
//! per slot, or says why it cannot. Error texts follow flux-core's.

use std::fmt;

use serde_json::Value;

/// What the simple reader extracts from a jobspec.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JjCounts {
    /// Nodes (product of counts down to the node vertex), 0 without nodes.
    pub nnodes: u64,
    /// Total slots (slot count times nnodes when there are nodes).
    pub nslots: u64,
    /// Cores per slot.
    pub slot_size: u64,
    /// GPUs per slot.
    pub slot_gpus: u64,
    /// A node vertex asked for exclusive allocation.
    pub exclusive: bool,
    /// `attributes.system.duration`, seconds.
    pub duration: f64,
}

impl fmt::Display for JjCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "nnodes={} nslots={} slot_size={} slot_gpus={} exclusive={} duration={:.1}",
            self.nnodes, self.nslots, self.slot_size, self.slot_gpus, self.exclusive, self.duration
        )
    }
}

/// Why the simple reader could not summarise a jobspec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct JjError(pub String);

/// jansson's names for JSON types, as its unpack errors print them.
fn jansson_type(v: &Value) -> &'static str {
    match v {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(n) if n.is_f64() => "real",
        Value::Number(_) => "integer",
        Value::Bool(true) => "true",
        Value::Bool(false) => "false",
        Value::Null => "null",
    }
}

fn get<'a>(v: &'a Value, key: &str) -> Result<&'a Value, String> {
    match v {
        Value::Object(o) => o
            .get(key)
            .ok_or_else(|| format!("Object item not found: {key}")),
        other => Err(format!("Expected object, got {}", jansson_type(other))),
    }
}

fn get_int(v: &Value, key: &str) -> Result<i64, String> {
    let x = get(v, key)?;
    match x {
        Value::Number(n) if !n.is_f64() => Ok(n.as_i64().unwrap_or(i64::MAX)),
        other => Err(format!("Expected integer, got {}", jansson_type(other))),
    }
}

/// Summarise a jobspec as flux-core's `jj_get_counts_json()` does. The
/// version is not checked (flux-core dropped that check); unknown resource
/// types are skipped but their counts still multiply the nodes below them.
pub fn jj_counts(jobspec: &Value) -> Result<JjCounts, JjError> {
    let top = |e: String| JjError(format!("at top level: {e}"));
    get_int(jobspec, "version").map_err(top)?;
    let resources = get(jobspec, "resources").map_err(top)?;
    let duration = get(jobspec, "attributes")
        .and_then(|a| get(a, "system"))
        .and_then(|s| get(s, "duration"))
        .and_then(|d| match d {
            Value::Number(n) => Ok(n.as_f64().unwrap_or(0.0)),
            other => Err(format!(
                "Expected real or integer, got {}",
                jansson_type(other)
            )),
        })
        .map_err(|e| JjError(format!("at top level: getting duration: {e}")))?;

    let mut jj = JjCounts {
        nnodes: 0,
        nslots: 0,
        slot_size: 0,
        slot_gpus: 0,
        exclusive: false,
        duration,
    };
    // Pre-order walk with an explicit stack so a deep tree cannot overflow.
    let mut stack: Vec<(&Value, usize, u64)> = Vec::new();
    push_level(&mut stack, resources, 0, 1)?;
    while let Some((vertex, level, factor)) = stack.pop() {
        let at_level = |e: String| JjError(format!("level {level}: {e}"));
        let kind = match get(vertex, "type").map_err(at_level)? {
            Value::String(s) => s.as_str(),
            other => {
                return Err(at_level(format!(
                    "Expected string, got {}",
                    jansson_type(other)
                )));
            }
        };
        let count = get_int(vertex, "count").map_err(at_level)?;
        let exclusive = match vertex.get("exclusive") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(at_level(format!(
                    "Expected true or false, got {}",
                    jansson_type(other)
                )));
            }
        };
        if count <= 0 {
            return Err(JjError(format!("Invalid count {count} for type '{kind}'")));
        }
        let count = count as u64;
        let factor = factor.saturating_mul(count);
        match kind {
            "node" => {
                jj.nnodes = factor;
                jj.exclusive |= exclusive;
            }
            "slot" => jj.nslots = count,
            "core" => jj.slot_size = count,
            "gpu" => jj.slot_gpus = count,
            _ => {}
        }
        if let Some(with) = vertex.get("with") {
            push_level(&mut stack, with, level + 1, factor)?;
        }
    }
    if jj.nslots == 0 {
        return Err(JjError("Unable to determine slot count".into()));
    }
    if jj.slot_size == 0 {
        return Err(JjError("Unable to determine slot size".into()));
    }
    if jj.nnodes > 0 {
        jj.nslots = jj.nslots.saturating_mul(jj.nnodes);
    }
    Ok(jj)
}

fn push_level<'a>(
    stack: &mut Vec<(&'a Value, usize, u64)>,
    level_value: &'a Value,
    level: usize,
    factor: u64,
) -> Result<(), JjError> {
    let list = level_value
        .as_array()
        .ok_or_else(|| JjError(format!("level {level}: must be an array")))?;
    stack.extend(list.iter().rev().map(|v| (v, level, factor)));
    Ok(())
}
