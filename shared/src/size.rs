//! Memory sizes as flux writes them (`parse_size`): a number with an
//! optional suffix K, M, G, T, P or E (powers of 1024, either case, an
//! optional trailing B), and their display.

/// A size in bytes from flux's syntax; `None` when it is not one.
pub fn parse(text: &str) -> Option<u64> {
    let t = text.trim();
    let t = t.strip_suffix(['B', 'b']).unwrap_or(t);
    let (num, shift) = match t.chars().last()? {
        c if c.is_ascii_digit() || c == '.' => (t, 0),
        c => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                'P' => 50,
                'E' => 60,
                _ => return None,
            };
            (&t[..t.len() - 1], shift)
        }
    };
    if let Ok(n) = num.parse::<u64>() {
        return n.checked_mul(1u64 << shift);
    }
    let f: f64 = num.parse().ok()?;
    let bytes = f * (1u64 << shift) as f64;
    (f.is_finite() && f >= 0.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
}

/// `bytes` in the largest unit that keeps it at least 1, as `1.5G`.
pub fn display(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["", "K", "M", "G", "T", "P"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes}B")
    } else if v.fract() == 0.0 {
        format!("{v}{}", UNITS[unit])
    } else {
        format!("{v:.1}{}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flux_sizes_parse_in_powers_of_1024() {
        assert_eq!(parse("100"), Some(100));
        assert_eq!(parse("64M"), Some(64 << 20));
        assert_eq!(parse("2g"), Some(2 << 30));
        assert_eq!(parse("1.5K"), Some(1536));
        assert_eq!(parse("512MB"), Some(512 << 20));
        assert_eq!(parse("lots"), None);
        assert_eq!(parse("-1M"), None);
        assert_eq!(parse("16E"), None);
    }

    #[test]
    fn sizes_display_in_their_largest_unit() {
        assert_eq!(display(512), "512B");
        assert_eq!(display(64 << 20), "64M");
        assert_eq!(display(1536 << 20), "1.5G");
    }
}
