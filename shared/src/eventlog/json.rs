//! JSON text as flux-core writes it, and the exact reading of a top-level number.
//!
//! flux-core serialises events with jansson (`json_dumps(entry, JSON_COMPACT)`), so a
//! byte-for-byte match with its eventlogs needs jansson's choices where serde_json's
//! differ:
//! - reals are printed with `%.17g` (then `.0` added to integral values, and the
//!   exponent stripped of `+` and leading zeros), not the shortest roundtrip form:
//!   `1795326931.5103021`, where the shortest form is `1795326931.510302`;
//! - control characters without a short escape are `\u001B`, uppercase hex.
//!
//! jansson builds with a dtoa option write shortest reals instead; the Flux
//! eventlogs we have (flux-core 0.88) show `%.17g`, so that is what is written here.
//!
//! serde_json (without its `float_roundtrip` feature) may read a 17-digit real one
//! unit in the last place off, which would change the bytes on re-emission, so the
//! timestamp is re-read from its own text with Rust's correctly rounded parser.

use std::io;

use std::borrow::Cow;

use serde_json::ser::{CharEscape, Formatter};
use serde_json::{Number, Value};

/// serde_json formatter emitting jansson's compact output.
pub(super) struct JanssonFormatter;

impl Formatter for JanssonFormatter {
    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        let mut s = String::with_capacity(24);
        push_real(&mut s, value);
        writer.write_all(s.as_bytes())
    }

    fn write_f32<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        self.write_f64(writer, f64::from(value))
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        char_escape: CharEscape,
    ) -> io::Result<()> {
        const HEX: &[u8; 16] = b"0123456789ABCDEF";
        let c = match char_escape {
            CharEscape::Quote => b'"',
            CharEscape::ReverseSolidus => b'\\',
            CharEscape::Solidus => b'/',
            CharEscape::Backspace => b'b',
            CharEscape::FormFeed => b'f',
            CharEscape::LineFeed => b'n',
            CharEscape::CarriageReturn => b'r',
            CharEscape::Tab => b't',
            CharEscape::AsciiControl(b) => {
                let seq = [
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 0xf)],
                ];
                return writer.write_all(&seq);
            }
        };
        writer.write_all(&[b'\\', c])
    }
}

/// Append `value` as jansson prints a real: C `%.17g`, `.0` added when the result
/// has neither `.` nor `e`, exponent without `+` or leading zeros.
/// Not-finite values (which JSON cannot hold) are written as `0.0`.
pub(crate) fn push_real(out: &mut String, value: f64) {
    if !value.is_finite() {
        out.push_str("0.0");
        return;
    }
    if value.is_sign_negative() {
        out.push('-');
    }
    // 17 significant digits, correctly rounded: "d.dddddddddddddddde<exp>".
    let sci = format!("{:.16e}", value.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    // %g drops trailing zeros of the fraction.
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };

    if !(-4..17).contains(&exp) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        if exp < 0 {
            out.push('-');
        }
        out.push_str(&exp.unsigned_abs().to_string());
    } else if exp >= 0 {
        let int_len = exp as usize + 1;
        if digits.len() > int_len {
            out.push_str(&digits[..int_len]);
            out.push('.');
            out.push_str(&digits[int_len..]);
        } else {
            out.push_str(digits);
            out.extend(std::iter::repeat_n('0', int_len - digits.len()));
            out.push_str(".0");
        }
    } else {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-exp - 1) as usize));
        out.push_str(digits);
    }
}

/// Re-read every real in `value` from its own text in `raw` (the JSON `value` was
/// parsed from), so that it is the correctly rounded double.
pub(super) fn fix_reals(value: &mut Value, raw: &str) {
    match value {
        Value::Number(n) if n.is_f64() => {
            if let Some(exact) = raw.parse::<f64>().ok().and_then(Number::from_f64) {
                *n = exact;
            }
        }
        Value::Array(items) => {
            for (item, raw_item) in items.iter_mut().zip(elements(raw)) {
                if has_real(item) {
                    fix_reals(item, raw_item);
                }
            }
        }
        Value::Object(map) => {
            // Members in text order: with duplicate keys the last one is applied last,
            // and it is the one the parser kept.
            for (raw_key, raw_value) in members(raw) {
                if let Some(v) = map.get_mut(key_text(raw_key).as_ref())
                    && has_real(v)
                {
                    fix_reals(v, raw_value);
                }
            }
        }
        _ => {}
    }
}

/// Whether any number in `value` is a real.
pub(super) fn has_real(value: &Value) -> bool {
    match value {
        Value::Number(n) => n.is_f64(),
        Value::Array(items) => items.iter().any(has_real),
        Value::Object(map) => map.values().any(has_real),
        _ => false,
    }
}

/// `(raw key with quotes, raw value)` of each member of the object text `raw`.
fn members(raw: &str) -> impl Iterator<Item = (&str, &str)> {
    let b = raw.as_bytes();
    let mut i = skip_ws(b, 0);
    let mut open = b.get(i) == Some(&b'{');
    i += 1;
    std::iter::from_fn(move || {
        if !open {
            return None;
        }
        let member = (|| {
            i = skip_ws(b, i);
            if b.get(i) == Some(&b',') {
                i = skip_ws(b, i + 1);
            }
            if b.get(i) != Some(&b'"') {
                return None;
            }
            let key_start = i;
            i = skip_string(b, i)?;
            let key = &raw[key_start..i];
            i = skip_ws(b, i);
            if b.get(i) != Some(&b':') {
                return None;
            }
            i = skip_ws(b, i + 1);
            let value_start = i;
            i = skip_value(b, i)?;
            Some((key, &raw[value_start..i]))
        })();
        open = member.is_some();
        member
    })
}

/// Raw text of each element of the array text `raw`.
fn elements(raw: &str) -> impl Iterator<Item = &str> {
    let b = raw.as_bytes();
    let mut i = skip_ws(b, 0);
    let mut open = b.get(i) == Some(&b'[');
    i += 1;
    std::iter::from_fn(move || {
        if !open {
            return None;
        }
        i = skip_ws(b, i);
        if b.get(i) == Some(&b',') {
            i = skip_ws(b, i + 1);
        }
        if matches!(b.get(i), None | Some(b']')) {
            open = false;
            return None;
        }
        let start = i;
        let end = skip_value(b, i);
        open = end.is_some();
        i = end?;
        Some(&raw[start..i])
    })
}

/// The text of a raw JSON string token (quotes included), escapes decoded.
fn key_text(raw: &str) -> Cow<'_, str> {
    if raw.contains('\\') {
        Cow::Owned(serde_json::from_str::<String>(raw).unwrap_or_default())
    } else {
        Cow::Borrowed(raw.get(1..raw.len().saturating_sub(1)).unwrap_or_default())
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// Index just past the string starting at `i` (which is a `"`).
fn skip_string(b: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    loop {
        match b.get(i)? {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
}

/// Index just past the value starting at `i`.
fn skip_value(b: &[u8], mut i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => skip_string(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            loop {
                match b.get(i)? {
                    b'"' => {
                        i = skip_string(b, i)?;
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
            while !matches!(
                b.get(i),
                None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            ) {
                i += 1;
            }
            Some(i)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn real(v: f64) -> String {
        let mut s = String::new();
        push_real(&mut s, v);
        s
    }

    // The literals are the 17-digit text flux-core writes, kept as written.
    #[allow(clippy::excessive_precision)]
    #[test]
    fn reals_match_jansson_percent_17g() {
        // Expected strings are C printf("%.17g") with jansson's fix-ups.
        let cases: &[(f64, &str)] = &[
            (42.0, "42.0"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (0.1, "0.10000000000000001"),
            (1.5, "1.5"),
            (-2.25, "-2.25"),
            (1e20, "1e20"),
            (1.5e-7, "1.4999999999999999e-7"),
            (1e-5, "1.0000000000000001e-5"),
            (0.0001, "0.0001"),
            (12345678901234567.0, "12345678901234568.0"),
            (123456789012345678.0, "1.2345678901234568e17"),
            (1795326931.5103021, "1795326931.5103021"),
            (1795326931.534759, "1795326931.534759"),
            (f64::MAX, "1.7976931348623157e308"),
            (5e-324, "4.9406564584124654e-324"),
        ];
        for &(v, want) in cases {
            assert_eq!(real(v), want, "{v:e}");
        }
    }

    #[test]
    fn fix_reals_rereads_each_real_from_its_text() {
        let t = r#"{"a":{"t":1},"t":0.1,"s":"x\"}","t" : 10967.385080918984 ,
            "l":[1, "]", {"x": 5.8301083732982434e-211}], "\u0074": 2}"#;
        let mut v: Value = serde_json::from_str(t).unwrap();
        fix_reals(&mut v, t);
        assert_eq!(v["t"].as_f64(), Some(2.0));
        assert_eq!(
            v["l"][2]["x"].as_f64().unwrap().to_bits(),
            5.8301083732982434e-211f64.to_bits()
        );
        let t = r#"{"t":10967.385080918984,"u":[0.1,7]}"#;
        let mut v: Value = serde_json::from_str(t).unwrap();
        fix_reals(&mut v, t);
        assert_eq!(
            v["t"].as_f64().unwrap().to_bits(),
            10967.385080918984f64.to_bits()
        );
        assert_eq!(v["u"][0].as_f64(), Some(0.1));
        assert!(!has_real(&v["u"][1]));
    }
}
