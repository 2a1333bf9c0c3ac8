//! RFC 22 idset: every flux-core vector, plus roundtrip and algebra properties.

use std::collections::BTreeSet;

use fluxgate_shared::idset::{EncodeFlags, IdSet, MAX_ID};
use proptest::prelude::*;
use serde_json::Value;

fn vectors() -> Value {
    serde_json::from_str(include_str!("data/idset/idset.json")).unwrap()
}

fn section(name: &str) -> Vec<Value> {
    vectors()[name].as_array().unwrap().clone()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn flags(name: &str) -> EncodeFlags {
    EncodeFlags {
        range: name.split('|').any(|f| f == "RANGE"),
        brackets: name.split('|').any(|f| f == "BRACKETS"),
    }
}

#[test]
fn decode_vectors() {
    let rows = section("decode");
    assert!(rows.len() >= 13);
    for row in rows {
        let input = row["input"].as_str().unwrap();
        let got = IdSet::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(
            got.iter().collect::<Vec<_>>(),
            ids(&row["expect"]),
            "{input}"
        );
    }
}

#[test]
fn encode_vectors() {
    let rows = section("encode");
    assert!(rows.len() >= 27);
    for row in rows {
        let set: IdSet = ids(&row["ids"]).into_iter().collect();
        let f = row["flags"].as_str().unwrap();
        assert_eq!(
            set.encode(flags(f)),
            row["expect"].as_str().unwrap(),
            "{row}"
        );
    }
}

#[test]
fn invalid_vectors_are_rejected() {
    let rows = section("invalid");
    assert!(rows.len() >= 24);
    for row in rows {
        let input = row.as_str().unwrap();
        let err = IdSet::parse(input).expect_err(input);
        let msg = err.to_string();
        assert!(msg.contains(&format!("{input:?}")), "{msg}");
    }
}

#[test]
fn ops_vectors() {
    let rows = section("ops");
    assert!(rows.len() >= 10);
    for row in rows {
        let a = IdSet::parse(row["a"].as_str().unwrap()).unwrap();
        let b = IdSet::parse(row["b"].as_str().unwrap()).unwrap();
        let expect = IdSet::parse(row["expect"].as_str().unwrap()).unwrap();
        let got = match row["op"].as_str().unwrap() {
            "union" => a.union(&b),
            "difference" => a.difference(&b),
            "intersect" => a.intersection(&b),
            "add" => {
                let mut a = a.clone();
                a.add(&b);
                a
            }
            "subtract" => {
                let mut a = a.clone();
                a.subtract(&b);
                a
            }
            "subtract_str" => {
                let got = a.difference(&b);
                assert_eq!(
                    got.encode(EncodeFlags::RANGE),
                    row["expect"].as_str().unwrap()
                );
                got
            }
            op => panic!("unknown op {op}"),
        };
        assert_eq!(got, expect, "{row}");
    }
}

#[test]
fn info_vectors() {
    for row in section("info") {
        let s = IdSet::parse(row["input"].as_str().unwrap()).unwrap();
        assert_eq!(s.count(), row["count"].as_u64().unwrap(), "{row}");
        assert_eq!(s.last().map(u64::from), row["maxid"].as_u64(), "{row}");
    }
}

#[test]
fn lenient_flux_core_vectors() {
    for row in section("lenient_flux_core") {
        let input = row["input"].as_str().unwrap();
        let got = IdSet::parse(input).unwrap();
        assert_eq!(
            got.iter().collect::<Vec<_>>(),
            ids(&row["expect"]),
            "{input}"
        );
    }
}

#[test]
fn limits() {
    let top = IdSet::parse("2147483647").unwrap();
    assert_eq!(top.first(), Some(MAX_ID));
    assert!(IdSet::parse("2147483648").is_err());
    assert!(IdSet::parse("0-2147483648").is_err());
    assert!(IdSet::parse("99999999999999999999").is_err());
    assert_eq!(
        IdSet::parse("0-2147483647").unwrap().count(),
        1 << 31,
        "count does not overflow"
    );
}

#[test]
fn more_invalid_forms() {
    for bad in [
        "01,2", "0-", "1-2,", "[0]x", "+1", "1,2,2", "0-01", "1;2", "[ ]",
    ] {
        // "1-2," is lenient in flux-core (trailing empty element skipped).
        if bad == "1-2," {
            assert!(IdSet::parse(bad).is_ok());
            continue;
        }
        assert!(IdSet::parse(bad).is_err(), "{bad} should be rejected");
    }
}

#[test]
fn accessors() {
    let s = IdSet::parse("1-3,7-9,14,16").unwrap();
    assert_eq!(s.count(), 8);
    assert_eq!(s.first(), Some(1));
    assert_eq!(s.last(), Some(16));
    assert_eq!(s.nth(0), Some(1));
    assert_eq!(s.nth(3), Some(7));
    assert_eq!(s.nth(7), Some(16));
    assert_eq!(s.nth(8), None);
    assert!(s.contains(8) && !s.contains(10) && !s.contains(0));
    assert_eq!(s.to_string(), "1-3,7-9,14,16");
    assert_eq!("[7-9]".parse::<IdSet>().unwrap(), IdSet::from_range(7, 9));
    assert!(IdSet::from_range(3, 2).is_empty());
    let mut e = IdSet::new();
    e.extend([5, 3, 4]);
    assert_eq!(e.to_string(), "3-5");
    assert!(e.is_subset(&s.union(&e)));
    assert!(!s.is_subset(&e));
}

const ALL_FLAGS: [EncodeFlags; 4] = [
    EncodeFlags::PLAIN,
    EncodeFlags::RANGE,
    EncodeFlags::BRACKETS,
    EncodeFlags::RANGE_BRACKETS,
];

fn model() -> impl Strategy<Value = BTreeSet<u32>> {
    prop_oneof![
        prop::collection::btree_set(0u32..64, 0..40),
        prop::collection::btree_set(0u32..=MAX_ID, 0..8),
        prop::collection::btree_set(MAX_ID - 40..=MAX_ID, 0..20),
    ]
}

fn of(m: &BTreeSet<u32>) -> IdSet {
    m.iter().copied().collect()
}

proptest! {
    #[test]
    fn decode_encode_roundtrip(m in model()) {
        let s = of(&m);
        for f in ALL_FLAGS {
            let text = s.encode(f);
            prop_assert_eq!(&IdSet::parse(&text).unwrap(), &s, "{}", text);
        }
        prop_assert_eq!(s.iter().collect::<Vec<_>>(), m.iter().copied().collect::<Vec<_>>());
        prop_assert_eq!(s.count(), m.len() as u64);
        prop_assert_eq!(s.first(), m.first().copied());
        prop_assert_eq!(s.last(), m.last().copied());
    }

    #[test]
    fn ops_match_btreeset(a in model(), b in model(), probe in 0u32..70) {
        let (sa, sb) = (of(&a), of(&b));
        prop_assert_eq!(sa.union(&sb), of(&a.union(&b).copied().collect()));
        prop_assert_eq!(sa.intersection(&sb), of(&a.intersection(&b).copied().collect()));
        prop_assert_eq!(sa.difference(&sb), of(&a.difference(&b).copied().collect()));
        prop_assert_eq!(sa.is_subset(&sb), a.is_subset(&b));
        prop_assert_eq!(sa.is_disjoint(&sb), a.is_disjoint(&b));
        prop_assert_eq!(sa.contains(probe), a.contains(&probe));
        prop_assert_eq!(sa.nth(u64::from(probe)), a.iter().nth(probe as usize).copied());
        prop_assert_eq!(sa.next_after(probe), a.range(probe + 1..).next().copied());
        let mut added = sa.clone();
        added.add(&sb);
        prop_assert_eq!(&added, &sa.union(&sb));
        let mut sub = sa.clone();
        sub.subtract(&sb);
        prop_assert_eq!(&sub, &sa.difference(&sb));
        let mut ins = sa.clone();
        for id in &b { ins.insert(*id); }
        prop_assert_eq!(&ins, &sa.union(&sb));
        let mut rem = sa.clone();
        for id in &b { rem.remove(*id); }
        prop_assert_eq!(&rem, &sa.difference(&sb));
    }

    #[test]
    fn algebra_laws(a in model(), b in model(), c in model()) {
        let (a, b, c) = (of(&a), of(&b), of(&c));
        prop_assert_eq!(a.union(&b), b.union(&a));
        prop_assert_eq!(a.intersection(&b), b.intersection(&a));
        prop_assert_eq!(a.union(&b).union(&c), a.union(&b.union(&c)));
        prop_assert_eq!(
            a.intersection(&b.union(&c)),
            a.intersection(&b).union(&a.intersection(&c))
        );
        prop_assert_eq!(a.difference(&b).union(&a.intersection(&b)), a.clone());
        prop_assert!(a.difference(&b).is_disjoint(&b));
    }

    #[test]
    fn range_inserts_match_model(ops in prop::collection::vec((any::<bool>(), 0u32..100, 0u32..8), 0..30)) {
        let mut s = IdSet::new();
        let mut m = BTreeSet::new();
        for (add, lo, len) in ops {
            if add {
                s.insert_range(lo, lo + len);
                m.extend(lo..=lo + len);
            } else {
                s.remove_range(lo, lo + len);
                for id in lo..=lo + len { m.remove(&id); }
            }
        }
        prop_assert_eq!(s, of(&m));
    }

    #[test]
    fn bulk_builders_match_inserts(
        ids in prop::collection::vec(0u32..200, 0..60),
        start in model(),
    ) {
        let mut one_by_one = of(&start);
        for &id in &ids {
            one_by_one.insert(id);
        }
        let mut extended = of(&start);
        extended.extend(ids.iter().copied());
        prop_assert_eq!(&extended, &one_by_one);
        let built: IdSet = ids.iter().copied().collect();
        prop_assert_eq!(built.union(&of(&start)), one_by_one);
        prop_assert_eq!(IdSet::from_ids(ids.iter().copied()), built);
    }

    #[test]
    fn parse_never_panics(text in "[0-9,\\-\\[\\] x]{0,16}") {
        if let Ok(s) = IdSet::parse(&text) {
            prop_assert_eq!(IdSet::parse(&s.to_string()).unwrap(), s);
        }
    }
}
