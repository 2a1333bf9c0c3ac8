//! RFC 44 resource events and state: golden journal and eventlog from
//! flux-core 0.88, drain semantics, remapping, requests, acquire, status.

use fluxgate_shared::resource::{
    AcquireDelta, DrainError, DrainMode, Overwrite, ResourceEvent, ResourceState, acquire_initial,
    replay, replay_into,
};
use fluxgate_shared::{Event, Hostlist, IdSet};
use proptest::prelude::*;
use serde_json::{Value, json};

fn parse_log(text: &str) -> Vec<Event> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            Event {
                timestamp: v["timestamp"].as_f64().unwrap(),
                name: v["name"].as_str().unwrap().into(),
                context: v
                    .get("context")
                    .and_then(|c| c.as_object().cloned().map(Into::into)),
            }
        })
        .collect()
}

fn to_line(e: &Event) -> String {
    let mut m = serde_json::Map::new();
    m.insert("timestamp".into(), json!(e.timestamp));
    m.insert("name".into(), json!(e.name));
    if let Some(c) = &e.context {
        m.insert("context".into(), Value::Object(c.as_map().clone()));
    }
    serde_json::to_string(&Value::Object(m)).unwrap()
}

fn ids(s: &str) -> IdSet {
    IdSet::parse(s).unwrap()
}

fn hl(s: &str) -> Hostlist {
    Hostlist::parse(s).unwrap()
}

const JOURNAL: &str = include_str!("data/resource/c-resource.journal.final.json");
const KVS_LOG: &str = include_str!("data/resource/c-resource.eventlog.final.kvs-raw");

#[test]
fn golden_journal_replays_to_no_drain_all_online() {
    let events = parse_log(JOURNAL);
    let state = replay(&events).unwrap();
    assert_eq!(state.ranks(), &ids("0-1"));
    assert_eq!(state.online(), &ids("0-1"));
    assert_eq!(state.hosts().encode(), "vm,vm");
    assert_eq!(state.method(), Some("dynamic-discovery"));
    assert!(state.drained().is_empty());
    assert_eq!(state.schedulable(&IdSet::new()), ids("0-1"));
}

#[test]
fn golden_journal_prefixes_imply_the_drains_flux_showed() {
    let events = parse_log(JOURNAL);
    // after line 5: rank 1 drained "some reason"
    let s = replay(&events[..5]).unwrap();
    assert_eq!(s.drained(), ids("1"));
    let g = s.drain_info(1).unwrap();
    assert_eq!(g.reason.as_deref(), Some("some reason"));
    assert_eq!(g.timestamp, events[4].timestamp);
    // flux resource status after drain: avail 1 (vm), drained 1 (vm)
    let st = s.status(&IdSet::new(), &IdSet::new());
    assert_eq!(st.avail, ids("0"));
    assert_eq!(st.drained, ids("1"));
    assert!(st.offline.is_empty() && st.draining.is_empty());
    // overwrite 1 replaces the reason, keeps the timestamp
    let s = replay(&events[..6]).unwrap();
    let g = s.drain_info(1).unwrap();
    assert_eq!(g.reason.as_deref(), Some("overwritten reason"));
    assert_eq!(g.timestamp, events[4].timestamp);
    // drain by hostname covers both ranks
    let s = replay(&events[..10]).unwrap();
    assert_eq!(s.drained(), ids("0-1"));
    assert_eq!(s.drain_groups().len(), 1);
    // drained before acquire: acquire's initial up is rank 0 only
    let s = replay(&events[..12]).unwrap();
    assert_eq!(s.schedulable(&IdSet::new()), ids("0"));
}

#[test]
fn golden_acquire_responses_follow_from_the_journal() {
    let events = parse_log(JOURNAL);
    let responses: Vec<Value> = include_str!("data/resource/c-resource-acquire.responses.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut state = replay(&events[..12]).unwrap();
    let mut up = state.schedulable(&IdSet::new());
    let initial = acquire_initial(responses[0]["response"]["resources"].clone(), &up);
    assert_eq!(Value::Object(initial), responses[0]["response"]);
    for (event, response) in events[12..15].iter().zip(&responses[1..4]) {
        state.apply(event).unwrap();
        let now = state.schedulable(&IdSet::new());
        let delta = AcquireDelta::between(&up, &now);
        assert_eq!(Value::Object(delta.to_json()), response["response"]);
        up = now;
    }
}

#[test]
fn golden_kvs_eventlog_replays_against_current_hosts() {
    let events = parse_log(KVS_LOG);
    let mut state = ResourceState::with_hosts(hl("vm,vm"));
    replay_into(&mut state, &events).unwrap();
    assert!(state.drained().is_empty());
    // everything but the last undrain: rank 0 drained with "acquire-test"
    let mut state = ResourceState::with_hosts(hl("vm,vm"));
    replay_into(&mut state, &events[..events.len() - 1]).unwrap();
    assert_eq!(state.drained(), ids("0"));
    assert_eq!(
        state.drain_info(0).unwrap().reason.as_deref(),
        Some("acquire-test")
    );
}

#[test]
fn golden_events_round_trip_byte_for_byte() {
    for text in [JOURNAL, KVS_LOG] {
        for line in text.lines() {
            let e = &parse_log(line)[0];
            let typed = ResourceEvent::from_event(e).unwrap();
            // Timestamps are left to the eventlog codec; name and context
            // must be the same bytes.
            let ours = to_line(&typed.to_event(e.timestamp));
            let tail = |l: &str| l[l.find(",\"name\"").unwrap()..].to_string();
            assert_eq!(tail(&ours), tail(line));
        }
    }
}

#[test]
fn event_decoding_errors_name_the_key() {
    let cases = [
        (json!({"name":"drain","context":{"nodelist":"vm"}}), "idset"),
        (
            json!({"name":"drain","context":{"idset":"x","nodelist":"vm"}}),
            "idset",
        ),
        (
            json!({"name":"drain","context":{"idset":"0","nodelist":"vm","overwrite":3}}),
            "overwrite",
        ),
        (
            json!({"name":"undrain","context":{"idset":"0"}}),
            "nodelist",
        ),
        (json!({"name":"online","context":{}}), "idset"),
        (
            json!({"name":"restart","context":{"ranks":"0","nodelist":"a"}}),
            "online",
        ),
        (json!({"name":"resource-define"}), "method"),
        (
            json!({"name":"resource-update","context":{"expiration":"x"}}),
            "expiration",
        ),
    ];
    for (v, key) in cases {
        let e = Event {
            timestamp: 1.0,
            name: v["name"].as_str().unwrap().into(),
            context: v
                .get("context")
                .and_then(|c| c.as_object().cloned().map(Into::into)),
        };
        let err = ResourceEvent::from_event(&e).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(key) && msg.contains(e.name.as_str()), "{msg}");
        let mut state = ResourceState::new();
        assert!(state.apply(&e).is_err());
    }
    let bad_line = parse_log(r#"{"timestamp":1,"name":"online","context":{"idset":"z"}}"#);
    let mut events = parse_log(JOURNAL);
    events.insert(3, bad_line[0].clone());
    let err = replay(&events).unwrap_err();
    assert_eq!(err.line, 4);
    assert!(err.to_string().contains("line 4"));
}

#[test]
fn unknown_events_and_truncate_are_accepted() {
    let events = parse_log(
        "{\"timestamp\":1,\"name\":\"truncate\"}\n{\"timestamp\":2,\"name\":\"future-thing\",\"context\":{\"a\":1}}\n",
    );
    let s = replay(&events).unwrap();
    assert!(s.is_truncated());
    assert_eq!(
        ResourceEvent::from_event(&events[0]).unwrap(),
        ResourceEvent::Truncate
    );
    assert!(!ResourceEvent::Truncate.is_persistent());
    assert!(ResourceEvent::Truncate.to_event(1.0).context.is_none());
}

fn drain_ev(idset: &str, nodelist: &str, reason: Option<&str>, ow: Overwrite) -> ResourceEvent {
    ResourceEvent::Drain {
        idset: ids(idset),
        nodelist: hl(nodelist),
        reason: reason.map(str::to_string),
        overwrite: ow,
    }
}

fn undrain_ev(idset: &str, nodelist: &str) -> ResourceEvent {
    ResourceEvent::Undrain {
        idset: ids(idset),
        nodelist: hl(nodelist),
        reason: None,
    }
}

#[test]
fn drain_overwrite_table() {
    // (first drain reason, overwrite of second, expected reason, expected ts)
    let table = [
        (Some("a"), Overwrite::Keep, Some("a"), 10.0),
        (Some("a"), Overwrite::Reason, Some("b"), 10.0),
        (Some("a"), Overwrite::ReasonAndTimestamp, Some("b"), 20.0),
        // drained without a reason: overwrite 0 still sets the reason
        (None, Overwrite::Keep, Some("b"), 10.0),
        (None, Overwrite::ReasonAndTimestamp, Some("b"), 20.0),
    ];
    for (first, ow, reason, ts) in table {
        let mut s = ResourceState::with_hosts(hl("n[0-3]"));
        s.apply_typed(10.0, &drain_ev("1-2", "n[1-2]", first, Overwrite::Keep));
        s.apply_typed(20.0, &drain_ev("2-3", "n[2-3]", Some("b"), ow));
        let g = s.drain_info(2).unwrap();
        assert_eq!(g.reason.as_deref(), reason, "{first:?} {ow:?}");
        assert_eq!(g.timestamp, ts, "{first:?} {ow:?}");
        // rank 3 was not drained: drained now with the new reason and time
        let g3 = s.drain_info(3).unwrap();
        assert_eq!((g3.reason.as_deref(), g3.timestamp), (Some("b"), 20.0));
        assert_eq!(s.drained(), ids("1-3"));
    }
}

#[test]
fn undrain_forgets_and_redrain_starts_fresh() {
    let mut s = ResourceState::with_hosts(hl("n[0-3]"));
    s.apply_typed(10.0, &drain_ev("0-3", "n[0-3]", Some("a"), Overwrite::Keep));
    s.apply_typed(11.0, &undrain_ev("1-2", "n[1-2]"));
    assert_eq!(s.drained(), ids("0,3"));
    assert_eq!(s.drain_groups().len(), 1);
    s.apply_typed(12.0, &drain_ev("1", "n1", Some("a"), Overwrite::Keep));
    assert_eq!(s.drain_info(1).unwrap().timestamp, 12.0);
    assert_eq!(s.drain_groups().len(), 2);
}

#[test]
fn replay_remaps_drained_ranks_by_hostname() {
    // Logged when rank 1 was "b"; now "b" is rank 3, and "c" is gone.
    let log = [
        drain_ev("1", "b", Some("bad dimm"), Overwrite::Keep).to_event(5.0),
        drain_ev("2", "c", Some("gone"), Overwrite::Keep).to_event(6.0),
        drain_ev("0", "a", Some("ok"), Overwrite::Keep).to_event(7.0),
        drain_ev("9", "z9", Some("past the end"), Overwrite::Keep).to_event(8.0),
    ];
    let mut s = ResourceState::with_hosts(hl("a,x,y,b"));
    replay_into(&mut s, &log).unwrap();
    assert_eq!(s.drained(), ids("0,3"));
    assert_eq!(s.drain_info(3).unwrap().reason.as_deref(), Some("bad dimm"));
    // hosts with several ranks (the golden instance): unchanged map keeps ranks
    let mut s = ResourceState::with_hosts(hl("vm,vm"));
    s.apply_typed(1.0, &drain_ev("1", "vm", Some("r"), Overwrite::Keep));
    assert_eq!(s.drained(), ids("1"));
    // undrain follows the hostname too
    let mut s = ResourceState::with_hosts(hl("a,x,y,b"));
    replay_into(&mut s, &log).unwrap();
    s.apply(&undrain_ev("1", "b").to_event(9.0)).unwrap();
    assert_eq!(s.drained(), ids("0"));
}

#[test]
fn remap_of_many_moved_hosts_follows_each_hostname() {
    // 64 ranks now on hosts h[0-63] plus h5 again at rank 64; the event was
    // logged when rank r ran on h((r * 7) % 64), or on a host now gone
    // (every fourth rank), and one rank past the end of the instance.
    let hosts = hl("h[0-63],h5");
    let logged_host = |r: u32| {
        if r.is_multiple_of(4) {
            format!("gone{r}")
        } else {
            format!("h{}", (r * 7) % 64)
        }
    };
    let ranks: Vec<u32> = (0..64).chain([70]).collect();
    let mut nodelist = Hostlist::new();
    for &r in &ranks {
        nodelist.push(&logged_host(r)).unwrap();
    }
    let idset: IdSet = ranks.iter().copied().collect();
    let mut s = ResourceState::with_hosts(hosts.clone());
    s.apply_typed(
        1.0,
        &ResourceEvent::Drain {
            idset,
            nodelist,
            reason: Some("moved".into()),
            overwrite: Overwrite::Keep,
        },
    );
    // Each logged host, where it still is: its first rank.
    let mut want = IdSet::new();
    for &r in &ranks {
        let host = logged_host(r);
        if hosts.nth(r as usize).as_deref() == Some(host.as_str()) {
            want.insert(r);
        } else if let Some(now) = hosts.find(&host) {
            want.insert(now as u32);
        }
    }
    assert_eq!(s.drained(), want.intersection(&ids("0-64")));
    assert!(!s.drained().contains(64), "h5 is found at its first rank");
}

#[test]
fn online_offline_torpid_lively() {
    let mut s = ResourceState::new();
    let seq = [
        ResourceEvent::Restart {
            ranks: ids("0-7"),
            online: IdSet::new(),
            nodelist: hl("n[0-7]"),
        },
        ResourceEvent::Online { idset: ids("0-7") },
        ResourceEvent::Torpid { idset: ids("3-4") },
        ResourceEvent::Lively { idset: ids("3") },
        ResourceEvent::Offline { idset: ids("4,6") },
    ];
    for (i, e) in seq.iter().enumerate() {
        s.apply_typed(i as f64, e);
    }
    assert_eq!(s.online(), &ids("0-3,5,7"));
    assert!(s.torpid().is_empty());
    s.apply_typed(9.0, &ResourceEvent::Torpid { idset: ids("5") });
    s.apply_typed(9.0, &drain_ev("7", "n7", None, Overwrite::Keep));
    assert_eq!(s.schedulable(&ids("0")), ids("1-3"));
    let st = s.status(&ids("0"), &ids("7"));
    assert_eq!(st.exclude, ids("0"));
    assert_eq!(st.offline, ids("4,6"));
    assert_eq!(st.torpid, ids("5"));
    assert_eq!(st.draining, ids("7"));
    assert!(st.drained.is_empty());
    assert_eq!(st.avail, ids("1-6"));
    assert_eq!(st.up, ids("0-3,5,7"));
}

#[test]
fn drain_requests_report_as_flux_does() {
    let mut s = ResourceState::with_hosts(hl("vm,vm,w0"));
    let none = IdSet::new();
    let e = s
        .plan_drain("1", Some("some reason"), DrainMode::Fail, &none)
        .unwrap();
    assert_eq!(
        to_line(&e.to_event(1795327063.0810578)),
        parse_log(JOURNAL)[4..5].iter().map(to_line).next().unwrap()
    );
    s.apply_typed(1.0, &e);
    let err = s
        .plan_drain("0-1", Some("x"), DrainMode::Fail, &none)
        .unwrap_err();
    assert_eq!(err.to_string(), "rank 1 already drained");
    let err = s
        .plan_drain("0-2", None, DrainMode::Fail, &ids("2"))
        .unwrap_err();
    assert_eq!(err.to_string(), "ranks 1-2 already drained or excluded");
    let err = s
        .plan_drain("2", None, DrainMode::Fail, &ids("2"))
        .unwrap_err();
    assert_eq!(err.to_string(), "rank 2 excluded");
    // hostnames resolve to every rank on the host
    let e = s
        .plan_drain("vm", Some("host"), DrainMode::Overwrite, &none)
        .unwrap();
    assert_eq!(e, drain_ev("0-1", "vm,vm", Some("host"), Overwrite::Reason));
    let e = s
        .plan_drain("w0", None, DrainMode::ForceOverwrite, &none)
        .unwrap();
    assert_eq!(e, drain_ev("2", "w0", None, Overwrite::ReasonAndTimestamp));
    let e = s
        .plan_drain("0-1", Some("u"), DrainMode::Update, &none)
        .unwrap();
    assert_eq!(e, drain_ev("0-1", "vm,vm", Some("u"), Overwrite::Keep));
    // errors on the targets themselves
    assert_eq!(
        s.plan_drain("3", None, DrainMode::Fail, &none).unwrap_err(),
        DrainError::OutOfRange
    );
    assert_eq!(
        s.plan_drain("nosuch[1-2],vm", None, DrainMode::Fail, &none)
            .unwrap_err()
            .to_string(),
        "invalid targets: invalid hosts: nosuch[1-2]"
    );
    assert_eq!(
        s.plan_drain("", None, DrainMode::Fail, &none).unwrap_err(),
        DrainError::Empty
    );
}

#[test]
fn undrain_requests_report_as_flux_does() {
    let mut s = ResourceState::with_hosts(hl("vm,vm,w0"));
    s.apply_typed(1.0, &drain_ev("1", "vm", Some("r"), Overwrite::Keep));
    let err = s.plan_undrain("0-2", None, false).unwrap_err();
    assert_eq!(err.to_string(), "vm,w0 (ranks 0,2) not drained");
    let err = s.plan_undrain("2", None, false).unwrap_err();
    assert_eq!(err.to_string(), "w0 (rank 2) not drained");
    let e = s.plan_undrain("0-2", Some("fixed"), true).unwrap().unwrap();
    assert_eq!(
        e,
        ResourceEvent::Undrain {
            idset: ids("1"),
            nodelist: hl("vm"),
            reason: Some("fixed".into())
        }
    );
    assert_eq!(s.plan_undrain("0", None, true).unwrap(), None);
    s.apply_typed(2.0, &e);
    assert!(s.drained().is_empty());
}

#[test]
fn acquire_delta_has_only_changed_keys() {
    let d = AcquireDelta::between(&ids("0-3"), &ids("0-1,4"));
    assert_eq!(Value::Object(d.to_json()), json!({"up":"4","down":"2-3"}));
    let d = AcquireDelta::between(&ids("0-3"), &ids("0-3"));
    assert!(d.is_empty());
    assert!(d.to_json().is_empty());
}

#[derive(Debug, Clone)]
enum Op {
    Drain(u32, u32, u8, u8),
    Undrain(u32, u32),
    Online(u32, u32),
    Offline(u32, u32),
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u32..16, 0u32..4, 0u8..3, 0u8..3).prop_map(|(a, n, r, o)| Op::Drain(a, a + n, r, o)),
        (0u32..16, 0u32..4).prop_map(|(a, n)| Op::Undrain(a, a + n)),
        (0u32..16, 0u32..8).prop_map(|(a, n)| Op::Online(a, a + n)),
        (0u32..16, 0u32..8).prop_map(|(a, n)| Op::Offline(a, a + n)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// The grouped drain state agrees with a per-rank model of flux-core's
    /// update_draininfo_rank, and replay of the emitted events matches.
    #[test]
    fn drain_groups_match_per_rank_model(ops in prop::collection::vec(arb_op(), 0..40)) {
        let hosts = hl("n[0-19]");
        let mut s = ResourceState::with_hosts(hosts.clone());
        let mut model: Vec<Option<(f64, Option<String>)>> = vec![None; 20];
        let mut log = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            let ts = i as f64;
            let ev = match op {
                Op::Drain(a, b, r, o) => {
                    let reason = match r { 0 => None, 1 => Some("x".to_string()), _ => Some(format!("r{i}")) };
                    let ow = Overwrite::from_code(i64::from(*o)).unwrap();
                    for rank in *a..=*b {
                        let cur = &mut model[rank as usize];
                        match cur {
                            Some((_, Some(_))) if ow == Overwrite::Keep => {}
                            Some((t, rs)) => {
                                *rs = reason.clone();
                                if ow == Overwrite::ReasonAndTimestamp { *t = ts; }
                            }
                            None => *cur = Some((ts, reason.clone())),
                        }
                    }
                    let set = IdSet::from_range(*a, *b);
                    ResourceEvent::Drain { nodelist: s.nodelist(&set), idset: set, reason, overwrite: ow }
                }
                Op::Undrain(a, b) => {
                    for rank in *a..=*b { model[rank as usize] = None; }
                    let set = IdSet::from_range(*a, *b);
                    ResourceEvent::Undrain { nodelist: s.nodelist(&set), idset: set, reason: None }
                }
                Op::Online(a, b) => ResourceEvent::Online { idset: IdSet::from_range(*a, *b) },
                Op::Offline(a, b) => ResourceEvent::Offline { idset: IdSet::from_range(*a, *b) },
            };
            let e = ev.to_event(ts);
            s.apply(&e).unwrap();
            log.push(e);
        }
        for (rank, m) in model.iter().enumerate() {
            let got = s.drain_info(rank as u32).map(|g| (g.timestamp, g.reason.clone()));
            prop_assert_eq!(&got, m, "rank {}", rank);
        }
        // groups are disjoint and distinct
        let groups = s.drain_groups();
        for (i, g) in groups.iter().enumerate() {
            prop_assert!(!g.ranks.is_empty());
            for h in &groups[i + 1..] {
                prop_assert!(g.ranks.is_disjoint(&h.ranks));
                prop_assert!(!(g.timestamp == h.timestamp && g.reason == h.reason));
            }
        }
        let mut again = ResourceState::with_hosts(hosts);
        replay_into(&mut again, &log).unwrap();
        prop_assert_eq!(again.drained(), s.drained());
        prop_assert_eq!(again.online(), s.online());
    }
}
