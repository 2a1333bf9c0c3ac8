//! `--begin-time=+FSD|TIME`: the `begin-time` dependency flux's
//! `BeginTimeAction` adds, `begin-time:SECONDS` with the time as Python
//! prints a float timestamp.

use anyhow::bail;
use fluxgate_shared::jobspec::parse_fsd;
use jiff::civil::{DateTime, Time};
use jiff::{Timestamp, tz::TimeZone};

/// The dependency URI for `--begin-time=arg`, measured from now.
pub fn dependency(arg: &str) -> anyhow::Result<String> {
    let secs = timestamp(arg, Timestamp::now(), &TimeZone::system())?;
    Ok(format!("begin-time:{}", python_float(secs)))
}

/// flux's `parse_datetime`: `now`, `+FSD` or `-FSD` from `now`, or a date
/// and time (ISO 8601, `HH:MM[:SS]` today, `3pm`) in the local time zone;
/// seconds since the epoch, to the microsecond as Python keeps them.
fn timestamp(arg: &str, now: Timestamp, tz: &TimeZone) -> anyhow::Result<f64> {
    let now_secs = now.as_microsecond() as f64 / 1e6;
    let offset = |fsd: &str| parse_fsd(fsd).map_err(|e| anyhow::anyhow!("{e}"));
    let secs = if arg == "now" {
        now_secs
    } else if let Some(fsd) = arg.strip_prefix('+') {
        now_secs + offset(fsd)?
    } else if let Some(fsd) = arg.strip_prefix('-') {
        now_secs - offset(fsd)?
    } else if let Some(t) = absolute(arg, now, tz) {
        t.as_microsecond() as f64 / 1e6
    } else {
        bail!("Invalid datetime: \"{arg}\"");
    };
    Ok((secs * 1e6).round() / 1e6)
}

/// A date and time, or a time of today, in `tz`.
fn absolute(arg: &str, now: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
    if let Ok(t) = arg.parse::<Timestamp>() {
        return Some(t);
    }
    let local = |dt: DateTime| tz.to_ambiguous_timestamp(dt).compatible().ok();
    if let Ok(dt) = arg.parse::<DateTime>() {
        return local(dt);
    }
    let today = now.to_zoned(tz.clone()).date();
    if let Ok(t) = arg.parse::<Time>() {
        return local(today.to_datetime(t));
    }
    // `3pm`, `11am`: an hour of today.
    let lower = arg.to_ascii_lowercase();
    let (hour, pm) = match (lower.strip_suffix("pm"), lower.strip_suffix("am")) {
        (Some(h), _) => (h, true),
        (_, Some(h)) => (h, false),
        _ => return None,
    };
    let hour: i8 = hour.trim().parse().ok().filter(|h| (1..=12).contains(h))?;
    let hour = hour % 12 + if pm { 12 } else { 0 };
    local(today.to_datetime(Time::new(hour, 0, 0, 0).ok()?))
}

/// A float as Python's `str` prints it: the shortest text that reads back
/// the same, with `.0` on whole numbers.
fn python_float(v: f64) -> String {
    let s = v.to_string();
    if s.contains(['.', 'e', 'i', 'N']) {
        s
    } else {
        format!("{s}.0")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_and_times() {
        let now: Timestamp = "2026-01-02T03:04:05.5Z".parse().unwrap();
        let tz = TimeZone::UTC;
        let base = 1767323045.5;
        assert_eq!(timestamp("now", now, &tz).unwrap(), base);
        assert_eq!(timestamp("+1h", now, &tz).unwrap(), base + 3600.0);
        assert_eq!(timestamp("-30", now, &tz).unwrap(), base - 30.0);
        assert_eq!(
            timestamp("2026-01-03 00:00", now, &tz).unwrap(),
            1767398400.0
        );
        assert_eq!(timestamp("3pm", now, &tz).unwrap(), 1767366000.0);
        assert_eq!(
            timestamp("soon", now, &tz).unwrap_err().to_string(),
            "Invalid datetime: \"soon\""
        );
        assert_eq!(python_float(1767398400.0), "1767398400.0");
        assert_eq!(python_float(1767323045.5), "1767323045.5");
    }
}
