//! RFC 18 eventlogs: one JSON object per line, each ending in `\n`.
//!
//! An event is `{"timestamp":<number>,"name":<string>[,"context":<object>]}`.
//! Reading follows flux-core's `libeventlog` (strict: one object per line, exactly one
//! trailing newline, `context` an object when present). Writing reproduces the bytes
//! flux-core writes (see [`json`] for the number and escape details).
//!
//! An event keeps its context as that exact text ([`Context`]): reading a
//! log checks each context and copies it (`canonical`), and readers take
//! members from the text in place (`raw`), so nothing is built for keys a
//! reader does not ask for. Known event names are static ([`EventName`]).
//!
//! There is no clock here: writers pass the timestamp, e.g. from
//! [`timestamp_from_unix`] as flux-core computes it.

mod canonical;
mod context;
mod json;
mod member;
mod name;
mod parse;
mod raw;
mod reader;
mod real;

pub(crate) use json::push_real;

use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value};

pub use context::Context;
pub use member::Member;
pub use name::EventName;
pub(crate) use raw::{decode_key, members as raw_members, to_value as raw_to_value};
pub use reader::{
    EventlogError, LenientEventlog, LineSplitter, parse_eventlog, parse_eventlog_lenient,
};

/// One eventlog entry: when, what, and an optional context object.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Seconds since the Unix epoch (> 0), microsecond precision as flux-core writes.
    pub timestamp: f64,
    /// Event name, e.g. `submit`, `alloc`, `finish`.
    pub name: EventName,
    /// Event-specific data; `None` when the line had no `context` key.
    pub context: Option<Context>,
}

/// Why one line is not an RFC 18 event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// Nothing but the newline.
    #[error("empty line: every line must hold one JSON object")]
    Empty,
    /// The text does not end in `\n` (a torn write, or a line given without it).
    #[error("no trailing newline: each event must end in exactly one \\n")]
    MissingNewline,
    /// A newline before the end: more than one line was given as one event.
    #[error("newline inside the event: an event is one JSON object on one line")]
    EmbeddedNewline,
    /// Not valid JSON (serde_json's message, with the column).
    #[error("invalid JSON: {0}")]
    Json(String),
    /// Valid JSON, but not an object.
    #[error("the line is JSON {0}, not an object")]
    NotObject(&'static str),
    /// No `timestamp` member.
    #[error("\"timestamp\" is missing")]
    MissingTimestamp,
    /// `timestamp` is not a number.
    #[error("\"timestamp\" must be a number, not {0}")]
    TimestampNotNumber(&'static str),
    /// No `name` member.
    #[error("\"name\" is missing")]
    MissingName,
    /// `name` is not a string.
    #[error("\"name\" must be a string, not {0}")]
    NameNotString(&'static str),
    /// `context` is present but not an object.
    #[error("\"context\" must be an object, not {0}")]
    ContextNotObject(&'static str),
    /// A line of a log read as bytes is not UTF-8.
    #[error("not UTF-8 text")]
    NotUtf8,
}

/// A context member that is missing or has the wrong type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContextError {
    /// The event has no such context key (or no context at all).
    #[error("event {event:?}: context has no {key:?}")]
    Missing {
        /// Event name.
        event: String,
        /// The key asked for.
        key: String,
    },
    /// The key holds a value of another type.
    #[error("event {event:?}: context {key:?} must be {expected}, not {found}")]
    WrongType {
        /// Event name.
        event: String,
        /// The key asked for.
        key: String,
        /// What the caller needed, e.g. "an unsigned integer".
        expected: &'static str,
        /// What was there, e.g. `string "16"`.
        found: String,
    },
}

/// A Unix time as flux-core turns `clock_gettime()` into an event timestamp:
/// `1e-9 * nanos + secs`.
pub fn timestamp_from_unix(secs: u64, nanos: u32) -> f64 {
    1e-9 * f64::from(nanos) + secs as f64
}

/// All events as one eventlog text, each line ending in `\n`.
pub fn encode_eventlog<'a>(events: impl IntoIterator<Item = &'a Event>) -> String {
    let mut out = String::new();
    for event in events {
        event.write_line(&mut out);
    }
    out
}

impl Event {
    /// An event with the given timestamp (seconds), name and context.
    pub fn new(
        timestamp: f64,
        name: impl Into<EventName>,
        context: Option<Map<String, Value>>,
    ) -> Self {
        Event {
            timestamp,
            name: name.into(),
            context: context.map(Context::from),
        }
    }

    /// An event without context; add some with [`Event::with_context`] or [`Event::with`].
    pub fn at(timestamp: f64, name: impl Into<EventName>) -> Self {
        Event::new(timestamp, name, None)
    }

    /// The same event with this context object.
    pub fn with_context(mut self, context: Map<String, Value>) -> Self {
        self.context = Some(Context::from(context));
        self
    }

    /// The same event with one more context member (the context is created if needed;
    /// members keep the order they are added in).
    pub fn with(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.context
            .get_or_insert_with(Context::new)
            .insert(key.into(), value.into());
        self
    }

    /// Parse one eventlog line, which must end in exactly one `\n`
    /// (flux-core `eventlog_entry_decode()`).
    pub fn parse_line(line: &str) -> Result<Event, EventError> {
        match line.strip_suffix('\n') {
            None => Err(EventError::MissingNewline),
            Some(body) => Event::parse_json(body),
        }
    }

    /// Parse one event given without its newline, e.g. from a message field; the text
    /// must hold no newline at all.
    pub fn parse_json(text: &str) -> Result<Event, EventError> {
        if text.contains('\n') {
            return Err(EventError::EmbeddedNewline);
        }
        if text.is_empty() {
            return Err(EventError::Empty);
        }
        parse::event(text)
    }

    /// The event as one eventlog line ending in `\n`, byte for byte as flux-core
    /// writes it: compact JSON, keys `timestamp`, `name`, `context` (omitted when
    /// `None`), the timestamp as C `%.17g`. A timestamp that is not finite is
    /// written as `0.0`, since JSON has no such numbers.
    pub fn to_line(&self) -> String {
        let mut out = String::with_capacity(64);
        self.write_line(&mut out);
        out
    }

    /// The event as JSON without the trailing newline.
    pub fn to_json(&self) -> String {
        let mut out = self.to_line();
        out.pop();
        out
    }

    /// Append [`Event::to_line`] to `out` (for writing many events to one buffer).
    pub fn write_line(&self, out: &mut String) {
        out.push_str("{\"timestamp\":");
        json::push_real(out, self.timestamp);
        out.push_str(",\"name\":");
        push_json(out, self.name.as_str());
        if let Some(context) = &self.context {
            out.push_str(",\"context\":");
            out.push_str(context.as_json());
        }
        out.push_str("}\n");
    }

    /// The context value under `key`, if any (builds the context's map; the
    /// typed `ctx_*` readers below read scalars without it).
    pub fn ctx(&self, key: &str) -> Option<&Value> {
        self.context.as_ref().and_then(|c| c.get(key))
    }

    /// The context member `key`, read in place.
    pub fn ctx_member(&self, key: &str) -> Option<Member<'_>> {
        self.context.as_ref().and_then(|c| c.member(key))
    }

    /// A required unsigned integer context member (JSON integer, not a real).
    pub fn ctx_u64(&self, key: &str) -> Result<u64, ContextError> {
        self.required(key, "an unsigned integer", Member::as_u64)
    }

    /// A required signed integer context member (JSON integer, not a real).
    pub fn ctx_i64(&self, key: &str) -> Result<i64, ContextError> {
        self.required(key, "an integer", Member::as_i64)
    }

    /// A required number context member (integer or real).
    pub fn ctx_f64(&self, key: &str) -> Result<f64, ContextError> {
        self.required(key, "a number", Member::as_f64)
    }

    /// A required string context member.
    pub fn ctx_str(&self, key: &str) -> Result<&str, ContextError> {
        self.required(key, "a string", Member::as_str)
    }

    /// A required boolean context member.
    pub fn ctx_bool(&self, key: &str) -> Result<bool, ContextError> {
        self.required(key, "a boolean", Member::as_bool)
    }

    /// A required object context member.
    pub fn ctx_object(&self, key: &str) -> Result<&Map<String, Value>, ContextError> {
        self.required(key, "an object", |m| m.value().as_object())
    }

    /// An optional unsigned integer: `Ok(None)` when absent, an error when mistyped.
    pub fn ctx_opt_u64(&self, key: &str) -> Result<Option<u64>, ContextError> {
        self.optional(key, "an unsigned integer", Member::as_u64)
    }

    /// An optional signed integer: `Ok(None)` when absent, an error when mistyped.
    pub fn ctx_opt_i64(&self, key: &str) -> Result<Option<i64>, ContextError> {
        self.optional(key, "an integer", Member::as_i64)
    }

    /// An optional number: `Ok(None)` when absent, an error when mistyped.
    pub fn ctx_opt_f64(&self, key: &str) -> Result<Option<f64>, ContextError> {
        self.optional(key, "a number", Member::as_f64)
    }

    /// An optional string: `Ok(None)` when absent, an error when mistyped.
    pub fn ctx_opt_str(&self, key: &str) -> Result<Option<&str>, ContextError> {
        self.optional(key, "a string", Member::as_str)
    }

    /// An optional boolean: `Ok(None)` when absent, an error when mistyped.
    pub fn ctx_opt_bool(&self, key: &str) -> Result<Option<bool>, ContextError> {
        self.optional(key, "a boolean", Member::as_bool)
    }

    fn required<'a, T>(
        &'a self,
        key: &str,
        expected: &'static str,
        get: impl Fn(&Member<'a>) -> Option<T>,
    ) -> Result<T, ContextError> {
        self.optional(key, expected, get)?
            .ok_or_else(|| ContextError::Missing {
                event: self.name.to_string(),
                key: key.to_owned(),
            })
    }

    fn optional<'a, T>(
        &'a self,
        key: &str,
        expected: &'static str,
        get: impl Fn(&Member<'a>) -> Option<T>,
    ) -> Result<Option<T>, ContextError> {
        match self.ctx_member(key) {
            None => Ok(None),
            Some(m) => get(&m).map(Some).ok_or_else(|| ContextError::WrongType {
                event: self.name.to_string(),
                key: key.to_owned(),
                expected,
                found: describe(m.value()),
            }),
        }
    }
}

impl fmt::Display for Event {
    /// The JSON line without its newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

/// Serialize with jansson's formatting into `out`.
fn push_json<T: Serialize + ?Sized>(out: &mut String, value: &T) {
    let mut buf = Vec::with_capacity(64);
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, json::JanssonFormatter);
    // Strings and JSON values always serialize, and writing to a Vec cannot fail.
    if value.serialize(&mut ser).is_ok() {
        out.push_str(&String::from_utf8_lossy(&buf));
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A short description of a value for error messages: its type and a prefix of it.
fn describe(v: &Value) -> String {
    let text = v.to_string();
    let shown: String = text.chars().take(40).collect();
    let ellipsis = if shown.len() < text.len() { "..." } else { "" };
    format!("{} {shown}{ellipsis}", type_name(v))
}
