//! R read from JSON text into borrowed structs, without a JSON tree.
//!
//! Reading R through `serde_json::Value` builds an object (a hash table and
//! owned key and value strings) for every `R_lite` entry and its children:
//! for a fragmented 16,384-node R, one entry per rank, that was most of the
//! time spent reading it. Here `R_lite` is read into structs that borrow
//! the text; the other keys are small and are read as values and applied
//! by the same code as [`ResourceSet::from_json`].
//!
//! This reader only takes the common shape and gives up (returns `None`) on
//! anything it is not sure reads the same: an unknown or repeated key, a
//! null, a string with escapes, an array where an object belongs, any
//! error. The caller then reads the text the strict way, so results and
//! errors are always those of `from_json`.

use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor, value::MapAccessDeserializer};
use serde_json::Value;

use super::execution::apply_execution;
use super::{Node, ResourceSet, merge_nodes};
use crate::idset::IdSet;

/// `T` read from a JSON object only: serde_json would also read a struct
/// from an array of its fields, which `from_json` refuses.
struct Object<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ObjectVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
            type Value = Object<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Object<T>, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(Object)
            }
        }
        d.deserialize_map(ObjectVisitor(PhantomData))
    }
}

/// A key that is present, null included (`Option` alone reads null as absent).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// A string without escapes; null is refused, as `from_json` refuses it.
fn borrowed_str<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de str>, D::Error> {
    <&'de str>::deserialize(d).map(Some)
}

/// The top level. `from_json` ignores unknown keys here, but skipping a
/// value is more lenient than reading it (a lone surrogate, `1e999`), so
/// this reader gives up on them instead.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Top<'a> {
    #[serde(default, deserialize_with = "present")]
    version: Option<Value>,
    #[serde(borrow)]
    execution: Object<Execution<'a>>,
    #[serde(default, deserialize_with = "present")]
    scheduling: Option<Value>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Execution<'a> {
    #[serde(rename = "R_lite", borrow)]
    r_lite: Vec<Object<Entry<'a>>>,
    #[serde(default, deserialize_with = "present")]
    nodelist: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    properties: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    nslots: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    starttime: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    expiration: Option<Value>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry<'a> {
    rank: &'a str,
    #[serde(borrow)]
    children: Object<Children<'a>>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Children<'a> {
    #[serde(default, borrow, deserialize_with = "borrowed_str")]
    core: Option<&'a str>,
    #[serde(default, borrow, deserialize_with = "borrowed_str")]
    gpu: Option<&'a str>,
}

/// R from `text` when it has the common shape and is valid; `None` means
/// "read it with `from_json`", never "invalid".
pub(super) fn read(text: &str) -> Option<ResourceSet> {
    let Object(top) = serde_json::from_str::<Object<Top<'_>>>(text).ok()?;
    if top.version.as_ref()?.as_i64() != Some(1) {
        return None;
    }
    let Object(exec) = top.execution;
    let ids = |s: Option<&str>| s.map_or(Ok(IdSet::new()), IdSet::parse).ok();
    let mut nodes = Vec::with_capacity(exec.r_lite.len());
    for Object(entry) in &exec.r_lite {
        let ranks = IdSet::parse(entry.rank).ok()?;
        let Object(children) = &entry.children;
        let cores = ids(children.core)?;
        let gpus = ids(children.gpu)?;
        nodes.extend(
            ranks
                .iter()
                .map(|rank| Node::new(rank, None, cores.clone(), gpus.clone())),
        );
    }
    let mut rs = ResourceSet {
        nodes: merge_nodes(nodes).ok()?,
        ..ResourceSet::default()
    };
    apply_execution(&mut rs, |key| match key {
        "nodelist" => exec.nodelist.as_ref(),
        "properties" => exec.properties.as_ref(),
        "nslots" => exec.nslots.as_ref(),
        "starttime" => exec.starttime.as_ref(),
        "expiration" => exec.expiration.as_ref(),
        _ => None,
    })
    .ok()?;
    rs.scheduling = top.scheduling;
    Some(rs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every R object found anywhere in `v`.
    fn r_objects(v: &Value, out: &mut Vec<Value>) {
        match v {
            Value::Object(o) if o.contains_key("execution") || o.contains_key("version") => {
                out.push(v.clone())
            }
            Value::Object(o) => o.values().for_each(|v| r_objects(v, out)),
            Value::Array(a) => a.iter().for_each(|v| r_objects(v, out)),
            _ => {}
        }
    }

    /// The typed reader either gives up or agrees with `from_json`.
    fn agrees(text: &str) -> bool {
        let strict = serde_json::from_str::<Value>(text)
            .map_err(|e| e.to_string())
            .and_then(|v| ResourceSet::from_json(&v).map_err(|e| e.to_string()));
        match read(text) {
            None => false,
            Some(rs) => {
                assert_eq!(Ok(rs), strict, "{text}");
                true
            }
        }
    }

    #[test]
    fn vectors_read_the_same() {
        let mut rs = Vec::new();
        for text in [
            include_str!("../../tests/data/rset/rlist.json"),
            include_str!("../../tests/data/rset/golden/a-normal.R.json"),
            include_str!("../../tests/data/rset/golden/acquire.R.json"),
        ] {
            r_objects(&serde_json::from_str(text).unwrap(), &mut rs);
        }
        assert!(rs.len() > 40, "{}", rs.len());
        let mut taken = 0;
        for r in &rs {
            taken += usize::from(agrees(&r.to_string()));
            agrees(&serde_json::to_string_pretty(r).unwrap());
        }
        assert!(taken > 30, "the common shape is read here: {taken}");
    }

    #[test]
    fn gives_up_where_unsure() {
        let base = r#"{"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"core": "0-3"}}], "nodelist": ["n[0-1]"]}}"#;
        assert!(agrees(base));
        for odd in [
            // shapes from_json reads, or refuses, that this reader leaves to it
            r#"{"version": 1, "execution": {"R_lite": {}}}"#,
            r#"{"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": null}}]}}"#,
            r#"{"version": 1, "execution": {"R_lite": [{"rank": "\u0030", "children": {"core": "0"}}]}}"#,
            r#"{"version": 1, "execution": {"R_lite": [["0", {"core": "0"}]]}}"#,
            r#"[1, {"R_lite": []}]"#,
            r#"{"version": 1, "version": 1, "execution": {"R_lite": []}}"#,
            r#"{"version": 1, "execution": {"R_lite": [], "R_lite": []}}"#,
            r#"{"version": 1, "execution": {"R_lite": []}, "extra": 1e999}"#,
            r#"{"version": 1, "execution": {"R_lite": []}, "extra": true}"#,
            r#"{"version": 1.0, "execution": {"R_lite": []}}"#,
            r#"{"version": 2, "execution": {"R_lite": []}}"#,
            r#"{"execution": {"R_lite": []}}"#,
            r#"{"version": 1, "execution": null}"#,
            r#"{"version": 1, "execution": {"R_lite": [], "nslots": null}}"#,
            r#"{"version": 1, "execution": {"R_lite": [], "nodelist": ["n0"]}}"#,
            r#"{"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0", "fpga": "0"}}]}}"#,
            r#"{"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0"}}, {"rank": "0", "children": {"core": "0"}}]}}"#,
            r#"{"version": 1, "execution": {"R_lite": [{"rank": "1,0", "children": {"core": "0"}}]}}"#,
            r#"{"version": 1, "execution": {"R_lite": []}} x"#,
        ] {
            assert!(!agrees(odd), "should give up on {odd}");
        }
        // null scheduling, no children, times and properties: read here
        assert!(agrees(
            r#"{"version": 1, "execution": {"R_lite": [{"rank": "1,3", "children": {}}],
                "starttime": 1.5, "expiration": 2.25, "nslots": 2,
                "properties": {"ssd": "1"}}, "scheduling": null}"#
        ));
    }
}
