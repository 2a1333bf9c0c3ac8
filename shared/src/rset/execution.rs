//! The keys of R's `execution` object besides `R_lite` (nodelist, nslots,
//! starttime, expiration, properties): checked and applied to a decoded
//! set, for both readers of R (the typed one and the `Value` one).

use serde_json::Value;

use super::{ResourceSet, RsetError, properties};
use crate::hostlist::Hostlist;

/// An error naming the R key at fault and why.
pub(super) fn invalid(key: impl Into<String>, reason: impl Into<String>) -> RsetError {
    RsetError::Invalid {
        key: key.into(),
        reason: reason.into(),
    }
}

/// What kind of JSON value `v` is, for an error message.
pub(super) fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A time in seconds since the epoch, checked.
fn parse_time(key: &str, v: &Value) -> Result<f64, RsetError> {
    let t = v
        .as_f64()
        .ok_or_else(|| invalid(key, format!("must be a number, not {}", describe(v))))?;
    if t.is_nan() || t < 0.0 || t.is_infinite() {
        return Err(invalid(
            key,
            format!("{t} is not a time (seconds since the epoch, >= 0)"),
        ));
    }
    Ok(t)
}

/// The keys of `execution` other than `R_lite`, checked and applied in
/// this order; `get` looks a key up.
pub(super) fn apply_execution<'a>(
    rs: &mut ResourceSet,
    get: impl Fn(&str) -> Option<&'a Value>,
) -> Result<(), RsetError> {
    if let Some(nl) = get("nodelist") {
        assign_nodelist(rs, nl)?;
    }
    if let Some(v) = get("nslots") {
        match v.as_u64() {
            Some(n) if n > 0 && n <= u64::from(u32::MAX) => rs.nslots = Some(n as u32),
            _ => {
                return Err(invalid(
                    "execution.nslots",
                    format!("must be an integer greater than 0, not {v}"),
                ));
            }
        }
    }
    if let Some(v) = get("starttime") {
        rs.starttime = parse_time("execution.starttime", v)?;
    }
    if let Some(v) = get("expiration") {
        rs.expiration = parse_time("execution.expiration", v)?;
    }
    if let Some(p) = get("properties") {
        properties::assign_json(rs, p)
            .map_err(|e| invalid("execution.properties", e.to_string()))?;
    }
    Ok(())
}

/// Give each node its hostname from `execution.nodelist`, in rank order.
fn assign_nodelist(rs: &mut ResourceSet, nl: &Value) -> Result<(), RsetError> {
    let key = "execution.nodelist";
    let arr = nl.as_array().ok_or_else(|| {
        invalid(
            key,
            format!("must be an array of hostlists, not {}", describe(nl)),
        )
    })?;
    let mut hl = Hostlist::new();
    for (i, v) in arr.iter().enumerate() {
        let s = v.as_str().ok_or_else(|| {
            invalid(
                format!("{key}[{i}]"),
                format!("must be a string, not {}", describe(v)),
            )
        })?;
        if s.is_empty() {
            // flux-core writes `[""]` for a set with no nodes.
            continue;
        }
        let part = Hostlist::parse(s).map_err(|e| invalid(format!("{key}[{i}]"), e.to_string()))?;
        hl.append(&part);
    }
    if hl.len() != rs.nodes.len() {
        return Err(invalid(
            key,
            format!(
                "{} hosts for {} ranks (one hostname per rank, in rank order)",
                hl.len(),
                rs.nodes.len()
            ),
        ));
    }
    // for_each_host builds each name in one buffer: no formatting per host.
    let mut nodes = rs.nodes.iter_mut();
    hl.for_each_host(|host| {
        if let Some(node) = nodes.next() {
            node.hostname = Some(host.to_owned());
        }
    });
    Ok(())
}
