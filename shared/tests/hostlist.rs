//! RFC 29 hostlist: every flux-core vector, plus roundtrip properties.

use fluxgate_shared::hostlist::{Hostlist, hostname};
use fluxgate_shared::idset::IdSet;
use proptest::prelude::*;
use serde_json::Value;

fn section(name: &str) -> Vec<Value> {
    let v: Value = serde_json::from_str(include_str!("data/hostlist/hostlist.json")).unwrap();
    v[name].as_array().unwrap().clone()
}

fn hl(s: &str) -> Hostlist {
    Hostlist::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn expand_vectors() {
    let rows = section("expand");
    assert!(rows.len() >= 9);
    for row in rows {
        let input = row["input"].as_str().unwrap();
        let got: Vec<String> = hl(input).iter().collect();
        assert_eq!(got, strings(&row["expect"]), "{input}");
        assert_eq!(hl(input).len(), got.len());
    }
}

#[test]
fn encode_vectors() {
    let rows = section("encode");
    assert!(rows.len() >= 18);
    for row in rows {
        let input = row["input"].as_str().unwrap();
        let h = hl(input);
        assert_eq!(h.encode(), row["expect"].as_str().unwrap(), "{input}");
        assert_eq!(h.len() as u64, row["count"].as_u64().unwrap(), "{input}");
        // Re-decoding the encoding yields the same hosts.
        assert_eq!(hl(&h.encode()), h, "{input}");
    }
}

#[test]
fn invalid_vectors_are_rejected() {
    let rows = section("invalid");
    assert!(rows.len() >= 9);
    for row in rows {
        let input = row.as_str().unwrap();
        let msg = Hostlist::parse(input).expect_err(input).to_string();
        assert!(msg.contains(&format!("{input:?}")), "{msg}");
    }
}

#[test]
fn more_invalid_forms() {
    for bad in [
        "foo[1,3",
        "foo[0-1,2--5]",
        "foo[1,,2]",
        "foo[0-]",
        "a[1-2]b[3-4]",
        "a]b[1]",
        "foo[+1]",
    ] {
        assert!(Hostlist::parse(bad).is_err(), "{bad} should be rejected");
    }
    assert_eq!(hl("foo[0-1048575]").len(), 1 << 20);
    let many: Vec<String> = (0..10241).map(|i| (i * 2).to_string()).collect();
    assert!(Hostlist::parse(&format!("n[{}]", many.join(","))).is_err());
    assert_eq!(hl(&format!("n[{}]", many[..10240].join(","))).len(), 10240);
}

#[test]
fn nth_vectors() {
    for row in section("nth") {
        let h = hl(row["input"].as_str().unwrap());
        let i = row["index"].as_u64().unwrap() as usize;
        assert_eq!(h.nth(i).as_deref(), row["expect"].as_str(), "{row}");
    }
}

#[test]
fn find_vectors() {
    let rows = section("find");
    assert!(rows.len() >= 14);
    for row in rows {
        let h = hl(row["input"].as_str().unwrap());
        let got = h
            .find(row["host"].as_str().unwrap())
            .map_or(-1, |i| i as i64);
        assert_eq!(got, row["expect"].as_i64().unwrap(), "{row}");
    }
}

#[test]
fn delete_vectors() {
    for row in section("delete") {
        let mut h = hl(row["input"].as_str().unwrap());
        let n = h.delete(&hl(row["delete"].as_str().unwrap()));
        assert_eq!(n as u64, row["expect_count"].as_u64().unwrap(), "{row}");
        assert_eq!(h.encode(), row["expect"].as_str().unwrap(), "{row}");
        assert_eq!(h.len(), h.iter().count());
    }
}

#[test]
fn delete_removes_one_occurrence_per_host() {
    let mut h = hl("foo[1,1,2]");
    assert_eq!(h.delete(&hl("foo1")), 1);
    assert_eq!(h.encode(), "foo[1-2]");
    let mut h = hl("foo[1,1,2],foo1");
    assert_eq!(h.delete_all(&hl("foo1")), 3);
    assert_eq!(h.encode(), "foo2");
}

#[test]
fn sort_uniq_vectors() {
    for row in section("sort_uniq") {
        let input = row["input"].as_str().unwrap();
        let mut sorted = hl(input);
        sorted.sort();
        let expect = row["sorted_flux_core"].as_str().unwrap();
        assert_eq!(
            sorted.iter().collect::<Vec<_>>(),
            hl(expect).iter().collect::<Vec<_>>(),
            "{input}"
        );
        // flux-core's exact sorted string, too (the CLI's -S prints it).
        assert_eq!(sorted.encode(), expect, "{input}");
        let mut u = hl(input);
        u.uniq();
        assert_eq!(u.encode(), row["uniq"].as_str().unwrap(), "{input}");
        assert_eq!(u.len(), u.iter().count());
    }
}

#[test]
fn hostname_parse_vectors() {
    for row in section("hostname_parse") {
        let input = row["input"].as_str().unwrap();
        if row["invalid"].as_bool() == Some(true) {
            assert!(hostname(input).is_err(), "{input}");
            continue;
        }
        let p = hostname(input).unwrap();
        assert_eq!(p.prefix, row["prefix"].as_str().unwrap());
        assert_eq!(p.number, row["num"].as_u64());
        assert_eq!(p.width as u64, row["width"].as_u64().unwrap());
    }
}

#[test]
fn quirks_follow_flux_core_padding() {
    for row in section("quirks_not_for_conformance") {
        let input = row["input"].as_str().unwrap();
        match Hostlist::parse(input) {
            // Per-range padding, as flux-core.
            Ok(h) => assert_eq!(
                h.iter().collect::<Vec<_>>(),
                strings(&row["flux_core_expand"])
            ),
            // Multiple bracket groups are rejected on purpose.
            Err(e) => assert!(input.matches('[').count() > 1, "{e}"),
        }
    }
}

#[test]
fn set_operations() {
    let a = hl("foo[1-5],bar");
    let b = hl("foo[4-8]");
    assert_eq!(a.union(&b).encode(), "bar,foo[1-8]");
    assert_eq!(a.intersect(&b).encode(), "foo[4-5]");
    assert_eq!(a.minus(&b).encode(), "foo[1-3],bar");
    assert_eq!(a.xor(&b).encode(), "bar,foo[1-3,6-8]");
    let mut c = Hostlist::new();
    c.push("foo1").unwrap();
    c.push("foo2").unwrap();
    c.append(&hl("foo[3-4]"));
    assert_eq!(c.encode(), "foo[1-4]");
    assert!(c.push("bad,name").is_err());
    assert!(c.push("").is_err());
    assert_eq!(c.first().as_deref(), Some("foo1"));
    assert_eq!(c.last().as_deref(), Some("foo4"));
    assert!(c.contains("foo3") && !c.contains("foo5"));
    assert_eq!(
        c.select(&IdSet::parse("0,3").unwrap()).unwrap().encode(),
        "foo[1,4]"
    );
}

#[test]
fn serde_and_display() {
    let h = hl("node[0-3],login");
    assert_eq!(h.to_string(), "node[0-3],login");
    assert_eq!(serde_json::to_string(&h).unwrap(), "\"node[0-3],login\"");
    let back: Hostlist = serde_json::from_str("\"node[0-3],login\"").unwrap();
    assert_eq!(back, h);
    assert!(serde_json::from_str::<Hostlist>("\"foo[\"").is_err());
    assert_eq!("a[1-2]".parse::<Hostlist>().unwrap().len(), 2);
    let joined: Hostlist = [hl("a1"), hl("a2")].into_iter().collect();
    assert_eq!(joined.encode(), "a[1-2]");
}

/// Host names drawn from a few prefixes, numbers and paddings.
fn host() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (prop::sample::select(vec!["n", "rack1-n", "x", ""]), 0u64..30, 0usize..4)
            .prop_map(|(p, n, w)| format!("{p}{n:0w$}")),
        1 => prop::sample::select(vec!["login", "foo-a", "nodeb"]).prop_map(String::from),
    ]
}

proptest! {
    #[test]
    fn encode_expand_roundtrip(model in prop::collection::vec(host(), 0..40)) {
        let mut h = Hostlist::new();
        for name in &model {
            h.push(name).unwrap();
        }
        prop_assert_eq!(h.len(), model.len());
        prop_assert_eq!(h.iter().collect::<Vec<_>>(), model.clone());
        let text = h.encode();
        let back = Hostlist::parse(&text).unwrap();
        prop_assert_eq!(back.iter().collect::<Vec<_>>(), model.clone(), "{}", text);
        prop_assert_eq!(back.encode(), text);
        for (i, name) in model.iter().enumerate() {
            prop_assert_eq!(h.nth(i), Some(name.clone()));
            prop_assert_eq!(h.find(name), model.iter().position(|m| m == name));
        }
    }

    #[test]
    fn ops_match_vec_model(a in prop::collection::vec(host(), 0..30), b in prop::collection::vec(host(), 0..30)) {
        let ha: Hostlist = Hostlist::parse(&a.join(",")).unwrap();
        let hb: Hostlist = Hostlist::parse(&b.join(",")).unwrap();
        let sorted_set = |v: Vec<String>| {
            let mut v = v;
            v.sort();
            v.dedup();
            v
        };
        let set = |h: &Hostlist| sorted_set(h.iter().collect());
        let mut u = ha.clone();
        u.uniq();
        prop_assert_eq!(set(&u), sorted_set(a.clone()));
        prop_assert_eq!(u.len(), u.iter().count());
        let names: Vec<String> = u.iter().collect();
        prop_assert_eq!(sorted_set(names.clone()).len(), names.len(), "uniq leaves duplicates");
        let mut s = ha.clone();
        s.sort();
        let mut sorted_model: Vec<String> = s.iter().collect();
        sorted_model.sort();
        let mut a_sorted = a.clone();
        a_sorted.sort();
        prop_assert_eq!(sorted_model, a_sorted);
        prop_assert_eq!(set(&ha.union(&hb)), sorted_set([a.clone(), b.clone()].concat()));
        prop_assert_eq!(
            set(&ha.intersect(&hb)),
            sorted_set(a.iter().filter(|x| b.contains(x)).cloned().collect())
        );
        let minus: Vec<String> = a.iter().filter(|x| !b.contains(x)).cloned().collect();
        prop_assert_eq!(ha.minus(&hb).iter().collect::<Vec<_>>(), minus);
        let mut d = ha.clone();
        d.delete_all(&hb);
        let left: Vec<String> = a.iter().filter(|x| !b.contains(x)).cloned().collect();
        prop_assert_eq!(d.iter().collect::<Vec<_>>(), left);
        prop_assert_eq!(d.len(), d.iter().count());
        prop_assert_eq!(hl(&d.encode()).iter().collect::<Vec<_>>(), d.iter().collect::<Vec<_>>());
    }

    #[test]
    fn parse_never_panics(text in "[a-c0-9,\\[\\]\\- ]{0,20}") {
        if let Ok(h) = Hostlist::parse(&text) {
            let again = Hostlist::parse(&h.encode()).unwrap();
            prop_assert_eq!(again.iter().collect::<Vec<_>>(), h.iter().collect::<Vec<_>>());
        }
    }
}
