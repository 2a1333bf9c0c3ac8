//! RFC 21 job state machine: golden eventlogs, transition tables, actions,
//! and properties of the fold.

use fluxgate_shared::Event;
use fluxgate_shared::job::{
    Action, Job, JobResult, JobState, ReplayError, StateMask, TransitionError, WaitStatus, replay,
};
use proptest::prelude::*;
use serde_json::{Value, json};

fn ev(name: &str, ctx: Value) -> Event {
    Event {
        timestamp: 1000.0,
        name: name.into(),
        context: match ctx {
            Value::Object(m) => Some(m.into()),
            _ => None,
        },
    }
}

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

fn golden(name: &str) -> Vec<Event> {
    let path = format!(
        "{}/tests/data/job/{name}.eventlog.json",
        env!("CARGO_MANIFEST_DIR")
    );
    parse_log(&std::fs::read_to_string(path).unwrap())
}

// ---- states, masks, results -------------------------------------------

#[test]
fn state_names_letters_and_bits_match_flux() {
    let table = [
        (JobState::New, "NEW", 'N', 1),
        (JobState::Depend, "DEPEND", 'D', 2),
        (JobState::Priority, "PRIORITY", 'P', 4),
        (JobState::Sched, "SCHED", 'S', 8),
        (JobState::Run, "RUN", 'R', 16),
        (JobState::Cleanup, "CLEANUP", 'C', 32),
        (JobState::Inactive, "INACTIVE", 'I', 64),
    ];
    for (st, name, letter, bit) in table {
        assert_eq!(st.name(), name);
        assert_eq!(st.to_string(), name);
        assert_eq!(st.letter(), letter);
        assert_eq!(st.bit(), bit);
        assert_eq!(JobState::from_bit(bit), Some(st));
        assert_eq!(name.parse::<JobState>().unwrap(), st);
        assert_eq!(name.to_lowercase().parse::<JobState>().unwrap(), st);
        assert_eq!(letter.to_string().parse::<JobState>().unwrap(), st);
    }
    let err = "RUNNING".parse::<JobState>().unwrap_err();
    assert!(err.to_string().contains("RUNNING"));
}

#[test]
fn virtual_states_are_flux_masks() {
    assert_eq!(StateMask::PENDING.bits(), 2 | 4 | 8);
    assert_eq!(StateMask::RUNNING.bits(), 16 | 32);
    assert_eq!(StateMask::ACTIVE.bits(), 1 | 2 | 4 | 8 | 16 | 32);
    assert_eq!(StateMask::ALL.bits(), 127);
    let pending: Vec<_> = StateMask::PENDING.states().collect();
    assert_eq!(
        pending,
        [JobState::Depend, JobState::Priority, JobState::Sched]
    );
    assert!(JobState::Sched.is_pending() && !JobState::Run.is_pending());
    assert!(JobState::Cleanup.is_running() && !JobState::Sched.is_running());
    assert!(JobState::New.is_active() && !JobState::Inactive.is_active());
    assert_eq!("pending".parse::<StateMask>().unwrap(), StateMask::PENDING);
    assert_eq!("Running".parse::<StateMask>().unwrap(), StateMask::RUNNING);
    assert_eq!("active".parse::<StateMask>().unwrap(), StateMask::ACTIVE);
    assert_eq!(
        "sched".parse::<StateMask>().unwrap(),
        StateMask::from(JobState::Sched)
    );
    assert_eq!(
        StateMask::from(JobState::Run) | JobState::Cleanup,
        StateMask::RUNNING
    );
    assert_eq!(StateMask::from_bits(128), None);
    assert!("bogus".parse::<StateMask>().is_err());
}

#[test]
fn results_have_flux_codes() {
    let table = [
        (JobResult::Completed, "COMPLETED", "CD", 1),
        (JobResult::Failed, "FAILED", "F", 2),
        (JobResult::Canceled, "CANCELED", "CA", 4),
        (JobResult::Timeout, "TIMEOUT", "TO", 8),
    ];
    for (r, name, abbrev, bit) in table {
        assert_eq!(r.name(), name);
        assert_eq!(r.abbrev(), abbrev);
        assert_eq!(r.bit(), bit);
        assert_eq!(abbrev.parse::<JobResult>().unwrap(), r);
        assert_eq!(name.to_lowercase().parse::<JobResult>().unwrap(), r);
    }
}

#[test]
fn wait_status_decodes_exit_and_signal() {
    assert_eq!(WaitStatus(0).exit_code(), Some(0));
    assert_eq!(WaitStatus(256).exit_code(), Some(1));
    assert_eq!(WaitStatus(32512).exit_code(), Some(127));
    assert_eq!(WaitStatus(36608).exit_code(), Some(143));
    assert_eq!(WaitStatus(15).signal(), Some(15));
    assert_eq!(WaitStatus(15).exit_code(), None);
    assert_eq!(WaitStatus(15).returncode(), -15);
    assert_eq!(WaitStatus(36352).returncode(), 142);
}

// ---- golden eventlogs from a real flux-core ------------------------------

#[test]
fn golden_eventlogs_replay_to_inactive_with_flux_result() {
    let table: [(&str, JobResult, Option<i32>, Option<&str>); 8] = [
        ("a-normal", JobResult::Completed, Some(0), None),
        ("b1-false", JobResult::Failed, Some(256), None),
        ("b2-nocmd", JobResult::Failed, Some(32512), Some("exec")),
        (
            "b3-cancel-pending",
            JobResult::Canceled,
            None,
            Some("cancel"),
        ),
        (
            "b4-cancel-running",
            JobResult::Canceled,
            Some(36608),
            Some("cancel"),
        ),
        (
            "b5-timelimit",
            JobResult::Timeout,
            Some(36352),
            Some("timeout"),
        ),
        ("b6-dep-parent", JobResult::Completed, Some(0), None),
        ("b6-dep-child", JobResult::Completed, Some(0), None),
    ];
    for (name, result, status, fatal) in table {
        let events = golden(name);
        let job = replay(&events).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(job.state(), JobState::Inactive, "{name}");
        assert_eq!(job.result(), Some(result), "{name}");
        assert_eq!(job.status_abbrev(), result.abbrev(), "{name}");
        assert_eq!(job.wait_status().map(|w| w.0), status, "{name}");
        assert_eq!(
            job.fatal_exception().map(|e| e.kind.as_str()),
            fatal,
            "{name}"
        );
        assert_eq!(job.userid(), 0, "{name}");
        assert!(!job.has_resources(), "{name}");
        assert_eq!(job.t_submit(), Some(events[0].timestamp), "{name}");
        assert_eq!(
            job.entered(JobState::Inactive),
            Some(events.last().unwrap().timestamp),
            "{name}"
        );
        assert!(job.pending_actions().is_empty(), "{name}");
    }
}

#[test]
fn golden_details() {
    let held_log = golden("b3-cancel-pending");
    let held = replay(&held_log).unwrap();
    assert_eq!(held.urgency(), 0);
    assert_eq!(held.priority(), Some(0));
    assert!(!held.was_allocated());
    assert_eq!(held.entered(JobState::Run), None);
    assert_eq!(held.entered(JobState::Cleanup), Some(held_log[4].timestamp));

    let child_log = golden("b6-dep-child");
    let child = replay(&child_log).unwrap();
    assert!(child.dependencies().is_empty());
    assert_eq!(
        child.entered(JobState::Depend),
        Some(child_log[2].timestamp)
    );
    assert_eq!(
        child.entered(JobState::Priority),
        Some(child_log[4].timestamp)
    );

    let normal = replay(&golden("a-normal")).unwrap();
    assert_eq!(
        normal.annotations().unwrap()["sched"]["resource_summary"],
        "rank[0-1]/core[0-1]"
    );
    assert!(normal.has_started() && normal.is_released());
    let ex = replay(&golden("b2-nocmd")).unwrap();
    let fatal = ex.fatal_exception().unwrap();
    assert_eq!(fatal.severity, 0);
    assert_eq!(fatal.userid, Some(0));
    assert!(fatal.note.contains("nosuchcommand-xyz"));
}

#[test]
fn every_golden_prefix_replays_and_states_follow_the_log() {
    for name in [
        "a-normal",
        "b1-false",
        "b2-nocmd",
        "b3-cancel-pending",
        "b4-cancel-running",
        "b5-timelimit",
        "b6-dep-child",
    ] {
        let events = golden(name);
        let mut job = Job::new();
        let mut seen = Vec::new();
        for e in &events {
            job.apply(e).unwrap();
            if seen.last() != Some(&job.state()) {
                seen.push(job.state());
            }
        }
        assert_eq!(seen.first(), Some(&JobState::New), "{name}");
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{name}: {seen:?}");
    }
}

#[test]
fn bench_eventlog_replays_to_completed() {
    let text = include_str!("data/job/bench-100.eventlog.json");
    let events = parse_log(text);
    assert_eq!(events.len(), 100);
    let job = replay(&events).unwrap();
    assert_eq!(job.result(), Some(JobResult::Completed));
    assert_eq!(job.urgency(), 30);
    assert_eq!(job.priority(), Some(30));
    assert!(job.flags().waitable);
    assert_eq!(job.jobspec_updates()["attributes.system.duration"], 3600.0);
    assert!(job.expiration().is_some());
    assert!(job.memo().contains_key("progress"));
    assert!(!job.memo().contains_key("stale"));
    assert!(job.exceptions().iter().all(|e| e.severity == 3));
}

#[test]
fn replay_errors_name_the_line() {
    assert_eq!(replay(&[]).unwrap_err(), ReplayError::Empty);
    let mut events = golden("a-normal");
    events.insert(4, ev("depend", Value::Null));
    let err = replay(&events).unwrap_err();
    match &err {
        ReplayError::Event { line, source } => {
            assert_eq!(*line, 5);
            assert!(matches!(source, TransitionError::NotAllowed { .. }));
        }
        other => panic!("{other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("line 5") && msg.contains("depend") && msg.contains("SCHED"),
        "{msg}"
    );
}

// ---- transition table ----------------------------------------------------

fn prefix(state: JobState) -> Vec<Event> {
    let steps = [
        ev(
            "submit",
            json!({"urgency":16,"userid":42,"flags":0,"version":1}),
        ),
        ev("validate", Value::Null),
        ev("depend", Value::Null),
        ev("priority", json!({"priority":16})),
        ev("alloc", json!({})),
        // start + finish lead to CLEANUP with resources held
        ev("start", Value::Null),
        ev("finish", json!({"status":0})),
        ev("release", json!({"ranks":"all","final":true})),
        ev("free", Value::Null),
        ev("clean", Value::Null),
    ];
    let n = match state {
        JobState::New => 1,
        JobState::Depend => 2,
        JobState::Priority => 3,
        JobState::Sched => 4,
        JobState::Run => 5,
        JobState::Cleanup => 7,
        JobState::Inactive => 10,
    };
    steps[..n].to_vec()
}

fn job_in(state: JobState) -> Job {
    let job = replay(&prefix(state)).unwrap();
    assert_eq!(job.state(), state);
    job
}

fn probe_events() -> Vec<(&'static str, Event)> {
    vec![
        (
            "submit",
            ev("submit", json!({"urgency":16,"userid":1,"flags":0})),
        ),
        ("validate", ev("validate", Value::Null)),
        ("invalidate", ev("invalidate", Value::Null)),
        ("dep-add", ev("dependency-add", json!({"description":"x"}))),
        (
            "dep-remove",
            ev("dependency-remove", json!({"description":"y"})),
        ),
        ("depend", ev("depend", Value::Null)),
        ("priority", ev("priority", json!({"priority":7}))),
        ("urgency", ev("urgency", json!({"urgency":3,"userid":42}))),
        ("restart", ev("flux-restart", Value::Null)),
        (
            "jobspec",
            ev("jobspec-update", json!({"attributes.system.duration":60})),
        ),
        (
            "res-update",
            ev("resource-update", json!({"expiration":2000})),
        ),
        ("alloc", ev("alloc", json!({}))),
        (
            "prolog-start",
            ev("prolog-start", json!({"description":"p"})),
        ),
        (
            "prolog-finish",
            ev("prolog-finish", json!({"description":"p","status":0})),
        ),
        (
            "epilog-start",
            ev("epilog-start", json!({"description":"e"})),
        ),
        (
            "epilog-finish",
            ev("epilog-finish", json!({"description":"e","status":0})),
        ),
        ("start", ev("start", Value::Null)),
        ("release", ev("release", json!({"ranks":"0","final":false}))),
        (
            "release-final",
            ev("release", json!({"ranks":"all","final":true})),
        ),
        ("finish", ev("finish", json!({"status":0}))),
        ("free", ev("free", Value::Null)),
        ("clean", ev("clean", Value::Null)),
        (
            "exc0",
            ev("exception", json!({"type":"cancel","severity":0,"note":""})),
        ),
        (
            "exc1",
            ev("exception", json!({"type":"warn","severity":1,"note":"n"})),
        ),
        ("memo", ev("memo", json!({"a":1}))),
        ("set-flags", ev("set-flags", json!({"flags":["debug"]}))),
        ("debug", ev("debug.free-request", Value::Null)),
        ("unknown", ev("future-event", json!({"x":1}))),
    ]
}

/// Expected outcome of each probe in each state: a letter for the state
/// after, or `-` for rejection. Columns follow `probe_events()`.
const TABLE: [(JobState, &str); 7] = [
    //                 s v i a r d p u R j U A P F E e t l L f x c 0 1 m g b k
    (
        JobState::New,
        "- D N N - - - N N N - - - - - - - - - - - - - N N N N N",
    ),
    (
        JobState::Depend,
        "- - - D - P - D D D - - - - - - - - - - - - C D D D D D",
    ),
    (
        JobState::Priority,
        "- - - - - - S P P P - - - - - - - - - - - - C P P P P P",
    ),
    (
        JobState::Sched,
        "- - - - - - S P P P - R - - - - - - - - - - C S S S S S",
    ),
    (
        JobState::Run,
        "- - - - - - - - R R R - R R - - R R - C - - C R R R R R",
    ),
    (
        JobState::Cleanup,
        "- - - C C C C C C C C - - - C C - C C - C - C C C C C C",
    ),
    (
        JobState::Inactive,
        "- - - - - - - - - - - - - - - - - - - - - - - - - - - -",
    ),
];

#[test]
fn transition_table_covers_every_event_in_every_state() {
    let probes = probe_events();
    for (state, row) in TABLE {
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells.len(), probes.len(), "row {state}");
        for ((label, event), cell) in probes.iter().zip(cells) {
            let mut job = job_in(state);
            let before = job.clone();
            let got = job.apply(event);
            if cell == "-" {
                let err = got.expect_err(&format!("{label} in {state} should be rejected"));
                assert_eq!(
                    job, before,
                    "{label} in {state}: rejected event changed the job"
                );
                let msg = err.to_string();
                assert!(msg.contains(event.name.as_str()), "{msg}");
                match err {
                    TransitionError::NotAllowed { state: s, .. } => {
                        assert_eq!(s, state);
                        assert!(msg.contains(state.name()), "{msg}");
                    }
                    other => panic!("{label} in {state}: {other:?}"),
                }
            } else {
                got.unwrap_or_else(|e| panic!("{label} in {state}: {e}"));
                let want: JobState = cell.parse().unwrap();
                assert_eq!(job.state(), want, "{label} in {state}");
            }
        }
    }
}

#[test]
fn bad_contexts_name_the_key() {
    let cases = [
        (JobState::New, "urgency", json!({"urgency":32}), "urgency"),
        (JobState::Sched, "priority", json!({}), "priority"),
        (
            JobState::Sched,
            "priority",
            json!({"priority":"x"}),
            "priority",
        ),
        (
            JobState::Depend,
            "exception",
            json!({"type":"x","severity":9}),
            "severity",
        ),
        (JobState::Depend, "exception", json!({"severity":0}), "type"),
        (JobState::Run, "finish", json!({"status":"0"}), "status"),
        (JobState::Run, "release", json!({"ranks":"all"}), "final"),
        (JobState::Depend, "dependency-add", json!({}), "description"),
        (
            JobState::Depend,
            "set-flags",
            json!({"flags":["waitable"]}),
            "flags",
        ),
        (
            JobState::Depend,
            "set-flags",
            json!({"flags":"debug"}),
            "flags",
        ),
        (JobState::Depend, "memo", Value::Null, "context"),
        (JobState::Depend, "jobspec-update", json!({}), "context"),
        (
            JobState::Run,
            "resource-update",
            json!({"expiration":-1}),
            "expiration",
        ),
    ];
    for (state, name, ctx, key) in cases {
        let mut job = job_in(state);
        let err = job.apply(&ev(name, ctx)).unwrap_err();
        match &err {
            TransitionError::BadContext { event, key: k, .. } => {
                assert_eq!(event, name);
                assert_eq!(k, key);
            }
            other => panic!("{name}: {other:?}"),
        }
        assert!(err.to_string().contains(key));
    }
    let mut fresh = Job::new();
    let err = fresh
        .apply(&ev("submit", json!({"urgency":16,"userid":1})))
        .unwrap_err();
    assert!(err.to_string().contains("flags"));
    let err = fresh.apply(&ev("validate", Value::Null)).unwrap_err();
    assert!(err.to_string().contains("first event must be submit"));
}

// ---- individual event semantics -------------------------------------------

#[test]
fn submit_records_identity_and_flags() {
    let mut job = Job::new();
    job.apply(&ev(
        "submit",
        json!({"urgency":5,"userid":5588,"flags":2|4|8,"version":1}),
    ))
    .unwrap();
    assert_eq!(job.urgency(), 5);
    assert_eq!(job.userid(), 5588);
    assert_eq!(job.version(), Some(1));
    let f = job.flags();
    assert!(f.debug && f.waitable && f.novalidate && !f.alloc_bypass);
    assert_eq!(f.submit_mask(), 14);
    job.apply(&ev(
        "set-flags",
        json!({"flags":["alloc-bypass","immutable"]}),
    ))
    .unwrap();
    assert!(job.flags().alloc_bypass && job.flags().immutable);
}

#[test]
fn dependencies_are_added_once_and_must_be_removed() {
    let mut job = job_in(JobState::New);
    job.apply(&ev("dependency-add", json!({"description":"a"})))
        .unwrap();
    job.apply(&ev("validate", Value::Null)).unwrap();
    job.apply(&ev("dependency-add", json!({"description":"b"})))
        .unwrap();
    assert_eq!(job.dependencies().len(), 2);
    let err = job.apply(&ev("depend", Value::Null)).unwrap_err();
    assert!(
        err.to_string().contains("2 dependencies outstanding"),
        "{err}"
    );
    assert!(job.pending_actions().is_empty());
    job.apply(&ev("dependency-remove", json!({"description":"a"})))
        .unwrap();
    // a description can be used once only (flux-core's grudge set)
    assert!(
        job.apply(&ev("dependency-add", json!({"description":"a"})))
            .is_err()
    );
    job.apply(&ev("dependency-remove", json!({"description":"b"})))
        .unwrap();
    assert_eq!(job.pending_actions(), [Action::PostDepend]);
    job.apply(&ev("depend", Value::Null)).unwrap();
    assert_eq!(job.state(), JobState::Priority);
}

#[test]
fn urgency_jobspec_update_and_restart_send_sched_back_to_priority() {
    for (name, ctx) in [
        ("urgency", json!({"urgency":0,"userid":42})),
        ("jobspec-update", json!({"attributes.system.duration":10})),
        ("flux-restart", Value::Null),
    ] {
        let mut job = job_in(JobState::Sched);
        job.apply(&ev(name, ctx)).unwrap();
        assert_eq!(job.state(), JobState::Priority, "{name}");
        job.apply(&ev("priority", json!({"priority":3}))).unwrap();
        assert_eq!(job.state(), JobState::Sched);
        assert_eq!(job.priority(), Some(3));
    }
}

#[test]
fn memo_merges_and_null_deletes() {
    let mut job = job_in(JobState::Depend);
    job.apply(&ev("memo", json!({"a":1,"o":{"x":1,"y":2}})))
        .unwrap();
    job.apply(&ev("memo", json!({"b":"s","o":{"y":null,"z":3}})))
        .unwrap();
    job.apply(&ev("memo", json!({"a":null}))).unwrap();
    assert_eq!(
        Value::Object(job.memo().clone()),
        json!({"o":{"x":1,"z":3},"b":"s"})
    );
}

#[test]
fn jobspec_updates_are_kept_by_path_and_apply_to_a_jobspec() {
    let mut job = job_in(JobState::Depend);
    job.apply(&ev(
        "jobspec-update",
        json!({"attributes.system.duration":60,"attributes.system.queue":"debug"}),
    ))
    .unwrap();
    job.apply(&ev(
        "jobspec-update",
        json!({"attributes.system.duration":120}),
    ))
    .unwrap();
    assert_eq!(job.jobspec_updates().len(), 2);
    assert_eq!(job.jobspec_updates()["attributes.system.duration"], 120);
    let mut spec = json!({"version":1,"attributes":{"system":{"duration":0}}});
    job.apply_jobspec_updates(&mut spec);
    assert_eq!(
        spec,
        json!({"version":1,"attributes":{"system":{"duration":120,"queue":"debug"}}})
    );
}

#[test]
fn resource_update_sets_expiration() {
    let mut job = job_in(JobState::Run);
    job.apply(&ev("resource-update", json!({"expiration":1692206240})))
        .unwrap();
    assert_eq!(job.expiration(), Some(1692206240.0));
}

#[test]
fn exceptions_keep_history_first_fatal_and_worst() {
    let mut job = job_in(JobState::Run);
    job.apply(&ev(
        "exception",
        json!({"type":"warn","severity":5,"note":"a"}),
    ))
    .unwrap();
    assert_eq!(job.state(), JobState::Run);
    job.apply(&ev(
        "exception",
        json!({"type":"timeout","severity":0,"note":"t"}),
    ))
    .unwrap();
    job.apply(&ev(
        "exception",
        json!({"type":"cancel","severity":0,"note":"c","userid":7}),
    ))
    .unwrap();
    assert_eq!(job.state(), JobState::Cleanup);
    assert_eq!(job.exceptions().len(), 3);
    assert_eq!(job.fatal_exception().unwrap().kind, "timeout");
    assert_eq!(job.worst_exception().unwrap().kind, "timeout");
    for e in [
        ev("finish", json!({"status":36352})),
        ev("release", json!({"ranks":"all","final":true})),
        ev("free", Value::Null),
        ev("clean", Value::Null),
    ] {
        job.apply(&e).unwrap();
    }
    assert_eq!(job.result(), Some(JobResult::Timeout));
}

#[test]
fn finish_zero_after_fatal_exception_is_not_completed() {
    let mut job = job_in(JobState::Run);
    job.apply(&ev(
        "exception",
        json!({"type":"exec","severity":0,"note":""}),
    ))
    .unwrap();
    for e in [
        ev("finish", json!({"status":0})),
        ev("release", json!({"ranks":"all","final":true})),
        ev("free", Value::Null),
        ev("clean", Value::Null),
    ] {
        job.apply(&e).unwrap();
    }
    assert_eq!(job.result(), Some(JobResult::Failed));
    assert_eq!(job.status_abbrev(), "F");
}

#[test]
fn status_abbrev_is_state_letter_while_active() {
    for st in JobState::ALL {
        let job = job_in(st);
        if st == JobState::Inactive {
            assert_eq!(job.status_abbrev(), "CD");
        } else {
            assert_eq!(job.status_abbrev(), st.letter().to_string());
            assert_eq!(job.result(), None);
        }
    }
}

#[test]
fn invalidated_job_accepts_nothing_more() {
    let mut job = job_in(JobState::New);
    job.apply(&ev("invalidate", Value::Null)).unwrap();
    assert!(job.is_invalidated());
    let err = job.apply(&ev("memo", json!({"a":1}))).unwrap_err();
    assert!(err.to_string().contains("invalidated"));
}

#[test]
fn late_events_after_a_fatal_exception_are_tolerated() {
    // An exception raced the alloc response and the start response.
    let mut job = job_in(JobState::Sched);
    job.apply(&ev(
        "exception",
        json!({"type":"cancel","severity":0,"note":""}),
    ))
    .unwrap();
    job.apply(&ev("alloc", json!({}))).unwrap();
    assert_eq!(job.state(), JobState::Cleanup);
    assert!(job.has_resources());
    assert_eq!(job.pending_actions(), [Action::FreeResources]);
    job.apply(&ev("free", Value::Null)).unwrap();
    job.apply(&ev("clean", Value::Null)).unwrap();
    assert_eq!(job.result(), Some(JobResult::Canceled));
}

#[test]
fn perilogs_hold_start_and_clean() {
    let mut job = job_in(JobState::Run);
    job.apply(&ev("prolog-start", json!({"description":"p"})))
        .unwrap();
    assert!(
        job.pending_actions().is_empty(),
        "start waits for the prolog"
    );
    job.apply(&ev("prolog-finish", json!({"description":"p","status":0})))
        .unwrap();
    assert_eq!(
        job.pending_actions(),
        [Action::StartExec { reattach: false }]
    );
    for e in [
        ev("start", Value::Null),
        ev("finish", json!({"status":0})),
        ev("release", json!({"ranks":"all","final":true})),
        ev("epilog-start", json!({"description":"e"})),
    ] {
        job.apply(&e).unwrap();
    }
    assert!(
        job.pending_actions().is_empty(),
        "free waits for the epilog"
    );
    job.apply(&ev("epilog-finish", json!({"description":"e","status":0})))
        .unwrap();
    assert_eq!(job.pending_actions(), [Action::FreeResources]);
    job.apply(&ev("free", Value::Null)).unwrap();
    job.apply(&ev("epilog-start", json!({"description":"e2"})))
        .unwrap();
    let err = job.apply(&ev("clean", Value::Null)).unwrap_err();
    assert!(err.to_string().contains("prolog/epilog"));
}

// ---- actions ---------------------------------------------------------------

/// Drive a job to INACTIVE taking only the owed actions, with a fake
/// scheduler and exec that answer at once.
fn drive(job: &mut Job, exit_status: i32) -> Vec<Action> {
    let mut taken = Vec::new();
    for _ in 0..50 {
        let owed = job.pending_actions();
        if owed.is_empty() {
            break;
        }
        for a in owed {
            taken.push(a);
            job.mark(a);
            let answers: Vec<Event> = match a {
                Action::PostDepend => vec![ev("depend", Value::Null)],
                Action::RequestPriority => {
                    vec![ev("priority", json!({"priority": job.urgency()}))]
                }
                Action::RequestAlloc => vec![ev("alloc", json!({}))],
                Action::CancelAlloc => vec![],
                Action::StartExec { reattach } => {
                    let mut v = Vec::new();
                    if !reattach {
                        v.push(ev("start", Value::Null));
                    }
                    v.push(ev("finish", json!({"status": exit_status})));
                    v.push(ev("release", json!({"ranks":"all","final":true})));
                    v
                }
                Action::FreeResources => vec![ev("free", Value::Null)],
                Action::PostClean => vec![ev("clean", Value::Null)],
            };
            for e in answers {
                job.apply(&e).unwrap();
            }
        }
    }
    taken
}

#[test]
fn owed_actions_drive_a_job_to_inactive() {
    let mut job = job_in(JobState::Depend);
    let taken = drive(&mut job, 256);
    assert_eq!(
        taken,
        [
            Action::PostDepend,
            Action::RequestPriority,
            Action::RequestAlloc,
            Action::StartExec { reattach: false },
            Action::FreeResources,
            Action::PostClean,
        ]
    );
    assert_eq!(job.result(), Some(JobResult::Failed));
}

#[test]
fn actions_are_idempotent_until_answered() {
    let mut job = job_in(JobState::Sched);
    assert_eq!(job.pending_actions(), [Action::RequestAlloc]);
    job.mark(Action::RequestAlloc);
    assert!(job.pending_actions().is_empty());
    assert!(job.pending_actions().is_empty());
    // urgency change: back to PRIORITY, the alloc request must be withdrawn
    job.apply(&ev("urgency", json!({"urgency":20,"userid":42})))
        .unwrap();
    assert_eq!(
        job.pending_actions(),
        [Action::CancelAlloc, Action::RequestPriority]
    );
    job.mark(Action::CancelAlloc);
    job.mark(Action::RequestPriority);
    assert!(job.pending_actions().is_empty());
}

#[test]
fn held_job_is_not_sent_to_the_scheduler() {
    let job = replay(&golden("b3-cancel-pending")[..4]).unwrap();
    assert_eq!(job.state(), JobState::Sched);
    assert!(job.pending_actions().is_empty());
}

#[test]
fn restart_replays_then_asks_again() {
    // Running job: replay, flux-restart, start again with reattach.
    let events = golden("b4-cancel-running");
    let mut job = replay(&events[..6]).unwrap();
    assert_eq!(job.state(), JobState::Run);
    job.apply(&ev("flux-restart", Value::Null)).unwrap();
    assert_eq!(
        job.pending_actions(),
        [Action::StartExec { reattach: true }]
    );

    // Scheduled job: flux-restart sends it back to PRIORITY.
    let mut job = replay(&golden("a-normal")[..4]).unwrap();
    job.apply(&ev("flux-restart", Value::Null)).unwrap();
    assert_eq!(job.state(), JobState::Priority);
    assert_eq!(job.pending_actions(), [Action::RequestPriority]);
    let taken = drive(&mut job, 0);
    assert_eq!(taken.first(), Some(&Action::RequestPriority));
    assert_eq!(job.result(), Some(JobResult::Completed));
}

#[test]
fn cleanup_after_cancel_in_run_frees_then_cleans() {
    let mut job = job_in(JobState::Run);
    job.mark(Action::StartExec { reattach: false });
    job.apply(&ev("start", Value::Null)).unwrap();
    job.apply(&ev(
        "exception",
        json!({"type":"cancel","severity":0,"note":""}),
    ))
    .unwrap();
    assert!(job.pending_actions().is_empty(), "shells still running");
    job.apply(&ev("finish", json!({"status":36608}))).unwrap();
    job.apply(&ev("release", json!({"ranks":"all","final":true})))
        .unwrap();
    assert_eq!(job.pending_actions(), [Action::FreeResources]);
    job.mark(Action::FreeResources);
    assert!(job.pending_actions().is_empty());
    job.apply(&ev("free", Value::Null)).unwrap();
    assert_eq!(job.pending_actions(), [Action::PostClean]);
}

// ---- properties ---------------------------------------------------------

/// Candidate next events for a random walk; the walk keeps those that apply.
fn candidates(job: &Job) -> Vec<Event> {
    let dep = format!("d{}", job.dependencies().len());
    let mut v = vec![
        ev("validate", Value::Null),
        ev("dependency-add", json!({"description": dep})),
        ev("depend", Value::Null),
        ev("priority", json!({"priority": 16})),
        ev("urgency", json!({"urgency": 9, "userid": 1})),
        ev("flux-restart", Value::Null),
        ev("jobspec-update", json!({"attributes.system.duration": 5})),
        ev("resource-update", json!({"expiration": 99})),
        ev("alloc", json!({})),
        ev("prolog-start", json!({"description":"p"})),
        ev("prolog-finish", json!({"description":"p","status":0})),
        ev("epilog-start", json!({"description":"e"})),
        ev("epilog-finish", json!({"description":"e","status":1})),
        ev("start", Value::Null),
        ev("release", json!({"ranks":"0","final":false})),
        ev("release", json!({"ranks":"all","final":true})),
        ev("finish", json!({"status": 0})),
        ev("finish", json!({"status": 256})),
        ev("free", Value::Null),
        ev("clean", Value::Null),
        ev("exception", json!({"type":"cancel","severity":0,"note":""})),
        ev(
            "exception",
            json!({"type":"timeout","severity":0,"note":""}),
        ),
        ev("exception", json!({"type":"x","severity":2,"note":""})),
        ev("memo", json!({"k": 1})),
        ev("set-flags", json!({"flags":["debug"]})),
        ev("debug.x", Value::Null),
    ];
    if let Some(d) = job.dependencies().iter().next() {
        v.push(ev("dependency-remove", json!({"description": d})));
    }
    v
}

fn walk(choices: &[u16]) -> Vec<Event> {
    let mut job = Job::new();
    let submit = ev(
        "submit",
        json!({"urgency":16,"userid":1,"flags":0,"version":1}),
    );
    job.apply(&submit).unwrap();
    let mut log = vec![submit];
    for (i, c) in choices.iter().enumerate() {
        let legal: Vec<Event> = candidates(&job)
            .into_iter()
            .filter(|e| job.clone().apply(e).is_ok())
            .collect();
        if legal.is_empty() {
            break;
        }
        let mut e = legal[*c as usize % legal.len()].clone();
        e.timestamp = 1000.0 + i as f64;
        job.apply(&e).unwrap();
        log.push(e);
    }
    log
}

fn arb_event() -> impl Strategy<Value = Event> {
    let names = prop::sample::select(vec![
        "submit",
        "validate",
        "invalidate",
        "dependency-add",
        "dependency-remove",
        "depend",
        "priority",
        "urgency",
        "flux-restart",
        "jobspec-update",
        "resource-update",
        "alloc",
        "prolog-start",
        "prolog-finish",
        "epilog-start",
        "epilog-finish",
        "start",
        "release",
        "finish",
        "free",
        "clean",
        "exception",
        "memo",
        "set-flags",
        "debug.y",
        "zzz",
    ]);
    let value = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-3i64..40).prop_map(Value::from),
        Just(json!("all")),
        Just(json!("d0")),
        Just(json!(["debug"])),
        Just(json!({"a": null})),
    ];
    let keys = prop::sample::select(vec![
        "urgency",
        "userid",
        "flags",
        "priority",
        "description",
        "status",
        "ranks",
        "final",
        "type",
        "severity",
        "note",
        "expiration",
        "version",
    ]);
    (
        names,
        prop::option::of(prop::collection::btree_map(keys, value, 0..6)),
    )
        .prop_map(|(name, ctx)| Event {
            timestamp: 5.0,
            name: name.into(),
            context: ctx.map(|m| m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()),
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn replay_equals_stepwise_apply(choices in prop::collection::vec(any::<u16>(), 0..60)) {
        let log = walk(&choices);
        let mut job = Job::new();
        let mut states = Vec::new();
        for e in &log {
            job.apply(e).unwrap();
            states.push(job.state());
        }
        let replayed = replay(&log).unwrap();
        prop_assert_eq!(&replayed, &job);
        // every prefix replays too, and states never go past INACTIVE
        for n in 1..=log.len() {
            prop_assert_eq!(replay(&log[..n]).unwrap().state(), states[n - 1]);
        }
        // nothing is accepted once inactive
        if job.state() == JobState::Inactive {
            prop_assert!(job.result().is_some());
            prop_assert!(job.pending_actions().is_empty());
        }
    }

    #[test]
    fn random_events_apply_or_name_themselves(
        prefix_choices in prop::collection::vec(any::<u16>(), 0..20),
        events in prop::collection::vec(arb_event(), 0..30),
    ) {
        let mut job = replay(&walk(&prefix_choices)).unwrap();
        for e in &events {
            let before = job.clone();
            match job.apply(e) {
                Ok(()) => {}
                Err(err) => {
                    prop_assert_eq!(&job, &before);
                    let msg = err.to_string();
                    prop_assert!(msg.contains(e.name.as_str()), "{}", msg);
                }
            }
        }
    }

    #[test]
    fn owed_actions_always_finish_a_walked_job(choices in prop::collection::vec(any::<u16>(), 0..30)) {
        let mut job = replay(&walk(&choices)).unwrap();
        if job.state() == JobState::New {
            job.apply(&ev("validate", Value::Null)).unwrap();
        }
        // drop outstanding dependencies as the dependency plugin would
        let deps: Vec<String> = if job.state() == JobState::Depend {
            job.dependencies().iter().cloned().collect()
        } else {
            Vec::new()
        };
        for d in deps {
            job.apply(&ev("dependency-remove", json!({"description": d}))).unwrap();
        }
        // release a hold so the scheduler sees the job
        if job.state().is_pending() && job.urgency() == 0 {
            job.apply(&ev("urgency", json!({"urgency": 16, "userid": 1}))).unwrap();
        }
        // finish any running perilog
        while job.perilog_active() > 0 {
            let name = if job.state() == JobState::Cleanup { "epilog-finish" } else { "prolog-finish" };
            job.apply(&ev(name, json!({"description":"p","status":0}))).unwrap();
        }
        if job.state() == JobState::Cleanup && job.has_started() && !job.is_released() {
            if job.wait_status().is_none() {
                job.apply(&ev("finish", json!({"status": 0}))).unwrap();
            }
            job.apply(&ev("release", json!({"ranks":"all","final":true}))).unwrap();
        }
        if job.state() == JobState::Run && job.has_started() {
            job.apply(&ev("finish", json!({"status": 0}))).unwrap();
            job.apply(&ev("release", json!({"ranks":"all","final":true}))).unwrap();
        }
        drive(&mut job, 0);
        prop_assert_eq!(job.state(), JobState::Inactive);
    }
}
