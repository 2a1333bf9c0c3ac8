//! Recognizing context text that is already in canonical form.
//!
//! A context is kept as its canonical text: what jansson's compact dump of the
//! parsed object gives (see [`super::json`]). Most contexts arrive in exactly
//! that form, since flux-core and Fluxgate wrote them, so reading one is
//! mostly checking that it already is canonical and copying it; only other
//! text (whitespace, escapes, reals in another spelling, repeated keys) is
//! parsed and written out again.
//!
//! [`object_len`] accepts only text it is sure of: valid JSON that
//! serde_json reads to a map whose compact dump is the same bytes. Anything
//! else, including valid JSON it could have accepted (escapes, integers of
//! more than 18 digits, deep nesting, objects with many keys), is refused and
//! takes the general path, which also produces the error message for bad
//! JSON.

use super::json::push_real;

/// Nesting beyond which text is left to the general reader (far below
/// serde_json's limit, so nothing accepted here could be refused there).
const MAX_DEPTH: usize = 32;

/// Members of one object tracked for the repeated-key check; objects with
/// more take the general path.
const MAX_KEYS: usize = 16;

/// Digits beyond which an integer is left to the general reader: up to 18,
/// every integer fits both i64 and u64, which serde_json keeps as written.
const MAX_INT_DIGITS: usize = 18;

/// The length of the JSON object in canonical form at the start of `text`,
/// if there is one there (what follows it is not looked at).
pub(super) fn object_len(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    if bytes.first() != Some(&b'{') {
        return None;
    }
    object_end(bytes, 0, 1)
}

/// The end of the value starting at `pos`. Inlined into the container
/// loops, where nearly all of the checking happens.
#[inline(always)]
fn value_end(bytes: &[u8], pos: usize, depth: usize) -> Option<usize> {
    match *bytes.get(pos)? {
        b'"' => Some(string_end(bytes, pos + 1)? + 1),
        b'{' => object_end(bytes, pos, depth + 1),
        b'[' => array_end(bytes, pos, depth + 1),
        b't' => literal_end(bytes, pos, b"true"),
        b'f' => literal_end(bytes, pos, b"false"),
        b'n' => literal_end(bytes, pos, b"null"),
        _ => number_end(bytes, pos),
    }
}

/// The end of the object whose `{` is at `pos`.
fn object_end(bytes: &[u8], mut pos: usize, depth: usize) -> Option<usize> {
    if depth > MAX_DEPTH {
        return None;
    }
    pos += 1;
    if *bytes.get(pos)? == b'}' {
        return Some(pos + 1);
    }
    // Key ranges, for the repeated-key check: serde_json keeps one member
    // per key, so text that repeats a key would not be written back as it is.
    let mut keys = [(0u32, 0u32); MAX_KEYS];
    let mut nkeys = 0;
    // One bit per (length, first byte, last byte) seen: keys are compared
    // only when theirs is already set.
    let mut seen = 0u64;
    loop {
        if *bytes.get(pos)? != b'"' {
            return None;
        }
        let start = pos + 1;
        let end = string_end(bytes, start)?;
        let key = &bytes[start..end];
        let byte = |b: Option<&u8>| b.map_or(0, |&b| usize::from(b));
        let slot = (key.len() + 3 * byte(key.first()) + 5 * byte(key.last())) % 64;
        let sign = 1u64 << slot;
        if seen & sign != 0
            && keys[..nkeys]
                .iter()
                .any(|&(s, e)| same(&bytes[s as usize..e as usize], key))
        {
            return None;
        }
        seen |= sign;
        *keys.get_mut(nkeys)? = (start as u32, end as u32);
        nkeys += 1;
        if *bytes.get(end + 1)? != b':' {
            return None;
        }
        pos = value_end(bytes, end + 2, depth)?;
        match *bytes.get(pos)? {
            b',' => pos += 1,
            b'}' => return Some(pos + 1),
            _ => return None,
        }
    }
}

/// The end of the array whose `[` is at `pos`.
fn array_end(bytes: &[u8], mut pos: usize, depth: usize) -> Option<usize> {
    if depth > MAX_DEPTH {
        return None;
    }
    pos += 1;
    if *bytes.get(pos)? == b']' {
        return Some(pos + 1);
    }
    loop {
        pos = value_end(bytes, pos, depth)?;
        match *bytes.get(pos)? {
            b',' => pos += 1,
            b']' => return Some(pos + 1),
            _ => return None,
        }
    }
}

/// Byte equality of two short slices, inline: keys are a few bytes, where a
/// call to `memcmp` costs more than the comparison.
#[inline]
pub(super) fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// `0x01` in every byte of a word.
const ONES: u64 = u64::from_le_bytes([1; 8]);
/// `0x80` in every byte of a word.
const HIGH: u64 = ONES * 0x80;

/// The high bit set in each byte of `w` that is `"`, `\` or a control
/// character. The lowest flagged byte is always a true match (a false one
/// can only follow a true one), which is all [`string_end`] uses.
fn stops(w: u64) -> u64 {
    let quote = w ^ (ONES * u64::from(b'"'));
    let backslash = w ^ (ONES * u64::from(b'\\'));
    let zero = |x: u64| x.wrapping_sub(ONES) & !x;
    (zero(quote) | zero(backslash) | (w.wrapping_sub(ONES * 0x20) & !w)) & HIGH
}

/// The position of the closing quote of a string without escapes (nor the
/// raw control characters JSON forbids) whose content starts at `start`.
#[inline]
pub(super) fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let pos = string_stop(bytes, start)?;
    (bytes[pos] == b'"').then_some(pos)
}

/// The position of the first `"`, `\` or control character from `start`.
/// Eight bytes are tested at a time while eight remain.
#[inline]
pub(super) fn string_stop(bytes: &[u8], start: usize) -> Option<usize> {
    let mut pos = start;
    while let Some(chunk) = bytes.get(pos..pos + 8) {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let found = stops(u64::from_le_bytes(word));
        if found != 0 {
            return Some(pos + (found.trailing_zeros() / 8) as usize);
        }
        pos += 8;
    }
    let len = bytes
        .get(pos..)?
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
    Some(pos + len)
}

fn literal_end(bytes: &[u8], pos: usize, word: &[u8]) -> Option<usize> {
    let end = pos + word.len();
    (bytes.get(pos..end)? == word).then_some(end)
}

/// The end of an integer as serde_json prints it, or of a real as jansson
/// prints it, starting at `start`.
fn number_end(bytes: &[u8], start: usize) -> Option<usize> {
    let digits_from = |from: usize| {
        bytes.get(from..).map_or(0, |rest| {
            rest.iter().take_while(|b| b.is_ascii_digit()).count()
        })
    };
    let negative = bytes.get(start) == Some(&b'-');
    let int_start = start + usize::from(negative);
    let int_len = digits_from(int_start);
    let leading = *bytes.get(int_start)?;
    if int_len == 0 || (int_len > 1 && leading == b'0') {
        return None;
    }
    let mut pos = int_start + int_len;
    match bytes.get(pos) {
        Some(b'.' | b'e' | b'E') => {}
        // serde_json reads -0 as the real -0.0.
        _ if negative && int_len == 1 && leading == b'0' => return None,
        _ => return (int_len <= MAX_INT_DIGITS).then_some(pos),
    }
    if bytes.get(pos) == Some(&b'.') {
        let frac = digits_from(pos + 1);
        if frac == 0 {
            return None;
        }
        pos += 1 + frac;
    }
    if matches!(bytes.get(pos), Some(b'e' | b'E')) {
        pos += 1;
        if matches!(bytes.get(pos), Some(b'+' | b'-')) {
            pos += 1;
        }
        let exp = digits_from(pos);
        if exp == 0 {
            return None;
        }
        pos += exp;
    }
    let text = std::str::from_utf8(bytes.get(start..pos)?).ok()?;
    let value: f64 = text.parse().ok()?;
    // Out-of-range reals parse to infinity here and are an error there;
    // push_real writes those as 0.0, so they are refused too.
    let mut printed = String::with_capacity(24);
    push_real(&mut printed, value);
    (printed == text).then_some(pos)
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, Value};

    use super::*;

    fn is_canonical_object(text: &str) -> bool {
        object_len(text) == Some(text.len())
    }

    fn dump(text: &str) -> Option<String> {
        let map: Map<String, Value> = serde_json::from_str(text).ok()?;
        Some(super::super::Context::from(map).as_json().to_string())
    }

    #[test]
    fn accepts_only_text_that_is_its_own_dump() {
        let accepted = [
            r#"{}"#,
            r#"{"a":1,"b":-2,"c":"x y","d":true,"e":false,"f":null}"#,
            "{\"a\":[],\"b\":[1,[2,{\"c\":{}}]],\"é\":\"ƒ4JTGFjm\",\"\u{7f}\":0}",
            r#"{"r":3600.0,"s":0.10000000000000001,"t":1e20,"u":-0.0,"v":1.4999999999999999e-7}"#,
            r#"{"big":999999999999999999,"neg":-999999999999999999}"#,
            r#"{"long":"a string longer than eight bytes, several times over","k":"12345678"}"#,
        ];
        for text in accepted {
            assert!(is_canonical_object(text), "{text}");
            assert_eq!(dump(text).as_deref(), Some(text));
        }
        let refused = [
            "",
            "[]",
            r#"{"a":1} "#,
            r#"{ "a":1}"#,
            r#"{"a":"\n"}"#,
            r#"{"a":"\u0041"}"#,
            r#"{"a":"a long string with an escape\" inside"}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"a":-0}"#,
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":.5}"#,
            r#"{"a":1e5}"#,
            r#"{"a":1E20}"#,
            r#"{"a":1.5e-7}"#,
            r#"{"a":0.1}"#,
            r#"{"a":1e999}"#,
            r#"{"a":1234567890123456789}"#,
            r#"{"a":tru}"#,
            r#"{"a":[1,]}"#,
            r#"{"a":1,}"#,
            r#"{"a"}"#,
            r#"{"a":1"#,
            r#"{"a":"unterminated"#,
            "{\"a\":\"\t\"}",
            "{\"a long key with a tab\t\":1}",
        ];
        for text in refused {
            assert!(!is_canonical_object(text), "{text}");
        }
        // Only the object is measured, not what follows it.
        assert_eq!(object_len(r#"{"a":1}}"#), Some(7));
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(40), "]".repeat(40));
        assert!(!is_canonical_object(&deep));
        let wide: String = (0..20).map(|i| format!(",\"k{i}\":{i}")).collect();
        assert!(!is_canonical_object(&format!("{{{}}}", &wide[1..])));
        // Repeats in different objects are not repeats.
        assert!(is_canonical_object(r#"{"a":{"a":{"a":1}},"b":{"a":2}}"#));
    }

    #[test]
    fn string_end_finds_the_first_stop_byte_anywhere() {
        let plain = |bytes: &[u8], start: usize| {
            let i = start
                + bytes[start..]
                    .iter()
                    .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
            (bytes[i] == b'"').then_some(i)
        };
        let fillers: [&[u8]; 4] = [b"a", "é".as_bytes(), "ƒ".as_bytes(), b"\x7f"];
        for stop in [b'"', b'\\', 0, b'\n', 0x1f] {
            for filler in fillers {
                for len in 0..20 {
                    for tail in [&b""[..], b"\"", b"xxxxxxxxxxxx\""] {
                        let mut text = filler.repeat(len);
                        text.push(stop);
                        text.extend_from_slice(tail);
                        assert_eq!(string_end(&text, 0), plain(&text, 0), "{text:?}");
                    }
                }
            }
        }
        assert_eq!(string_end(b"abcdefghijklmnop", 0), None);
    }
}
