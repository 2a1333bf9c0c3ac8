//! An event's context: canonical JSON text, parsed into a map only on demand.
//!
//! Reading an eventlog is mostly copying context text and reading a few
//! scalar members (the RFC 21 fold reads one to four per event), so the
//! context is kept as the exact text written to the log. Scalars are read
//! straight from it ([`Context::member`]); the map of values is built on the
//! first call that needs it ([`Context::get`], [`Context::as_map`]) and kept.
//! The text is always what jansson would write for the map, so writing an
//! event back is a copy and gives the same bytes.

use std::fmt;
use std::ops::Index;
use std::sync::OnceLock;

use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use super::member::{LazyMap, Member};
use super::raw;
use super::raw::parse_object as parse;

/// The context object of an event.
pub struct Context {
    /// Canonical compact JSON of the object.
    text: String,
    /// The parsed object, built on first use (boxed: most contexts never
    /// need it, and events stay small to move).
    map: LazyMap,
}

impl Context {
    /// An empty object.
    pub fn new() -> Self {
        Context::from(Map::new())
    }

    /// Text already known to be canonical (checked by the reader, or written
    /// by [`push_object`]).
    pub(super) fn from_canonical(text: String) -> Self {
        Context {
            text,
            map: OnceLock::new(),
        }
    }

    /// The object as compact JSON, exactly as it is written in the eventlog.
    pub fn as_json(&self) -> &str {
        &self.text
    }

    /// The object as a map (parsed on first use, then kept).
    pub fn as_map(&self) -> &Map<String, Value> {
        self.map.get_or_init(|| Box::new(parse(&self.text)))
    }

    /// The object as a map, taking it out of the context.
    pub fn into_map(self) -> Map<String, Value> {
        let Context { text, map } = self;
        map.into_inner().map_or_else(|| parse(&text), |m| *m)
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_map().get(key)
    }

    /// The member `key` read in place, without building the map.
    pub fn member(&self, key: &str) -> Option<Member<'_>> {
        if !raw::plain_key(key) {
            let index = self.as_map().keys().position(|k| k == key)?;
            let raw = raw::members(&self.text).nth(index)?.1;
            return Some(Member::new(&self.text, &self.map, index, raw));
        }
        raw::find(&self.text, key)
            .map(|(index, raw)| Member::new(&self.text, &self.map, index, raw))
    }

    /// True when the object has a member `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.member(key).is_some()
    }

    /// Member names in order.
    pub fn keys(&self) -> serde_json::map::Keys<'_> {
        self.as_map().keys()
    }

    /// Members in order.
    pub fn iter(&self) -> serde_json::map::Iter<'_> {
        self.as_map().iter()
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        raw::members(&self.text).count()
    }

    /// True when the object has no member.
    pub fn is_empty(&self) -> bool {
        self.text == "{}"
    }

    /// Set `key` to `value`: a new key goes last, an existing one keeps its place.
    pub fn insert(&mut self, key: String, value: Value) {
        let mut text = std::mem::take(&mut self.text);
        let mut map = std::mem::take(&mut self.map)
            .into_inner()
            .map_or_else(|| parse(&text), |m| *m);
        if map.contains_key(&key) || !text.ends_with('}') {
            map.insert(key, value);
            *self = Context::from(map);
            return;
        }
        // A new key goes last, so appending keeps the text canonical without
        // writing it all again.
        text.pop();
        if text.len() > 1 {
            text.push(',');
        }
        super::push_json(&mut text, &key);
        text.push(':');
        super::push_json(&mut text, &value);
        text.push('}');
        map.insert(key, value);
        *self = Context {
            text,
            map: OnceLock::from(Box::new(map)),
        };
    }
}

impl Default for Context {
    fn default() -> Self {
        Context::new()
    }
}

impl From<Map<String, Value>> for Context {
    fn from(map: Map<String, Value>) -> Self {
        let mut text = String::with_capacity(64);
        super::push_json(&mut text, &map);
        Context {
            text,
            map: OnceLock::from(Box::new(map)),
        }
    }
}

impl FromIterator<(String, Value)> for Context {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(members: I) -> Self {
        Context::from(Map::from_iter(members))
    }
}

impl From<Context> for Map<String, Value> {
    fn from(context: Context) -> Self {
        context.into_map()
    }
}

impl From<Context> for Value {
    fn from(context: Context) -> Self {
        Value::Object(context.into_map())
    }
}

impl Clone for Context {
    /// Copies the text only: most copies are written or sent, not read.
    fn clone(&self) -> Self {
        Context::from_canonical(self.text.clone())
    }
}

impl PartialEq for Context {
    /// Equal as JSON objects (member order does not matter, as for maps).
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text || self.as_map() == other.as_map()
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Context").field(&self.text).finish()
    }
}

impl fmt::Display for Context {
    /// The compact JSON text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Index<&str> for Context {
    type Output = Value;

    /// The value of `key`; panics when there is none, as indexing a map does.
    fn index(&self, key: &str) -> &Value {
        &self.as_map()[key]
    }
}

impl<'a> IntoIterator for &'a Context {
    type Item = (&'a String, &'a Value);
    type IntoIter = serde_json::map::Iter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl Serialize for Context {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.as_map().serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ctx(v: Value) -> Context {
        match v {
            Value::Object(m) => Context::from(m),
            _ => Context::new(),
        }
    }

    #[test]
    fn insert_keeps_text_and_map_in_step() {
        let mut c = Context::new();
        assert!(c.is_empty());
        c.insert("b".into(), json!(1));
        c.insert("a".into(), json!("x\u{1b}"));
        c.insert("b".into(), json!(2.5));
        assert_eq!(c.as_json(), r#"{"b":2.5,"a":"x\u001B"}"#);
        assert_eq!(Context::from_canonical(c.as_json().into()), c);
        let other = ctx(json!({"a": "x\u{1b}", "b": 2.5}));
        assert_eq!(c, other);
        assert_ne!(c, Context::new());
        assert_eq!(c["b"], 2.5);
    }
}
