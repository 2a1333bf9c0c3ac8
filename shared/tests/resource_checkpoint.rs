//! A checkpoint of the resource eventlog replays to the same drained targets,
//! reasons, times, expiration and method as the log it replaces, and keeps
//! following hostnames when ranks move.

use fluxgate_shared::resource::{
    Overwrite, ResourceEvent, ResourceState, checkpoint, last_definition_times, replay_into,
};
use fluxgate_shared::{Event, Hostlist, IdSet};
use proptest::prelude::*;

fn hosts(n: u32) -> Hostlist {
    Hostlist::parse(&format!("node[0-{}]", n - 1)).unwrap()
}

/// Per rank: (timestamp, reason) when drained.
fn drained_view(state: &ResourceState, n: u32) -> Vec<Option<(f64, Option<String>)>> {
    (0..n)
        .map(|r| state.drain_info(r).map(|g| (g.timestamp, g.reason.clone())))
        .collect()
}

fn replayed(hostmap: &Hostlist, events: &[Event]) -> ResourceState {
    let mut s = ResourceState::with_hosts(hostmap.clone());
    replay_into(&mut s, events).unwrap();
    s
}

fn compact(hostmap: &Hostlist, events: &[Event]) -> Vec<Event> {
    let state = replayed(hostmap, events);
    let (define, update) = last_definition_times(events);
    checkpoint(&state, define, update)
}

#[test]
fn drain_groups_survive_with_their_times_and_reasons() {
    let h = hosts(8);
    let state = ResourceState::with_hosts(h.clone());
    let mut log = Vec::new();
    let mut t = 100.0;
    let mut post = |e: ResourceEvent| {
        t += 1.0;
        log.push(e.to_event(t));
    };
    post(ResourceEvent::Restart {
        ranks: IdSet::parse("0-7").unwrap(),
        online: IdSet::new(),
        nodelist: h.clone(),
    });
    post(ResourceEvent::ResourceDefine {
        method: "configuration".into(),
    });
    for _ in 0..50 {
        post(
            state
                .plan_drain("1-3", Some("bad disk"), Default::default(), &IdSet::new())
                .unwrap(),
        );
        post(ResourceEvent::Undrain {
            idset: IdSet::parse("1-3").unwrap(),
            nodelist: Hostlist::parse("node[1-3]").unwrap(),
            reason: None,
        });
    }
    post(ResourceEvent::Drain {
        idset: IdSet::parse("2,5").unwrap(),
        nodelist: Hostlist::parse("node[2,5]").unwrap(),
        reason: Some("fan".into()),
        overwrite: Overwrite::Keep,
    });
    post(ResourceEvent::Drain {
        idset: IdSet::parse("6").unwrap(),
        nodelist: Hostlist::parse("node6").unwrap(),
        reason: None,
        overwrite: Overwrite::Keep,
    });
    post(ResourceEvent::ResourceUpdate { expiration: 5000.0 });

    let cp = compact(&h, &log);
    let names: Vec<&str> = cp.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        ["resource-define", "drain", "drain", "resource-update"]
    );
    let a = replayed(&h, &log);
    let b = replayed(&h, &cp);
    assert_eq!(drained_view(&a, 8), drained_view(&b, 8));
    assert_eq!(b.expiration(), Some(5000.0));
    assert!(cp.len() < log.len() / 10);
}

#[test]
fn define_and_update_keep_their_times() {
    let h = hosts(2);
    let log = vec![
        ResourceEvent::ResourceDefine {
            method: "configuration".into(),
        }
        .to_event(10.0),
        ResourceEvent::ResourceDefine {
            method: "dynamic-discovery".into(),
        }
        .to_event(20.0),
        ResourceEvent::Drain {
            idset: IdSet::parse("1").unwrap(),
            nodelist: Hostlist::parse("node1").unwrap(),
            reason: Some("x".into()),
            overwrite: Overwrite::Keep,
        }
        .to_event(15.0),
    ];
    let cp = compact(&h, &log);
    let got: Vec<(f64, &str)> = cp.iter().map(|e| (e.timestamp, e.name.as_str())).collect();
    assert_eq!(got, [(15.0, "drain"), (20.0, "resource-define")]);
    assert_eq!(
        replayed(&h, &cp).method(),
        Some("dynamic-discovery"),
        "the last definition wins"
    );
}

#[test]
fn checkpoint_follows_hostnames_after_ranks_move() {
    // node2 was drained as rank 2; a checkpoint is taken, then the instance
    // restarts with node2 as rank 0.
    let before = Hostlist::parse("node[0-3]").unwrap();
    let log = vec![
        ResourceEvent::Drain {
            idset: IdSet::parse("2").unwrap(),
            nodelist: Hostlist::parse("node2").unwrap(),
            reason: Some("psu".into()),
            overwrite: Overwrite::Keep,
        }
        .to_event(7.0),
    ];
    let cp = compact(&before, &log);
    let after = Hostlist::parse("node2,node0,node1,node3").unwrap();
    let state = replayed(&after, &cp);
    assert_eq!(state.drained().to_string(), "0");
    assert_eq!(state.drain_info(0).unwrap().reason.as_deref(), Some("psu"));
}

#[test]
fn nothing_drained_checkpoints_to_nothing() {
    let h = hosts(4);
    let log = vec![
        ResourceEvent::Restart {
            ranks: IdSet::parse("0-3").unwrap(),
            online: IdSet::new(),
            nodelist: h.clone(),
        }
        .to_event(1.0),
    ];
    assert!(compact(&h, &log).is_empty());
}

fn drain_op(n: u32) -> impl Strategy<Value = (bool, u32, u32, Option<String>, u8)> {
    (
        any::<bool>(),
        0..n,
        0..n,
        proptest::option::of("[a-z ]{0,6}"),
        0u8..3,
    )
}

proptest! {
    #[test]
    fn checkpoint_replays_to_the_same_drains(ops in proptest::collection::vec(drain_op(12), 0..40)) {
        let h = hosts(12);
        let mut log = Vec::new();
        for (i, (drain, a, b, reason, ow)) in ops.into_iter().enumerate() {
            let (lo, hi) = (a.min(b), a.max(b));
            let idset = IdSet::from_range(lo, hi);
            let nodelist = Hostlist::parse(&format!("node[{lo}-{hi}]")).unwrap();
            let e = if drain {
                ResourceEvent::Drain {
                    idset,
                    nodelist,
                    reason,
                    overwrite: Overwrite::from_code(i64::from(ow)).unwrap(),
                }
            } else {
                ResourceEvent::Undrain { idset, nodelist, reason: None }
            };
            // Coarse times so that groups with equal times occur.
            log.push(e.to_event(1000.0 + (i / 3) as f64));
        }
        let a = replayed(&h, &log);
        let cp = compact(&h, &log);
        let b = replayed(&h, &cp);
        prop_assert_eq!(drained_view(&a, 12), drained_view(&b, 12));
        prop_assert!(cp.len() <= 12);
        // A checkpoint of a checkpoint is itself.
        prop_assert_eq!(compact(&h, &cp), cp);
    }
}
