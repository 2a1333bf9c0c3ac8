//! Nodes that die, come back, and stay drained across restarts.

use fluxgate_integration_tests::{Instance, eventually, names};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::jobspec::JobspecBuilder;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_node_stays_drained_across_a_restart() {
    let mut inst = Instance::start(2, 1).await;
    inst.resource()
        .await
        .drain(pb::DrainRequest {
            targets: "node1".into(),
            reason: "bad disk".into(),
            mode: 0,
        })
        .await
        .unwrap();
    inst.restart_jm(false).await;
    let st = inst.status().await;
    assert_eq!(st["drained"], "1", "{st}");
    assert_eq!(st["drain_info"][0]["reason"], "bad disk", "{st}");
    let id = inst.submit(&JobspecBuilder::new(["true"]), None).await;
    inst.wait_clean(id).await;
    assert_eq!(inst.r(id).await.ranks().to_string(), "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_node_stays_drained_when_it_changes_rank() {
    let mut inst = Instance::start(4, 1).await;
    inst.resource()
        .await
        .drain(pb::DrainRequest {
            targets: "node2".into(),
            reason: "bad psu".into(),
            mode: 0,
        })
        .await
        .unwrap();
    // The site reorders its node list: node2 is now rank 0, node0 rank 1.
    inst.restart_jm_with(false, "node2,node0,node1,node3").await;
    let st = inst.status().await;
    assert_eq!(st["drained"], "0", "{st}");
    assert_eq!(st["drain_info"][0]["reason"], "bad psu", "{st}");
    assert_eq!(st["drain_info"][0]["nodelist"], "node2", "{st}");
    // Three nodes are free, and none of them is node2.
    let id = inst
        .submit(&JobspecBuilder::new(["hostname"]).nodes(3), None)
        .await;
    inst.wait_clean(id).await;
    let r = inst.r(id).await;
    assert_eq!(r.ranks().to_string(), "1-3");
    assert_eq!(r.nodelist().unwrap().encode(), "node[0-1,3]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_dies_ends_its_jobs_and_comes_back_online() {
    let mut inst = Instance::start(2, 1).await;
    let id = inst
        .submit(&JobspecBuilder::new(["sleep", "60"]).nodes(2), None)
        .await;
    inst.events_until(id, "eventlog", "start").await;
    inst.kill_exec(1);
    let ev = inst.wait_clean(id).await;
    let exc = ev
        .iter()
        .find(|e| e.name == "exception")
        .unwrap_or_else(|| panic!("no exception: {:?}", names(&ev)));
    let ctx = exc.context.as_ref().unwrap();
    assert_eq!(ctx["severity"], 0);
    let note = ctx["note"].as_str().unwrap();
    assert!(
        ["node1", "rank 1", "rank(s) 1"]
            .iter()
            .any(|n| note.contains(n)),
        "{ctx:?}"
    );
    let st = inst.status().await;
    assert_eq!(st["offline"], "1", "{st}");
    inst.restart_exec(1, 1);
    inst.wait_up(2).await;
    let st = inst.status().await;
    assert_eq!(st["offline"], "", "{st}");
    // The journal saw it go and come back.
    let mut journal = inst
        .resource()
        .await
        .journal(pb::JournalRequest {})
        .await
        .unwrap()
        .into_inner();
    let mut seen = Vec::new();
    loop {
        let e = journal.message().await.unwrap().unwrap();
        if e.sentinel {
            break;
        }
        seen.push(fluxgate_shared::Event::parse_json(&e.line).unwrap().name);
    }
    let offline = seen.iter().position(|n| n == "offline").expect("offline");
    assert!(seen[offline..].iter().any(|n| n == "online"), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resource_eventlog_follows_persistent_events_only() {
    let inst = Instance::start(2, 1).await;
    let mut res = inst.resource().await;
    let mut log = res
        .eventlog(pb::ResourceEventlogRequest { follow: true })
        .await
        .unwrap()
        .into_inner();
    let first = log.message().await.unwrap().unwrap();
    let first = fluxgate_shared::Event::parse_json(&first.line).unwrap();
    assert_eq!(first.name, "resource-define");
    res.drain(pb::DrainRequest {
        targets: "1".into(),
        reason: "test".into(),
        mode: 0,
    })
    .await
    .unwrap();
    let next = log.message().await.unwrap().unwrap();
    let next = fluxgate_shared::Event::parse_json(&next.line).unwrap();
    // Online/offline and the like stay in the journal only.
    assert_eq!(next.name, "drain");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_node_is_torpid_and_unused_until_it_speaks_again() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("jm.toml");
    std::fs::write(
        &config,
        "[resource]\nheartbeat_interval = 0.2\ntorpid_timeout = 1.0\n",
    )
    .unwrap();
    let config = config.to_str().unwrap().to_string();
    let inst = Instance::start_with(1, 1, &["--config", &config]).await;
    inst.signal_exec(0, nix::sys::signal::Signal::SIGSTOP);
    let st = eventually(std::time::Duration::from_secs(20), async || {
        let st = inst.status().await;
        if st["torpid"] == "0" {
            Ok(st)
        } else {
            Err(format!("never torpid: {st}"))
        }
    })
    .await;
    assert_eq!(st["up"], "", "a torpid node is not schedulable: {st}");
    // A job submitted now waits: nothing is allocated on a torpid node.
    let id = inst.submit(&JobspecBuilder::new(["true"]), None).await;
    inst.events_until(id, "eventlog", "priority").await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let list = inst
        .jobs()
        .await
        .list(pb::ListRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.jobs[0].state, "SCHED");
    inst.signal_exec(0, nix::sys::signal::Signal::SIGCONT);
    let ev = inst.wait_clean(id).await;
    assert_eq!(names(&ev).last(), Some(&"clean"));
    let st = inst.status().await;
    assert_eq!(st["torpid"], "", "{st}");
}
