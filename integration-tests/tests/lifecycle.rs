//! Whole job lifecycles against the real binaries: the event order of each
//! scenario matches what Flux itself writes (see the flux-golden reference
//! logs), with the same context keys.

use fluxgate_integration_tests::{Instance, cmd, keys, names, output_data};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::Event;

/// Exec eventlog names without the optional `shell.*` ones (RFC 50 lets the
/// shell add them; fluxgate adds none).
fn exec_names(events: &[Event]) -> Vec<&str> {
    names(events)
        .into_iter()
        .filter(|n| !n.starts_with("shell."))
        .collect()
}

fn context_i64(events: &[Event], name: &str, key: &str) -> i64 {
    events
        .iter()
        .find(|e| e.name == name)
        .and_then(|e| e.context.as_ref())
        .and_then(|c| c.get(key))
        .and_then(serde_json::Value::as_i64)
        .unwrap_or_else(|| panic!("{name}.{key} missing in {:?}", names(events)))
}

const NORMAL: [&str; 10] = [
    "submit", "validate", "depend", "priority", "alloc", "start", "finish", "release", "free",
    "clean",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_job_walks_every_state() {
    let inst = Instance::start(1, 2).await;
    let id = inst.submit(&cmd(&["hostname"]), None).await;
    let ev = inst.wait_clean(id).await;
    assert_eq!(names(&ev), NORMAL);
    assert_eq!(
        keys(&ev, "submit"),
        ["flags", "urgency", "userid", "version"]
    );
    assert_eq!(keys(&ev, "priority"), ["priority"]);
    assert_eq!(keys(&ev, "alloc"), ["annotations"]);
    assert_eq!(keys(&ev, "finish"), ["status"]);
    assert_eq!(keys(&ev, "release"), ["final", "ranks"]);
    assert_eq!(context_i64(&ev, "finish", "status"), 0);
    assert_eq!(context_i64(&ev, "priority", "priority"), 16);

    let exec = inst.log(id, "exec.eventlog").await;
    assert_eq!(
        exec_names(&exec),
        ["init", "starting", "shell-exit", "complete", "done"]
    );
    assert_eq!(keys(&exec, "complete"), ["status"]);
    let out = inst.log(id, "output").await;
    assert_eq!(out[0].name, "header");
    assert_eq!(
        keys(&out, "header"),
        ["count", "encoding", "options", "version"]
    );
    let data: Vec<&Event> = out
        .iter()
        .filter(|e| e.context.as_ref().is_some_and(|c| c.contains_key("data")))
        .collect();
    assert_eq!(data.len(), 1, "{out:?}");
    assert_eq!(
        data[0].context.as_ref().unwrap()["data"],
        "node0\n".replace("node0", &hostname())
    );
}

fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_node_job_runs_a_task_per_node() {
    let inst = Instance::start(4, 1).await;
    let id = inst
        .submit(
            &cmd(&[
                "sh",
                "-c",
                "echo rank=$FLUX_TASK_RANK size=$FLUX_JOB_SIZE nnodes=$FLUX_JOB_NNODES",
            ])
            .nodes(4),
            None,
        )
        .await;
    let ev = inst.wait_clean(id).await;
    assert_eq!(names(&ev), NORMAL);
    let exec = inst.log(id, "exec.eventlog").await;
    assert_eq!(
        exec_names(&exec),
        ["init", "starting", "shell-exit", "complete", "done"]
    );
    let out = inst.log(id, "output").await;
    let mut lines = output_data(&out);
    lines.sort();
    assert_eq!(
        lines,
        (0..4)
            .map(|r| format!("rank={r} size=4 nnodes=4\n"))
            .collect::<Vec<_>>()
    );
    let r = inst.r(id).await;
    assert_eq!(r.nnodes(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nonzero_exit_is_a_failed_job() {
    let inst = Instance::start(1, 1).await;
    let id = inst.submit(&cmd(&["false"]), None).await;
    let ev = inst.wait_clean(id).await;
    assert_eq!(names(&ev), NORMAL);
    assert_eq!(context_i64(&ev, "finish", "status"), 256);
    let list = inst
        .jobs()
        .await
        .list(pb::ListRequest {
            states: 64,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.jobs[0].result, "FAILED");
    assert_eq!(list.jobs[0].waitstatus, Some(256));
    assert_eq!(list.jobs[0].nnodes, 1);
    assert_eq!(list.jobs[0].urgency, 16);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_command_is_an_exec_exception() {
    let inst = Instance::start(1, 1).await;
    let id = inst.submit(&cmd(&["nosuchcommand-xyz"]), None).await;
    let ev = inst.wait_clean(id).await;
    assert_eq!(
        names(&ev),
        [
            "submit",
            "validate",
            "depend",
            "priority",
            "alloc",
            "start",
            "exception",
            "finish",
            "release",
            "free",
            "clean"
        ]
    );
    assert_eq!(
        keys(&ev, "exception"),
        ["note", "severity", "type", "userid"]
    );
    let exc = ev.iter().find(|e| e.name == "exception").unwrap();
    let ctx = exc.context.as_ref().unwrap();
    assert_eq!(ctx["type"], "exec");
    assert_eq!(ctx["severity"], 0);
    assert!(
        ctx["note"]
            .as_str()
            .unwrap()
            .ends_with("start failed: nosuchcommand-xyz: No such file or directory"),
        "{ctx:?}"
    );
    assert_eq!(context_i64(&ev, "finish", "status"), 32512);
    let out = inst.log(id, "output").await;
    assert!(out.iter().any(|e| e.name == "log"), "{:?}", names(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_while_pending_and_while_running() {
    let inst = Instance::start(1, 1).await;
    // Held (urgency 0): canceled from SCHED, no exec eventlog.
    let held = inst.submit(&cmd(&["sleep", "10"]), Some(0)).await;
    let running = inst.submit(&cmd(&["sleep", "100"]), None).await;
    // Running means started: cancelled while its tasks are still being
    // launched, the exception would rightly come before `start`.
    inst.events_until(running, "eventlog", "start").await;
    let mut jobs = inst.jobs().await;
    for id in [held, running] {
        jobs.cancel(pb::CancelRequest {
            id: id.into(),
            note: String::new(),
        })
        .await
        .unwrap();
    }
    let ev = inst.wait_clean(held).await;
    assert_eq!(
        names(&ev),
        [
            "submit",
            "validate",
            "depend",
            "priority",
            "exception",
            "clean"
        ]
    );
    assert_eq!(context_i64(&ev, "priority", "priority"), 0);
    let info = jobs
        .info(pb::InfoRequest {
            id: held.into(),
            keys: vec!["exec.eventlog".into()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(info.code(), tonic::Code::FailedPrecondition, "{info}");

    let ev = inst.wait_clean(running).await;
    assert_eq!(
        names(&ev),
        [
            "submit",
            "validate",
            "depend",
            "priority",
            "alloc",
            "start",
            "exception",
            "finish",
            "release",
            "free",
            "clean"
        ]
    );
    assert_eq!(context_i64(&ev, "finish", "status"), 36608);
    let exc = ev.iter().find(|e| e.name == "exception").unwrap();
    assert_eq!(exc.context.as_ref().unwrap()["type"], "cancel");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_limit_ends_the_job_with_a_timeout() {
    let inst = Instance::start(1, 1).await;
    let id = inst
        .submit(&cmd(&["sleep", "30"]).duration_secs(1.0), None)
        .await;
    let ev = inst.wait_clean(id).await;
    assert_eq!(
        names(&ev),
        [
            "submit",
            "validate",
            "depend",
            "priority",
            "alloc",
            "start",
            "exception",
            "finish",
            "release",
            "free",
            "clean"
        ]
    );
    let exc = ev.iter().find(|e| e.name == "exception").unwrap();
    let ctx = exc.context.as_ref().unwrap();
    assert_eq!(ctx["type"], "timeout");
    assert_eq!(ctx["note"], "resource allocation expired");
    assert_eq!(context_i64(&ev, "finish", "status"), 36352);
    let r = inst.r(id).await;
    let (start, exp) = (r.starttime().unwrap(), r.expiration().unwrap());
    assert!((exp - start - 1.0).abs() < 1e-6, "{start} {exp}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn afterok_waits_and_afternotok_fails() {
    let inst = Instance::start(1, 2).await;
    let parent = inst.submit(&cmd(&["sleep", "1"]), None).await;
    let dep =
        |scheme: &str| cmd(&["true"]).dependency(format!("{scheme}:{parent}").parse().unwrap());
    let ok = inst.submit(&dep("afterok"), None).await;
    let notok = inst.submit(&dep("afternotok"), None).await;
    let ev = inst.wait_clean(ok).await;
    assert_eq!(
        names(&ev),
        [
            "submit",
            "dependency-add",
            "validate",
            "dependency-remove",
            "depend",
            "priority",
            "alloc",
            "start",
            "finish",
            "release",
            "free",
            "clean"
        ]
    );
    let desc = ev[1].context.as_ref().unwrap()["description"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(desc, format!("after-success={parent}"));
    let ev = inst.wait_clean(notok).await;
    assert_eq!(
        names(&ev),
        ["submit", "dependency-add", "validate", "exception", "clean"]
    );
    let exc = &ev[3].context.as_ref().unwrap();
    assert_eq!(exc["type"], "dependency");
    // A dependency on a job that does not exist is refused, nothing stored.
    let err = inst
        .submit_json(
            cmd(&["true"])
                .dependency("afterok:f1".parse().unwrap())
                .build()
                .unwrap()
                .to_json(),
            None,
            0,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_job_runs_once_released() {
    let inst = Instance::start(1, 1).await;
    let id = inst.submit(&cmd(&["true"]), Some(0)).await;
    inst.events_until(id, "eventlog", "priority").await;
    let mut jobs = inst.jobs().await;
    let old = jobs
        .set_urgency(pb::SetUrgencyRequest {
            id: id.into(),
            urgency: 16,
        })
        .await
        .unwrap()
        .into_inner()
        .old_urgency;
    assert_eq!(old, 0);
    let ev = inst.wait_clean(id).await;
    assert_eq!(
        names(&ev),
        [
            "submit", "validate", "depend", "priority", "urgency", "priority", "alloc", "start",
            "finish", "release", "free", "clean"
        ]
    );
    assert_eq!(keys(&ev, "urgency"), ["urgency", "userid"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn higher_priority_runs_first() {
    let inst = Instance::start(1, 1).await;
    // Occupy the only core, then queue low, default and expedited jobs.
    let blocker = inst.submit(&cmd(&["sleep", "1"]), None).await;
    inst.events_until(blocker, "eventlog", "start").await;
    let low = inst.submit(&cmd(&["true"]), Some(4)).await;
    let mid = inst.submit(&cmd(&["true"]), None).await;
    let high = inst.submit(&cmd(&["true"]), Some(31)).await;
    let mut starts = Vec::new();
    for id in [low, mid, high] {
        let ev = inst.wait_clean(id).await;
        let alloc = ev.iter().find(|e| e.name == "alloc").unwrap().timestamp;
        starts.push((alloc, id));
        if id == high {
            assert_eq!(context_i64(&ev, "priority", "priority"), 4294967295);
        }
    }
    starts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let order: Vec<_> = starts.into_iter().map(|(_, id)| id).collect();
    assert_eq!(order, [high, mid, low]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsatisfiable_request_gets_an_alloc_exception_at_once() {
    let inst = Instance::start(2, 1).await;
    let id = inst.submit(&cmd(&["true"]).nodes(3), None).await;
    let ev = inst.wait_clean(id).await;
    assert_eq!(
        names(&ev),
        [
            "submit",
            "validate",
            "depend",
            "priority",
            "exception",
            "clean"
        ]
    );
    let exc = ev[4].context.as_ref().unwrap();
    assert_eq!(exc["type"], "alloc");
    assert_eq!(exc["severity"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_node_is_not_used() {
    let inst = Instance::start(2, 1).await;
    let mut res = inst.resource().await;
    res.drain(pb::DrainRequest {
        targets: "node0".into(),
        reason: "maintenance".into(),
        mode: 0,
    })
    .await
    .unwrap();
    // Draining again without force names the rank.
    let err = res
        .drain(pb::DrainRequest {
            targets: "0".into(),
            reason: "again".into(),
            mode: 0,
        })
        .await
        .unwrap_err();
    assert!(err.message().contains("already drained"), "{err}");
    for _ in 0..3 {
        let id = inst.submit(&cmd(&["true"]), None).await;
        inst.wait_clean(id).await;
        let r = inst.r(id).await;
        assert_eq!(r.ranks().to_string(), "1", "job ran on a drained node");
    }
    let st = inst.status().await;
    assert_eq!(st["drained"], "0");
    // The persistent resource eventlog has resource-define then the drain.
    let mut log = res
        .eventlog(pb::ResourceEventlogRequest { follow: false })
        .await
        .unwrap()
        .into_inner();
    let mut evs = Vec::new();
    while let Some(e) = log.message().await.unwrap() {
        evs.push(Event::parse_json(&e.line).unwrap());
    }
    assert_eq!(names(&evs).first().copied(), Some("resource-define"));
    assert_eq!(names(&evs).last().copied(), Some("drain"));
    assert_eq!(
        keys(&evs, "drain"),
        ["idset", "nodelist", "overwrite", "reason"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_is_captured_in_order() {
    let inst = Instance::start(1, 1).await;
    let id = inst
        .submit(
            &cmd(&[
                "sh",
                "-c",
                "for i in $(seq 1 200); do echo line$i; done; echo err >&2",
            ]),
            None,
        )
        .await;
    inst.wait_clean(id).await;
    let out = inst.log(id, "output").await;
    let stdout: String = out
        .iter()
        .filter_map(|e| {
            let c = e.context.as_ref()?;
            (c.get("stream")? == "stdout").then(|| c.get("data")?.as_str().map(str::to_string))?
        })
        .collect();
    let expected: String = (1..=200).map(|i| format!("line{i}\n")).collect();
    assert_eq!(stdout, expected);
    let stderr: Vec<&Event> = out
        .iter()
        .filter(|e| {
            e.context.as_ref().is_some_and(|c| {
                c.get("stream").is_some_and(|s| s == "stderr") && c.contains_key("data")
            })
        })
        .collect();
    assert_eq!(stderr.len(), 1);
    // Each stream ends with eof.
    for stream in ["stdout", "stderr"] {
        assert!(out.iter().any(|e| e.context.as_ref().is_some_and(|c| {
            c.get("stream").is_some_and(|s| s == stream)
                && c.get("eof") == Some(&serde_json::Value::Bool(true))
        })));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn journal_has_a_sentinel_and_acquire_follows_drains() {
    let inst = Instance::start(2, 1).await;
    let mut res = inst.resource().await;
    let mut journal = res
        .journal(pb::JournalRequest {})
        .await
        .unwrap()
        .into_inner();
    let mut backlog = Vec::new();
    loop {
        let e = journal.message().await.unwrap().unwrap();
        if e.sentinel {
            break;
        }
        backlog.push(Event::parse_json(&e.line).unwrap());
    }
    let n = names(&backlog);
    assert_eq!(n[0], "restart", "{n:?}");
    assert_eq!(keys(&backlog, "restart"), ["nodelist", "online", "ranks"]);
    assert!(n.contains(&"resource-define"), "{n:?}");
    assert_eq!(n.iter().filter(|x| **x == "online").count(), 2, "{n:?}");

    let mut acquire = res
        .acquire(pb::AcquireRequest {})
        .await
        .unwrap()
        .into_inner();
    let first = acquire.message().await.unwrap().unwrap();
    assert!(first.resources.is_some());
    assert_eq!(first.up.as_deref(), Some("0-1"));
    // A second acquirer is refused while the first holds the stream.
    let Err(busy) = inst.resource().await.acquire(pb::AcquireRequest {}).await else {
        panic!("a second acquire was accepted");
    };
    assert!(busy.message().contains("EBUSY"), "{busy}");

    res.drain(pb::DrainRequest {
        targets: "1".into(),
        reason: String::new(),
        mode: 0,
    })
    .await
    .unwrap();
    let down = acquire.message().await.unwrap().unwrap();
    assert_eq!((down.up, down.down.as_deref()), (None, Some("1")));
    res.undrain(pb::UndrainRequest {
        targets: "node1".into(),
        force: false,
        reason: String::new(),
    })
    .await
    .unwrap();
    let up = acquire.message().await.unwrap().unwrap();
    assert_eq!((up.up.as_deref(), up.down), (Some("1"), None));

    let live: Vec<String> = {
        let mut v = Vec::new();
        for _ in 0..2 {
            let e = journal.message().await.unwrap().unwrap();
            v.push(Event::parse_json(&e.line).unwrap().name.into());
        }
        v
    };
    assert_eq!(live, ["drain", "undrain"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_jobspec_is_rejected_and_nothing_is_stored() {
    let inst = Instance::start(1, 1).await;
    let mut jobs = inst.jobs().await;
    for bad in [
        "",
        "{not json",
        r#"{"version": 1}"#,
        r#"{"version": 1, "resources": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 0}]}], "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}], "attributes": {"system": {"duration": 0}}}"#,
    ] {
        let err = jobs
            .submit(pb::SubmitRequest {
                jobspec: bad.into(),
                urgency: None,
                flags: 0,
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{bad}: {err}");
        assert!(err.message().starts_with("jobspec"), "{err}");
    }
    let err = jobs
        .submit(pb::SubmitRequest {
            jobspec: cmd(&["true"]).build().unwrap().to_json(),
            urgency: Some(40),
            flags: 0,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    let all = jobs
        .list(pb::ListRequest {
            states: 127,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(all.jobs.is_empty(), "{:?}", all.jobs);
}

/// `--begin-time` holds a real job in DEPEND until its time: an hour away
/// it waits (flux's `dependency-add` says why), a second away it runs.
#[tokio::test(flavor = "multi_thread")]
async fn begin_time_holds_the_job_until_its_time() {
    let inst = Instance::start(1, 1).await;
    let submit = |when: &str| {
        let out = std::process::Command::new(fluxgate_integration_tests::binary("fluxgate"))
            .args(["submit", &format!("--begin-time={when}"), "true"])
            .env("FLUXGATE_URI", &inst.uri)
            .env_remove("FLUXGATE_TOKEN")
            .output()
            .expect("fluxgate submit");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<fluxgate_shared::JobId>()
            .expect("a job id")
    };
    let later = submit("+1h");
    let soon = submit("+1s");
    // The job a second away starts and ends while the other still waits.
    let events = inst.events_until(soon, "eventlog", "clean").await;
    assert!(names(&events).contains(&"start"), "{:?}", names(&events));
    let events = inst.events_until(later, "eventlog", "dependency-add").await;
    let add = events.last().expect("dependency-add");
    let why = add
        .context
        .as_ref()
        .and_then(|c| c.get("description"))
        .and_then(|d| d.as_str())
        .unwrap_or_default()
        .to_string();
    assert!(why.starts_with("begin-time="), "{why}");
    let row = inst.list(0).await;
    let state = row
        .iter()
        .find(|j| j.id == u64::from(later))
        .map(|j| j.state.as_str());
    assert_eq!(state, Some("DEPEND"), "{row:?}");
}
