//! `fluxgate job id [--to=ENC] [ID...]`: convert job ids between encodings, as
//! `flux job id` (flux-core `src/cmd/job/id.c`) does.
//!
//! Each id, from the arguments or else one per line of standard input (trimmed),
//! is parsed in any encoding and printed in the `--to` encoding (default `dec`).
//! The first bad id stops the command with `ID: malformed input`; an unknown
//! encoding is reported when the first id is converted, as flux-core does. With
//! no id at all the command fails without a message.

use std::env;
use std::io::{self, BufRead, Write};
use std::process::ExitCode;

use anyhow::{Context, anyhow};
use fluxgate_shared::JobId;
use fluxgate_shared::jobid::Encoding;

/// Arguments of `fluxgate job id`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Convert jobid to specified form
    #[arg(
        short = 't',
        long = "to",
        value_name = "dec|kvs|hex|dothex|words|f58|f58plain|emoji",
        default_value = "dec"
    )]
    to: String,
    /// Job ids in any encoding; read one per line from standard input when none
    ids: Vec<String>,
}

/// Run `fluxgate job id`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let ascii_f58 = f58_needs_ascii();
    let mut out = io::stdout().lock();
    let mut converted = false;
    let mut emit = |src: &str| -> anyhow::Result<()> {
        let line = convert(src, &args.to, ascii_f58)?;
        writeln!(out, "{line}").context("writing standard output")?;
        converted = true;
        Ok(())
    };
    if args.ids.is_empty() {
        for line in io::stdin().lock().split(b'\n') {
            let line = line.context("reading standard input")?;
            let line = String::from_utf8_lossy(&line);
            emit(trim_c_space(&line))?;
        }
    } else {
        for id in &args.ids {
            emit(id)?;
        }
    }
    Ok(if converted {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// One id in the requested encoding, or flux-core's error text.
fn convert(src: &str, to: &str, ascii_f58: bool) -> anyhow::Result<String> {
    let id = JobId::parse(src).map_err(|_| anyhow!("{src}: malformed input"))?;
    let encoding: Encoding = to.parse().map_err(|_| anyhow!("Unknown to={to}"))?;
    Ok(match encoding {
        Encoding::F58 if ascii_f58 => id.encode(Encoding::F58Plain),
        other => id.encode(other),
    })
}

/// flux-core prints F58 with an ASCII `f` unless the locale is multibyte (UTF-8),
/// or always when `FLUX_F58_FORCE_ASCII` is set (`FLUXGATE_F58_FORCE_ASCII` too).
fn f58_needs_ascii() -> bool {
    if env::var_os("FLUX_F58_FORCE_ASCII").is_some()
        || env::var_os("FLUXGATE_F58_FORCE_ASCII").is_some()
    {
        return true;
    }
    // setlocale(LC_ALL, "") takes the first set of these; unset means "C".
    let locale = ["LC_ALL", "LC_CTYPE", "LANG"]
        .iter()
        .filter_map(|name| env::var(name).ok())
        .find(|value| !value.is_empty())
        .unwrap_or_default()
        .to_ascii_lowercase();
    !(locale.contains("utf-8") || locale.contains("utf8"))
}

/// Strip C `isspace()` characters from both ends, as flux-core's `trim_string()`.
fn trim_c_space(s: &str) -> &str {
    s.trim_matches(|c: char| matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_and_reports_like_flux() {
        assert_eq!(convert("42", "dec", false).unwrap(), "42");
        assert_eq!(convert("ƒj", "HEX", false).unwrap(), "0x2a");
        assert_eq!(convert("42", "f58", false).unwrap(), "ƒj");
        assert_eq!(convert("42", "f58", true).unwrap(), "fj");
        assert_eq!(convert("42", "f58plain", false).unwrap(), "fj");
        assert_eq!(
            convert("42x", "dec", false).unwrap_err().to_string(),
            "42x: malformed input"
        );
        assert_eq!(
            convert("42", "octal", false).unwrap_err().to_string(),
            "Unknown to=octal"
        );
        // The id is parsed before the encoding is looked at.
        assert_eq!(
            convert("x", "octal", false).unwrap_err().to_string(),
            "x: malformed input"
        );
    }

    #[test]
    fn trims_c_whitespace() {
        assert_eq!(trim_c_space(" \t42\x0b\r"), "42");
        assert_eq!(trim_c_space(" "), "");
    }
}
