//! The exec service over real gRPC on 127.0.0.1:0, running real processes.
//! The job manager's side of the contract is played by a small fake `Node`
//! server that welcomes every hello.

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use fluxgate_exec::config::Config;
use fluxgate_exec::server::{self, Running};
use fluxgate_proto::v1::exec_client::ExecClient;
use fluxgate_proto::v1::start_response::Response as R;
use fluxgate_proto::v1::{
    ExecExceptionRequest, ExecKillRequest, ExecTasksRequest, StartRequest, StartResponse,
};
use fluxgate_shared::{IdSet, JobId};
use serde_json::{Value, json};
use tonic::Streaming;
use tonic::transport::Channel;

use common::{FakeJm, fake_jm, wait_for};

// ---------------------------------------------------------------- exec helpers

/// What a test-execution job that ends by itself says, in order.
const TEST_RUN: [&str; 7] = [
    "exec init",
    "exec starting",
    "start",
    "exec complete",
    "finish 0",
    "exec done",
    "release all true",
];

fn config(jm: &str, hostname: &str) -> Config {
    let mut c = Config::single(jm, hostname, IdSet::from_range(0, 1));
    c.kill_timeout = Duration::from_secs(2);
    c
}

/// An exec service joined to `jm` (waits until its hello arrived).
async fn exec(jm_uri: &str, jm: &FakeJm, hostname: &str) -> Running {
    let before = jm.hellos.lock().unwrap().len();
    let running = server::start(config(jm_uri, hostname)).await.unwrap();
    wait_for("hello", || jm.hellos.lock().unwrap().len() > before).await;
    running
}

async fn client(addr: &str) -> ExecClient<Channel> {
    ExecClient::connect(addr.to_string()).await.unwrap()
}

fn jobspec(command: &[&str], count: Value, system: Value) -> String {
    let mut sys = json!({"duration": 0, "environment": {"PATH": std::env::var("PATH").unwrap()}});
    if let Value::Object(extra) = system {
        for (k, v) in extra {
            sys[k] = v;
        }
    }
    json!({
        "version": 1,
        "resources": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}],
        "tasks": [{"command": command, "slot": "task", "count": count}],
        "attributes": {"system": sys},
    })
    .to_string()
}

fn r_one(host: &str, cores: &str) -> String {
    json!({"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": cores}}], "nodelist": [host], "starttime": 0.0, "expiration": 0.0}}).to_string()
}

fn request(id: u64, jobspec: String, r: String, peers: &[(u32, &str)]) -> StartRequest {
    StartRequest {
        id,
        userid: 0,
        jobspec,
        r,
        reattach: false,
        ranks: String::new(),
        peers: peers.iter().map(|(r, a)| (*r, a.to_string())).collect(),
        credential: String::new(),
    }
}

async fn collect(mut stream: Streaming<StartResponse>) -> Vec<StartResponse> {
    let mut all = Vec::new();
    let fut = async {
        while let Some(r) = stream.message().await.unwrap() {
            all.push(r);
        }
    };
    tokio::time::timeout(Duration::from_secs(20), fut)
        .await
        .expect("stream did not end within 20s");
    all
}

async fn run(addr: &str, req: StartRequest) -> Vec<StartResponse> {
    let stream = client(addr).await.start(req).await.unwrap().into_inner();
    collect(stream).await
}

/// A compact view of a response: kind plus the interesting part.
fn kind(r: &StartResponse) -> String {
    match r.response.as_ref().unwrap() {
        R::Start(_) => "start".into(),
        R::Reattached(_) => "reattached".into(),
        R::Release(rel) => format!("release {} {}", rel.ranks, rel.r#final),
        R::Exception(e) => format!("exception {} {}", e.r#type, e.severity),
        R::Finish(f) => format!("finish {}", f.status),
        R::ExecEvent(l) => format!("exec {}", parse(l)["name"].as_str().unwrap()),
        R::OutputEvent(l) => format!("output {}", parse(l)["name"].as_str().unwrap()),
        R::LiveOutputEvent(l) => format!("live {}", parse(l)["name"].as_str().unwrap()),
        R::Pmi(k) => format!("pmi {}", k.kvs.len()),
    }
}

fn parse(line: &str) -> Value {
    assert!(
        !line.ends_with('\n'),
        "event lines carry no newline: {line:?}"
    );
    let v: Value = serde_json::from_str(line).unwrap();
    assert!(v["timestamp"].as_f64().unwrap() > 1.6e9);
    v
}

fn exec_events(all: &[StartResponse]) -> Vec<Value> {
    all.iter()
        .filter_map(|r| match r.response.as_ref() {
            Some(R::ExecEvent(l)) => Some(parse(l)),
            _ => None,
        })
        .collect()
}

fn output_events(all: &[StartResponse]) -> Vec<Value> {
    all.iter()
        .filter_map(|r| match r.response.as_ref() {
            Some(R::OutputEvent(l)) => Some(parse(l)),
            _ => None,
        })
        .collect()
}

fn names(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["name"].as_str().unwrap()).collect()
}

fn finish_status(all: &[StartResponse]) -> i32 {
    let statuses: Vec<i32> = all
        .iter()
        .filter_map(|r| match r.response.as_ref() {
            Some(R::Finish(f)) => Some(f.status),
            _ => None,
        })
        .collect();
    assert_eq!(statuses.len(), 1, "exactly one finish");
    statuses[0]
}

/// Stdout text per task rank.
fn stdout_by_task(all: &[StartResponse]) -> HashMap<String, String> {
    let mut out: HashMap<String, String> = HashMap::new();
    for e in output_events(all) {
        let c = &e["context"];
        if e["name"] == "data" && c["stream"] == "stdout" && c.get("data").is_some() {
            out.entry(c["rank"].as_str().unwrap().to_string())
                .or_default()
                .push_str(c["data"].as_str().unwrap());
        }
    }
    out
}

/// The common frame of every leader stream: exec events, release last.
fn assert_leader_frame(all: &[StartResponse], status: i32) {
    let kinds: Vec<String> = all.iter().map(kind).collect();
    assert_eq!(kinds[0], "exec init", "{kinds:?}");
    assert_eq!(kinds[1], "exec starting", "{kinds:?}");
    assert_eq!(kinds.last().unwrap(), "release all true", "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| k.starts_with("release")).count(), 1);
    assert_eq!(finish_status(all), status);
    let n = kinds.len();
    assert_eq!(
        kinds[n - 4..],
        [
            "exec complete".to_string(),
            format!("finish {status}"),
            "exec done".into(),
            "release all true".into()
        ],
        "{kinds:?}"
    );
    let ev = exec_events(all);
    let complete = ev.iter().find(|e| e["name"] == "complete").unwrap();
    assert_eq!(complete["context"]["status"], json!(status));
    assert!(all.iter().all(|r| r.id == all[0].id));
}

fn start_index(all: &[StartResponse]) -> usize {
    all.iter()
        .position(|r| kind(r) == "start")
        .expect("a start response")
}

// ---------------------------------------------------------------- tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostname_on_one_rank_writes_output_and_exec_events() {
    let (uri, jm) = fake_jm().await;
    let ex = exec(&uri, &jm, "vm").await;
    let host = String::from_utf8(
        std::process::Command::new("hostname")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let all = run(
        &ex.exec_address,
        request(
            1,
            jobspec(&["hostname"], json!({"per_slot": 1}), json!({})),
            r_one("vm", "0"),
            &[(0, &ex.exec_address)],
        ),
    )
    .await;
    assert_leader_frame(&all, 0);
    let ev = exec_events(&all);
    assert_eq!(
        names(&ev),
        ["init", "starting", "shell-exit", "complete", "done"]
    );
    assert_eq!(ev[2]["context"], json!({"rank": 0, "wait_status": 0}));
    assert!(ev[0].get("context").is_none());

    let out = output_events(&all);
    assert_eq!(out[0]["name"], "header");
    assert_eq!(
        out[0]["context"],
        json!({"version":1,"encoding":{"stdout":"UTF-8","stderr":"UTF-8"},"count":{"stdout":1,"stderr":1},"options":{}})
    );
    assert_eq!(stdout_by_task(&all)["0"], host);
    let eofs: Vec<_> = out
        .iter()
        .filter(|e| e["context"]["eof"] == json!(true))
        .map(|e| e["context"].clone())
        .collect();
    assert_eq!(eofs.len(), 2);
    assert!(eofs.contains(&json!({"stream":"stdout","rank":"0","eof":true})));
    assert!(eofs.contains(&json!({"stream":"stderr","rank":"0","eof":true})));
    // start comes before any task output, shell-exit after the last of it.
    let s = start_index(&all);
    let first_data = all.iter().position(|r| kind(r) == "output data").unwrap();
    assert!(s < first_data);
    let shell_exit = all
        .iter()
        .position(|r| kind(r) == "exec shell-exit")
        .unwrap();
    let last_data = all.iter().rposition(|r| kind(r) == "output data").unwrap();
    assert!(last_data < shell_exit);
    ex.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_ranks_on_two_exec_services_merge_into_one_stream() {
    let (uri, jm) = fake_jm().await;
    let a = exec(&uri, &jm, "hosta").await;
    let b = exec(&uri, &jm, "hostb").await;
    let js = json!({
        "version": 1,
        "resources": [{"type": "node", "count": 2, "exclusive": true, "with": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}]}],
        "tasks": [{"command": ["sh", "-c", "echo task $FLUX_TASK_RANK of $FLUX_JOB_SIZE"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": 0, "environment": {"PATH": std::env::var("PATH").unwrap()}}},
    })
    .to_string();
    let r = json!({"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"core": "0-1"}}], "nodelist": ["hosta,hostb"]}}).to_string();
    let all = run(
        &a.exec_address,
        request(2, js, r, &[(0, &a.exec_address), (1, &b.exec_address)]),
    )
    .await;
    assert_leader_frame(&all, 0);
    assert_eq!(all.iter().filter(|r| kind(r) == "start").count(), 1);
    let out = stdout_by_task(&all);
    assert_eq!(out["0"], "task 0 of 2\n");
    assert_eq!(out["1"], "task 1 of 2\n");
    let header = &output_events(&all)[0];
    assert_eq!(
        header["context"]["count"],
        json!({"stdout": 2, "stderr": 2})
    );
    let eofs = output_events(&all)
        .iter()
        .filter(|e| e["context"]["eof"] == json!(true))
        .count();
    assert_eq!(eofs, 4);
    // Only the leader writes the exec eventlog: one shell-exit, for rank 0.
    let ev = exec_events(&all);
    assert_eq!(
        names(&ev),
        ["init", "starting", "shell-exit", "complete", "done"]
    );
    assert_eq!(ev[2]["context"]["rank"], 0);
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn false_finishes_with_status_256() {
    let (uri, jm) = fake_jm().await;
    let ex = exec(&uri, &jm, "vm").await;
    let all = run(
        &ex.exec_address,
        request(
            3,
            jobspec(&["false"], json!({"per_slot": 1}), json!({})),
            r_one("vm", "0"),
            &[(0, &ex.exec_address)],
        ),
    )
    .await;
    assert_leader_frame(&all, 256);
    let ev = exec_events(&all);
    assert_eq!(ev[2]["context"], json!({"rank": 0, "wait_status": 256}));
    ex.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_command_is_an_exec_exception_with_flux_wording() {
    let (uri, jm) = fake_jm().await;
    let ex = exec(&uri, &jm, "vm").await;
    let all = run(
        &ex.exec_address,
        request(
            4,
            jobspec(&["nosuchcommand-xyz"], json!({"per_slot": 1}), json!({})),
            r_one("vm", "0"),
            &[(0, &ex.exec_address)],
        ),
    )
    .await;
    assert_leader_frame(&all, 32512);
    let note = "task 0 (host vm): start failed: nosuchcommand-xyz: No such file or directory";
    let exc: Vec<_> = all
        .iter()
        .filter_map(|r| match r.response.as_ref() {
            Some(R::Exception(e)) => Some(e.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(exc.len(), 1);
    assert_eq!(
        (
            exc[0].r#type.as_str(),
            exc[0].severity,
            exc[0].note.as_str()
        ),
        ("exec", 0, note)
    );
    let out = output_events(&all);
    assert_eq!(names(&out), ["header", "log"]);
    assert_eq!(
        out[1]["context"],
        json!({"rank": 0, "level": 0, "message": note})
    );
    let kinds: Vec<String> = all.iter().map(kind).collect();
    let pos = |k: &str| kinds.iter().position(|x| x == k).unwrap();
    assert!(pos("start") < pos("output log"));
    assert!(pos("output log") < pos("exception exec 0"));
    assert!(pos("exception exec 0") < pos("exec shell-exit"));
    assert_eq!(
        names(&exec_events(&all)),
        ["init", "starting", "shell-exit", "complete", "done"]
    );
    ex.stop().await.unwrap();
}

/// Start `sleep 100`, wait for `start`, raise an exception of `kind`; the
/// job must end with `status` within a few seconds.
async fn teardown(kind_: &str, status: i32) {
    let (uri, jm) = fake_jm().await;
    let ex = exec(&uri, &jm, "vm").await;
    let mut c = client(&ex.exec_address).await;
    let mut stream = c
        .start(request(
            5,
            jobspec(&["sleep", "100"], json!({"per_slot": 1}), json!({})),
            r_one("vm", "0"),
            &[(0, &ex.exec_address)],
        ))
        .await
        .unwrap()
        .into_inner();
    let mut all = Vec::new();
    loop {
        let r = stream.message().await.unwrap().unwrap();
        let started = kind(&r) == "start";
        all.push(r);
        if started {
            break;
        }
    }
    let t0 = Instant::now();
    c.exception(ExecExceptionRequest {
        id: 5,
        r#type: kind_.into(),
        severity: 0,
        note: String::new(),
    })
    .await
    .unwrap();
    all.extend(collect(stream).await);
    assert!(
        t0.elapsed() < Duration::from_secs(4),
        "teardown took {:?}",
        t0.elapsed()
    );
    assert_leader_frame(&all, status);
    ex.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_sends_sigterm_status_36608() {
    teardown("cancel", 36608).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_sends_sigalrm_status_36352() {
    teardown("timeout", 36352).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_lists_the_task_processes_of_every_rank() {
    let (uri, jm) = fake_jm().await;
    let a = exec(&uri, &jm, "hosta").await;
    let b = exec(&uri, &jm, "hostb").await;
    let js = json!({
        "version": 1,
        "resources": [{"type": "node", "count": 2, "with": [{"type": "slot", "count": 2, "label": "task", "with": [{"type": "core", "count": 1}]}]}],
        "tasks": [{"command": ["sleep", "100"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": 0, "environment": {"PATH": std::env::var("PATH").unwrap()}}},
    })
    .to_string();
    let r = json!({"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"core": "0-1"}}], "nodelist": ["hosta,hostb"]}}).to_string();
    let mut leader = client(&a.exec_address).await;
    let err = leader.tasks(ExecTasksRequest { id: 7 }).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound, "{err:?}");
    let mut stream = leader
        .start(request(
            7,
            js,
            r,
            &[(0, &a.exec_address), (1, &b.exec_address)],
        ))
        .await
        .unwrap()
        .into_inner();
    while kind(&stream.message().await.unwrap().unwrap()) != "start" {}

    let tasks = leader
        .tasks(ExecTasksRequest { id: 7 })
        .await
        .unwrap()
        .into_inner()
        .tasks;
    let placed: Vec<(u32, u32, &str)> = tasks
        .iter()
        .map(|t| (t.task_rank, t.node_rank, t.hostname.as_str()))
        .collect();
    assert_eq!(
        placed,
        [
            (0, 0, "hosta"),
            (1, 0, "hosta"),
            (2, 1, "hostb"),
            (3, 1, "hostb")
        ]
    );
    for t in &tasks {
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", t.pid)).unwrap();
        assert!(cmdline.ends_with(b"sleep\x00100\x00"), "{cmdline:?}");
    }
    // A peer lists its own ranks' tasks only.
    let on_b = client(&b.exec_address)
        .await
        .tasks(ExecTasksRequest { id: 7 })
        .await
        .unwrap()
        .into_inner()
        .tasks;
    assert_eq!(on_b, tasks[2..]);

    leader
        .kill(ExecKillRequest { id: 7, signum: 15 })
        .await
        .unwrap();
    collect(stream).await;
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_forwards_the_signal_and_severity_1_does_not_tear_down() {
    let (uri, jm) = fake_jm().await;
    let ex = exec(&uri, &jm, "vm").await;
    let mut c = client(&ex.exec_address).await;
    let mut stream = c
        .start(request(
            6,
            jobspec(&["sleep", "100"], json!({"per_slot": 1}), json!({})),
            r_one("vm", "0"),
            &[(0, &ex.exec_address)],
        ))
        .await
        .unwrap()
        .into_inner();
    while kind(&stream.message().await.unwrap().unwrap()) != "start" {}
    c.exception(ExecExceptionRequest {
        id: 6,
        r#type: "note".into(),
        severity: 1,
        note: "just saying".into(),
    })
    .await
    .unwrap();
    let err = c
        .kill(ExecKillRequest { id: 6, signum: 0 })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    let err = c
        .kill(ExecKillRequest {
            id: 999,
            signum: 10,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    c.kill(ExecKillRequest { id: 6, signum: 10 }).await.unwrap();
    let rest = collect(stream).await;
    // SIGUSR1 killed the task: the shell would exit 128+10.
    assert_eq!(finish_status(&rest), (128 + 10) << 8);
    ex.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_mode_runs_nothing_for_run_duration_and_is_killable() {
    let (uri, jm) = fake_jm().await;
    let ex = exec(&uri, &jm, "vm").await;
    // Ranks nobody serves: test execution runs them all on the leader.
    let r = json!({"version": 1, "execution": {"R_lite": [{"rank": "0-3", "children": {"core": "0-1"}}]}}).to_string();
    let t0 = Instant::now();
    let js = jobspec(
        &["nosuchcommand-xyz"],
        json!({"per_slot": 1}),
        json!({"exec": {"test": {"run_duration": "200ms"}}}),
    );
    let all = run(
        &ex.exec_address,
        request(7, js, r.clone(), &[(0, &ex.exec_address)]),
    )
    .await;
    assert!(t0.elapsed() >= Duration::from_millis(200));
    assert_leader_frame(&all, 0);
    let kinds: Vec<String> = all.iter().map(kind).collect();
    assert_eq!(kinds, TEST_RUN);

    let js = jobspec(
        &["true"],
        json!({"per_slot": 1}),
        json!({"exec": {"test": {"run_duration": 100}}}),
    );
    let mut c = client(&ex.exec_address).await;
    let mut stream = c.start(request(8, js, r, &[])).await.unwrap().into_inner();
    while kind(&stream.message().await.unwrap().unwrap()) != "start" {}
    c.exception(ExecExceptionRequest {
        id: 8,
        r#type: "cancel".into(),
        severity: 0,
        note: String::new(),
    })
    .await
    .unwrap();
    let rest = collect(stream).await;
    // flux-core's test exec reports the raw signal as the wait status.
    assert_eq!(finish_status(&rest), 15);
    ex.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reattach_resumes_a_running_job_and_reports_an_unknown_one_lost() {
    let (uri, jm) = fake_jm().await;
    let ex = exec(&uri, &jm, "vm").await;
    {
        let mut c = client(&ex.exec_address).await;
        let js = jobspec(
            &["sh", "-c", "sleep 0.5; echo after"],
            json!({"per_slot": 1}),
            json!({}),
        );
        let mut stream = c
            .start(request(9, js, r_one("vm", "0"), &[(0, &ex.exec_address)]))
            .await
            .unwrap()
            .into_inner();
        while kind(&stream.message().await.unwrap().unwrap()) != "start" {}
        // The caller goes away, as a restarting job manager would.
    }
    let mut c = client(&ex.exec_address).await;
    let mut again = request(9, String::new(), String::new(), &[]);
    again.reattach = true;
    let all = collect(c.start(again).await.unwrap().into_inner()).await;
    let kinds: Vec<String> = all.iter().map(kind).collect();
    assert_eq!(
        kinds[..3],
        ["exec reattach", "exec re-starting", "reattached"],
        "{kinds:?}"
    );
    assert!(!kinds.contains(&"start".to_string()));
    assert_eq!(stdout_by_task(&all)["0"], "after\n");
    assert_eq!(finish_status(&all), 0);
    assert_eq!(kinds.last().unwrap(), "release all true");

    let mut lost = request(424242, String::new(), String::new(), &[]);
    lost.reattach = true;
    let all = collect(c.start(lost).await.unwrap().into_inner()).await;
    let kinds: Vec<String> = all.iter().map(kind).collect();
    assert_eq!(kinds, ["exception exec 0", "release all true"]);
    let Some(R::Exception(e)) = &all[0].response else {
        unreachable!()
    };
    assert!(e.note.starts_with("job lost: "), "{}", e.note);
    // A finished job is forgotten, so the table stays bounded.
    wait_for("job table to empty", || ex.service.jobs().is_empty()).await;
    ex.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_get_flux_environment_and_their_share_of_cores() {
    let (uri, jm) = fake_jm().await;
    let ex = exec(&uri, &jm, "vm").await;
    let script = "echo $FLUX_TASK_RANK $FLUX_TASK_LOCAL_ID $FLUX_JOB_SIZE $FLUX_JOB_NNODES $FLUX_JOB_ID $MYVAR ${FLUX_JOB_TMPDIR-unset} ${CUDA_VISIBLE_DEVICES-none}";
    let mut js: Value = serde_json::from_str(&jobspec(
        &["sh", "-c", script],
        json!({"total": 2}),
        json!({}),
    ))
    .unwrap();
    js["attributes"]["system"]["environment"]["MYVAR"] = json!("x");
    js["attributes"]["system"]["environment"]["FLUX_JOB_TMPDIR"] = json!("/nope");
    let r = json!({"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0-1", "gpu": "2-3"}}], "nodelist": ["vm"]}}).to_string();
    let id = JobId::from(123456789u64);
    let all = run(
        &ex.exec_address,
        request(id.into(), js.to_string(), r, &[(0, &ex.exec_address)]),
    )
    .await;
    assert_leader_frame(&all, 0);
    let out = stdout_by_task(&all);
    // The service's own FLUX_JOB_TMPDIR, never the stored jobspec's.
    let parent = fluxgate_exec::jobtmp::default_parent();
    let tmp = fluxgate_exec::jobtmp::path(&parent, 0, id, false);
    let tmp = tmp.display();
    assert_eq!(out["0"], format!("0 0 2 1 {id} x {tmp} 2,3\n"));
    assert_eq!(out["1"], format!("1 1 2 1 {id} x {tmp} 2,3\n"));
    ex.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_files_replace_data_events_with_redirect() {
    let (uri, jm) = fake_jm().await;
    let ex = exec(&uri, &jm, "vm").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out-{{id}}.txt");
    let js = jobspec(
        &["sh", "-c", "echo to-out; echo to-err >&2"],
        json!({"per_slot": 1}),
        json!({"shell": {"options": {"output": {"stdout": {"type": "file", "path": path.to_str().unwrap()}}}}}),
    );
    let id = JobId::from(77u64);
    let all = run(
        &ex.exec_address,
        request(77, js, r_one("vm", "0"), &[(0, &ex.exec_address)]),
    )
    .await;
    assert_leader_frame(&all, 0);
    let out = output_events(&all);
    assert_eq!(names(&out), ["header", "redirect", "redirect"]);
    let file = dir.path().join(format!("out-{id}.txt"));
    assert_eq!(
        out[1]["context"],
        json!({"stream": "stdout", "rank": "0", "path": file.to_str().unwrap()})
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("to-out\n") && text.contains("to-err\n"),
        "{text:?}"
    );
    ex.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_answer_on_the_stream_or_with_a_status() {
    let (uri, jm) = fake_jm().await;
    let ex = exec(&uri, &jm, "vm").await;
    let all = run(
        &ex.exec_address,
        request(10, "{not json".into(), r_one("vm", "0"), &[]),
    )
    .await;
    let kinds: Vec<String> = all.iter().map(kind).collect();
    assert_eq!(kinds, ["exception exec 0", "release all true"]);
    // A rank with no known exec service.
    let r =
        json!({"version": 1, "execution": {"R_lite": [{"rank": "5", "children": {"core": "0"}}]}})
            .to_string();
    let all = run(
        &ex.exec_address,
        request(
            11,
            jobspec(&["true"], json!({"per_slot": 1}), json!({})),
            r,
            &[],
        ),
    )
    .await;
    let Some(R::Exception(e)) = &all[0].response else {
        panic!("{all:?}")
    };
    assert_eq!(e.note, "no exec service address for rank 5");
    // The same job twice (a job manager that restarted before it stored
    // `start`): the running job is adopted, not launched again.
    let mut c = client(&ex.exec_address).await;
    let req = request(
        12,
        jobspec(&["sleep", "100"], json!({"per_slot": 1}), json!({})),
        r_one("vm", "0"),
        &[(0, &ex.exec_address)],
    );
    let mut first = c.start(req.clone()).await.unwrap().into_inner();
    while kind(&first.message().await.unwrap().unwrap()) != "start" {}
    let mut second = c.start(req).await.unwrap().into_inner();
    assert_eq!(kind(&second.message().await.unwrap().unwrap()), "start");
    c.exception(ExecExceptionRequest {
        id: 12,
        r#type: "cancel".into(),
        severity: 0,
        note: String::new(),
    })
    .await
    .unwrap();
    assert_eq!(finish_status(&collect(second).await), 36608);
    drop(first);
    ex.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_heartbeats_and_rejoins_after_a_lost_stream() {
    let (uri, jm) = fake_jm().await;
    jm.drop_first.store(true, Ordering::SeqCst);
    let mut cfg = config(&uri, "node7");
    cfg.heartbeat = Some(Duration::from_millis(20));
    let ex = server::start(cfg).await.unwrap();
    wait_for("a second hello after the stream was dropped", || {
        jm.hellos.lock().unwrap().len() >= 2
    })
    .await;
    wait_for("heartbeats", || jm.heartbeats.load(Ordering::SeqCst) >= 3).await;
    let hello = jm.hellos.lock().unwrap()[1].clone();
    assert_eq!(hello.exec_address, ex.exec_address);
    assert_eq!(hello.nodes.len(), 1);
    assert_eq!(
        (
            hello.nodes[0].hostname.as_str(),
            hello.nodes[0].cores.as_str(),
            hello.nodes[0].gpus.as_str()
        ),
        ("node7", "0-1", "")
    );
    let addr: SocketAddr = ex
        .exec_address
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    assert_eq!(addr, ex.local_addr);
    assert_ne!(addr.port(), 0);
    ex.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_terminates_running_jobs_and_reports_them() {
    let (uri, jm) = fake_jm().await;
    let ex = exec(&uri, &jm, "vm").await;
    let mut c = client(&ex.exec_address).await;
    let mut stream = c
        .start(request(
            13,
            jobspec(&["sleep", "100"], json!({"per_slot": 1}), json!({})),
            r_one("vm", "0"),
            &[(0, &ex.exec_address)],
        ))
        .await
        .unwrap()
        .into_inner();
    while kind(&stream.message().await.unwrap().unwrap()) != "start" {}
    let stopping = tokio::spawn(ex.stop());
    let rest = collect(stream).await;
    assert_eq!(finish_status(&rest), 36608);
    assert!(rest.iter().any(|r| kind(r) == "exception exec 0"));
    tokio::time::timeout(Duration::from_secs(10), stopping)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_that_ignore_sigterm_get_sigkill_after_the_kill_timeout() {
    let (uri, jm) = fake_jm().await;
    let mut cfg = config(&uri, "vm");
    cfg.kill_timeout = Duration::from_millis(500);
    let ex = server::start(cfg).await.unwrap();
    wait_for("hello", || !jm.hellos.lock().unwrap().is_empty()).await;
    let mut c = client(&ex.exec_address).await;
    let js = jobspec(
        &["sh", "-c", "trap '' TERM; echo ready; sleep 100"],
        json!({"per_slot": 1}),
        json!({}),
    );
    let mut stream = c
        .start(request(14, js, r_one("vm", "0"), &[(0, &ex.exec_address)]))
        .await
        .unwrap()
        .into_inner();
    // Wait until the trap is installed.
    while kind(&stream.message().await.unwrap().unwrap()) != "output data" {}
    let t0 = Instant::now();
    c.exception(ExecExceptionRequest {
        id: 14,
        r#type: "cancel".into(),
        severity: 0,
        note: String::new(),
    })
    .await
    .unwrap();
    let rest = collect(stream).await;
    assert!(t0.elapsed() >= Duration::from_millis(500));
    assert_eq!(finish_status(&rest), (128 + 9) << 8);
    ex.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_forwards_exceptions_to_its_peers() {
    let (uri, jm) = fake_jm().await;
    let a = exec(&uri, &jm, "hosta").await;
    let b = exec(&uri, &jm, "hostb").await;
    let js = json!({
        "version": 1,
        "resources": [{"type": "node", "count": 2, "with": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}]}],
        "tasks": [{"command": ["sleep", "100"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": 0, "environment": {"PATH": std::env::var("PATH").unwrap()}}},
    })
    .to_string();
    let r = json!({"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"core": "0"}}], "nodelist": ["hosta,hostb"]}}).to_string();
    let mut c = client(&a.exec_address).await;
    let mut stream = c
        .start(request(
            15,
            js,
            r,
            &[(0, &a.exec_address), (1, &b.exec_address)],
        ))
        .await
        .unwrap()
        .into_inner();
    let mut all = Vec::new();
    loop {
        let r = stream.message().await.unwrap().unwrap();
        let started = kind(&r) == "start";
        all.push(r);
        if started {
            break;
        }
    }
    // `start` says the leader's own tasks run; the peer may not know the
    // job yet. The exception is forwarded once it does, and ends rank 1 too.
    let t0 = Instant::now();
    c.exception(ExecExceptionRequest {
        id: 15,
        r#type: "cancel".into(),
        severity: 0,
        note: String::new(),
    })
    .await
    .unwrap();
    all.extend(collect(stream).await);
    assert!(t0.elapsed() < Duration::from_secs(4));
    assert_leader_frame(&all, 36608);
    wait_for("the peer to forget the job", || b.service.jobs().is_empty()).await;
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_jobs_own_credential_reaches_its_tasks() {
    let (uri, jm) = fake_jm().await;
    let ex = exec(&uri, &jm, "vm").await;
    let mut js: Value = serde_json::from_str(&jobspec(
        &["sh", "-c", "echo ${FLUXGATE_TOKEN-unset}"],
        json!({"per_slot": 1}),
        json!({}),
    ))
    .unwrap();
    // A credential stored in a jobspec (copied there by an old client).
    js["attributes"]["system"]["environment"]["FLUXGATE_TOKEN"] = json!("stored-owner-token");
    let mut req = request(
        31,
        js.to_string(),
        r_one("vm", "0"),
        &[(0, &ex.exec_address)],
    );
    let all = run(&ex.exec_address, req.clone()).await;
    assert_eq!(stdout_by_task(&all)["0"], "unset\n");
    req.id = 32;
    req.credential = "job-credential".into();
    let all = run(&ex.exec_address, req).await;
    assert_eq!(stdout_by_task(&all)["0"], "job-credential\n");
    ex.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_session_carries_many_jobs_each_tagged_with_its_id() {
    use fluxgate_proto::v1::SessionRequest;
    use fluxgate_proto::v1::session_request::Request as S;

    let (uri, jm) = fake_jm().await;
    let ex = exec(&uri, &jm, "vm").await;
    let r = json!({"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0-1"}}]}}).to_string();
    let sim = |secs: f64| {
        jobspec(
            &["true"],
            json!({"per_slot": 1}),
            json!({"exec": {"test": {"run_duration": secs}}}),
        )
    };
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    let send = |r: S| {
        let tx = tx.clone();
        async move {
            tx.send(SessionRequest { request: Some(r) }).await.unwrap();
        }
    };
    let mut c = client(&ex.exec_address).await;
    let mut stream = c
        .session(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    send(S::Start(request(21, sim(0.1), r.clone(), &[]))).await;
    send(S::Start(request(22, sim(100.0), r.clone(), &[]))).await;
    let mut lost = request(23, String::new(), String::new(), &[]);
    lost.reattach = true;
    send(S::Start(lost)).await;

    let mut by_job: HashMap<u64, Vec<String>> = HashMap::new();
    let mut finals = 0;
    let read = async {
        while finals < 3 {
            let resp = stream
                .message()
                .await
                .unwrap()
                .expect("the session stays open");
            let k = kind(&resp);
            if k == "start" && resp.id == 22 {
                // Cancel the long job once it runs, on the same session.
                send(S::Exception(ExecExceptionRequest {
                    id: 22,
                    r#type: "cancel".into(),
                    severity: 0,
                    note: String::new(),
                }))
                .await;
            }
            if k.ends_with(" true") && k.starts_with("release") {
                finals += 1;
            }
            by_job.entry(resp.id).or_default().push(k);
        }
    };
    tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .expect("every job of the session ended within 20s");
    assert_eq!(by_job[&21], TEST_RUN);
    assert!(
        by_job[&22].contains(&"finish 15".to_string()),
        "{:?}",
        by_job[&22]
    );
    assert_eq!(by_job[&23], ["exception exec 0", "release all true"]);
    ex.stop().await.unwrap();
}
