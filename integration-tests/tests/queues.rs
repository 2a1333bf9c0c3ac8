//! Queues (RFC 33), limits per user and fair share on a 4-node instance
//! with real short jobs: limits and unknown queues refused at submit, a
//! stopped queue's jobs kept from the scheduler, queue state kept across a
//! job manager restart, a running-jobs limit holding one user's extra job,
//! and of two users' waiting jobs the one with less recent usage first.
//! Nothing here waits on a clock: every step waits for an event.

use std::process::Command;

use fluxgate_integration_tests::{GuestUser, Instance, Setup, binary, names, sleeper, text};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;
use fluxgate_shared::jobspec::JobspecBuilder;
use tonic::Code;

/// Two queues, batch the default (at most 2 nodes, 1 hour), debug on
/// nodes with the property `debug` (none here, so its jobs cannot run).
const QUEUES: &str = r#"
[queues.batch]
policy.limits.job-size.max.nnodes = 2
policy.limits.duration = "1h"

[queues.debug]
requires = ["debug"]

[policy.jobspec.defaults.system]
queue = "batch"
duration = "10m"
"#;

/// The job manager's config file in the instance's own directory.
fn config_file(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("jm.toml");
    std::fs::write(&path, text).expect("write config");
    (dir, path.display().to_string())
}

/// An instance of 4 nodes of 2 cores whose job manager reads `text`,
/// requiring credentials (so a restart keeps the config).
async fn instance(text: &str) -> (Instance, tempfile::TempDir) {
    let (dir, path) = config_file(text);
    let setup = Setup {
        auth: true,
        jm_args: vec!["--config".into(), path],
        ..Setup::default()
    };
    (Instance::start_setup(4, 2, setup).await, dir)
}

fn refused(r: Result<JobId, tonic::Status>, want: &str) {
    match r {
        Err(s) => {
            assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");
            assert_eq!(s.message(), want);
        }
        Ok(id) => panic!("job {id} accepted; wanted {want:?}"),
    }
}

fn job(nodes: u64) -> JobspecBuilder {
    JobspecBuilder::new(["true"]).nodes(nodes).exclusive(true)
}

async fn submit(inst: &Instance, spec: &JobspecBuilder) -> Result<JobId, tonic::Status> {
    inst.submit_json(spec.build().expect("jobspec").to_json(), None, 0)
        .await
}

async fn queue(
    inst: &Instance,
    action: pb::QueueAction,
    name: &str,
    reason: &str,
) -> Vec<pb::QueueInfo> {
    inst.jobs()
        .await
        .queue(pb::QueueRequest {
            action: action as i32,
            reason: reason.into(),
            name: name.into(),
            all: false,
        })
        .await
        .expect("queue request")
        .into_inner()
        .queues
}

fn cli(inst: &Instance, args: &[&str]) -> String {
    let out = Command::new(binary("fluxgate"))
        .args(args)
        .env("FLUXGATE_URI", &inst.uri)
        .env("FLUXGATE_TOKEN", inst.owner_token.as_deref().unwrap_or(""))
        .output()
        .expect("fluxgate");
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_limits_and_unknown_queues_are_refused() {
    let (inst, _dir) = instance(QUEUES).await;
    refused(
        submit(&inst, &job(3)).await,
        "requested nnodes (3) exceeds policy limit of 2 for queue batch",
    );
    refused(
        submit(&inst, &job(1).duration_secs(7200.0)).await,
        "requested duration (2h) exceeds policy limit of 1h for queue batch",
    );
    refused(
        submit(&inst, &job(1).queue("gold")).await,
        "Invalid queue 'gold' specified",
    );
    // Defaults filled in and a real job runs in the default queue.
    let id = submit(&inst, &job(2)).await.expect("a 2-node job fits");
    let events = inst.wait_clean(id).await;
    assert!(names(&events).contains(&"finish"), "{:?}", names(&events));
    let jobspec = inst
        .jobs()
        .await
        .info(pb::InfoRequest {
            id: id.into(),
            keys: vec!["jobspec".into()],
            ..Default::default()
        })
        .await
        .expect("info")
        .into_inner()
        .values
        .remove("jobspec")
        .expect("jobspec");
    let v: serde_json::Value = serde_json::from_str(&jobspec).expect("json");
    assert_eq!(v["attributes"]["system"]["queue"], "batch");
    assert_eq!(v["attributes"]["system"]["duration"], 600.0);
    let listed = inst.list(127).await;
    assert_eq!(
        listed
            .iter()
            .find(|j| j.id == u64::from(id))
            .map(|j| j.queue.as_str()),
        Some("batch")
    );
    // The debug queue's requires became a constraint no node meets.
    let id = submit(&inst, &job(1).queue("debug"))
        .await
        .expect("debug job");
    let events = inst.wait_clean(id).await;
    let exception = events
        .iter()
        .find(|e| e.name == "exception")
        .expect("exception");
    assert_eq!(exception.context.as_ref().unwrap()["type"], "alloc");
    // flux-queue's listing.
    let list = cli(&inst, &["queue", "list"]);
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(
        lines,
        [
            "QUEUE    EN ST TDEFAULT   TLIMIT     NNODES     NCORES      NGPUS",
            "batch*    ✔  ✔      10m       1h        0-2        0-8        0-0",
            "debug     ✔  ✔      10m      inf        0-0        0-0        0-0",
        ],
        "{list}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_is_named_only_when_queues_are_configured() {
    let inst = Instance::start(1, 1).await;
    refused(
        submit(&inst, &job(1).queue("batch")).await,
        "Invalid queue 'batch' specified",
    );
    let (inst, _dir) = instance("[queues.a]\n[queues.b]\n").await;
    refused(submit(&inst, &job(1)).await, "no queue specified");
    let id = submit(&inst, &job(1).queue("b")).await.expect("named");
    inst.wait_clean(id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_stop_start_enable_disable_and_survive_a_restart() {
    let (mut inst, _dir) = instance("[queues.batch]\n[queues.other]\n").await;
    queue(&inst, pb::QueueAction::Stop, "batch", "maintenance").await;
    queue(&inst, pb::QueueAction::Disable, "other", "closed").await;
    let held = submit(&inst, &job(1).queue("batch"))
        .await
        .expect("submit to a stopped queue");
    let err = submit(&inst, &job(1).queue("other")).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(err.message(), "job submission to other is disabled: closed");
    // Held in SCHED: it reached the priority step and stays there.
    let events = inst.events_until(held, "eventlog", "priority").await;
    assert!(!names(&events).contains(&"alloc"));

    inst.restart_jm(true).await;
    let status = queue(&inst, pb::QueueAction::Status, "", "").await;
    let of = |n: &str| status.iter().find(|q| q.name == n).cloned().expect("queue");
    assert!(!of("batch").started && of("batch").stop_reason == "maintenance");
    assert!(of("batch").enabled);
    assert!(!of("other").enabled && of("other").disable_reason == "closed");
    let text = cli(&inst, &["queue", "status"]);
    assert!(
        text.contains("batch: Scheduling is stopped: maintenance"),
        "{text}"
    );
    assert!(
        text.contains("other: Job submission is disabled: closed"),
        "{text}"
    );

    // Started again, the held job runs; enabled again, submissions are taken.
    let started = queue(&inst, pb::QueueAction::Start, "batch", "").await;
    assert!(started[0].started);
    let events = inst.wait_clean(held).await;
    assert!(names(&events).contains(&"alloc"), "{:?}", names(&events));
    queue(&inst, pb::QueueAction::Enable, "other", "").await;
    let id = submit(&inst, &job(1).queue("other"))
        .await
        .expect("enabled");
    inst.wait_clean(id).await;
}

/// A user account and its token on `inst`.
fn user(inst: &Instance, guest: &GuestUser) -> String {
    inst.token(&guest.name, guest.uid, None)
}

async fn submit_as(inst: &Instance, token: &str, spec: &JobspecBuilder) -> JobId {
    let r = inst
        .jobs_as(Some(token))
        .await
        .submit(pb::SubmitRequest {
            jobspec: spec.build().expect("jobspec").to_json(),
            urgency: None,
            flags: 0,
            ..Default::default()
        })
        .await
        .expect("submit");
    JobId::from(r.into_inner().id)
}

async fn cancel(inst: &Instance, id: JobId) {
    inst.jobs()
        .await
        .cancel(pb::CancelRequest {
            id: id.into(),
            note: String::new(),
        })
        .await
        .expect("cancel");
}

/// The time of `id`'s first `name` event.
fn time_of(events: &[fluxgate_shared::Event], name: &str) -> f64 {
    events
        .iter()
        .find(|e| e.name == name)
        .map(|e| e.timestamp)
        .unwrap_or_else(|| panic!("no {name} in {:?}", names(events)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_users_waiting_jobs_the_one_with_less_recent_usage_starts_first() {
    let (alice, bob) = (GuestUser::create("fsa"), GuestUser::create("fsb"));
    let (inst, _dir) = instance("[accounting]\nenabled = true\n").await;
    let (a, b) = (user(&inst, &alice), user(&inst, &bob));
    // Alice uses the whole machine for a moment.
    let used = submit_as(
        &inst,
        &a,
        &JobspecBuilder::new(["true"]).nodes(4).exclusive(true),
    )
    .await;
    inst.wait_clean(used).await;
    // The machine is busy; Alice submits first, Bob second.
    let blocker = inst.submit(&sleeper("300", 4), None).await;
    inst.events_until(blocker, "eventlog", "start").await;
    let alices = submit_as(&inst, &a, &job(4)).await;
    let bobs = submit_as(&inst, &b, &job(4)).await;
    inst.events_until(bobs, "eventlog", "priority").await;
    let accounts = inst
        .jobs()
        .await
        .accounting(pb::AccountingRequest {})
        .await
        .expect("accounting")
        .into_inner();
    let fs = |uid| {
        accounts
            .rows
            .iter()
            .find(|r| r.userid == uid)
            .map(|r| r.fairshare)
            .expect("row")
    };
    assert!(fs(bob.uid) > fs(alice.uid), "{accounts:?}");
    cancel(&inst, blocker).await;
    let (ea, eb) = (inst.wait_clean(alices).await, inst.wait_clean(bobs).await);
    assert!(
        time_of(&eb, "alloc") < time_of(&ea, "alloc"),
        "Bob, who used nothing, goes first"
    );
    let shown = cli(&inst, &["accounting", "show"]);
    assert!(
        shown.contains(&alice.name) && shown.contains("FAIRSHARE"),
        "{shown}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_jobs_limit_holds_a_users_extra_job_until_the_first_ends() {
    let alice = GuestUser::create("lra");
    let bob = GuestUser::create("lrb");
    let text = format!("[limits.users.{}]\nmax_running_jobs = 1\n", alice.name);
    let (inst, _dir) = instance(&text).await;
    let (a, b) = (user(&inst, &alice), user(&inst, &bob));
    let first = submit_as(&inst, &a, &sleeper("300", 1)).await;
    let extra = submit_as(&inst, &a, &job(1)).await;
    let bobs = submit_as(&inst, &b, &sleeper("300", 1)).await;
    inst.events_until(first, "eventlog", "start").await;
    inst.events_until(bobs, "eventlog", "start").await;
    // Nodes are free, yet Alice's second job waits, and says why.
    let row = inst
        .list(127)
        .await
        .into_iter()
        .find(|j| j.id == u64::from(extra))
        .expect("listed");
    assert_eq!(row.state, "SCHED");
    assert!(
        row.annotations.contains("max-running-jobs-user-limit"),
        "{row:?}"
    );
    let info = cli(&inst, &["jobs", "-A", "-o", "{id.dec} {contextual_info}"]);
    assert!(
        info.contains(&format!("{} max-running-jobs-user-limit", u64::from(extra))),
        "{info}"
    );
    cancel(&inst, first).await;
    let events = inst.wait_clean(extra).await;
    assert!(names(&events).contains(&"alloc"), "{:?}", names(&events));
    cancel(&inst, bobs).await;
    inst.wait_clean(bobs).await;
}

#[test]
fn fluxgate_start_config_carries_queues_into_the_local_instance() {
    let (dir, path) = config_file(QUEUES);
    let out = Command::new(binary("fluxgate"))
        .args([
            "start",
            "--size",
            "1",
            "--kill-timeout",
            "1",
            "--config",
            &path,
        ])
        .args([
            "--",
            "sh",
            "-c",
            "$F queue list -n && $F submit -q gold true",
        ])
        .env("F", binary("fluxgate"))
        .env_remove("FLUXGATE_TOKEN")
        .current_dir(dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("fluxgate start");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.starts_with("batch*"), "{stdout}\n{stderr}");
    assert!(stdout.contains("\ndebug "), "{stdout}");
    assert!(!out.status.success(), "the unknown queue is refused");
    assert!(
        stderr.contains("Invalid queue 'gold' specified"),
        "{stderr}"
    );
}

/// `queue idle` answers once no job runs (a held one may wait on), `queue
/// drain` once none is active; until then each outlasts its `--timeout`.
#[tokio::test(flavor = "multi_thread")]
async fn queue_idle_and_drain_wait_for_the_jobs() {
    let (inst, _dir) = instance("").await;
    let running = inst.submit(&sleeper("300", 1), None).await;
    let held = inst.submit(&job(1), Some(0)).await;
    inst.events_until(running, "eventlog", "start").await;
    let quiet = |args: &[&str]| {
        Command::new(binary("fluxgate"))
            .args(args)
            .env("FLUXGATE_URI", &inst.uri)
            .env("FLUXGATE_TOKEN", inst.owner_token.as_deref().unwrap_or(""))
            // Waiting is not bounded by the client's usual bound per call.
            .env("FLUXGATE_TIMEOUT", "0.2")
            .output()
            .expect("fluxgate")
    };
    // A running job: neither answers (the held job can never start).
    for action in ["idle", "drain"] {
        let out = quiet(&["queue", action, "--timeout", "1"]);
        assert!(!out.status.success(), "queue {action} answered: {out:?}");
        assert!(
            text(&out.stderr).trim_end().ends_with(": timeout"),
            "{out:?}"
        );
    }
    cancel(&inst, running).await;
    let out = quiet(&["queue", "idle"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(text(&out.stdout), "1 pending jobs\n");
    let out = quiet(&["queue", "drain", "--timeout", "1"]);
    assert!(!out.status.success(), "drained with a job pending: {out:?}");
    cancel(&inst, held).await;
    let out = quiet(&["queue", "drain"]);
    assert!(out.status.success(), "{out:?}");
}
