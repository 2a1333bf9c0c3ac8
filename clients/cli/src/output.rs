//! One output trait with three renderers: a table as flux prints it, JSON
//! (`--json`), and quiet (ids or nothing).
//!
//! Strings that other users choose (job names, notes, reasons, memos) reach
//! the terminal of whoever lists them: human output passes each through
//! [`printable`] so that no escape sequence or bidi override in them can act
//! on that terminal. JSON output needs no such step: serde_json writes every
//! character below 0x20 as `\uXXXX` (ESC as `\u001b`).

use std::io::{self, Write};

use serde_json::Value;

pub use fluxgate_jobfmt::printable;

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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn padding() {
        assert_eq!(pad("abc", 5, None, true), "  abc");
        assert_eq!(pad("abcdef", 4, Some(4), false), "abcd");
    }
}
