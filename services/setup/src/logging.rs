//! Logging of both services: lines on standard error, filtered by
//! `FLUXGATE_LOG`, else `RUST_LOG`, else `info` (tracing's directives, e.g.
//! `FLUXGATE_LOG=fluxgate_job_manager=debug,info`); and, when
//! `telemetry.otlp_endpoint` is set, spans exported over OTLP ([`crate::otlp`]),
//! filtered on their own so a quiet log does not silence the traces.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::otlp::{OtlpConfig, OtlpError, TraceExport};

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

/// Send the process's logs to stderr as `format` says, and its spans to
/// `otlp`'s endpoint when one is set; call once, first, inside the tokio
/// runtime the exports are to run on. Keep the [`TraceExport`] until the
/// service stops and shut it down then, so the last spans are sent.
pub fn init_logging(format: LogFormat, otlp: &OtlpConfig) -> Result<TraceExport, OtlpError> {
    let export = TraceExport::start(otlp)?;
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = match format {
        LogFormat::Text => fmt.with_ansi(std::io::stderr().is_terminal()).boxed(),
        LogFormat::Json => fmt.json().boxed(),
    };
    tracing_subscriber::registry()
        .with(fmt.with_filter(filter()))
        .with(export.layer())
        .try_init()
        .map_err(|e| OtlpError::AlreadySet(e.to_string()))?;
    export.install();
    Ok(export)
}
