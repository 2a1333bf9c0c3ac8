//! Reading canonical context text in place: its members, one member by
//! key, and values, without parsing the whole object.
//!
//! The text is always canonical (see [`super::canonical`]): compact, one
//! member per key, strings escaped only where JSON requires it. The readers
//! here rely on that and do not check it again; on text that is not JSON
//! they return `None`, never panic.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::canonical::{same, string_stop};

/// The members of a canonical object in order: each key as written (escapes
/// not decoded) and its value's text.
pub(crate) fn members(text: &str) -> Members<'_> {
    Members {
        text,
        pos: usize::from(text.starts_with('{')),
    }
}

/// Iterator of [`members`].
pub(crate) struct Members<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Iterator for Members<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        let bytes = self.text.as_bytes();
        if bytes.get(self.pos) != Some(&b'"') {
            return None;
        }
        let key_end = quoted_end(bytes, self.pos)?;
        let key = self.text.get(self.pos + 1..key_end - 1)?;
        if bytes.get(key_end) != Some(&b':') {
            return None;
        }
        let value_start = key_end + 1;
        let value_end = value_end(bytes, value_start)?;
        let value = self.text.get(value_start..value_end)?;
        // Past the ',' (or the closing '}', where the next call stops).
        self.pos = value_end + 1;
        Some((key, value))
    }
}

/// The position and value text of the member `key` of canonical object
/// text; `key` must be [`plain_key`]. Keys are compared where they stand,
/// and only values are skipped, so a lookup reads the text once at most.
pub(super) fn find<'a>(text: &'a str, key: &str) -> Option<(usize, &'a str)> {
    let bytes = text.as_bytes();
    let wanted = key.as_bytes();
    let mut pos = usize::from(bytes.first() == Some(&b'{'));
    let mut index = 0;
    while bytes.get(pos) == Some(&b'"') {
        let name = pos + 1;
        let after = name + wanted.len();
        // A plain key matches only text without escapes, so equal bytes and
        // then the closing quote mean equal keys.
        let hit = bytes.get(after) == Some(&b'"') && same(&bytes[name..after], wanted);
        let key_end = if hit {
            after + 1
        } else {
            quoted_end(bytes, pos)?
        };
        if bytes.get(key_end) != Some(&b':') {
            return None;
        }
        let end = value_end(bytes, key_end + 1)?;
        if hit {
            return Some((index, text.get(key_end + 1..end)?));
        }
        pos = end + 1;
        index += 1;
    }
    None
}

/// The key text from [`members`] as the key it stands for (escapes decoded).
pub(crate) fn decode_key(text: &str) -> Cow<'_, str> {
    // A plain loop: keys are short, and most have no escape.
    if !text.bytes().any(|b| b == b'\\') {
        return Cow::Borrowed(text);
    }
    // Canonical text holds only valid escapes; the fallback is not reached.
    serde_json::from_str(&format!("\"{text}\"")).map_or(Cow::Borrowed(text), Cow::Owned)
}

/// Parse a context's text, which the reader checked or this module wrote;
/// it is a JSON object, so the empty map is only a fallback that cannot be
/// reached.
pub(super) fn parse_object(text: &str) -> Map<String, Value> {
    serde_json::from_str(text).unwrap_or_default()
}

/// The value of canonical value text: scalars are read directly, the rest
/// through serde_json.
pub(crate) fn to_value(text: &str) -> Value {
    match text {
        "null" => return Value::Null,
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        _ => {}
    }
    if let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"'))
        && !inner.contains('\\')
    {
        return Value::String(inner.to_owned());
    }
    // (Rust's integer parsing also takes a leading '+', which JSON does not.)
    if text.starts_with(|c: char| c.is_ascii_digit() || c == '-') {
        if let Ok(n) = text.parse::<u64>() {
            return Value::from(n);
        }
        if let Ok(n) = text.parse::<i64>() {
            return Value::from(n);
        }
    }
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// True when `key` is written in JSON exactly as it is (no escapes needed), so
/// that comparing it with a key's text from [`members`] is comparing keys.
pub(super) fn plain_key(key: &str) -> bool {
    !key.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20)
}

/// The end (one past the closing quote) of the string, escapes allowed,
/// whose opening quote is at `quote`.
fn quoted_end(bytes: &[u8], quote: usize) -> Option<usize> {
    let mut pos = quote + 1;
    loop {
        pos = string_stop(bytes, pos)?;
        match bytes[pos] {
            b'"' => return Some(pos + 1),
            b'\\' => pos += 2,
            // Not in canonical text.
            _ => return None,
        }
    }
}

/// The end of the compact JSON value starting at `start`.
fn value_end(bytes: &[u8], start: usize) -> Option<usize> {
    match bytes.get(start)? {
        b'"' => quoted_end(bytes, start),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = start;
            loop {
                match bytes.get(i)? {
                    b'"' => {
                        i = quoted_end(bytes, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let len = bytes[start..]
                .iter()
                .position(|&b| matches!(b, b',' | b'}' | b']'))
                .unwrap_or(bytes.len() - start);
            Some(start + len)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Map;

    use super::*;

    #[test]
    fn members_are_found_in_place() {
        let text = r#"{"a":{"x":"}","y":[1,"]"]},"b\"c":"q\"r","n":-5,"s":"v","e":{}}"#;
        let got: Vec<_> = members(text).collect();
        assert_eq!(
            got,
            [
                ("a", r#"{"x":"}","y":[1,"]"]}"#),
                (r#"b\"c"#, r#""q\"r""#),
                ("n", "-5"),
                ("s", r#""v""#),
                ("e", "{}"),
            ]
        );
        assert_eq!(members("{}").count(), 0);
        assert!(plain_key("urgency") && !plain_key("b\"c"));
        for (index, (key, raw)) in got.iter().enumerate() {
            if plain_key(key) {
                assert_eq!(find(text, key), Some((index, *raw)), "{key}");
            }
            let whole: Map<String, Value> = serde_json::from_str(text).unwrap();
            assert_eq!(whole.get(decode_key(key).as_ref()), Some(&to_value(raw)));
        }
        assert_eq!(find(text, "x"), None);
        assert_eq!(find(text, "b"), None);
        assert_eq!(find("{}", "a"), None);
    }

    #[test]
    fn values_read_from_text_match_serde_json() {
        for text in [
            "null",
            "true",
            "false",
            "0",
            "-5",
            "18446744073709551615",
            "-9223372036854775808",
            "3600.0",
            "-0.0",
            "1e20",
            "\"s\"",
            "\"a\\u001Bb\"",
            "[1,{\"a\":null}]",
            "{\"k\":\"v\"}",
        ] {
            let want: Value = serde_json::from_str(text).unwrap();
            assert_eq!(to_value(text), want, "{text}");
        }
    }
}
