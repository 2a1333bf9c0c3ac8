//! JSON text as flux-core writes it.
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
//! Reading needs serde_json's `float_roundtrip` feature (enabled for the workspace):
//! without it a 17-digit real may be read one unit in the last place off, which
//! would change the bytes on re-emission.

use std::io;

use serde_json::ser::{CharEscape, Formatter};

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
}
