//! Wall-clock time as eventlogs record it.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch, with microsecond precision as flux-core writes.
pub fn now() -> f64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_micros() as f64) / 1e6
}

/// Milliseconds since the Unix epoch, for the job id generator.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}
