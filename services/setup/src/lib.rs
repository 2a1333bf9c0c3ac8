//! How a Fluxgate service sets itself up at start, the same way for the job
//! manager and the exec service: its configuration in layers
//! ([`layered`]: defaults, a TOML file, `FLUXGATE_*` environment, flags and
//! `--set KEY=VALUE`), its logs ([`logging`]), its trace export ([`otlp`])
//! and the limits of its listener's connections ([`conns`]).

pub mod conns;
pub mod layered;
pub mod logging;
pub mod otlp;

pub use conns::{ConnLimits, Guarded};
pub use layered::{ConfigError, Layered, SetError};
pub use logging::{LogFormat, init_logging};
pub use otlp::{OtlpConfig, OtlpError, RpcSpans, TraceExport};
