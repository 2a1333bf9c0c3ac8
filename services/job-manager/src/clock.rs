//! Wall-clock time as eventlogs record it.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch, with microsecond precision as flux-core writes.
pub fn now() -> f64 {
    #[cfg(test)]
    if let Some(t) = test::now() {
        return t;
    }
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

/// A test clock: in this crate's unit tests a thread may set the time
/// [`now`] answers, so that time limits and begin times are tested without
/// waiting. Not compiled outside tests.
#[cfg(test)]
pub mod test {
    use std::cell::Cell;

    thread_local! {
        static NOW: Cell<Option<f64>> = const { Cell::new(None) };
    }

    /// The time set on this thread, if any.
    pub fn now() -> Option<f64> {
        NOW.with(Cell::get)
    }

    /// From now on this thread's clock reads `t`.
    pub fn set(t: f64) {
        NOW.with(|c| c.set(Some(t)));
    }

    /// Move this thread's clock on by `secs`.
    pub fn advance(secs: f64) {
        NOW.with(|c| c.set(Some(c.get().unwrap_or_else(super::now) + secs)));
    }
}
