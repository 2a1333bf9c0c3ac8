//! A job over five exec services of fan-out 2 (in this process, over real
//! gRPC on 127.0.0.1:0): the leader starts the services of ranks 1 and 3,
//! which start those of ranks 2 and 4. The job manager's side is a fake
//! `Node` server; the leader's stream is read as the job manager reads it.

mod common;

use std::time::Duration;

use fluxgate_exec::config::Config;
use fluxgate_exec::server::{self, Running};
use fluxgate_proto::v1::exec_client::ExecClient;
use fluxgate_proto::v1::start_response::Response as R;
use fluxgate_proto::v1::{
    ExecInputRequest, ExecKillRequest, ExecTasksRequest, StartRequest, StartResponse,
};
use fluxgate_shared::IdSet;
use serde_json::{Value, json};
use tonic::Streaming;
use tonic::transport::Channel;

use common::{FakeJm, fake_jm, wait_for};

/// Exec services of the job.
const NODES: usize = 5;

/// Exec services `node0..node4`, each with two children at most in a job's
/// tree, joined to a fake job manager.
async fn services(jm_uri: &str, jm: &FakeJm) -> Vec<Running> {
    let mut all = Vec::new();
    for i in 0..NODES {
        let mut c = Config::single(jm_uri, &format!("node{i}"), IdSet::from_range(0, 1));
        c.kill_timeout = Duration::from_secs(2);
        c.fanout = 2;
        all.push(server::start(c).await.unwrap());
        jm.wait_hellos(i + 1).await;
    }
    all
}

async fn client(addr: &str) -> ExecClient<Channel> {
    ExecClient::connect(addr.to_string()).await.unwrap()
}

/// A job of one task per node running `script`, started on node0.
fn request(id: u64, script: &str, execs: &[Running]) -> StartRequest {
    let jobspec = json!({
        "version": 1,
        "resources": [{"type": "node", "count": NODES, "with": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}]}],
        "tasks": [{"command": ["sh", "-c", script], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {
            "duration": 0,
            "environment": {"PATH": std::env::var("PATH").unwrap()},
            // Standard input from Exec.Input, as `fluxgate run` asks.
            "shell": {"options": {"input": {"stdin": {"type": "service"}}}},
        }},
    })
    .to_string();
    let hosts: Vec<String> = (0..NODES).map(|i| format!("node{i}")).collect();
    let r = json!({"version": 1, "execution": {"R_lite": [{"rank": format!("0-{}", NODES - 1), "children": {"core": "0"}}], "nodelist": hosts}}).to_string();
    StartRequest {
        id,
        userid: 0,
        jobspec,
        r,
        reattach: false,
        ranks: String::new(),
        peers: execs
            .iter()
            .enumerate()
            .map(|(i, e)| (i as u32, e.exec_address.clone()))
            .collect(),
        credential: String::new(),
    }
}

/// The rest of a stream, to its end (20 s at most).
async fn collect(stream: &mut Streaming<StartResponse>) -> Vec<StartResponse> {
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

/// Responses up to and including `start`.
async fn until_start(stream: &mut Streaming<StartResponse>) -> Vec<StartResponse> {
    let mut all = Vec::new();
    loop {
        let r = stream.message().await.unwrap().expect("a start");
        let start = matches!(r.response, Some(R::Start(_)));
        all.push(r);
        if start {
            return all;
        }
    }
}

/// Stdout lines of the output events, sorted.
fn stdout_lines(all: &[StartResponse]) -> Vec<String> {
    let mut lines: Vec<String> = all
        .iter()
        .filter_map(|r| match &r.response {
            Some(R::OutputEvent(l)) => Some(serde_json::from_str::<Value>(l).unwrap()),
            _ => None,
        })
        .filter(|e| e["name"] == "data" && e["context"]["stream"] == "stdout")
        .filter_map(|e| e["context"]["data"].as_str().map(str::to_string))
        .collect();
    lines.sort();
    lines
}

/// The task ranks an exec service lists for job `id`.
async fn task_ranks(addr: &str, id: u64) -> Vec<u32> {
    client(addr)
        .await
        .tasks(ExecTasksRequest { id })
        .await
        .unwrap()
        .into_inner()
        .tasks
        .iter()
        .map(|t| t.task_rank)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_input_and_the_end_go_through_the_tree() {
    let (uri, jm) = fake_jm().await;
    let execs = services(&uri, &jm).await;
    let mut leader = client(&execs[0].exec_address).await;
    let req = request(3, "read line; echo $FLUX_TASK_RANK got $line", &execs);
    let mut stream = leader.start(req).await.unwrap().into_inner();
    let mut all = until_start(&mut stream).await;

    // The leader lists every task; an interior node its subtree's, a leaf
    // its own.
    assert_eq!(task_ranks(&execs[0].exec_address, 3).await, [0, 1, 2, 3, 4]);
    assert_eq!(task_ranks(&execs[1].exec_address, 3).await, [1, 2]);
    assert_eq!(task_ranks(&execs[3].exec_address, 3).await, [3, 4]);
    assert_eq!(task_ranks(&execs[4].exec_address, 3).await, [4]);
    // The leader started two of the four others itself.
    assert_eq!(
        execs.iter().map(|e| e.service.jobs().len()).sum::<usize>(),
        NODES
    );

    let chunks = vec![
        ExecInputRequest {
            id: 3,
            data: b"hello\n".to_vec(),
            ..Default::default()
        },
        ExecInputRequest {
            id: 3,
            eof: true,
            ..Default::default()
        },
    ];
    leader
        .input(tokio_stream::iter(chunks))
        .await
        .expect("input taken");
    all.extend(collect(&mut stream).await);
    assert_eq!(
        stdout_lines(&all),
        (0..NODES)
            .map(|r| format!("{r} got hello\n"))
            .collect::<Vec<_>>(),
        "each task's output once"
    );
    let kinds: Vec<&R> = all.iter().filter_map(|r| r.response.as_ref()).collect();
    assert_eq!(kinds.iter().filter(|r| matches!(r, R::Start(_))).count(), 1);
    let finishes: Vec<i32> = kinds
        .iter()
        .filter_map(|r| match r {
            R::Finish(f) => Some(f.status),
            _ => None,
        })
        .collect();
    assert_eq!(finishes, [0]);
    match kinds.last() {
        Some(R::Release(rel)) => assert!(rel.r#final && rel.ranks == "all", "{rel:?}"),
        other => panic!("last: {other:?}"),
    }
    // No PMI keys, releases or starts of the parts reach the job manager.
    assert!(!kinds.iter().any(|r| matches!(r, R::Pmi(_))));
    assert_eq!(
        kinds.iter().filter(|r| matches!(r, R::Release(_))).count(),
        1
    );
    for e in &execs {
        wait_for("every part to end", || e.service.jobs().is_empty()).await;
    }
    for e in execs {
        e.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_status_comes_up_and_a_kill_goes_down() {
    let (uri, jm) = fake_jm().await;
    let execs = services(&uri, &jm).await;
    let mut leader = client(&execs[0].exec_address).await;

    // Rank 2, below rank 1, fails the most.
    let req = request(
        4,
        "exit $(( FLUX_TASK_RANK == 2 ? 7 : FLUX_TASK_RANK ))",
        &execs,
    );
    let mut stream = leader.start(req).await.unwrap().into_inner();
    let all = collect(&mut stream).await;
    let finish: Vec<i32> = all
        .iter()
        .filter_map(|r| match &r.response {
            Some(R::Finish(f)) => Some(f.status),
            _ => None,
        })
        .collect();
    assert_eq!(finish, [7 << 8]);

    // A signal to the leader reaches every node's task, through the tree.
    let req = request(5, "sleep 100", &execs);
    let mut stream = leader.start(req).await.unwrap().into_inner();
    until_start(&mut stream).await;
    leader
        .kill(ExecKillRequest { id: 5, signum: 10 })
        .await
        .unwrap();
    let all = collect(&mut stream).await;
    let finish: Vec<i32> = all
        .iter()
        .filter_map(|r| match &r.response {
            Some(R::Finish(f)) => Some(f.status),
            _ => None,
        })
        .collect();
    // SIGUSR1 killed every task (or the job would run on): the shell
    // would exit 128+10.
    assert_eq!(finish, [(128 + 10) << 8]);
    for e in execs {
        e.stop().await.unwrap();
    }
}
