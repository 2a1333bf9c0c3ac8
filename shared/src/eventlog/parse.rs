//! Reading one event line in a single pass over its text.
//!
//! The line is deserialized straight into the three members an event needs:
//! the top-level object is never built as a map, and its keys are matched in
//! place (no allocation unless a key holds escapes). Every member value is
//! still read as a full JSON value, so the line is as strictly checked as if
//! it had been parsed whole (an out-of-range real inside an unknown member is
//! still an error, as in jansson).
//!
//! Type mistakes are recorded rather than raised at once, so that a line that
//! is also malformed JSON further on reports the JSON error, and the member
//! checks run in the same order as flux-core's `eventlog_entry_parse()`. A
//! duplicate key replaces the earlier value, as jansson does.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::real::leading_real;
use super::{Context, Event, EventError, EventName, canonical, type_name};

/// One member of the line as read: absent, usable, or of the named wrong type.
enum Slot<T> {
    Missing,
    Found(T),
    Wrong(&'static str),
}

/// The top-level JSON value of a line.
enum Line {
    Object {
        timestamp: Slot<f64>,
        name: Slot<String>,
        context: Slot<Map<String, Value>>,
    },
    /// Not an object: the JSON type it is.
    Other(&'static str),
}

/// Parse the JSON text of one event (no newline checks here).
pub(super) fn event(text: &str) -> Result<Event, EventError> {
    match flux_shaped(text) {
        Some(event) => Ok(event),
        None => any_shape(text),
    }
}

/// The event when `text` is laid out exactly as flux-core writes events
/// (`{"timestamp":T,"name":"N"[,"context":{...}]}`, compact, members in that
/// order, a plain positive real and an unescaped name), read without going
/// through the general object reader; `None` for anything else, which
/// [`any_shape`] then reads (and rejects, when it is wrong). Accepted text is
/// valid JSON with exactly these members, so both readers give the same event.
fn flux_shaped(text: &str) -> Option<Event> {
    let (timestamp, name, rest) = header(text)?;
    if rest == "}" {
        return Some(new_event(timestamp, name, None));
    }
    let rest = rest.strip_prefix(",\"context\":")?;
    if let Some(len) = canonical::object_len(rest)
        && &rest[len..] == "}"
    {
        let context = Context::from_canonical(rest[..len].to_owned());
        return Some(new_event(timestamp, name, Some(context)));
    }
    let body = rest.strip_suffix('}')?;
    // Read alone, the context sits one level higher than inside the line, so
    // the parser's nesting limit would allow one level more: leave anything
    // that could be that deep to the full reader.
    if body.len() >= 2 * DEEP && body.bytes().filter(|&b| b == b'{' || b == b'[').count() >= DEEP {
        return None;
    }
    let mut de = serde_json::Deserializer::from_str(body);
    let Ok(Slot::Found(context)) = ContextSeed.deserialize(&mut de) else {
        return None;
    };
    de.end().ok()?;
    Some(new_event(timestamp, name, Some(Context::from(context))))
}

/// The first line of `log` when it is a flux-shaped event whose context is
/// already canonical, and the length of the line with its newline. This
/// reads the line and finds its end in one pass, where splitting the log
/// into lines first would read every byte twice. `None` sends the line to
/// the general path ([`event`] on the line found by its newline), which
/// gives the same event for any line accepted here.
pub(super) fn flux_shaped_line(log: &str) -> Option<(Event, usize)> {
    let (timestamp, name, rest) = header(log)?;
    let line_len = |rest: &str, tail: usize| log.len() - rest.len() + tail;
    if rest.starts_with("}\n") {
        return Some((new_event(timestamp, name, None), line_len(rest, 2)));
    }
    let rest = rest.strip_prefix(",\"context\":")?;
    let len = canonical::object_len(rest)?;
    // Canonical text holds no raw newline, so this is the end of the line.
    if !rest[len..].starts_with("}\n") {
        return None;
    }
    let context = Context::from_canonical(rest[..len].to_owned());
    Some((
        new_event(timestamp, name, Some(context)),
        line_len(rest, len + 2),
    ))
}

/// `{"timestamp":T,"name":"N"` at the start of `text`: the timestamp, the
/// name and the text after the name's closing quote.
fn header(text: &str) -> Option<(f64, &str, &str)> {
    let rest = text.strip_prefix("{\"timestamp\":")?;
    let (timestamp, number_len) = leading_real(rest)?;
    let rest = rest[number_len..].strip_prefix(",\"name\":\"")?;
    // A name with escapes or (invalid) raw control characters takes the long way.
    let name_len = canonical::string_end(rest.as_bytes(), 0)?;
    Some((timestamp, &rest[..name_len], &rest[name_len + 1..]))
}

fn new_event(timestamp: f64, name: &str, context: Option<Context>) -> Event {
    Event {
        timestamp,
        name: EventName::new(name),
        context,
    }
}

/// Nesting (well under serde_json's limit of 128) beyond which a context is
/// left to the full reader.
const DEEP: usize = 100;

/// Any JSON text: the general reader, which also names every mistake.
fn any_shape(text: &str) -> Result<Event, EventError> {
    let line: Line = serde_json::from_str(text).map_err(|e| EventError::Json(e.to_string()))?;
    let (timestamp, name, context) = match line {
        Line::Other(kind) => return Err(EventError::NotObject(kind)),
        Line::Object {
            timestamp,
            name,
            context,
        } => (timestamp, name, context),
    };
    let timestamp = match timestamp {
        Slot::Missing => return Err(EventError::MissingTimestamp),
        Slot::Found(t) => t,
        Slot::Wrong(kind) => return Err(EventError::TimestampNotNumber(kind)),
    };
    let name = match name {
        Slot::Missing => return Err(EventError::MissingName),
        Slot::Found(n) => n,
        Slot::Wrong(kind) => return Err(EventError::NameNotString(kind)),
    };
    let context = match context {
        Slot::Missing => None,
        Slot::Found(c) => Some(Context::from(c)),
        Slot::Wrong(kind) => return Err(EventError::ContextNotObject(kind)),
    };
    Ok(Event {
        timestamp,
        name: name.into(),
        context,
    })
}

impl<'de> Deserialize<'de> for Line {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LineVisitor)
    }
}

struct LineVisitor;

impl<'de> Visitor<'de> for LineVisitor {
    type Value = Line;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Line, E> {
        Ok(Line::Other("a boolean"))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Line, E> {
        Ok(Line::Other("a number"))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Line, E> {
        Ok(Line::Other("a number"))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Line, E> {
        Ok(Line::Other("a number"))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Line, E> {
        Ok(Line::Other("a string"))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Line, E> {
        Ok(Line::Other("null"))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Line, A::Error> {
        // Read the elements as values so that bad JSON inside still fails as JSON.
        while seq.next_element::<Value>()?.is_some() {}
        Ok(Line::Other("an array"))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Line, A::Error> {
        let mut timestamp = Slot::Missing;
        let mut name = Slot::Missing;
        let mut context = Slot::Missing;
        while let Some(key) = map.next_key_seed(KeySeed)? {
            match key {
                Key::Timestamp => {
                    timestamp = match map.next_value::<Value>()? {
                        Value::Number(n) => match n.as_f64() {
                            Some(t) => Slot::Found(t),
                            None => Slot::Wrong("a number out of range"),
                        },
                        other => Slot::Wrong(type_name(&other)),
                    }
                }
                Key::Name => {
                    name = match map.next_value::<Value>()? {
                        Value::String(s) => Slot::Found(s),
                        other => Slot::Wrong(type_name(&other)),
                    }
                }
                Key::Context => context = map.next_value_seed(ContextSeed)?,
                Key::Other => {
                    map.next_value::<Value>()?;
                }
            }
        }
        Ok(Line::Object {
            timestamp,
            name,
            context,
        })
    }
}

/// Reads `context`: an object into a map sized for a typical context up front
/// (growing one from empty costs a rehash and a reallocation per event), any
/// other value fully (so bad JSON inside still fails as JSON) to name its type.
struct ContextSeed;

/// Members a context map is sized for before reading; most have fewer.
const CONTEXT_CAPACITY: usize = 8;

impl<'de> DeserializeSeed<'de> for ContextSeed {
    type Value = Slot<Map<String, Value>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ContextSeed {
    type Value = Slot<Map<String, Value>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Slot::Wrong("a boolean"))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Slot::Wrong("a number"))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Slot::Wrong("a number"))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Slot::Wrong("a number"))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Slot::Wrong("a string"))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Slot::Wrong("null"))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<Value>()?.is_some() {}
        Ok(Slot::Wrong("an array"))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Map::with_capacity(CONTEXT_CAPACITY);
        // Insert keeps the first position of a repeated key and its last value,
        // as serde_json's own map reading (and jansson) do.
        while let Some((key, value)) = map.next_entry::<String, Value>()? {
            out.insert(key, value);
        }
        Ok(Slot::Found(out))
    }
}

/// The top-level members an event has; anything else is read and dropped.
enum Key {
    Timestamp,
    Name,
    Context,
    Other,
}

/// Matches a key in place, without making a `String` of it.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Key, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for KeySeed {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Key, E> {
        Ok(match key {
            "timestamp" => Key::Timestamp,
            "name" => Key::Name,
            "context" => Key::Context,
            _ => Key::Other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The literals are 17-digit reals as flux-core writes them.
    #[allow(clippy::excessive_precision)]
    #[test]
    fn reals_anywhere_are_read_correctly_rounded() {
        let t = r#"{"timestamp":10967.385080918984,"name":"x","context":{"l":[1,{"x":5.8301083732982434e-211}],"t":0.1}}"#;
        let e = event(t).unwrap();
        assert_eq!(e.timestamp.to_bits(), 10967.385080918984f64.to_bits());
        let c = e.context.unwrap();
        assert_eq!(
            c["l"][1]["x"].as_f64().unwrap().to_bits(),
            5.8301083732982434e-211f64.to_bits()
        );
        assert_eq!(c["t"].as_f64(), Some(0.1));
    }

    #[test]
    fn both_readers_agree() {
        let lines = [
            r#"{"timestamp":42.0,"name":"foo"}"#,
            r#"{"timestamp":42,"name":"foo","context":{"bar":16,"bar":[1,{"x":null}]}}"#,
            "{\"timestamp\":1795326931.5103021,\"name\":\"é\u{7f}\",\"context\":{}}",
            r#"{"timestamp":18446744073709551616123,"name":"a","context":{"s":"a\"b"} }"#,
            r#"{"timestamp":0.1,"name":"","context":{"t":1e-3}}"#,
        ];
        for text in lines {
            assert!(flux_shaped(text).is_some(), "{text}");
            assert_eq!(flux_shaped(text), any_shape(text).ok(), "{text}");
        }
        let deep = format!(
            r#"{{"timestamp":1.0,"name":"d","context":{}{}}}"#,
            "[".repeat(127),
            "]".repeat(127)
        );
        assert!(flux_shaped(&deep).is_none());
        assert!(matches!(any_shape(&deep), Err(EventError::Json(_))));
        for text in [
            r#"{"timestamp":01.5,"name":"a"}"#,
            r#"{"timestamp":1.,"name":"a"}"#,
            r#"{"timestamp":1.5.5,"name":"a"}"#,
            r#"{"timestamp":1e999,"name":"a"}"#,
            r#"{"timestamp":-1.5,"name":"a"}"#,
            r#"{"timestamp":1.5,"name":"a\u0062"}"#,
            r#"{"timestamp":1.5,"name":"a","context":null}"#,
            r#"{"timestamp":1.5,"name":"a","context":{},"x":{}}"#,
            r#"{"timestamp":1.5,"name":"a","context":{}"#,
        ] {
            assert!(flux_shaped(text).is_none(), "{text}");
        }
        let negative = any_shape(r#"{"timestamp":-1.5,"name":"a"}"#).unwrap();
        assert_eq!(negative.timestamp, -1.5);
    }

    #[test]
    fn json_errors_come_before_member_errors() {
        let e = event(r#"{"timestamp":"1","name":"a","x":1e999}"#).unwrap_err();
        assert!(matches!(e, EventError::Json(_)), "{e:?}");
        let e = event(r#"{"timestamp":"1","name":"a" "#).unwrap_err();
        assert!(matches!(e, EventError::Json(_)), "{e:?}");
        let e = event(r#"[1e999]"#).unwrap_err();
        assert!(matches!(e, EventError::Json(_)), "{e:?}");
        assert_eq!(event(r#""x""#), Err(EventError::NotObject("a string")));
        let e = event(r#"{"name":"a","timestamp":"x","timestamp":1}"#).unwrap();
        assert_eq!(e.timestamp, 1.0);
    }
}
