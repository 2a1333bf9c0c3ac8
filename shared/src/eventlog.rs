//! RFC 18 eventlogs: one JSON object per line, each ending in `\n`.

use serde_json::{Map, Value};

/// One eventlog entry: when, what, and an optional context object.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Seconds since the Unix epoch (> 0), microsecond precision as flux-core writes.
    pub timestamp: f64,
    /// Event name, e.g. `submit`, `alloc`, `finish`.
    pub name: String,
    /// Event-specific data; `None` when the line had no `context` key.
    pub context: Option<Map<String, Value>>,
}
// To provide (eventlog helper): Event::new, Event::parse_line(&str) (strict, the
// trailing newline included or not as the API documents), Event::to_line(),
// a whole-log reader with line numbers in errors (strict and lenient).
