//! The `fluxgate-exec` binary: flags, virtual nodes, health, SIGTERM.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fluxgate_proto::v1::StartRequest;
use fluxgate_proto::v1::exec_client::ExecClient;
use fluxgate_proto::v1::start_response::Response as R;
use serde_json::json;

use common::fake_jm;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtual_nodes_run_a_two_rank_job_and_sigterm_exits_cleanly() {
    let (jm_uri, jm) = fake_jm().await;

    let mut child = Command::new(env!("CARGO_BIN_EXE_fluxgate-exec"))
        .args(["--hostname", "node", "--virtual", "2", "--cores-count", "2"])
        .env("FLUXGATE_JOB_MANAGER", jm_uri.clone())
        .env("FLUXGATE_KILL_TIMEOUT", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let address = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        line.trim().to_string()
    })
    .await
    .unwrap();
    assert!(address.starts_with("http://127.0.0.1:"), "{address}");

    jm.wait_hellos(1).await;
    let hello = jm.hellos.lock().unwrap()[0].clone();
    assert_eq!(hello.exec_address, address);
    let nodes: Vec<_> = hello
        .nodes
        .iter()
        .map(|n| (n.hostname.as_str(), n.cores.as_str(), n.gpus.as_str()))
        .collect();
    assert_eq!(nodes, [("node-v0", "0-1", ""), ("node-v1", "0-1", "")]);

    let channel = tonic::transport::Endpoint::from_shared(address.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    let status = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "fluxgate.v1.Exec".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        status.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );

    // Both ranks are virtual nodes of this one process: no fan-out needed.
    let js = json!({
        "version": 1,
        "resources": [{"type": "node", "count": 2, "with": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}]}],
        "tasks": [{"command": ["printenv", "FLUX_TASK_RANK"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": 0, "environment": {"PATH": std::env::var("PATH").unwrap()}}},
    });
    let r = json!({"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"core": "0"}}], "nodelist": ["node-v[0-1]"]}});
    let mut exec = ExecClient::new(channel);
    let mut stream = exec
        .start(StartRequest {
            id: 42,
            userid: 0,
            jobspec: js.to_string(),
            r: r.to_string(),
            reattach: false,
            ranks: String::new(),
            peers: [(0, address.clone()), (1, address.clone())].into(),
            credential: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut data = Vec::new();
    let mut last = None;
    while let Some(r) = stream.message().await.unwrap() {
        if let Some(R::OutputEvent(l)) = &r.response {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            if let Some(d) = v["context"]["data"].as_str() {
                data.push((
                    v["context"]["rank"].as_str().unwrap().to_string(),
                    d.to_string(),
                ));
            }
        }
        last = r.response;
    }
    data.sort();
    assert_eq!(
        data,
        [
            ("0".to_string(), "0\n".to_string()),
            ("1".into(), "1\n".into())
        ]
    );
    assert!(matches!(last, Some(R::Release(rel)) if rel.r#final && rel.ranks == "all"));

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn bad_flags_exit_2_with_a_message_naming_the_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_fluxgate-exec"))
        .args(["--job-manager", "http://127.0.0.1:1", "--cores", "x-y"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--cores \"x-y\" is not an idset"), "{err}");
}

/// The body of `GET /metrics` at `addr`.
async fn scrape(addr: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    body.to_string()
}

fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_file_json_logs_with_job_ids_and_metrics() {
    let (jm_uri, jm) = fake_jm().await;
    // A port picked here rather than 0, so the test knows where to scrape.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let metrics_addr = format!("127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("exec.toml");
    std::fs::write(
        &config,
        format!(
            "job_manager = \"{jm_uri}\"\nhostname = \"node\"\ncores_count = 2\n\
             kill_timeout = 1\n[metrics]\nlisten = \"{metrics_addr}\"\n"
        ),
    )
    .unwrap();
    let log = dir.path().join("exec.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_fluxgate-exec"))
        .args(["--log-format", "json"])
        .env("FLUXGATE_EXEC_CONFIG", &config)
        .env_remove("FLUXGATE_JOB_MANAGER")
        // A job's start and end are logged at debug, as flux-core's job-exec does.
        .env("FLUXGATE_LOG", "info,fluxgate_exec=debug")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let address = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        line.trim().to_string()
    })
    .await
    .unwrap();
    jm.wait_hellos(1).await;
    assert_eq!(jm.hellos.lock().unwrap()[0].nodes[0].cores, "0-1");

    // Job 1: two tasks, rank 1 exits 1. Job 2: a command that does not exist.
    let path = std::env::var("PATH").unwrap();
    let jobspec = |argv: serde_json::Value| {
        json!({
            "version": 1,
            "resources": [{"type": "slot", "count": 2, "label": "task", "with": [{"type": "core", "count": 1}]}],
            "tasks": [{"command": argv, "slot": "task", "count": {"per_slot": 1}}],
            "attributes": {"system": {"duration": 0, "environment": {"PATH": path}}},
        })
        .to_string()
    };
    let r = json!({"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0-1"}}], "nodelist": ["node"]}});
    let mut exec = ExecClient::connect(address.clone()).await.unwrap();
    let jobs = [
        (
            4242u64,
            jobspec(json!(["sh", "-c", "exit $FLUX_TASK_RANK"])),
        ),
        (4343u64, jobspec(json!(["/nonexistent/command"]))),
    ];
    for (id, js) in &jobs {
        let mut stream = exec
            .start(StartRequest {
                id: *id,
                userid: 0,
                jobspec: js.clone(),
                r: r.to_string(),
                reattach: false,
                ranks: String::new(),
                peers: [(0, address.clone())].into(),
                credential: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        while stream.message().await.unwrap().is_some() {}
    }

    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = scrape(&metrics_addr).await;
        if metric(&text, "fluxgate_exec_jobs_running") == Some(0.0) {
            break text;
        }
        assert!(Instant::now() < deadline, "jobs still running:\n{text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    for (series, want) in [
        ("fluxgate_exec_jobs_started_total", 2.0),
        ("fluxgate_exec_tasks_started_total", 2.0),
        ("fluxgate_exec_tasks_failed_total", 1.0),
        ("fluxgate_exec_task_start_failures_total", 1.0),
    ] {
        assert_eq!(metric(&text, series), Some(want), "{series}:\n{text}");
    }

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");

    // Every line logged about a job, from the start request to the tasks'
    // end, names it in its span.
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for (id, _) in &jobs {
        let f58 = fluxgate_shared::JobId::from(*id).to_string();
        let about: Vec<&str> = lines
            .iter()
            .filter(|l| l["span"]["job"] == f58.as_str())
            .filter_map(|l| l["fields"]["message"].as_str())
            .collect();
        assert_eq!(about, ["start", "tasks done"], "{f58} in:\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_descriptor_the_service_inherits_never_reaches_a_task() {
    use nix::fcntl::{OFlag, open};
    use nix::sys::stat::Mode;
    use std::os::fd::AsRawFd;

    let (jm_uri, jm) = fake_jm().await;
    // A file the starting shell had open, left open across exec (no
    // O_CLOEXEC), as a redirection or a leaked pipe would be.
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "secret\n").unwrap();
    let leaked = open(&secret, OFlag::O_RDONLY, Mode::empty()).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_fluxgate-exec"))
        .args(["--hostname", "node", "--cores-count", "1"])
        .env("FLUXGATE_JOB_MANAGER", jm_uri.clone())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let fd = leaked.as_raw_fd();
    drop(leaked);
    let stdout = child.stdout.take().unwrap();
    let address = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        line.trim().to_string()
    })
    .await
    .unwrap();
    jm.wait_hellos(1).await;

    // The task's PMI socket (PMI_FD) is the one descriptor it is given.
    let script = format!(
        "test -n \"$PMI_FD\" || echo no PMI_FD; \
         ls /proc/self/fd | grep -vx \"$PMI_FD\" | tr '\\n' ' '; echo; \
         cat /proc/self/fd/{fd} 2>/dev/null || echo unreadable"
    );
    let js = json!({
        "version": 1,
        "resources": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}],
        "tasks": [{"command": ["sh", "-c", script], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": 0, "environment": {"PATH": "/usr/bin:/bin"}}},
    });
    let r = json!({"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0"}}], "nodelist": ["node"]}});
    let mut exec = ExecClient::connect(address.clone()).await.unwrap();
    let mut stream = exec
        .start(StartRequest {
            id: 7,
            userid: 0,
            jobspec: js.to_string(),
            r: r.to_string(),
            reattach: false,
            ranks: String::new(),
            peers: [(0, address.clone())].into(),
            credential: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut text = String::new();
    while let Some(r) = stream.message().await.unwrap() {
        if let Some(R::OutputEvent(l)) = &r.response {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            if v["context"]["stream"] == "stdout"
                && let Some(d) = v["context"]["data"].as_str()
            {
                text.push_str(d);
            }
        }
    }
    // 0-2, and the directory `ls` itself has open (besides PMI_FD).
    assert_eq!(text, "0 1 2 3 \nunreadable\n", "fd {fd} was inherited");

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");
}

/// An exec service whose job manager stops answering its heartbeats (cut
/// off on the network) kills its jobs on its own once the fence the job
/// manager asked for has passed: a `node-failure` exception, then the
/// job's end, in the job's stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_service_cut_off_past_its_fence_kills_its_jobs() {
    let (jm_uri, jm) = fake_jm().await;
    *jm.fence.lock().unwrap() = 1.0;
    jm.ack.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut child = Command::new(env!("CARGO_BIN_EXE_fluxgate-exec"))
        .args(["--hostname", "node0", "--cores-count", "1"])
        .env("FLUXGATE_JOB_MANAGER", jm_uri.clone())
        .env("FLUXGATE_KILL_TIMEOUT", "30")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let address = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        line.trim().to_string()
    })
    .await
    .unwrap();
    jm.wait_hellos(1).await;
    let js = json!({
        "version": 1,
        "resources": [{"type": "node", "count": 1, "with": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}]}],
        "tasks": [{"command": ["sleep", "300"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": 0, "environment": {"PATH": std::env::var("PATH").unwrap()}}},
    });
    let r = json!({"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0"}}], "nodelist": ["node0"]}});
    let channel = tonic::transport::Endpoint::from_shared(address.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut stream = ExecClient::new(channel)
        .start(StartRequest {
            id: 7,
            userid: 0,
            jobspec: js.to_string(),
            r: r.to_string(),
            reattach: false,
            ranks: String::new(),
            peers: [(0, address.clone())].into(),
            credential: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    loop {
        let r = stream
            .message()
            .await
            .unwrap()
            .expect("start before the end");
        if matches!(r.response, Some(R::Start(_))) {
            break;
        }
    }
    // The job manager is cut off: no heartbeat is acknowledged any more.
    jm.ack.store(false, std::sync::atomic::Ordering::SeqCst);
    let mut exception = None;
    let mut finish = None;
    let mut last = None;
    while let Some(r) = stream.message().await.unwrap() {
        match &r.response {
            Some(R::Exception(e)) => exception = Some(e.clone()),
            Some(R::Finish(f)) => finish = Some(f.status),
            _ => {}
        }
        last = r.response;
    }
    let exception = exception.expect("an exception");
    assert_eq!(exception.r#type, "node-failure", "{exception:?}");
    assert_eq!(exception.severity, 0);
    // Killed at once (SIGKILL, which the job shell reports as an exit
    // code of 128 + 9), not by a SIGTERM and the 30 s kill timeout.
    assert_eq!(finish, Some((128 + 9) << 8), "a SIGKILLed task's status");
    assert!(matches!(last, Some(R::Release(rel)) if rel.r#final));
    let _ = child.kill();
    let _ = child.wait();
}
