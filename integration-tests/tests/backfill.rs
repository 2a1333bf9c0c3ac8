//! EASY backfill on a 4-node instance with real (short) jobs: a short job
//! starts past a blocked whole-machine head, a long one waits behind it,
//! and the head shows when it expects to start.

use fluxgate_integration_tests::{Instance, names};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;
use fluxgate_shared::jobspec::JobspecBuilder;

/// `sleep SECS` on `nodes` whole nodes, one task each, limited to `limit` s.
fn sleeper(secs: &str, nodes: u64, limit: f64) -> JobspecBuilder {
    fluxgate_integration_tests::sleeper(secs, nodes)
        .ntasks(nodes)
        .duration_secs(limit)
}

async fn start_time(inst: &Instance, id: JobId) -> f64 {
    let events = inst.events_until(id, "eventlog", "start").await;
    events
        .iter()
        .find(|e| &*e.name == "start")
        .expect("a start event")
        .timestamp
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_job_backfills_ahead_of_a_blocked_head_and_a_long_one_does_not() {
    let inst = Instance::start(4, 2).await;
    // Runs until cancelled below: the head is pending for as long as the
    // checks take, however loaded the machine.
    let running = inst.submit(&sleeper("300", 3, 30.0), None).await;
    let running_start = start_time(&inst, running).await;
    let head = inst.submit(&sleeper("0.2", 4, 30.0), None).await;
    let short = inst.submit(&sleeper("0.2", 1, 5.0), None).await;
    let long = inst.submit(&sleeper("0.2", 1, 3600.0), None).await;

    // The short job runs on the fourth node while the head waits.
    let short_start = start_time(&inst, short).await;
    let short_end = inst.wait_clean(short).await;
    assert!(names(&short_end).contains(&"finish"));

    // The head is pending with an estimate: the running job's limit.
    let pending = inst
        .list(fluxgate_shared::job::StateMask::ACTIVE.bits())
        .await;
    let h = pending
        .iter()
        .find(|j| j.id == u64::from(head))
        .expect("the head is listed");
    let ann: serde_json::Value = serde_json::from_str(&h.annotations).expect("annotations");
    let eta = ann["sched"]["t_estimate"]
        .as_f64()
        .unwrap_or_else(|| panic!("no t_estimate: {ann}"));
    assert!(
        (eta - (running_start + 30.0)).abs() < 2.0,
        "eta {eta} vs running job's end {}",
        running_start + 30.0
    );

    // The head starts once the running job ends; the long job only after.
    inst.jobs()
        .await
        .cancel(pb::CancelRequest {
            id: u64::from(running),
            note: String::new(),
        })
        .await
        .expect("cancel the running job");
    let head_start = start_time(&inst, head).await;
    let long_start = start_time(&inst, long).await;
    assert!(short_start < head_start, "the short job backfilled");
    assert!(
        head_start <= long_start,
        "the long job did not pass the head"
    );
    let running_end = inst.wait_clean(running).await;
    let running_freed = running_end
        .iter()
        .find(|e| &*e.name == "free")
        .expect("free")
        .timestamp;
    assert!(head_start >= running_freed, "the head waited for the nodes");
    inst.wait_clean(head).await;
    inst.wait_clean(long).await;
}

/// The t_estimate annotation of a pending job.
async fn estimate(inst: &Instance, id: JobId) -> Option<f64> {
    let pending = inst
        .list(fluxgate_shared::job::StateMask::ACTIVE.bits())
        .await;
    let j = pending.iter().find(|j| j.id == u64::from(id))?;
    let ann: serde_json::Value = serde_json::from_str(&j.annotations).ok()?;
    ann["sched"]["t_estimate"].as_f64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conservative_keeps_a_job_from_delaying_the_second_blocked_one() {
    let inst = Instance::start_with(4, 2, &["--set", "sched.policy=conservative"]).await;
    // Nodes 0-2 busy for 3 s (limit 30); a 3-node head reserved when they
    // free, one node spare then; a whole-machine job reserved after the
    // head; a 1-node job with a limit past both would fit on the spare
    // node under easy, but under conservative it waits.
    // Runs until cancelled below: the head is pending for as long as the
    // checks take, however loaded the machine.
    let running = inst.submit(&sleeper("300", 3, 30.0), None).await;
    let running_start = start_time(&inst, running).await;
    let head = inst.submit(&sleeper("0.2", 3, 30.0), None).await;
    let second = inst.submit(&sleeper("0.2", 4, 30.0), None).await;
    let long = inst.submit(&sleeper("0.2", 1, 100.0), None).await;
    let short = inst.submit(&sleeper("0.2", 1, 5.0), None).await;

    // The short job delays nobody: it runs on the spare node at once.
    let short_start = start_time(&inst, short).await;
    inst.wait_clean(short).await;
    // Both blocked jobs are reserved, one after the other.
    let (h, s) = (
        estimate(&inst, head).await.expect("head reserved"),
        estimate(&inst, second).await.expect("second reserved"),
    );
    assert!((h - (running_start + 30.0)).abs() < 2.0, "head eta {h}");
    assert!((s - (h + 30.0)).abs() < 2.0, "second eta {s} after {h}");
    assert!(estimate(&inst, long).await.is_some(), "the long job too");

    let head_start = start_time(&inst, head).await;
    let second_start = start_time(&inst, second).await;
    let long_start = start_time(&inst, long).await;
    assert!(short_start < head_start);
    assert!(
        second_start <= long_start,
        "the long job did not pass the second blocked job"
    );
    for id in [running, head, second, long] {
        inst.wait_clean(id).await;
    }
}
