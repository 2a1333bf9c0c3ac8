//! Members of an event context, read from its text in place.

use std::fmt;
use std::sync::OnceLock;

use serde_json::{Map, Value};

use super::raw;

/// The map of a context's members, built from its text on first use and
/// kept with the context.
pub(super) type LazyMap = OnceLock<Box<Map<String, Value>>>;

/// One member of a context, read from its text: scalars are decoded from the
/// text, anything else comes from the parsed map ([`Member::value`]).
#[derive(Clone, Copy)]
pub struct Member<'a> {
    /// The whole context's text, and its map.
    text: &'a str,
    map: &'a LazyMap,
    /// Position among the members (the map keeps the text's order).
    index: usize,
    /// The value's JSON text.
    raw: &'a str,
}

impl<'a> Member<'a> {
    #[inline]
    pub(super) fn new(text: &'a str, map: &'a LazyMap, index: usize, raw: &'a str) -> Self {
        Member {
            text,
            map,
            index,
            raw,
        }
    }

    /// The value's compact JSON text.
    pub fn as_json(&self) -> &'a str {
        self.raw
    }

    /// The value as a [`Value`] (builds the context's map).
    pub fn value(&self) -> &'a Value {
        static NULL: Value = Value::Null;
        let map = self
            .map
            .get_or_init(|| Box::new(raw::parse_object(self.text)));
        map.values().nth(self.index).unwrap_or(&NULL)
    }

    /// The value as an owned [`Value`], read from its text alone.
    pub fn to_value(&self) -> Value {
        raw::to_value(self.raw)
    }

    /// As [`Value::as_u64`]: a non-negative JSON integer.
    #[inline]
    pub fn as_u64(&self) -> Option<u64> {
        let digits = self.raw.as_bytes();
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.raw.parse().ok()
    }

    /// As [`Value::as_i64`]: a JSON integer within i64.
    #[inline]
    pub fn as_i64(&self) -> Option<i64> {
        let digits = self.raw.strip_prefix('-').unwrap_or(self.raw).as_bytes();
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.raw.parse().ok()
    }

    /// As [`Value::as_f64`]: any JSON number.
    #[inline]
    pub fn as_f64(&self) -> Option<f64> {
        if let Some(n) = self.as_u64() {
            return Some(n as f64);
        }
        if let Some(n) = self.as_i64() {
            return Some(n as f64);
        }
        // A real: its %.17g text reads back to the same double.
        match self.raw.as_bytes().first() {
            Some(b'-' | b'0'..=b'9') => self.raw.parse().ok(),
            _ => None,
        }
    }

    /// As [`Value::as_bool`].
    #[inline]
    pub fn as_bool(&self) -> Option<bool> {
        match self.raw {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    }

    /// As [`Value::as_str`]; read in place unless the string has escapes.
    #[inline]
    pub fn as_str(&self) -> Option<&'a str> {
        let inner = self.raw.strip_prefix('"')?.strip_suffix('"')?;
        if inner.contains('\\') {
            self.value().as_str()
        } else {
            Some(inner)
        }
    }

    /// True for JSON `null`.
    pub fn is_null(&self) -> bool {
        self.raw == "null"
    }
}

impl fmt::Debug for Member<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Member").field(&self.raw).finish()
    }
}

impl fmt::Display for Member<'_> {
    /// As the [`Value`] displays (serde_json's compact text).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.value(), f)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::eventlog::context::Context;

    #[test]
    fn members_read_as_values_do() {
        let Value::Object(map) = json!({
            "u": 18446744073709551615u64, "i": -9223372036854775808i64, "z": 0,
            "r": 3600.0, "t": 1e-5, "s": "a\"b", "p": "plain", "b": false,
            "n": null, "o": {"x": 1}, "a": [1, 2], "k\"q": 7
        }) else {
            unreachable!()
        };
        let c = Context::from(map);
        let reread = Context::from_canonical(c.as_json().to_string());
        for (key, v) in c.as_map() {
            let m = reread.member(key).expect(key);
            assert_eq!(m.as_u64(), v.as_u64(), "{key}");
            assert_eq!(m.as_i64(), v.as_i64(), "{key}");
            assert_eq!(m.as_f64().map(f64::to_bits), v.as_f64().map(f64::to_bits));
            assert_eq!(m.as_bool(), v.as_bool(), "{key}");
            assert_eq!(m.as_str(), v.as_str(), "{key}");
            assert_eq!(m.is_null(), v.is_null(), "{key}");
            assert_eq!(m.value(), v, "{key}");
            assert_eq!(&m.to_value(), v, "{key}");
            assert_eq!(m.to_string(), v.to_string(), "{key}");
        }
        assert!(reread.member("missing").is_none());
        assert_eq!(reread.len(), 12);
        assert!(reread.contains_key("k\"q"));
    }
}
