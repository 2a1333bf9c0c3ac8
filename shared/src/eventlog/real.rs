//! Reading an event timestamp: a plain decimal real, to the nearest double.
//!
//! Every event starts with one, so it is read here with integer arithmetic
//! rather than by the general float parser, which costs several times more.
//! The result is the correctly rounded double (ties to even), the same one
//! serde_json (with `float_roundtrip`) and Rust's parser give, which the
//! tests check against `str::parse`.

/// Powers of ten exactly representable as doubles.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// Digits a u64 always holds.
const MAX_DIGITS: usize = 19;

/// The number `digits[.digits]` (JSON's grammar without sign or exponent)
/// at the start of `text`, as the nearest double, and its length; `None`
/// when the text there is not of that form (a second `.` included), or the
/// value is not finite.
pub(super) fn leading_real(text: &str) -> Option<(f64, usize)> {
    let bytes = text.as_bytes();
    let mut mantissa = 0u64;
    let int_len = digits(bytes, 0, &mut mantissa);
    let (scale, len) = if bytes.get(int_len) == Some(&b'.') {
        let scale = digits(bytes, int_len + 1, &mut mantissa);
        (scale, int_len + 1 + scale)
    } else {
        (0, int_len)
    };
    let leading_zero = int_len > 1 && bytes[0] == b'0';
    let bad_point = len > int_len && scale == 0;
    if int_len == 0 || leading_zero || bad_point || bytes.get(len) == Some(&b'.') {
        return None;
    }
    let exact = if int_len + scale <= MAX_DIGITS {
        ratio(mantissa, scale)
    } else {
        None
    };
    // What integer arithmetic does not cover (more than 19 digits, or 2^54
    // and more with few decimals) goes to the general parser, which rounds
    // correctly too.
    let value = match exact {
        Some(value) => value,
        None => text[..len].parse().ok()?,
    };
    value.is_finite().then_some((value, len))
}

/// The count of decimal digits from `start`, appended to `mantissa` (past
/// 19 digits it wraps around; the caller reads such numbers again).
fn digits(bytes: &[u8], start: usize, mantissa: &mut u64) -> usize {
    let mut pos = start;
    // Eight digits at a time, as fast_float does.
    while let Some(chunk) = bytes.get(pos..pos + 8) {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_le_bytes(word);
        let all_digits = (word & 0xF0F0_F0F0_F0F0_F0F0)
            | (((word.wrapping_add(0x0606_0606_0606_0606)) & 0xF0F0_F0F0_F0F0_F0F0) >> 4)
            == 0x3333_3333_3333_3333;
        if !all_digits {
            break;
        }
        let v = word - 0x3030_3030_3030_3030;
        let v = (v * 10) + (v >> 8);
        let v = (v & 0x0000_00FF_0000_00FF)
            .wrapping_mul(100 + (1_000_000 << 32))
            .wrapping_add(((v >> 16) & 0x0000_00FF_0000_00FF).wrapping_mul(1 + (10_000 << 32)))
            >> 32;
        *mantissa = mantissa.wrapping_mul(100_000_000).wrapping_add(v);
        pos += 8;
    }
    while let Some(&b) = bytes.get(pos) {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            break;
        }
        *mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(digit));
        pos += 1;
    }
    pos - start
}

/// `mantissa / 10^scale` correctly rounded, for `scale` up to 19; `None`
/// leaves the rare cases this does not settle to the general parser.
fn ratio(mantissa: u64, scale: usize) -> Option<f64> {
    if mantissa == 0 || scale == 0 {
        // Converting an integer rounds to nearest, ties to even.
        return Some(mantissa as f64);
    }
    let power = *POW10.get(scale)?;
    if mantissa < 1 << 53 {
        // Both operands are exact, so the one division rounds correctly.
        return Some(mantissa as f64 / power);
    }
    // Two roundings put the quotient at most one unit in the last place
    // off; compare it with the exact value in integers and step if needed.
    let power_int = 10u128.pow(u32::try_from(scale).ok()?);
    let mut guess = mantissa as f64 / power;
    for _ in 0..3 {
        let bits = guess.to_bits();
        // guess = significand * 2^exponent
        let significand = (bits & ((1 << 52) - 1)) | (1 << 52);
        let exponent = ((bits >> 52) & 0x7ff) as i32 - 1075;
        let shift = 1 - exponent;
        // At the bottom of a binade the gap below is half as wide; and
        // the shifted mantissa must fit in 128 bits.
        if significand == 1 << 52 || !(0..=63).contains(&shift) {
            return None;
        }
        // mantissa / 10^scale against the midpoints (2s ± 1) * 2^(exponent-1),
        // all scaled by 2^shift * 10^scale.
        let exact = u128::from(mantissa) << shift;
        let below = u128::from(2 * significand - 1) * power_int;
        let above = u128::from(2 * significand + 1) * power_int;
        let even = significand & 1 == 0;
        if exact > above || (exact == above && !even) {
            guess = f64::from_bits(bits + 1);
        } else if exact < below || (exact == below && !even) {
            guess = f64::from_bits(bits - 1);
        } else {
            return Some(guess);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) {
        let want: f64 = text.parse().unwrap();
        assert_eq!(
            leading_real(text).map(|(v, len)| (v.to_bits(), len)),
            Some((want.to_bits(), text.len())),
            "{text}"
        );
        let followed = format!("{text},\"name\"");
        assert_eq!(
            leading_real(&followed).map(|(_, len)| len),
            Some(text.len())
        );
    }

    #[test]
    fn reads_as_the_general_parser_does() {
        for text in [
            "0",
            "0.0",
            "1",
            "42.0",
            "1795326937.8202686",
            "1795326931.5103021",
            "1700000000.001234",
            "10967.385080918984",
            "0.10000000000000001",
            "9007199254740993",
            "4503599627370496.5",
            "4503599627370497.5",
            "9007199254740993.0",
            "18446744073709551615",
            "1844674407370955161.5",
            "184467440737095516.5",
            "1.8446744073709551615",
            "0.0000000000000000001",
            "9999999999999999999",
            "123456789012345678901234567890.5",
        ] {
            check(text);
        }
        // A spread of 17-significant-digit values, as flux writes timestamps.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let digits = 1 + (x % 19) as usize;
            let text = (x % 10u64.pow(digits as u32)).to_string();
            let point = (x >> 40) as usize % (text.len() + 1);
            let text = if point == 0 || point == text.len() {
                text
            } else {
                format!("{}.{}", &text[..point], &text[point..])
            };
            if !(text.len() > 1 && text.starts_with('0') && !text.starts_with("0.")) {
                check(&text);
            }
        }
    }

    #[test]
    fn refuses_what_json_or_the_event_reader_does_not_take() {
        for text in ["", ".5", "1.", "01.5", "1.5.5", "-1", "+1", ",1"] {
            assert_eq!(leading_real(text), None, "{text}");
        }
        // The number ends where its grammar does; the caller checks what follows.
        assert_eq!(leading_real("1e5"), Some((1.0, 1)));
        assert_eq!(leading_real("1.5 "), Some((1.5, 3)));
    }
}
