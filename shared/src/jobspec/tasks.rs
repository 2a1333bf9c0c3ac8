//! The tasks section (RFC 14): what to run in each slot.

use serde_json::{Map, Value};

use super::error::{JobspecError, index, join};

/// How many tasks a task entry starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskCount {
    /// This many tasks in every slot.
    PerSlot(u64),
    /// This many tasks in all, spread over the slots.
    Total(u64),
    /// This many tasks per resource of a type (not in version 1).
    PerResource {
        /// The resource type, e.g. `node`.
        kind: String,
        /// Tasks per resource.
        count: u64,
    },
}

/// One task entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// argv of the program (at least one string).
    pub command: Vec<String>,
    /// Label of the slot the tasks run in.
    pub slot: String,
    /// Task count.
    pub count: TaskCount,
    /// Task-level attributes, kept as JSON (not in version 1).
    pub attributes: Option<Map<String, Value>>,
    /// Distribution hint (not in version 1).
    pub distribution: Option<String>,
}

/// Parse and check the `tasks` list (RFC 14, as flux-core's Python checks).
pub(crate) fn parse_tasks(v: &Value) -> Result<Vec<Task>, JobspecError> {
    let list = v
        .as_array()
        .ok_or_else(|| JobspecError::wrong_type("tasks", "an array", v))?;
    if list.is_empty() {
        return Err(JobspecError::invalid(
            "tasks",
            "must hold at least one task",
        ));
    }
    list.iter()
        .enumerate()
        .map(|(i, t)| parse_task(t, &index("tasks", i)))
        .collect()
}

fn parse_task(v: &Value, path: &str) -> Result<Task, JobspecError> {
    let obj = v
        .as_object()
        .ok_or_else(|| JobspecError::wrong_type(path, "an object (a task)", v))?;
    for key in ["command", "slot", "count"] {
        if !obj.contains_key(key) {
            return Err(JobspecError::missing(&join(path, key)));
        }
    }
    let count = parse_task_count(&obj["count"], &join(path, "count"))?;
    let slot = match &obj["slot"] {
        Value::String(s) => s.clone(),
        other => {
            return Err(JobspecError::wrong_type(
                &join(path, "slot"),
                "a string",
                other,
            ));
        }
    };
    let attributes = match obj.get("attributes") {
        None => None,
        Some(Value::Object(o)) => Some(o.clone()),
        Some(other) => {
            return Err(JobspecError::wrong_type(
                &join(path, "attributes"),
                "an object",
                other,
            ));
        }
    };
    let distribution = match obj.get("distribution") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(JobspecError::wrong_type(
                &join(path, "distribution"),
                "a string",
                other,
            ));
        }
    };
    let command = parse_command(&obj["command"], &join(path, "command"))?;
    Ok(Task {
        command,
        slot,
        count,
        attributes,
        distribution,
    })
}

fn parse_command(v: &Value, path: &str) -> Result<Vec<String>, JobspecError> {
    // A bare string is refused: it would be split differently by every reader.
    let list = v
        .as_array()
        .ok_or_else(|| JobspecError::wrong_type(path, "an array of strings", v))?;
    if list.is_empty() {
        return Err(JobspecError::invalid(
            path,
            "must hold at least the program name",
        ));
    }
    list.iter()
        .enumerate()
        .map(|(i, a)| match a {
            Value::String(s) => Ok(s.clone()),
            other => Err(JobspecError::wrong_type(&index(path, i), "a string", other)),
        })
        .collect()
}

fn parse_task_count(v: &Value, path: &str) -> Result<TaskCount, JobspecError> {
    let obj = v
        .as_object()
        .ok_or_else(|| JobspecError::wrong_type(path, "an object", v))?;
    if obj.len() != 1 {
        return Err(JobspecError::invalid(
            path,
            format!(
                "must hold exactly one of per_slot, total, per_resource; got {} keys",
                obj.len()
            ),
        ));
    }
    let positive = |key: &str| -> Result<u64, JobspecError> {
        let p = join(path, key);
        let val = &obj[key];
        match val.as_i64() {
            Some(n) if n >= 1 => Ok(n as u64),
            Some(n) => Err(JobspecError::invalid(
                &p,
                format!("must be at least 1, got {n}"),
            )),
            None => Err(JobspecError::wrong_type(&p, "an integer", val)),
        }
    };
    if obj.contains_key("per_slot") {
        positive("per_slot").map(TaskCount::PerSlot)
    } else if obj.contains_key("total") {
        positive("total").map(TaskCount::Total)
    } else if let Some(pr) = obj.get("per_resource") {
        let p = join(path, "per_resource");
        let pr_obj = pr
            .as_object()
            .ok_or_else(|| JobspecError::wrong_type(&p, "an object {type, count}", pr))?;
        let kind = match pr_obj.get("type") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(JobspecError::wrong_type(
                    &join(&p, "type"),
                    "a string",
                    other,
                ));
            }
            None => return Err(JobspecError::missing(&join(&p, "type"))),
        };
        let count = match pr_obj.get("count") {
            Some(c) => match c.as_i64() {
                Some(n) if n >= 1 => n as u64,
                Some(n) => {
                    return Err(JobspecError::invalid(
                        &join(&p, "count"),
                        format!("must be at least 1, got {n}"),
                    ));
                }
                None => {
                    return Err(JobspecError::wrong_type(
                        &join(&p, "count"),
                        "an integer",
                        c,
                    ));
                }
            },
            None => return Err(JobspecError::missing(&join(&p, "count"))),
        };
        Ok(TaskCount::PerResource { kind, count })
    } else {
        let key = obj.keys().next().map(String::as_str).unwrap_or_default();
        Err(JobspecError::unknown_key(&join(path, key)))
    }
}
