//! Every section of the flux-core derived `rlist.json` vectors.

use fluxgate_shared::ResourceSet;
use fluxgate_shared::idset::IdSet;
use fluxgate_shared::rset::{AllocError, AllocRequest, Constraint, Pool};
use serde_json::Value;

fn vectors() -> Value {
    serde_json::from_str(include_str!("data/rset/rlist.json")).expect("vectors parse")
}

fn section(name: &str) -> Vec<Value> {
    vectors()[name].as_array().expect("section").clone()
}

fn r(v: &Value) -> ResourceSet {
    ResourceSet::from_json(v).unwrap_or_else(|e| panic!("parse {v}: {e}"))
}

#[test]
fn parse_valid() {
    let cases = section("parse_valid");
    assert_eq!(cases.len(), 7);
    for case in cases {
        let rs = r(&case["R"]);
        let count = &case["count"];
        assert_eq!(
            rs.nnodes() as u64,
            count["node"].as_u64().unwrap(),
            "{case}"
        );
        assert_eq!(rs.ncores(), count["core"].as_u64().unwrap(), "{case}");
        assert_eq!(rs.ngpus(), count["gpu"].as_u64().unwrap(), "{case}");
        if let Some(d) = case["dumps"].as_str() {
            assert_eq!(rs.dumps(), d);
        }
        if let Some(n) = case["nodelist"].as_str() {
            assert_eq!(rs.nodelist().unwrap().encode(), n);
        }
        if let Some(ranks) = case["ranks"].as_str() {
            assert_eq!(rs.ranks(), IdSet::parse(ranks).unwrap());
        }
        // What we emit reads back the same.
        assert_eq!(ResourceSet::parse(&rs.to_json_string()).unwrap(), rs);
    }
}

#[test]
fn parse_invalid() {
    let cases = section("parse_invalid");
    assert_eq!(cases.len(), 6);
    for case in cases {
        let err = ResourceSet::from_json(&case["R"]).expect_err(&case.to_string());
        if let Some(want) = case["error"].as_str() {
            let got = err.to_string();
            assert!(got.contains(want), "{got:?} should contain {want:?}");
        }
    }
}

#[test]
fn r_lite_errors_come_in_entry_order() {
    let err = |entries: &str| {
        let text = format!(r#"{{"version": 1, "execution": {{"R_lite": [{entries}]}}}}"#);
        ResourceSet::parse(&text).unwrap_err().to_string()
    };
    let entry = |ranks: &str, cores: &str| {
        format!(r#"{{"rank": "{ranks}", "children": {{"core": "{cores}"}}}}"#)
    };
    // Rank 1 overlaps in entry 1, rank 0 only in entry 2: entry 1 is named,
    // although its rank is the larger, and the bad entry 3 is not reached.
    let entries = [
        entry("0-1", "0-1"),
        entry("1", "1"),
        entry("0", "0"),
        entry("2", "x"),
    ];
    assert_eq!(
        err(&entries.join(",")),
        "R execution.R_lite[1].rank: rank 1 core1 appears in more than one R_lite entry"
    );
    // Ranks out of order, entries with no rank: the overlap names its entry.
    let entries = [
        entry("7", "0-3"),
        r#"{"rank": "", "children": {}}"#.to_string(),
        entry("3,5", "0"),
        entry("5", "3-4"),
        entry("7", "2-9"),
    ];
    assert_eq!(
        err(&entries.join(",")),
        "R execution.R_lite[4].rank: rank 7 core[2-3] appears in more than one R_lite entry"
    );
    // A bad entry before any overlap is the error.
    let entries = [entry("0", "0"), entry("1", "y"), entry("0", "0")];
    assert!(
        err(&entries.join(",")).starts_with("R execution.R_lite[1].children.core: "),
        "{}",
        err(&entries.join(","))
    );
}

#[test]
fn fragmented_r_reads_as_ordered_r() {
    // One R_lite entry per rank in a scrambled order, ranks merged by rank.
    let n = 64u32;
    let entries: Vec<String> = (0..n)
        .map(|i| (i * 37) % n)
        .map(|r| format!(r#"{{"rank": "{r}", "children": {{"core": "0-3"}}}}"#))
        .collect();
    let text = format!(
        r#"{{"version": 1, "execution": {{"R_lite": [{}], "nodelist": ["n[0-{}]"]}}}}"#,
        entries.join(","),
        n - 1
    );
    let rs = ResourceSet::parse(&text).unwrap();
    assert_eq!(rs.dumps(), format!("rank[0-{}]/core[0-3]", n - 1));
    assert_eq!(rs.node(5).unwrap().hostname(), Some("n5"));
}

#[test]
fn dumps() {
    for case in section("dumps") {
        assert_eq!(r(&case["R"]).dumps(), case["expect"].as_str().unwrap());
    }
}

fn check_merge(name: &str, f: impl Fn(&mut ResourceSet, &ResourceSet)) {
    let cases = section(name);
    assert!(!cases.is_empty());
    for case in cases {
        let mut a = r(&case["a"]);
        let b = r(&case["b"]);
        f(&mut a, &b);
        assert_eq!(a.ncores(), case["expect_cores"].as_u64().unwrap(), "{case}");
        assert_eq!(a.nnodes() as u64, case["expect_nodes"].as_u64().unwrap());
        assert_eq!(
            a.nodelist().unwrap().encode(),
            case["expect_nodelist"].as_str().unwrap()
        );
    }
}

#[test]
fn append() {
    check_merge("append", |a, b| a.append(b).expect("disjoint"));
}

#[test]
fn add() {
    check_merge("add", |a, b| a.add(b));
}

#[test]
fn ops() {
    let cases = section("ops");
    assert_eq!(cases.len(), 12);
    for case in cases {
        let a = r(&case["a"]);
        let b = r(&case["b"]);
        let got = match case["op"].as_str().unwrap() {
            "diff" => Some(a.diff(&b)),
            "union" => Some(a.union(&b)),
            "intersect" => Some(a.intersect(&b)),
            "append" => {
                let mut a = a.clone();
                a.append(&b).ok().map(|_| a)
            }
            op => panic!("unknown op {op}"),
        };
        match case["expect"].as_str() {
            Some(want) => assert_eq!(got.expect("op succeeds").dumps(), want, "{case}"),
            None => assert!(got.is_none(), "{case} must fail"),
        }
    }
}

#[test]
fn rank_select() {
    for case in section("rank_select") {
        let rs = r(&case["R"]);
        let ranks = IdSet::parse(case["ranks"].as_str().unwrap()).unwrap();
        let got = match case["op"].as_str().unwrap() {
            "copy_ranks" => rs.copy_ranks(&ranks),
            "include" => rs.include(&ranks),
            "exclude" => rs.exclude(&ranks),
            "remove_ranks" => {
                let mut rs = rs.clone();
                let n = rs.remove_ranks(&ranks);
                assert_eq!(n as u64, case["expect_removed"].as_u64().unwrap());
                rs
            }
            op => panic!("unknown op {op}"),
        };
        assert_eq!(got.dumps(), case["expect"].as_str().unwrap(), "{case}");
        if let Some(n) = case["expect_nnodes"].as_u64() {
            assert_eq!(got.nnodes() as u64, n);
        }
        if let Some(n) = case["expect_cores"].as_u64() {
            assert_eq!(got.ncores(), n);
        }
    }
}

#[test]
fn remap() {
    for case in section("remap") {
        let mut rs = r(&case["R"]);
        rs.remap();
        assert_eq!(rs.dumps(), case["expect"].as_str().unwrap());
    }
}

#[test]
fn hosts_to_ranks() {
    for case in section("hosts_to_ranks") {
        let rs = r(&case["R"]);
        let got = rs.hosts_to_ranks(case["hosts"].as_str().unwrap());
        match case["expect"].as_str() {
            Some(want) => assert_eq!(got.unwrap(), IdSet::parse(want).unwrap()),
            None => {
                let err = got.expect_err("must fail").to_string();
                assert_eq!(err, case["error"].as_str().unwrap());
            }
        }
    }
}

#[test]
fn constraint() {
    let cases = section("constraint");
    assert_eq!(cases.len(), 7);
    for case in cases {
        let rs = r(&case["R"]);
        let c = Constraint::from_json(&case["constraint"]).unwrap();
        assert_eq!(
            rs.copy_constraint(&c).dumps(),
            case["expect"].as_str().unwrap(),
            "{case}"
        );
    }
}

#[test]
fn alloc() {
    let cases = section("alloc");
    // Four single-core requests spread across the two nodes, worst-fit.
    let case = &cases[0];
    let mut pool = Pool::new(r(&case["R"]));
    let mut allocs = Vec::new();
    for (req, want) in case["requests"]
        .as_array()
        .unwrap()
        .iter()
        .zip(case["expect"].as_array().unwrap())
    {
        let req = AllocRequest::slots(
            req["slots"].as_u64().unwrap() as u32,
            req["cores_per_slot"].as_u64().unwrap() as u32,
        );
        let got = pool.alloc(&req).expect("fits");
        assert_eq!(got.dumps(), want.as_str().unwrap());
        assert_eq!(got.slot_count(), Some(1));
        allocs.push(got);
    }
    // All busy now: a fifth request waits rather than failing for good.
    assert_eq!(
        pool.alloc(&AllocRequest::slots(1, 1)),
        Err(AllocError::Busy)
    );
    // Free rank0/core1 and the next request gets exactly it.
    pool.free(&allocs[2]).unwrap();
    assert_eq!(
        pool.alloc(&AllocRequest::slots(1, 1)).unwrap().dumps(),
        "rank0/core1"
    );

    // A slot bigger than any node can never be satisfied.
    let case = &cases[1];
    let mut pool = Pool::new(r(&case["R"]));
    let req = &case["requests"][0];
    let err = pool
        .alloc(&AllocRequest::slots(
            req["slots"].as_u64().unwrap() as u32,
            req["cores_per_slot"].as_u64().unwrap() as u32,
        ))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains(case["deny_note_contains"].as_str().unwrap()),
        "{err}"
    );
    assert!(matches!(err, AllocError::Unsatisfiable(_)));
}
