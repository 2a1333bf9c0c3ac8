//! RFC 18 eventlogs: flux-core's vectors (tests/data/eventlog/eventlog.json), the
//! eventlogs a real Flux instance wrote (tests/data/eventlog/golden/), and roundtrip
//! properties.

use std::fs;
use std::path::PathBuf;

use fluxgate_shared::Event;
use fluxgate_shared::eventlog::{
    ContextError, EventError, EventlogError, LineSplitter, encode_eventlog, parse_eventlog,
    parse_eventlog_lenient, timestamp_from_unix,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn vectors(section: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(include_str!("data/eventlog/eventlog.json")).unwrap();
    v[section]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

fn golden() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/eventlog/golden");
    let mut files: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, fs::read_to_string(&p).unwrap())
        })
        .collect()
}

#[test]
fn good_events_parse_and_reemit() {
    for line in vectors("good_event") {
        let event = Event::parse_line(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        assert_eq!(event.timestamp, 42.0);
        assert_eq!(event.name, "foo");
        assert_eq!(event.to_line(), line);
    }
}

#[test]
fn bad_events_are_rejected() {
    for line in vectors("bad_event") {
        assert!(Event::parse_line(&line).is_err(), "{line:?} parsed");
    }
}

#[test]
fn good_logs_parse_and_reemit() {
    for log in vectors("good_log") {
        let events = parse_eventlog(&log).unwrap_or_else(|e| panic!("{log:?}: {e}"));
        assert_eq!(encode_eventlog(&events), log);
        assert!(parse_eventlog_lenient(&log).errors.is_empty());
    }
}

#[test]
fn bad_logs_are_rejected() {
    for log in vectors("bad_log") {
        assert!(parse_eventlog(&log).is_err(), "{log:?} parsed");
        assert!(!parse_eventlog_lenient(&log).errors.is_empty());
    }
}

#[test]
fn golden_eventlogs_reemit_byte_for_byte() {
    let files = golden();
    assert!(files.len() >= 20, "golden files missing");
    let mut events_seen = 0;
    for (name, text) in files {
        let events = parse_eventlog(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!events.is_empty(), "{name}");
        events_seen += events.len();
        assert_eq!(encode_eventlog(&events), text, "{name}");
        for (event, line) in events.iter().zip(text.split_inclusive('\n')) {
            assert_eq!(&Event::parse_line(line).unwrap(), event);
        }
    }
    assert!(events_seen > 150);
}

#[test]
fn golden_timestamps_need_17_digits() {
    // Shortest-roundtrip printing would write 1795326931.510302 here.
    let text = fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/eventlog/golden/a-normal.eventlog.json"),
    )
    .unwrap();
    let validate = text.lines().nth(1).unwrap();
    assert_eq!(
        validate,
        r#"{"timestamp":1795326931.5103021,"name":"validate"}"#
    );
    let event = Event::parse_json(validate).unwrap();
    assert_eq!(event.to_json(), validate);
}

#[test]
fn golden_contexts_read_with_typed_accessors() {
    let text = fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/eventlog/golden/b1-false.eventlog.json"),
    )
    .unwrap();
    let events = parse_eventlog(&text).unwrap();
    let submit = &events[0];
    assert_eq!(submit.name, "submit");
    assert_eq!(submit.ctx_u64("userid").unwrap(), 0);
    assert_eq!(submit.ctx_i64("urgency").unwrap(), 16);
    let finish = events.iter().find(|e| e.name == "finish").unwrap();
    assert_eq!(finish.ctx_i64("status").unwrap(), 256);
    let release = events.iter().find(|e| e.name == "release").unwrap();
    assert_eq!(release.ctx_str("ranks").unwrap(), "all");
    assert!(release.ctx_bool("final").unwrap());
}

#[test]
fn line_errors_say_what_is_wrong() {
    use EventError::*;
    let cases: &[(&str, EventError)] = &[
        ("\n", Empty),
        ("{\"timestamp\":1,\"name\":\"a\"}", MissingNewline),
        ("{\"timestamp\":1,\"name\":\"a\"}\n\n", EmbeddedNewline),
        ("[1]\n", NotObject("an array")),
        ("{\"name\":\"a\"}\n", MissingTimestamp),
        (
            "{\"timestamp\":\"1\",\"name\":\"a\"}\n",
            TimestampNotNumber("a string"),
        ),
        ("{\"timestamp\":1}\n", MissingName),
        ("{\"timestamp\":1,\"name\":null}\n", NameNotString("null")),
        (
            "{\"timestamp\":1,\"name\":\"a\",\"context\":[]}\n",
            ContextNotObject("an array"),
        ),
    ];
    for (line, want) in cases {
        assert_eq!(&Event::parse_line(line).unwrap_err(), want, "{line:?}");
    }
    match Event::parse_line("{\"timestamp\":1,\n\"name\":\"a\"}\n").unwrap_err() {
        EventError::EmbeddedNewline => {}
        other => panic!("{other:?}"),
    }
    match Event::parse_line("{\"timestamp\":1 \"name\"}\n").unwrap_err() {
        EventError::Json(msg) => assert!(msg.contains("column"), "{msg}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn flux_core_reader_details() {
    // Integer timestamps, whitespace around the object, unknown members, and
    // members in any order are accepted, as jansson accepts them.
    let e =
        Event::parse_line(" { \"name\" : \"x\" , \"extra\":[1], \"timestamp\" : 7 }\r\n").unwrap();
    assert_eq!((e.timestamp, e.name.as_str(), e.context), (7.0, "x", None));
    // A duplicate key: the last one wins.
    let e = Event::parse_line("{\"timestamp\":1.5,\"name\":\"a\",\"timestamp\":2.5}\n").unwrap();
    assert_eq!(e.timestamp, 2.5);
    // Escaped key names are still the key.
    let e = Event::parse_line("{\"time\\u0073tamp\":3.25,\"name\":\"a\"}\n").unwrap();
    assert_eq!(e.timestamp, 3.25);
}

#[test]
fn strict_log_reports_the_first_bad_line() {
    let log = "{\"timestamp\":1.0,\"name\":\"a\"}\n\n{\"timestamp\":2.0,\"name\":\"b\"}\n";
    assert_eq!(
        parse_eventlog(log),
        Err(EventlogError {
            line: 2,
            error: EventError::Empty
        })
    );
    let torn = "{\"timestamp\":1.0,\"name\":\"a\"}\n{\"timestamp\":2.0,\"na";
    let err = parse_eventlog(torn).unwrap_err();
    assert_eq!((err.line, &err.error), (2, &EventError::MissingNewline));
    assert_eq!(
        err.to_string(),
        format!("eventlog line 2: {}", EventError::MissingNewline)
    );
}

#[test]
fn lenient_log_keeps_good_events() {
    let log = concat!(
        "{\"timestamp\":1.0,\"name\":\"a\"}\n",
        "garbage\n",
        "{\"timestamp\":2.0,\"name\":\"b\",\"context\":{\"k\":1}}\n",
        "\n",
        "{\"timestamp\":3.0,\"name\":\"c\"}\n",
        "{\"timestamp\":4.0,\"na",
    );
    let got = parse_eventlog_lenient(log);
    let names: Vec<_> = got.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    let bad: Vec<_> = got.errors.iter().map(|e| e.line).collect();
    assert_eq!(bad, [2, 4, 6]);
    assert_eq!(got.errors[2].error, EventError::MissingNewline);
}

#[test]
fn builder_and_writer() {
    let e = Event::at(1795326931.5654666, "finish").with("status", 0);
    assert_eq!(
        e.to_line(),
        "{\"timestamp\":1795326931.5654666,\"name\":\"finish\",\"context\":{\"status\":0}}\n"
    );
    let mut ctx = Map::new();
    ctx.insert("ranks".into(), json!("all"));
    ctx.insert("final".into(), json!(true));
    let e = Event::new(2.0, "release", None).with_context(ctx.clone());
    assert_eq!(e, Event::new(2.0, "release", Some(ctx)));
    assert_eq!(
        e.to_json(),
        "{\"timestamp\":2.0,\"name\":\"release\",\"context\":{\"ranks\":\"all\",\"final\":true}}"
    );
    assert_eq!(e.to_string(), e.to_json());
    // Not-finite timestamps cannot be JSON; the line stays readable.
    assert_eq!(
        Event::at(f64::NAN, "x").to_json(),
        "{\"timestamp\":0.0,\"name\":\"x\"}"
    );
}

#[test]
fn writer_escapes_like_jansson() {
    let e = Event::at(1.0, "data").with("data", "a\u{1b}[0m\"\\/\t\n\u{7f}é\u{0}");
    assert_eq!(
        e.to_json(),
        "{\"timestamp\":1.0,\"name\":\"data\",\"context\":{\"data\":\"a\\u001B[0m\\\"\\\\/\\t\\n\u{7f}é\\u0000\"}}"
    );
    assert_eq!(Event::parse_json(&e.to_json()).unwrap(), e);
    // Reals inside the context are written with 17 digits as well.
    let e = Event::at(1.0, "x").with("expiration", 0.1);
    assert!(e.to_json().contains("\"expiration\":0.10000000000000001"));
}

#[test]
fn timestamp_from_unix_matches_flux_core() {
    assert_eq!(
        timestamp_from_unix(1795326931, 498617200),
        1795326931.4986172
    );
    let e = Event::at(timestamp_from_unix(1552593348, 73045000), "submit");
    assert_eq!(
        e.to_json(),
        "{\"timestamp\":1552593348.073045,\"name\":\"submit\"}"
    );
}

#[test]
fn context_accessors_name_the_key() {
    let e = Event::at(1.0, "alloc")
        .with("userid", 5588)
        .with("neg", -3)
        .with("real", 2.5)
        .with("s", "x")
        .with("obj", json!({"a": 1}));
    assert_eq!(e.ctx_u64("userid"), Ok(5588));
    assert_eq!(e.ctx_i64("neg"), Ok(-3));
    assert_eq!(e.ctx_f64("userid"), Ok(5588.0));
    assert_eq!(e.ctx_f64("real"), Ok(2.5));
    assert_eq!(e.ctx_str("s"), Ok("x"));
    assert_eq!(e.ctx_object("obj").unwrap().len(), 1);
    assert_eq!(e.ctx_opt_u64("nope"), Ok(None));
    assert_eq!(e.ctx_opt_str("s"), Ok(Some("x")));
    assert_eq!(
        e.ctx_u64("nope"),
        Err(ContextError::Missing {
            event: "alloc".into(),
            key: "nope".into()
        })
    );
    let err = e.ctx_u64("neg").unwrap_err();
    assert_eq!(
        err.to_string(),
        "event \"alloc\": context \"neg\" must be an unsigned integer, not a number -3"
    );
    // A real is not an integer, as jansson's "I" refuses it.
    assert!(e.ctx_i64("real").is_err());
    assert!(Event::at(1.0, "x").ctx_str("s").is_err());
}

#[test]
fn splitter_returns_only_complete_lines() {
    let log = "{\"timestamp\":1.0,\"name\":\"a\"}\n{\"timestamp\":2.0,\"name\":\"é\"}\nbad\n";
    let bytes = log.as_bytes();
    // Feed one byte at a time: UTF-8 and lines are split everywhere.
    let mut s = LineSplitter::new();
    let mut got = Vec::new();
    for b in bytes {
        s.push(std::slice::from_ref(b));
        while let Some(r) = s.next_event() {
            got.push(r);
        }
    }
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].as_ref().unwrap().name, "a");
    assert_eq!(got[1].as_ref().unwrap().name, "é");
    assert_eq!(got[2].as_ref().unwrap_err().line, 3);
    assert_eq!(s.lines_read(), 3);
    assert!(s.pending().is_empty());

    s.push(b"{\"timestamp\":3.0,");
    assert!(s.next_line().is_none());
    assert_eq!(s.pending(), b"{\"timestamp\":3.0,");
    s.push(b"\"name\":\"c\"}\n");
    let (n, line) = s.next_line().unwrap();
    assert_eq!((n, line), (4, &b"{\"timestamp\":3.0,\"name\":\"c\"}\n"[..]));
    s.push(b"\xff\n");
    assert_eq!(
        s.next_event().unwrap().unwrap_err().error,
        EventError::NotUtf8
    );
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
        "[\\x00-\\x1f\"\\\\/a]{0,6}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::vec(("[a-z_\\x01]{1,6}", inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn event() -> impl Strategy<Value = Event> {
    let timestamp = prop_oneof![
        0.0..4e9f64,
        (0u64..4_000_000_000, 0u32..1_000_000_000).prop_map(|(s, n)| timestamp_from_unix(s, n)),
        any::<f64>().prop_filter("finite", |f| f.is_finite()),
    ];
    let context = proptest::option::of(
        proptest::collection::vec(("\\PC{1,8}", json_value()), 0..5)
            .prop_map(|kv| kv.into_iter().collect::<Map<_, _>>()),
    );
    (timestamp, "\\PC{0,16}", context).prop_map(|(t, n, c)| Event::new(t, n, c))
}

/// `v` as JSON text written in one of the many ways JSON allows (spacing,
/// escapes, number spellings, a repeated key whose last value wins), each
/// choice taken from `pick`.
fn render(v: &Value, pick: &mut impl FnMut() -> u8, out: &mut String) {
    let space = |pick: &mut dyn FnMut() -> u8, out: &mut String| {
        if pick().is_multiple_of(6) {
            out.push(' ');
        }
    };
    match v {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(0.0);
            match pick() % 3 {
                0 => out.push_str(&format!("{f:e}")),
                1 => out.push_str(&format!("{f:.17e}")),
                _ => out.push_str(&n.to_string()),
            }
        }
        Value::String(s) => render_string(s, pick, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                space(pick, out);
                render(item, pick, out);
                space(pick, out);
            }
            out.push(']');
        }
        Value::Object(members) => {
            out.push('{');
            for (i, (key, value)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if pick().is_multiple_of(8) {
                    // An earlier copy of the key: the map keeps its place
                    // and the later value.
                    render_string(key, pick, out);
                    out.push_str(":null,");
                }
                space(pick, out);
                render_string(key, pick, out);
                space(pick, out);
                out.push(':');
                render(value, pick, out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn render_string(s: &str, pick: &mut impl FnMut() -> u8, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' if pick().is_multiple_of(2) => out.push_str("\\/"),
            c if (c as u32) < 0x20 || (c.is_ascii() && pick().is_multiple_of(10)) => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

proptest! {
    #[test]
    fn any_spelling_reads_as_serde_json_does(
        e in event(),
        choices in proptest::collection::vec(any::<u8>(), 64),
        spaced in any::<bool>(),
    ) {
        let mut next = choices.into_iter().cycle();
        let mut pick = move || next.next().unwrap_or(0);
        let mut line = format!("{{\"timestamp\":{:?},\"name\":", e.timestamp);
        render_string(&e.name, &mut pick, &mut line);
        if let Some(c) = &e.context {
            line.push_str(if spaced { ", \"context\": " } else { ",\"context\":" });
            render(&Value::Object(c.as_map().clone()), &mut pick, &mut line);
        }
        line.push_str("}\n");
        // What serde_json reads from the same text, written as flux-core would.
        let reference: Value = serde_json::from_str(&line).unwrap();
        let want = Event::new(
            reference["timestamp"].as_f64().unwrap(),
            reference["name"].as_str().unwrap(),
            reference.get("context").and_then(|c| c.as_object().cloned()),
        );
        let log = format!("{line}{line}");
        let got = parse_eventlog(&log).unwrap();
        prop_assert_eq!(got.len(), 2);
        for event in &got {
            prop_assert_eq!(event, &want);
            prop_assert_eq!(event.to_line(), want.to_line());
        }
        prop_assert_eq!(Event::parse_line(&line).unwrap().to_line(), want.to_line());
    }

    #[test]
    fn to_line_parse_line_roundtrip(e in event()) {
        let line = e.to_line();
        prop_assert!(line.ends_with('\n'));
        prop_assert_eq!(line.matches('\n').count(), 1);
        let back = Event::parse_line(&line).unwrap();
        prop_assert_eq!(back.timestamp.to_bits(), e.timestamp.to_bits());
        prop_assert_eq!(&back, &e);
        prop_assert_eq!(back.to_line(), line);
    }

    #[test]
    fn log_roundtrip(events in proptest::collection::vec(event(), 0..6)) {
        let log = encode_eventlog(&events);
        prop_assert_eq!(&parse_eventlog(&log).unwrap(), &events);
        let mut s = LineSplitter::new();
        for chunk in log.as_bytes().chunks(7) {
            s.push(chunk);
        }
        let mut split = Vec::new();
        while let Some(r) = s.next_event() {
            split.push(r.unwrap());
        }
        prop_assert_eq!(split, events);
    }

    #[test]
    fn parse_line_never_panics(s in "\\PC{0,40}\n?") {
        let _ = Event::parse_line(&s);
        let _ = parse_eventlog_lenient(&s);
    }
}
