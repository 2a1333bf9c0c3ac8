//! Durations in policy tables: read as flux reads them (an RFC 23 string
//! such as `"30m"`, or a number of seconds) and printed as flux-core's
//! `fsd_format_duration_ex` prints them in limit messages, or as flux's
//! Python tools print them in listings (`flux jobs`, `flux top`).

use serde::{Deserialize, Serialize};

use crate::jobspec::parse_fsd;

/// A duration in seconds, given in a config file as FSD text or a number.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Fsd(pub f64);

impl<'de> Deserialize<'de> for Fsd {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Text {
            Number(f64),
            Text(String),
        }
        let secs = match Text::deserialize(d)? {
            Text::Number(n) if n.is_finite() && n >= 0.0 => n,
            Text::Number(n) => {
                return Err(serde::de::Error::custom(format!(
                    "duration {n} must be a non-negative number of seconds"
                )));
            }
            Text::Text(t) => parse_fsd(&t).map_err(serde::de::Error::custom)?,
        };
        Ok(Fsd(secs))
    }
}

impl std::str::FromStr for Fsd {
    type Err = crate::jobspec::DurationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_fsd(s).map(Fsd)
    }
}

/// `duration` as flux-core's `fsd_format_duration_ex(…, precision)`:
/// `%.*g` of the value in the largest unit it reaches (ms below 0.1 s).
pub fn format_fsd(duration: f64, precision: usize) -> String {
    if duration.is_infinite() {
        return "infinity".into();
    }
    let (value, unit) = if duration < 0.1 && duration != 0.0 {
        (duration * 1000.0, "ms")
    } else if duration < 60.0 {
        (duration, "s")
    } else if duration < 3600.0 {
        (duration / 60.0, "m")
    } else if duration < 86400.0 {
        (duration / 3600.0, "h")
    } else {
        (duration / 86400.0, "d")
    };
    format!("{}{unit}", format_g(value, precision.max(1)))
}

/// `secs` as flux's Python `fsd()` prints it (`flux jobs`, `flux top`):
/// below 1 ms is `0s`, then `1.234s`, then `%.4g` in the largest unit it
/// reaches: `12.35s`, `1.5m`, `2h`, `1.5d`.
pub fn format_fsd_py(secs: f64) -> String {
    if secs < 1.0e-3 {
        "0s".to_string()
    } else if secs < 10.0 {
        format!("{secs:.3}s")
    } else {
        format_fsd(secs, 4)
    }
}

/// C's `%.*g` for a finite value: `precision` significant digits, trailing
/// zeros dropped, scientific form when the exponent is below -4 or reaches
/// the precision.
fn format_g(value: f64, precision: usize) -> String {
    if value == 0.0 {
        return "0".into();
    }
    // The exponent after rounding to `precision` digits, as C decides it.
    let sci = format!("{:.*e}", precision - 1, value);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let prec = i32::try_from(precision).unwrap_or(i32::MAX);
    if exp < -4 || exp >= prec {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{}e{sign}{:02}", trim_zeros(mantissa), exp.abs());
    }
    let decimals = usize::try_from(prec - 1 - exp).unwrap_or(0);
    trim_zeros(&format!("{value:.decimals$}")).to_string()
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_as_flux_limit_messages_print_them() {
        for (secs, text) in [
            (3600.0, "1h"),
            (5400.0, "1.5h"),
            (90.0, "1.5m"),
            (45.0, "45s"),
            (1000.0, "17m"),
            (6000.0, "1.7h"),
            (0.0, "0s"),
            (0.05, "50ms"),
            (86400.0 * 2.0, "2d"),
            (86400.0 * 120.0, "1.2e+02d"),
            (f64::INFINITY, "infinity"),
        ] {
            assert_eq!(format_fsd(secs, 2), text, "{secs}");
        }
    }

    #[test]
    fn durations_print_as_flux_listings_print_them() {
        for (secs, text) in [
            (0.0, "0s"),
            (0.0123, "0.012s"),
            (1.5, "1.500s"),
            (12.3456, "12.35s"),
            (59.99, "59.99s"),
            (90.0, "1.5m"),
            (7200.0, "2h"),
            (86400.0 * 3.0, "3d"),
        ] {
            assert_eq!(format_fsd_py(secs), text, "{secs}");
        }
    }

    #[test]
    fn a_duration_reads_as_text_or_seconds() {
        #[derive(Deserialize)]
        struct T {
            d: Fsd,
        }
        let t: T = serde_json::from_str(r#"{"d":"30m"}"#).unwrap();
        assert_eq!(t.d, Fsd(1800.0));
        let t: T = serde_json::from_str(r#"{"d":90}"#).unwrap();
        assert_eq!(t.d, Fsd(90.0));
        assert!(serde_json::from_str::<T>(r#"{"d":"soon"}"#).is_err());
        assert!(serde_json::from_str::<T>(r#"{"d":-1}"#).is_err());
    }
}
