//! Site policy, pure: queues (RFC 33 and flux's `[queues.*]` and `[policy.*]`
//! tables), job defaults and size/duration limits applied at submit, the
//! multi-factor priority and fair share of flux-accounting's `mf_priority`,
//! and per-user and per-bank limits.
//!
//! Nothing here reads a clock or a file: time is an argument, and the
//! services parse the configuration into these types once, at start.

pub mod fairshare;
mod fsd;
pub mod limits;
pub mod priority;
pub mod queues;

pub use fairshare::{Association, Usage, fairshare};
pub use fsd::{Fsd, format_fsd, format_fsd_py};
pub use limits::{AssocLimits, Held, LimitError, Load, admit_submit, hold};
pub use priority::{Factors, Weights, age};
pub use queues::{
    Effective, IngestError, JobSize, JobspecDefaults, JobspecPolicy, PolicyConfigError,
    PolicyTable, QueueConfig, QueueLimits, Queues, SizeCounts, SystemDefaults,
};
