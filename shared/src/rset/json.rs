//! R version 1 JSON: strict decoding and compact encoding.
//!
//! Encoding writes keys in the order flux-core 0.88 writes them
//! (`version`, `execution{R_lite, starttime, expiration, nslots, nodelist,
//! properties}`, `scheduling`) and reals as jansson does (`%.17g`, always
//! with a `.0` or exponent), so `flux R` output can be matched byte for byte.

use std::fmt::Write as _;
use std::str::FromStr;

use serde_json::Value;

use super::execution::{apply_execution, describe, invalid};
use super::{Node, ResourceSet, RsetError, merge_nodes, range_str};
use crate::idset::IdSet;

/// An idset string; `key` names it in an error (built only then: R has a
/// key per entry, and formatting each one cost more than reading it).
fn parse_idset(key: impl FnOnce() -> String, v: &Value) -> Result<IdSet, RsetError> {
    let Some(s) = v.as_str() else {
        return Err(invalid(
            key(),
            format!("must be an idset string, not {}", describe(v)),
        ));
    };
    IdSet::parse(s).map_err(|e| invalid(key(), e.to_string()))
}

impl ResourceSet {
    /// Decode R from JSON text.
    pub fn parse(s: &str) -> Result<Self, RsetError> {
        let mut rs = Self::from_json_str(s)?;
        // serde_json's default float parser may be one ulp off, which shows
        // in the 17 digits flux writes; re-read the times from the text with
        // the exactly-rounding std parser.
        rs.starttime = exact_real(s, "starttime", rs.starttime);
        rs.expiration = exact_real(s, "expiration", rs.expiration);
        Ok(rs)
    }

    /// Decode R from a JSON value, strictly.
    pub fn from_json(v: &Value) -> Result<Self, RsetError> {
        let top = v.as_object().ok_or_else(|| {
            invalid(
                "(top level)",
                format!("must be an object, not {}", describe(v)),
            )
        })?;
        let version = top
            .get("version")
            .ok_or_else(|| invalid("version", "missing (required)"))?;
        match version.as_i64() {
            Some(1) => {}
            Some(n) => {
                return Err(invalid(
                    "version",
                    format!("unknown version {n} (only version 1 is supported)"),
                ));
            }
            None => {
                return Err(invalid(
                    "version",
                    format!("must be an integer, not {version}"),
                ));
            }
        }
        let exec = top
            .get("execution")
            .ok_or_else(|| invalid("execution", "missing (required)"))?;
        let exec = exec.as_object().ok_or_else(|| {
            invalid(
                "execution",
                format!("must be an object, not {}", describe(exec)),
            )
        })?;
        for key in exec.keys() {
            if !matches!(
                key.as_str(),
                "R_lite" | "nodelist" | "properties" | "nslots" | "starttime" | "expiration"
            ) {
                return Err(invalid(format!("execution.{key}"), "unknown key"));
            }
        }
        let mut rs = ResourceSet::new();
        let r_lite = exec
            .get("R_lite")
            .ok_or_else(|| invalid("execution.R_lite", "missing (required)"))?;
        match r_lite {
            Value::Array(entries) => rs.nodes = parse_r_lite(entries)?,
            // flux-core (`json_array_foreach` on a non-array) reads `{}` as an
            // empty R_lite and its tests rely on it; anything else is an error.
            Value::Object(o) if o.is_empty() => {}
            other => {
                return Err(invalid(
                    "execution.R_lite",
                    format!("must be an array, not {}", describe(other)),
                ));
            }
        }
        apply_execution(&mut rs, |key| exec.get(key))?;
        if let Some(s) = top.get("scheduling") {
            rs.scheduling = Some(s.clone());
        }
        Ok(rs)
    }

    /// Decode R from JSON text as [`from_json`](Self::from_json) decodes the value.
    pub fn from_json_str(text: &str) -> Result<Self, RsetError> {
        if let Some(rs) = super::typed::read(text) {
            return Ok(rs);
        }
        let v: Value = serde_json::from_str(text).map_err(|e| RsetError::Json(e.to_string()))?;
        Self::from_json(&v)
    }

    /// Encode compactly (no spaces), as a scheduler stores R.
    pub fn to_json_string(&self) -> String {
        self.encode(false)
    }

    /// Encode as `flux R` prints it (jansson's default `", "` / `": "` separators).
    pub fn encode_flux(&self) -> String {
        self.encode(true)
    }

    /// The R object as a JSON value.
    pub fn to_json(&self) -> Value {
        // The encoder is the single source of key order; parse its output back.
        serde_json::from_str(&self.to_json_string()).unwrap_or(Value::Null)
    }

    fn encode(&self, spaced: bool) -> String {
        let (comma, colon) = if spaced { (", ", ": ") } else { (",", ":") };
        let mut out = String::with_capacity(128);
        let _ = write!(
            out,
            "{{\"version\"{colon}1{comma}\"execution\"{colon}{{\"R_lite\"{colon}["
        );
        let mut first = true;
        for (ranks, node) in self.groups() {
            if !first {
                out.push_str(comma);
            }
            first = false;
            let _ = write!(
                out,
                "{{\"rank\"{colon}\"{}\"{comma}\"children\"{colon}{{",
                range_str(&ranks)
            );
            let mut firstc = true;
            for (name, ids) in [("core", &node.cores), ("gpu", &node.gpus)] {
                if ids.is_empty() {
                    continue;
                }
                if !firstc {
                    out.push_str(comma);
                }
                firstc = false;
                let _ = write!(out, "\"{name}\"{colon}\"{}\"", range_str(ids));
            }
            if firstc {
                // A rank with nothing still needs RFC 20's required `core`
                // so that it reads back (flux-core would drop it here but
                // keep its hostname, producing R it cannot read).
                let _ = write!(out, "\"core\"{colon}\"\"");
            }
            out.push_str("}}");
        }
        out.push(']');
        let _ = write!(
            out,
            "{comma}\"starttime\"{colon}{}{comma}\"expiration\"{colon}{}",
            format_real(self.starttime),
            format_real(self.expiration)
        );
        if let Some(n) = self.nslots {
            let _ = write!(out, "{comma}\"nslots\"{colon}{n}");
        }
        if let Some(hl) = self.nodelist() {
            let _ = write!(
                out,
                "{comma}\"nodelist\"{colon}[{}]",
                json_str(&hl.encode())
            );
        }
        if !self.properties.is_empty() {
            let _ = write!(out, "{comma}\"properties\"{colon}{{");
            for (i, (name, ranks)) in self.properties.iter().enumerate() {
                if i > 0 {
                    out.push_str(comma);
                }
                let _ = write!(out, "{}{colon}\"{}\"", json_str(name), range_str(ranks));
            }
            out.push('}');
        }
        out.push('}');
        if let Some(s) = &self.scheduling {
            let text = if spaced {
                spaced_json(s)
            } else {
                serde_json::to_string(s).unwrap_or_else(|_| "null".into())
            };
            let _ = write!(out, "{comma}\"scheduling\"{colon}{text}");
        }
        out.push('}');
        out
    }
}

/// The nodes of an `R_lite` array, sorted by rank.
///
/// Entries may list ranks in any order (a scheduler's R is often
/// fragmented), so the nodes are collected and merged once by
/// [`merge_nodes`] instead of inserted one by one. Errors are those of
/// reading entry after entry: an entry that overlaps an earlier one is
/// reported before a malformed later entry.
fn parse_r_lite(entries: &[Value]) -> Result<Vec<Node>, RsetError> {
    let mut nodes = Vec::new();
    // Entry `i` produced nodes[starts[i]..starts[i + 1]].
    let mut starts = Vec::with_capacity(entries.len());
    let mut malformed = None;
    for (i, entry) in entries.iter().enumerate() {
        starts.push(nodes.len());
        if let Err(e) = parse_entry(&mut nodes, i, entry) {
            malformed = Some(e);
            break;
        }
    }
    let nodes = merge_nodes(nodes).map_err(|(pos, e)| {
        let i = starts.partition_point(|&s| s <= pos) - 1;
        match e {
            RsetError::Overlap { rank, what } => invalid(
                format!("execution.R_lite[{i}].rank"),
                format!("rank {rank} {what} appears in more than one R_lite entry"),
            ),
            other => other,
        }
    })?;
    match malformed {
        Some(e) => Err(e),
        None => Ok(nodes),
    }
}

/// Read one `R_lite` entry, appending a node per rank to `nodes`.
fn parse_entry(nodes: &mut Vec<Node>, i: usize, entry: &Value) -> Result<(), RsetError> {
    // Key paths are built only for an error: see parse_idset.
    let key = |rest: &str| format!("execution.R_lite[{i}]{rest}");
    let obj = entry.as_object().ok_or_else(|| {
        invalid(
            key(""),
            format!("must be an object, not {}", describe(entry)),
        )
    })?;
    for k in obj.keys() {
        if k != "rank" && k != "children" {
            return Err(invalid(key(&format!(".{k}")), "unknown key"));
        }
    }
    let ranks = parse_idset(
        || key(".rank"),
        obj.get("rank")
            .ok_or_else(|| invalid(key(".rank"), "missing (required)"))?,
    )?;
    let children = obj
        .get("children")
        .ok_or_else(|| invalid(key(".children"), "missing (required)"))?;
    let children = children.as_object().ok_or_else(|| {
        invalid(
            key(".children"),
            format!("must be an object, not {}", describe(children)),
        )
    })?;
    let mut cores = IdSet::new();
    let mut gpus = IdSet::new();
    for (name, ids) in children {
        let ckey = || key(&format!(".children.{name}"));
        match name.as_str() {
            "core" => cores = parse_idset(ckey, ids)?,
            "gpu" => gpus = parse_idset(ckey, ids)?,
            // flux-core keeps any child name; RFC 20 defines only these two
            // and nothing downstream can use another, so say so early.
            _ => {
                return Err(invalid(
                    ckey(),
                    "unknown resource type (R version 1 has core and gpu)",
                ));
            }
        }
    }
    // RFC 20 calls `core` REQUIRED, but flux-core omits it when a rank has
    // only gpus, so a missing `core` is read as no cores. A rank with
    // nothing at all is kept, as flux-core keeps it (it still takes a host).
    nodes.extend(
        ranks
            .iter()
            .map(|rank| Node::new(rank, None, cores.clone(), gpus.clone())),
    );
    Ok(())
}

/// The number written after `"key":` in `text`, parsed exactly, when it is
/// `approx` up to rounding; `approx` otherwise.
fn exact_real(text: &str, key: &str, approx: f64) -> f64 {
    if approx == 0.0 {
        return approx;
    }
    let pat = format!("\"{key}\"");
    for (at, _) in text.match_indices(&pat) {
        let rest = text[at + pat.len()..].trim_start();
        let Some(rest) = rest.strip_prefix(':') else {
            continue;
        };
        let rest = rest.trim_start();
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E')))
            .unwrap_or(rest.len());
        if let Ok(x) = rest[..end].parse::<f64>()
            && (x - approx).abs() <= approx.abs() * 1e-12
        {
            return x;
        }
    }
    approx
}

/// A JSON string literal.
fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// A real as jansson prints it (the eventlog's writer: `%.17g`, exponent
/// without `+` or leading zeros, `.0` when it would read as an integer).
pub(crate) fn format_real(x: f64) -> String {
    let mut s = String::with_capacity(24);
    crate::eventlog::push_real(&mut s, x);
    s
}

/// JSON text with jansson's default separators, for the opaque scheduling key.
fn spaced_json(v: &Value) -> String {
    match v {
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(spaced_json).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(o) => {
            let items: Vec<String> = o
                .iter()
                .map(|(k, v)| format!("{}: {}", json_str(k), spaced_json(v)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        Value::Number(n) if n.is_f64() => format_real(n.as_f64().unwrap_or(0.0)),
        other => serde_json::to_string(other).unwrap_or_else(|_| "null".into()),
    }
}

impl FromStr for ResourceSet {
    type Err = RsetError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl std::fmt::Display for ResourceSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_json_string())
    }
}

impl serde::Serialize for ResourceSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for ResourceSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        ResourceSet::from_json(&v).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::format_real;

    #[test]
    fn reals_print_as_jansson() {
        assert_eq!(format_real(0.0), "0.0");
        assert_eq!(format_real(100.0), "100.0");
        assert_eq!(format_real(1.5), "1.5");
        assert_eq!(format_real(1.1), "1.1000000000000001");
        assert_eq!(format_real(1_795_326_931.523_034), "1795326931.5230341");
        assert_eq!(format_real(1e20), "1e20");
        assert_eq!(format_real(1.5e-7), "1.4999999999999999e-7");
        assert_eq!(format_real(0.001), "0.001");
    }
}
