//! Containment on this machine's cgroups (run as root, as CI does): the
//! whole tree of a job ends with it, its CPUs and memory and process count
//! hold, and its usage is reported.

mod common;

use std::time::{Duration, Instant};

use fluxgate_exec::config::Config;
use fluxgate_exec::server::{self, Running};
use fluxgate_proto::v1::exec_client::ExecClient;
use fluxgate_proto::v1::start_response::Response as R;
use fluxgate_proto::v1::{ExecExceptionRequest, StartRequest, StartResponse};
use fluxgate_shared::IdSet;
use fluxgate_shared::job::usage::{JobUsage, NodeUsage};
use serde_json::{Value, json};
use tonic::Streaming;

use common::{FakeJm, fake_jm, wait_for};

/// An exec service with `config` applied, joined to a fake job manager,
/// and sure to contain its jobs.
async fn exec(jm_uri: &str, jm: &FakeJm, tweak: impl FnOnce(&mut Config)) -> Running {
    let mut c = Config::single(jm_uri, "vm", IdSet::from_range(0, 1));
    c.kill_timeout = Duration::from_secs(2);
    tweak(&mut c);
    let before = jm.hellos.lock().unwrap().len();
    let running = server::start(c).await.unwrap();
    wait_for("hello", || jm.hellos.lock().unwrap().len() > before).await;
    let mode = jm.hellos.lock().unwrap()[before].nodes[0]
        .containment
        .clone();
    assert!(
        mode == "v1" || mode == "v2",
        "these tests need a writable cgroup hierarchy (root); this node runs in mode {mode:?}"
    );
    running
}

fn request(id: u64, command: &[&str], options: Value) -> StartRequest {
    let jobspec = json!({
        "version": 1,
        "resources": [{"type": "slot", "count": 1, "label": "task",
                       "with": [{"type": "core", "count": 1}]}],
        "tasks": [{"command": command, "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {
            "duration": 0,
            "environment": {"PATH": std::env::var("PATH").unwrap()},
            "shell": {"options": options},
        }},
    });
    let r = json!({"version": 1, "execution": {
        "R_lite": [{"rank": "0", "children": {"core": "0"}}],
        "nodelist": ["vm"], "starttime": 0.0, "expiration": 0.0}});
    StartRequest {
        id,
        userid: 0,
        jobspec: jobspec.to_string(),
        r: r.to_string(),
        reattach: false,
        ranks: String::new(),
        peers: Default::default(),
        credential: String::new(),
    }
}

async fn start(ex: &Running, mut req: StartRequest) -> Streaming<StartResponse> {
    req.peers.insert(0, ex.exec_address.clone());
    let mut c = ExecClient::connect(ex.exec_address.clone()).await.unwrap();
    c.start(req).await.unwrap().into_inner()
}

/// Responses until `stop` holds for one (included) or the stream ends.
async fn until(
    stream: &mut Streaming<StartResponse>,
    mut stop: impl FnMut(&StartResponse) -> bool,
) -> Vec<StartResponse> {
    let mut all = Vec::new();
    let fut = async {
        while let Some(r) = stream.message().await.unwrap() {
            let done = stop(&r);
            all.push(r);
            if done {
                break;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .expect("the job's stream did not get there within 60s");
    all
}

async fn run(ex: &Running, req: StartRequest) -> Vec<StartResponse> {
    let mut stream = start(ex, req).await;
    until(&mut stream, |_| false).await
}

fn events(all: &[StartResponse], output: bool) -> Vec<Value> {
    all.iter()
        .filter_map(|r| match (r.response.as_ref(), output) {
            (Some(R::OutputEvent(l)), true) | (Some(R::ExecEvent(l)), false) => {
                Some(serde_json::from_str(l).unwrap())
            }
            _ => None,
        })
        .collect()
}

fn stream_text(all: &[StartResponse], stream: &str) -> String {
    events(all, true)
        .iter()
        .filter(|e| e["name"] == "data" && e["context"]["stream"] == stream)
        .filter_map(|e| e["context"]["data"].as_str().map(str::to_string))
        .collect()
}

fn finish_status(all: &[StartResponse]) -> i32 {
    all.iter()
        .find_map(|r| match r.response.as_ref() {
            Some(R::Finish(f)) => Some(f.status),
            _ => None,
        })
        .expect("a finish")
}

fn exceptions(all: &[StartResponse]) -> Vec<(String, String)> {
    all.iter()
        .filter_map(|r| match r.response.as_ref() {
            Some(R::Exception(e)) => Some((e.r#type.clone(), e.note.clone())),
            _ => None,
        })
        .collect()
}

/// The usage the job's `Finish` carries to the job manager.
fn usage(all: &[StartResponse]) -> JobUsage {
    let nodes = all
        .iter()
        .find_map(|r| match r.response.as_ref() {
            Some(R::Finish(f)) => Some(f.usage.clone()),
            _ => None,
        })
        .expect("a finish");
    assert!(!nodes.is_empty(), "no usage in the finish");
    JobUsage::new(
        nodes
            .iter()
            .map(|n| NodeUsage {
                ranks: n.ranks.clone(),
                hostname: n.hostname.clone(),
                user: n.user_ns as f64 / 1e9,
                system: n.system_ns as f64 / 1e9,
                max_rss: n.peak_memory,
            })
            .collect(),
    )
}

/// True while process `pid` exists (and is not a zombie).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

/// Poll until `pid` is gone, failing after 10 s.
async fn gone(pid: i32) {
    wait_for(&format!("process {pid} to be gone"), || !alive(pid)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setsid_child_holding_stdout_is_gone_when_the_job_ends() {
    let (uri, jm) = fake_jm().await;
    let ex = exec(&uri, &jm, |_| {}).await;
    let t0 = Instant::now();
    let all = run(
        &ex,
        request(1, &["sh", "-c", "setsid sleep 600 & echo $!"], json!({})),
    )
    .await;
    let text = stream_text(&all, "stdout");
    let pid: i32 = text.trim().parse().unwrap_or_else(|_| panic!("{all:?}"));
    assert_eq!(finish_status(&all), 0);
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "the job waited for its setsid child"
    );
    gone(pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_kills_new_sessions_and_process_groups() {
    let (uri, jm) = fake_jm().await;
    let ex = exec(&uri, &jm, |_| {}).await;
    let script = "setsid sh -c 'trap \"\" TERM; sleep 600' & echo $!; \
                  (set -m; sleep 600 & echo $!); sleep 600";
    let mut stream = start(&ex, request(2, &["sh", "-c", script], json!({}))).await;
    let mut all = Vec::new();
    let mut pids: Vec<i32> = Vec::new();
    while pids.len() < 2 {
        let more = until(&mut stream, |r| {
            matches!(r.response, Some(R::OutputEvent(_)))
        })
        .await;
        assert!(
            !more.is_empty(),
            "the job ended before printing its pids: {all:?}"
        );
        all.extend(more);
        pids = stream_text(&all, "stdout")
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
    }
    let mut c = ExecClient::connect(ex.exec_address.clone()).await.unwrap();
    c.exception(ExecExceptionRequest {
        id: 2,
        r#type: "cancel".into(),
        severity: 0,
        note: String::new(),
    })
    .await
    .unwrap();
    until(&mut stream, |_| false).await;
    for pid in pids {
        gone(pid).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_cannot_widen_its_cpus() {
    let (uri, jm) = fake_jm().await;
    let ex = exec(&uri, &jm, |_| {}).await;
    let script = "taskset -pc 0-1 $$ >/dev/null 2>&1; \
                  grep Cpus_allowed_list /proc/self/status | cut -f2";
    let all = run(&ex, request(3, &["sh", "-c", script], json!({}))).await;
    assert_eq!(stream_text(&all, "stdout").trim(), "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_its_memory_limit_a_job_fails_with_the_memory_exception() {
    let (uri, jm) = fake_jm().await;
    let ex = exec(&uri, &jm, |_| {}).await;
    let limit = json!({"cgroup": {"memory": {"max": "32M"}}});
    let dd = |mib: u32| {
        vec![
            "dd".to_string(),
            "if=/dev/zero".into(),
            "of=/dev/null".into(),
            format!("bs={mib}M"),
            "count=1".into(),
        ]
    };
    let under = dd(4);
    let under: Vec<&str> = under.iter().map(String::as_str).collect();
    let all = run(&ex, request(4, &under, limit.clone())).await;
    assert_eq!(finish_status(&all), 0, "{:?}", exceptions(&all));
    assert!(exceptions(&all).is_empty());

    let over = dd(128);
    let over: Vec<&str> = over.iter().map(String::as_str).collect();
    let all = run(&ex, request(5, &over, limit)).await;
    assert_ne!(finish_status(&all), 0);
    let exc = exceptions(&all);
    let (kind, note) = exc.first().expect("an oom exception");
    assert_eq!(kind, "oom");
    assert!(note.contains("went over its memory limit of 32M"), "{note}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_is_stopped_by_pids_max_and_the_node_goes_on() {
    let (uri, jm) = fake_jm().await;
    let ex = exec(&uri, &jm, |c| c.cgroup.pids_max = Some(16)).await;
    let script = "for i in $(seq 200); do sleep 5 & done; wait";
    let all = run(&ex, request(6, &["sh", "-c", script], json!({}))).await;
    let stderr = stream_text(&all, "stderr");
    assert!(
        stderr.contains("fork") || stderr.contains("Resource temporarily unavailable"),
        "{stderr}"
    );
    let all = run(&ex, request(7, &["echo", "still here"], json!({}))).await;
    assert_eq!(stream_text(&all, "stdout"), "still here\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recursive_fork_bomb_is_held_by_pids_max_and_cancel_ends_all_of_it() {
    let (uri, jm) = fake_jm().await;
    let ex = exec(&uri, &jm, |c| c.cgroup.pids_max = Some(32)).await;
    // Every process forks two more: held at 32 by pids.max, forks fail.
    // The tree may unwind by itself once they do; its root then becomes a
    // sleep (exec: no fork needed), so the job runs until it is cancelled.
    let bomb = "b() { b & b & wait; }; b; exec sleep 1000";
    let mut stream = start(&ex, request(9, &["sh", "-c", bomb], json!({}))).await;
    let mut all = Vec::new();
    while !stream_text(&all, "stderr").contains("fork") {
        let more = until(&mut stream, |r| {
            matches!(r.response, Some(R::OutputEvent(_)))
        })
        .await;
        assert!(!more.is_empty(), "the bomb ended by itself: {all:?}");
        all.extend(more);
    }
    let mut c = ExecClient::connect(ex.exec_address.clone()).await.unwrap();
    c.exception(ExecExceptionRequest {
        id: 9,
        r#type: "cancel".into(),
        severity: 0,
        note: String::new(),
    })
    .await
    .unwrap();
    // The stream ends once the job is released: its cgroup is empty then.
    all.extend(until(&mut stream, |_| false).await);
    assert!(
        all.iter()
            .any(|r| matches!(&r.response, Some(R::Release(rel)) if rel.r#final)),
        "no final release"
    );
    let all = run(&ex, request(10, &["echo", "still here"], json!({}))).await;
    assert_eq!(stream_text(&all, "stdout"), "still here\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_reports_the_cpu_a_busy_loop_burned_and_its_peak_memory() {
    let (uri, jm) = fake_jm().await;
    let ex = exec(&uri, &jm, |_| {}).await;
    // The shell's own CPU time (utime + stime, in ticks), printed before it
    // exits: what the job's usage must show, within 20%.
    let script = "i=0; while [ $i -lt 1500000 ]; do i=$((i+1)); done; \
                  cut -d' ' -f14,15 /proc/$$/stat";
    let all = run(&ex, request(8, &["sh", "-c", script], json!({}))).await;
    let ticks: Vec<f64> = stream_text(&all, "stdout")
        .split_whitespace()
        .map(|t| t.parse().unwrap())
        .collect();
    let burned = ticks.iter().sum::<f64>() / 100.0;
    let u = usage(&all);
    assert_eq!(u.nodes.len(), 1);
    let reported = u.total.cpu_time();
    assert!(burned > 0.2, "the loop burned only {burned}s");
    assert!(
        (reported - burned).abs() <= 0.2 * burned,
        "usage says {reported}s, the loop burned {burned}s"
    );
    assert!(u.total.max_rss > 0, "{u:?}");
}
