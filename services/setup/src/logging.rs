//! Logging of both services: lines on standard error, filtered by
//! `FLUXGATE_LOG`, else `RUST_LOG`, else `info` (tracing's directives, e.g.
//! `FLUXGATE_LOG=fluxgate_job_manager=debug,info`).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// The variable that filters the services' logs; `RUST_LOG` when it is unset.
pub const LOG_ENV: &str = "FLUXGATE_LOG";

/// How log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines, colored on a terminal.
    Text,
    /// One JSON object per line (for log collectors).
    Json,
}

/// The filter the logs go through: `FLUXGATE_LOG`, else `RUST_LOG`, else `info`.
pub fn filter() -> EnvFilter {
    EnvFilter::try_from_env(LOG_ENV)
        .or_else(|_| EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| EnvFilter::new("info"))
}

/// Send the process's logs to stderr as `format` says; call once, first.
pub fn init_logging(format: LogFormat) {
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => fmt.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => fmt.json().init(),
    }
}
