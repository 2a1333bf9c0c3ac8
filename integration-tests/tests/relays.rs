//! A tree of exec services: two relays carry the joins of the services
//! below them, so the job manager holds a stream per relay; jobs run across
//! the tree, survive a relay's death (its subtree joins the job manager
//! directly) and a job manager killed and restarted under the tree.

use fluxgate_integration_tests::*;
use fluxgate_proto::v1 as pb;
use fluxgate_shared::{Event, IdSet, JobId};

/// Nodes: node0 and node1 are relays (and run jobs), node2-3 join through
/// node0, node4-5 through node1.
const NODES: usize = 6;

/// A loopback address no one listens on yet.
fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").to_string()
}

/// The instance and the index of each relay's process.
async fn tree() -> (Instance, [usize; 2]) {
    let mut inst = Instance::start_bare(NODES).await;
    let addrs = [free_addr(), free_addr()];
    let mut relays = [0; 2];
    for (i, addr) in addrs.iter().enumerate() {
        let spec = inst.exec_spec(&host(i), 1).listen(addr).args(["--relay"]);
        relays[i] = inst.add_exec(spec);
    }
    // A relay takes joins once it has joined itself: before that a node
    // below it would join the job manager directly, and the tree would not
    // be the one the tests take down.
    inst.wait_online(2).await;
    for i in 2..NODES {
        // Through the relay first; the job manager itself when it is gone.
        let parent = &addrs[(i - 2) / 2];
        let spec = Exec::new(&format!("http://{parent},{}", inst.uri))
            .hostname(&host(i))
            .cores(Cores::Count(1))
            .kill_timeout(2.0);
        inst.add_exec(spec);
    }
    inst.wait_up(NODES).await;
    (inst, relays)
}

/// Every task prints its rank; the job's output lines, sorted.
async fn ranks_job(inst: &Instance, nodes: u64) -> (JobId, Vec<String>) {
    let spec = cmd(&["printenv", "FLUX_TASK_RANK"])
        .nodes(nodes)
        .ntasks(nodes);
    let id = inst.submit(&spec, None).await;
    let ev = inst.wait_clean(id).await;
    let finish = ev.iter().find(|e| e.name == "finish").expect("finish");
    assert_eq!(
        finish.context.as_ref().unwrap()["status"],
        0,
        "{:?}",
        names(&ev)
    );
    let mut out = output_data(&inst.log(id, "output").await);
    out.sort();
    (id, out)
}

fn expected(n: usize) -> Vec<String> {
    let mut v: Vec<String> = (0..n).map(|i| format!("{i}\n")).collect();
    v.sort();
    v
}

/// The ranks named by the resource journal's `offline` events.
async fn offline_ranks(inst: &Instance) -> IdSet {
    let mut journal = inst
        .resource()
        .await
        .journal(pb::JournalRequest {})
        .await
        .expect("journal")
        .into_inner();
    let mut down = IdSet::new();
    loop {
        let e = journal.message().await.expect("journal").expect("sentinel");
        if e.sentinel {
            return down;
        }
        let ev = Event::parse_json(&e.line).expect("RFC 18");
        if ev.name == "offline" {
            let idset = ev.context.as_ref().expect("context")["idset"]
                .as_str()
                .expect("idset")
                .to_string();
            down = down.union(&IdSet::parse(&idset).expect("idset"));
        }
    }
}

async fn drain(inst: &Instance, targets: &str) {
    inst.resource()
        .await
        .drain(pb::DrainRequest {
            targets: targets.into(),
            reason: "relays only".into(),
            mode: 0,
        })
        .await
        .expect("drain");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_run_across_relays_and_survive_a_relay_dying() {
    let (mut inst, relays) = tree().await;
    let (_, out) = ranks_job(&inst, NODES as u64).await;
    assert_eq!(out, expected(NODES));

    // A job on the relayed nodes only, running while relay node0 dies.
    drain(&inst, "0-1").await;
    let id = inst.submit(&sleeper("3", 4).ntasks(4), None).await;
    inst.events_until(id, "eventlog", "start").await;
    assert!(offline_ranks(&inst).await.is_empty());
    inst.kill_exec(relays[0]);
    // node2 and node3 went down with their relay's stream (they joined
    // through it) and join the job manager directly; node0 stays down.
    inst.wait_online(NODES - 1).await;
    let down = offline_ranks(&inst).await;
    for rank in [0, 2, 3] {
        assert!(down.contains(rank), "rank {rank} not offline in {down}");
    }
    let ev = inst.wait_clean(id).await;
    assert!(
        !ev.iter().any(|e| e.name == "exception"),
        "{:?}",
        names(&ev)
    );
    let finish = ev.iter().find(|e| e.name == "finish").expect("finish");
    assert_eq!(finish.context.as_ref().unwrap()["status"], 0);

    // The re-parented nodes run jobs again.
    let (_, out) = ranks_job(&inst, 4).await;
    assert_eq!(out, expected(4));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tree_rejoins_a_job_manager_killed_under_it() {
    let (mut inst, _) = tree().await;
    let id = inst
        .submit(&sleeper("3", NODES as u64).ntasks(NODES as u64), None)
        .await;
    inst.events_until(id, "eventlog", "start").await;
    // SIGKILL: every relay's stream breaks; the relays join the new job
    // manager and their subtrees join again through them.
    inst.restart_jm(false).await;
    inst.wait_up(NODES).await;
    let ev = inst.wait_clean(id).await;
    let finish = ev.iter().find(|e| e.name == "finish").expect("finish");
    assert_eq!(
        finish.context.as_ref().unwrap()["status"],
        0,
        "{:?}",
        names(&ev)
    );
    let (_, out) = ranks_job(&inst, NODES as u64).await;
    assert_eq!(out, expected(NODES));
}
