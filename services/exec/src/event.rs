//! RFC 18 event lines as the exec service writes them: one JSON object, no
//! trailing newline, wall-clock timestamp with microsecond precision.

use std::time::{SystemTime, UNIX_EPOCH};

use fluxgate_shared::Event;
use serde_json::{Map, Value};

/// Seconds since the Unix epoch, rounded to the microsecond as flux-core writes them.
pub fn now() -> f64 {
    let micros = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0);
    micros as f64 / 1e6
}

/// An event stamped now.
pub fn event(name: &str, context: Option<Map<String, Value>>) -> Event {
    Event::new(now(), name, context)
}

/// An event stamped now, as a line.
pub fn line(name: &str, context: Option<Map<String, Value>>) -> String {
    event(name, context).to_json()
}

/// Build a context object from key/value pairs, keeping their order.
pub fn context<const N: usize>(pairs: [(&str, Value); N]) -> Map<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lines_have_rfc18_key_order_and_no_newline() {
        let l = line("complete", Some(context([("status", json!(256))])));
        assert!(l.starts_with("{\"timestamp\":"));
        assert!(l.ends_with(",\"name\":\"complete\",\"context\":{\"status\":256}}"));
        assert!(!l.contains('\n'));
        let v: Value = serde_json::from_str(&l).unwrap();
        let ts = v["timestamp"].as_f64().unwrap();
        assert!(ts > 1.6e9);
        assert_eq!(
            line("done", None).split("\"name\":").nth(1),
            Some("\"done\"}")
        );
    }
}
