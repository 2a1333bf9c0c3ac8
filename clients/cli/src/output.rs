//! One output trait with three renderers: a table as flux prints it, JSON
//! (`--json`), and quiet (ids or nothing).

use std::io::{self, Write};

use serde_json::Value;

/// How a command shows its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Columns with a header, as the flux command prints them.
    Table,
    /// One JSON document.
    Json,
    /// Only what a script needs (ids), or nothing.
    Quiet,
}

impl Mode {
    /// The mode chosen by `--json` / `--quiet` flags.
    pub fn from_flags(json: bool, quiet: bool) -> Mode {
        if json {
            Mode::Json
        } else if quiet {
            Mode::Quiet
        } else {
            Mode::Table
        }
    }
}

/// Something a command shows.
pub trait Render {
    /// Human-readable lines.
    fn table(&self, out: &mut dyn Write) -> io::Result<()>;
    /// Machine-readable form.
    fn json(&self) -> Value;
    /// The minimum: nothing unless overridden.
    fn quiet(&self, _out: &mut dyn Write) -> io::Result<()> {
        Ok(())
    }
}

/// Show `item` on standard output in `mode`.
pub fn emit(mode: Mode, item: &dyn Render) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    match mode {
        Mode::Table => item.table(&mut out)?,
        Mode::Json => writeln!(out, "{}", item.json())?,
        Mode::Quiet => item.quiet(&mut out)?,
    }
    out.flush()?;
    Ok(())
}

/// Flux Standard Duration as `flux jobs` prints it (Python `fsd()`):
/// below 1 ms is `0s`, then `1.234s`, `12.35s`, `1.5m`, `2h`, `1.5d`.
pub fn fsd(secs: f64) -> String {
    if secs < 1.0e-3 {
        "0s".to_string()
    } else if secs < 10.0 {
        format!("{secs:.3}s")
    } else if secs < 60.0 {
        format!("{}s", g4(secs))
    } else if secs < 3600.0 {
        format!("{}m", g4(secs / 60.0))
    } else if secs < 86400.0 {
        format!("{}h", g4(secs / 3600.0))
    } else {
        format!("{}d", g4(secs / 86400.0))
    }
}

/// C's `%.4g` for the positive values [`fsd`] feeds it (below 10^4 after
/// scaling, except days): four significant digits, trailing zeros dropped.
pub fn g4(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let exp = v.abs().log10().floor() as i32;
    if !(-4..4).contains(&exp) {
        // Scientific form; rare here (more than 9999 days).
        let s = format!("{v:.3e}");
        let (mant, e) = s.split_once('e').unwrap_or((&s, "0"));
        let mant = trim_zeros(mant);
        let e: i32 = e.parse().unwrap_or(0);
        let sign = if e < 0 { '-' } else { '+' };
        return format!("{mant}e{sign}{:02}", e.abs());
    }
    let decimals = (3 - exp).max(0) as usize;
    let s = format!("{v:.decimals$}");
    // Rounding may add a digit (9.9996 -> 10.000): recompute with one fewer.
    let digits = s.chars().filter(|c| c.is_ascii_digit()).count();
    let s = if s.contains('.') && digits > 4 && decimals > 0 {
        format!("{v:.prec$}", prec = decimals - 1)
    } else {
        s
    };
    trim_zeros(&s).to_string()
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Python's `{:<W.P}` / `{:>W.P}` on a string: truncate to `prec` chars, pad to `width`.
pub fn pad(s: &str, width: usize, prec: Option<usize>, right: bool) -> String {
    let s: String = match prec {
        Some(p) => s.chars().take(p).collect(),
        None => s.to_string(),
    };
    let n = s.chars().count();
    if n >= width {
        return s;
    }
    let fill = " ".repeat(width - n);
    if right { fill + &s } else { s + &fill }
}

/// flux's `+` truncation (`{name:<10.10+}`): a value too long ends in `+`.
pub fn pad_plus(s: &str, width: usize) -> String {
    if s.chars().count() > width {
        let mut t: String = s.chars().take(width.saturating_sub(1)).collect();
        t.push('+');
        t
    } else {
        pad(s, width, None, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fsd_matches_python() {
        assert_eq!(fsd(0.0), "0s");
        assert_eq!(fsd(0.0123), "0.012s");
        assert_eq!(fsd(1.5), "1.500s");
        assert_eq!(fsd(12.3456), "12.35s");
        assert_eq!(fsd(59.99), "59.99s");
        assert_eq!(fsd(90.0), "1.5m");
        assert_eq!(fsd(7200.0), "2h");
        assert_eq!(fsd(86400.0 * 3.0), "3d");
    }

    #[test]
    fn padding() {
        assert_eq!(pad("abc", 5, None, true), "  abc");
        assert_eq!(pad("abcdef", 4, Some(4), false), "abcd");
        assert_eq!(pad_plus("verylongname", 10), "verylongn+");
        assert_eq!(pad_plus("short", 10), "short     ");
    }
}
