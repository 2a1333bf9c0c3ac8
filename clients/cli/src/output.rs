//! One output trait with three renderers: a table as flux prints it, JSON
//! (`--json`), and quiet (ids or nothing).
//!
//! Strings that other users choose (job names, notes, reasons, memos) reach
//! the terminal of whoever lists them: human output passes each through
//! [`printable`] so that no escape sequence or bidi override in them can act
//! on that terminal. JSON output needs no such step: serde_json writes every
//! character below 0x20 as `\uXXXX` (ESC as `\u001b`).

use std::borrow::Cow;
use std::fmt::Write as _;
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

/// A user-supplied string made safe to show on a terminal: control characters
/// (C0 including ESC, TAB, CR and LF, then DEL and C1) and the Unicode
/// characters that reorder or break the text around them (bidi embeddings,
/// overrides, isolates and marks, line and paragraph separators) are written
/// as visible escapes (`\x1b`, `\n`, `\u{202e}`); everything else, non-ASCII
/// letters included, is left as it is.
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !needs_escape(c) {
            out.push(c);
            continue;
        }
        // Writing to a String cannot fail.
        let _ = match c {
            '\t' => write!(out, "\\t"),
            '\n' => write!(out, "\\n"),
            '\r' => write!(out, "\\r"),
            c if (c as u32) < 0x80 => write!(out, "\\x{:02x}", c as u32),
            c => write!(out, "\\u{{{:x}}}", c as u32),
        };
    }
    Cow::Owned(out)
}

/// Whether `c` must not reach a terminal as it is.
fn needs_escape(c: char) -> bool {
    c.is_control() // C0, DEL, C1
        || matches!(
            c,
            '\u{061c}'                 // Arabic letter mark
            | '\u{200e}' | '\u{200f}' // left-to-right and right-to-left marks
            | '\u{2028}' | '\u{2029}' // line and paragraph separators
            | '\u{202a}'..='\u{202e}' // bidi embeddings and overrides
            | '\u{2066}'..='\u{2069}' // bidi isolates
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_escapes_controls_and_bidi() {
        assert_eq!(printable("\x1b[2Jgone"), "\\x1b[2Jgone");
        assert_eq!(printable("a\tb\r\nc"), "a\\tb\\r\\nc");
        assert_eq!(printable("\0\x07\x7f"), "\\x00\\x07\\x7f");
        // C1: CSI (U+009B) starts a sequence on its own on some terminals.
        assert_eq!(printable("\u{9b}2J\u{85}"), "\\u{9b}2J\\u{85}");
        assert_eq!(
            printable("evil\u{202e}txt.exe\u{2066}x\u{2069}"),
            "evil\\u{202e}txt.exe\\u{2066}x\\u{2069}"
        );
        assert_eq!(
            printable("\u{202a}\u{202d}\u{2067}\u{2068}"),
            "\\u{202a}\\u{202d}\\u{2067}\\u{2068}"
        );
        assert_eq!(printable("\u{200f}\u{2028}"), "\\u{200f}\\u{2028}");
    }

    #[test]
    fn printable_leaves_text_alone() {
        for s in [
            "",
            "hello world",
            "ƒ2bX9",
            "naïve Ωmega 日本語 ✔",
            "a\\x1b literal",
        ] {
            assert!(matches!(printable(s), Cow::Borrowed(_)), "{s:?}");
            assert_eq!(printable(s), s);
        }
    }

    #[test]
    fn printable_output_has_no_control_bytes() {
        let all: String = (0u32..0x3000).filter_map(char::from_u32).collect();
        let out = printable(&all);
        assert!(!out.chars().any(needs_escape));
        assert!(!out.bytes().any(|b| b < 0x20 || b == 0x7f));
    }

    #[test]
    fn json_output_escapes_controls() {
        // Machine output is left to serde_json: check it escapes what a
        // terminal would act on.
        let v = serde_json::json!({ "name": "\x1b[2J\t\n\r\x01" });
        let s = v.to_string();
        assert!(!s.bytes().any(|b| b < 0x20), "{s}");
        assert!(s.contains("\\u001b[2J"), "{s}");
    }

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
    }
}
