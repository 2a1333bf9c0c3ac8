//! RFC 19 job ids against flux-core's vectors (tests/data/jobid/fluid.json), plus
//! roundtrip and generator properties.

use fluxgate_shared::JobId;
use fluxgate_shared::jobid::{
    Encoding, FluidGenerator, GeneratorError, JobIdErrorReason, LayoutError, MAX_TIMESTAMP,
};
use proptest::prelude::*;
use serde_json::Value;

fn vectors() -> Value {
    serde_json::from_str(include_str!("data/jobid/fluid.json")).unwrap()
}

fn rows(section: &str) -> Vec<Value> {
    vectors()[section].as_array().unwrap().clone()
}

fn id_of(v: &Value) -> JobId {
    JobId::new(v.as_str().unwrap().parse().unwrap())
}

#[test]
fn f58_vectors_encode_and_decode_both_prefixes() {
    for row in rows("f58") {
        let id = id_of(&row["id"]);
        let f58 = row["f58"].as_str().unwrap();
        let ascii = row["f58_ascii"].as_str().unwrap();
        assert_eq!(id.to_f58(), f58);
        assert_eq!(id.to_f58_ascii(), ascii);
        assert_eq!(id.to_string(), f58);
        assert_eq!(format!("{id:#}"), ascii);
        assert_eq!(JobId::decode(f58, Encoding::F58).unwrap(), id);
        assert_eq!(JobId::decode(ascii, Encoding::F58Plain).unwrap(), id);
        assert_eq!(f58.parse::<JobId>().unwrap(), id);
        assert_eq!(ascii.parse::<JobId>().unwrap(), id);
    }
}

#[test]
fn f58_decode_extra_and_invalid() {
    for row in rows("f58_decode_extra") {
        let input = row["input"].as_str().unwrap();
        assert_eq!(
            JobId::decode(input, Encoding::F58).unwrap(),
            id_of(&row["id"])
        );
    }
    for bad in rows("f58_decode_invalid") {
        let bad = bad.as_str().unwrap();
        assert!(
            JobId::decode(bad, Encoding::F58).is_err(),
            "{bad:?} decoded as F58"
        );
    }
}

#[test]
fn parse_vectors() {
    for row in rows("parse") {
        let input = row["input"].as_str().unwrap();
        let got = JobId::parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
        assert_eq!(got, id_of(&row["id"]), "{input:?}");
    }
}

#[test]
fn parse_invalid_vectors() {
    for bad in rows("parse_invalid") {
        let bad = bad.as_str().unwrap();
        assert!(JobId::parse(bad).is_err(), "{bad:?} parsed");
        assert!(bad.parse::<JobId>().is_err());
    }
}

#[test]
fn encodings_table() {
    let columns = [
        ("dec", Encoding::Dec),
        ("hex", Encoding::Hex),
        ("dothex", Encoding::Dothex),
        ("kvs", Encoding::Kvs),
        ("words", Encoding::Words),
        ("f58", Encoding::F58),
        ("f58_ascii", Encoding::F58Plain),
        ("emoji", Encoding::Emoji),
    ];
    for row in rows("encodings") {
        let id = id_of(&row["id"]);
        for (column, encoding) in columns {
            let text = row[column].as_str().unwrap();
            assert_eq!(id.encode(encoding), text, "{id:?} {column}");
            assert_eq!(JobId::decode(text, encoding).unwrap(), id, "{text:?}");
            assert_eq!(JobId::parse(text).unwrap(), id, "{text:?}");
        }
    }
}

#[test]
fn kvs_key_vectors() {
    for row in rows("kvs_key") {
        let id = id_of(&row["id"]);
        let got = match row["key"].as_str() {
            Some(key) => id.kvs_key(key),
            None => id.to_kvs(),
        };
        assert_eq!(got, row["expect"].as_str().unwrap());
    }
}

#[test]
fn layout_vectors() {
    for row in rows("layout") {
        let ts = row["ts_ms"].as_u64().unwrap();
        let generator = u16::try_from(row["gen"].as_u64().unwrap()).unwrap();
        let seq = u16::try_from(row["seq"].as_u64().unwrap()).unwrap();
        let id = JobId::from_parts(ts, generator, seq).unwrap();
        assert_eq!(id, id_of(&row["id"]));
        assert_eq!(
            (id.timestamp_ms(), id.generator(), id.sequence()),
            (ts, generator, seq)
        );
    }
}

#[test]
fn layout_rejects_fields_that_do_not_fit() {
    assert_eq!(
        JobId::from_parts(MAX_TIMESTAMP + 1, 0, 0),
        Err(LayoutError::Timestamp(MAX_TIMESTAMP + 1))
    );
    assert_eq!(
        JobId::from_parts(0, 16384, 0),
        Err(LayoutError::Generator(16384))
    );
    assert_eq!(
        JobId::from_parts(0, 0, 1024),
        Err(LayoutError::Sequence(1024))
    );
}

#[test]
fn rfc_example_id() {
    let id = JobId::new(6731191091817518);
    assert_eq!(id.to_hex(), "0x17e9fb8df16c2e");
    assert_eq!(id.to_dothex(), "0017.e9fb.8df1.6c2e");
    assert_eq!(id.to_kvs(), "job.0017.e9fb.8df1.6c2e");
    assert_eq!(
        id.to_words(),
        "reform-remote-galileo--heart-package-academy"
    );
    assert_eq!(id.to_f58(), "ƒuZZybuNNy");
}

#[test]
fn parse_follows_flux_core_quirks() {
    // strtoull() accepts a plus sign and trailing whitespace.
    assert_eq!(JobId::parse("+42").unwrap(), JobId::new(42));
    assert_eq!(JobId::parse("\t42 \n").unwrap(), JobId::new(42));
    // "job." may be followed by whitespace and any encoding, not only dothex.
    assert_eq!(JobId::parse("job. 0x2a").unwrap(), JobId::new(42));
    assert_eq!(JobId::parse("job.ƒj").unwrap(), JobId::new(42));
    // words: any case, any non-letter separators.
    assert_eq!(
        JobId::parse("Arizona academy academy  academy.academy/academy")
            .unwrap_err()
            .reason,
        JobIdErrorReason::Dothex,
        "a '.' selects dothex first"
    );
    assert_eq!(
        JobId::parse("ARIZONA academy_academy--academy academy academy").unwrap(),
        JobId::new(42)
    );
    // Trailing whitespace is only allowed after numbers.
    assert!(JobId::parse("ƒj ").is_err());
    assert!(JobId::parse("0000.0000.0000.002a ").is_err());
    // Uppercase 0X is not hex, and a lone 0x has no digits.
    assert!(JobId::parse("0X2a").is_err());
    assert!(JobId::parse("0x").is_err());
}

#[test]
fn errors_name_the_problem() {
    let e = JobId::parse("42plusbad").unwrap_err();
    assert_eq!(e.reason, JobIdErrorReason::BadNumber('p'));
    assert_eq!(
        e.to_string(),
        format!("invalid job id \"42plusbad\": {}", e.reason)
    );
    assert_eq!(
        JobId::parse("18446744073709551616").unwrap_err().reason,
        JobIdErrorReason::Overflow
    );
    assert_eq!(
        JobId::parse("  ").unwrap_err().reason,
        JobIdErrorReason::Empty
    );
    assert_eq!(
        JobId::parse("fl").unwrap_err().reason,
        JobIdErrorReason::F58Digit('l')
    );
    assert_eq!(
        JobId::parse("f").unwrap_err().reason,
        JobIdErrorReason::F58Empty
    );
    assert_eq!(
        JobId::parse("f1111111111111").unwrap_err().reason,
        JobIdErrorReason::F58TooLong(13)
    );
    assert_eq!(
        JobId::parse(&format!("f{}", "z".repeat(12)))
            .unwrap_err()
            .reason,
        JobIdErrorReason::Overflow
    );
    assert_eq!(
        JobId::parse("bad-words").unwrap_err().reason,
        JobIdErrorReason::UnknownWord("bad".into())
    );
    assert_eq!(
        JobId::parse("academy-academy").unwrap_err().reason,
        JobIdErrorReason::Words("found 2 words".into())
    );
    assert_eq!(
        JobId::parse("🦄").unwrap_err().reason,
        JobIdErrorReason::EmojiDigit("🦄".into())
    );
    // 576^7 > 2^64: the largest 7-digit emoji string does not fit.
    assert_eq!(
        JobId::parse("🎌🎌🎌🎌🎌🎌🎌").unwrap_err().reason,
        JobIdErrorReason::Overflow
    );
}

#[test]
fn encoding_names_are_case_insensitive() {
    for e in Encoding::ALL {
        assert_eq!(e.name().parse::<Encoding>().unwrap(), e);
        assert_eq!(e.name().to_uppercase().parse::<Encoding>().unwrap(), e);
    }
    let err = "octal".parse::<Encoding>().unwrap_err();
    assert!(err.to_string().contains("\"octal\""));
}

#[test]
fn serde_is_an_integer_and_reads_strings() {
    let id = JobId::new(u64::MAX);
    assert_eq!(serde_json::to_string(&id).unwrap(), "18446744073709551615");
    assert_eq!(
        serde_json::from_str::<JobId>("18446744073709551615").unwrap(),
        id
    );
    assert_eq!(
        serde_json::from_str::<JobId>("\"ƒjpXCZedGfVQ\"").unwrap(),
        id
    );
    assert!(serde_json::from_str::<JobId>("-1").is_err());
    assert!(serde_json::from_str::<JobId>("1.5").is_err());
    assert!(serde_json::from_str::<JobId>("\"nope\"").is_err());
}

#[test]
fn display_pads_like_a_string() {
    assert_eq!(format!("{:>6}", JobId::new(42)), "    ƒj");
    assert_eq!(format!("{:<5}|", JobId::new(42)), "ƒj   |");
}

#[test]
fn generator_layout_and_borrowing() {
    let mut g = FluidGenerator::new(3, 100).unwrap();
    let a = g.next(100).unwrap();
    assert_eq!((a.timestamp_ms(), a.generator(), a.sequence()), (100, 3, 0));
    // A clock that went back: same millisecond, next sequence.
    let b = g.next(50).unwrap();
    assert_eq!((b.timestamp_ms(), b.sequence()), (100, 1));
    // Use up the millisecond: the next id borrows 101.
    for _ in 2..=1023 {
        g.next(100).unwrap();
    }
    let c = g.next(100).unwrap();
    assert_eq!((c.timestamp_ms(), c.sequence()), (101, 0));
    // The clock catching up does not repeat 101/0.
    let d = g.next(101).unwrap();
    assert_eq!((d.timestamp_ms(), d.sequence()), (101, 1));
    let e = g.next(500).unwrap();
    assert_eq!((e.timestamp_ms(), e.sequence()), (500, 0));
}

#[test]
fn generator_limits() {
    assert_eq!(
        FluidGenerator::new(16384, 0),
        Err(GeneratorError::GeneratorOutOfRange(16384))
    );
    let mut g = FluidGenerator::new(0, MAX_TIMESTAMP).unwrap();
    for _ in 0..1024 {
        g.next(0).unwrap();
    }
    assert_eq!(
        g.next(0),
        Err(GeneratorError::TimestampExhausted(MAX_TIMESTAMP + 1))
    );
    assert_eq!(
        g.next(MAX_TIMESTAMP + 5),
        Err(GeneratorError::TimestampExhausted(MAX_TIMESTAMP + 5))
    );
    let last = JobId::from_parts(MAX_TIMESTAMP, 0, 0).unwrap();
    assert!(FluidGenerator::resume(0, last).is_err());
}

#[test]
fn generator_resume_starts_after_any_generator() {
    let last = JobId::from_parts(1000, 16383, 1023).unwrap();
    let mut g = FluidGenerator::resume(0, last).unwrap();
    let next = g.next(10).unwrap();
    assert!(next > last);
    assert_eq!(next.timestamp_ms(), 1001);
}

fn any_encoding() -> impl Strategy<Value = Encoding> {
    proptest::sample::select(Encoding::ALL.to_vec())
}

/// One step of a simulated run: the clock moves by `delta` ms (possibly back),
/// `count` ids are issued, and maybe the process restarts.
#[derive(Debug, Clone)]
struct Step {
    delta: i64,
    count: usize,
    restart: bool,
}

fn step() -> impl Strategy<Value = Step> {
    (-50i64..50, 0usize..1500, proptest::bool::weighted(0.2)).prop_map(|(delta, count, restart)| {
        Step {
            delta,
            count,
            restart,
        }
    })
}

proptest! {
    #[test]
    fn every_encoding_roundtrips(raw in any::<u64>(), encoding in any_encoding()) {
        let id = JobId::new(raw);
        let text = id.encode(encoding);
        prop_assert_eq!(JobId::decode(&text, encoding).unwrap(), id);
        prop_assert_eq!(JobId::parse(&text).unwrap(), id);
        prop_assert_eq!(JobId::parse(&format!("  {text}")).unwrap(), id);
    }

    #[test]
    fn parts_roundtrip(ts in 0..=MAX_TIMESTAMP, generator in 0u16..16384, seq in 0u16..1024) {
        let id = JobId::from_parts(ts, generator, seq).unwrap();
        prop_assert_eq!((id.timestamp_ms(), id.generator(), id.sequence()), (ts, generator, seq));
    }

    #[test]
    fn parse_never_panics(s in "\\PC{0,30}") {
        let _ = JobId::parse(&s);
    }

    #[test]
    fn generator_strictly_increases_across_restarts_and_clock_jumps(
        generator in 0u32..16384,
        start in 0u64..1_000_000,
        steps in proptest::collection::vec(step(), 1..12),
    ) {
        let mut clock = start;
        let mut g = FluidGenerator::new(generator, start).unwrap();
        let mut last: Option<JobId> = None;
        for s in steps {
            clock = clock.saturating_add_signed(s.delta);
            if let (true, Some(l)) = (s.restart, last) {
                g = FluidGenerator::resume(generator, l).unwrap();
            }
            for _ in 0..s.count {
                let id = g.next(clock).unwrap();
                prop_assert_eq!(u32::from(id.generator()), generator);
                if let Some(l) = last {
                    prop_assert!(id > l, "{:?} after {:?}", id, l);
                }
                last = Some(id);
            }
        }
    }
}
