//! Queues, limits and fair share through the core's pipeline: the same
//! bench (memory store, recording exec link, test clock) as the rest.

use super::*;
use crate::core::queues::QueueAction;

const ALICE: u32 = 2001;
const BOB: u32 = 2002;

fn with(sets: &[(&str, &str)]) -> Config {
    let mut c = config();
    for (k, v) in sets {
        c.set(k, v).unwrap_or_else(|e| panic!("{k}: {e}"));
    }
    c
}

fn in_queue(q: &str) -> String {
    spec(1, 0.0, &format!("    queue: {q}\n"))
}

fn allocated(b: &Bench, id: JobId) -> bool {
    b.events(id).iter().any(|e| e == "alloc")
}

fn listed(b: &Bench, id: JobId) -> JobInfo {
    b.core
        .list(&ListFilter::default())
        .into_iter()
        .find(|j| j.id == id)
        .expect("listed")
}

#[tokio::test]
async fn a_stopped_queue_holds_its_jobs_until_started() {
    let cfg = with(&[("queues.batch.requires", ""), ("queues.debug.requires", "")]);
    let mut b = Bench::over(Arc::new(MemoryStore::new()), 2, cfg, true).await;
    let err = b.queue(QueueAction::Stop, None, "").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "Use --all to apply this command to all queues"
    );
    b.queue(QueueAction::Stop, Some("batch"), "maintenance")
        .await
        .unwrap();
    let held = b.submit(&in_queue("batch")).await;
    let other = b.submit(&in_queue("debug")).await;
    assert_eq!(b.state(held), Some(JobState::Sched));
    assert!(
        !allocated(&b, held),
        "a stopped queue's job is not scheduled"
    );
    assert!(allocated(&b, other), "another queue goes on");
    let status = b
        .queue(QueueAction::Start, Some("batch"), "")
        .await
        .unwrap();
    assert!(status[0].state.start);
    assert!(allocated(&b, held));
}

#[tokio::test]
async fn stopping_withdraws_pending_requests() {
    let mut b = Bench::new(1).await;
    let first = b.submit(&spec(1, 0.0, "")).await;
    let second = b.submit(&spec(1, 0.0, "")).await;
    b.queue(QueueAction::Stop, None, "").await.unwrap();
    b.run_to_end(first, 0).await;
    assert!(
        !allocated(&b, second),
        "the freed node is not given while stopped"
    );
    b.queue(QueueAction::Start, None, "").await.unwrap();
    assert!(allocated(&b, second));
}

#[tokio::test]
async fn queue_state_survives_a_restart() {
    let store = Arc::new(MemoryStore::new());
    let cfg = || with(&[("queues.batch.requires", ""), ("queues.debug.requires", "")]);
    {
        let mut b = Bench::over(Arc::clone(&store), 1, cfg(), true).await;
        b.queue(QueueAction::Disable, Some("batch"), "closed")
            .await
            .unwrap();
        b.queue(QueueAction::Stop, Some("debug"), "paused")
            .await
            .unwrap();
    }
    let mut b = Bench::over(store, 1, cfg(), true).await;
    let all = b.queue(QueueAction::Status, None, "").await.unwrap();
    let by_name = |n: &str| all.iter().find(|q| q.name == n).unwrap().state.clone();
    assert!(!by_name("batch").enable);
    assert_eq!(by_name("batch").disable_reason, "closed");
    assert!(by_name("batch").start);
    assert!(!by_name("debug").start);
    assert_eq!(by_name("debug").stop_reason, "paused");
    let err = b
        .submit_as(&in_queue("batch"), 16, OWNER)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "job submission to batch is disabled: closed"
    );
    let id = b.submit(&in_queue("debug")).await;
    assert!(!allocated(&b, id));
}

#[tokio::test]
async fn a_running_jobs_limit_holds_a_users_extra_job_and_releases_it() {
    let cfg = with(&[(&format!("limits.users.{ALICE}.max_running_jobs"), "1")]);
    let mut b = Bench::over(Arc::new(MemoryStore::new()), 3, cfg, true).await;
    let first = b.submit_as(&spec(1, 0.0, ""), 16, ALICE).await.unwrap();
    let extra = b.submit_as(&spec(1, 0.0, ""), 16, ALICE).await.unwrap();
    let bobs = b.submit_as(&spec(1, 0.0, ""), 16, BOB).await.unwrap();
    assert!(allocated(&b, first));
    assert!(!allocated(&b, extra), "held by the limit with a node free");
    assert!(allocated(&b, bobs), "another user's job runs");
    let row = listed(&b, extra);
    assert!(
        row.annotations
            .as_deref()
            .is_some_and(|a| a.contains("max-running-jobs-user-limit")),
        "{row:?}"
    );
    b.run_to_end(first, 0).await;
    assert!(allocated(&b, extra), "released when the first one ended");
    assert!(
        listed(&b, extra)
            .annotations
            .is_none_or(|a| !a.contains("limit"))
    );
}

#[tokio::test]
async fn canceling_a_pending_job_frees_its_place_under_the_limit() {
    let cfg = with(&[("limits.users.default.max_running_jobs", "1")]);
    let mut b = Bench::over(Arc::new(MemoryStore::new()), 1, cfg, true).await;
    let running = b.submit_as(&spec(1, 0.0, ""), 16, ALICE).await.unwrap();
    let waiting = b.submit_as(&spec(1, 0.0, ""), 16, BOB).await.unwrap();
    let held = b.submit_as(&spec(1, 0.0, ""), 16, BOB).await.unwrap();
    // Bob's first waits for the node, with the scheduler; his second is held.
    assert!(b.core.holds.reason(held).is_some());
    b.cancel(waiting).await;
    assert!(
        b.core.holds.reason(held).is_none(),
        "asks once the other left"
    );
    b.run_to_end(running, 0).await;
    assert!(allocated(&b, held));
}

#[tokio::test]
async fn active_and_node_limits_refuse_at_submit() {
    let cfg = with(&[
        ("limits.users.default.max_active_jobs", "2"),
        ("limits.users.default.max_nodes", "1"),
    ]);
    let mut b = Bench::over(Arc::new(MemoryStore::new()), 2, cfg, true).await;
    let err = b.submit_as(&spec(2, 0.0, ""), 16, ALICE).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "job requests 2 nodes, over the user max_nodes limit of 1"
    );
    b.submit_as(&spec(1, 0.0, ""), 16, ALICE).await.unwrap();
    b.submit_as(&spec(1, 0.0, ""), 16, ALICE).await.unwrap();
    let err = b.submit_as(&spec(1, 0.0, ""), 16, ALICE).await.unwrap_err();
    assert_eq!(err.to_string(), "user has max active jobs");
    assert!(matches!(err, Error::Exhausted(_)));
}

#[tokio::test]
async fn less_recent_usage_gets_the_higher_priority() {
    let cfg = with(&[("accounting.enabled", "true")]);
    let mut b = Bench::over(Arc::new(MemoryStore::new()), 1, cfg, true).await;
    // Alice uses the node for an hour.
    let used = b.submit_as(&spec(1, 0.0, ""), 16, ALICE).await.unwrap();
    b.exec(ExecMsg::Started { id: used }).await;
    b.advance(3600.0).await;
    b.finish(used, 0).await;
    // A blocker, then Alice's and Bob's jobs wait for the node: Alice's first.
    let blocker = b.submit_as(&spec(1, 0.0, ""), 16, OWNER).await.unwrap();
    let alices = b.submit_as(&spec(1, 0.0, ""), 16, ALICE).await.unwrap();
    let bobs = b.submit_as(&spec(1, 0.0, ""), 16, BOB).await.unwrap();
    let prio = |b: &Bench, id| b.core.jobs[&id].job.priority().unwrap();
    assert!(
        prio(&b, bobs) > prio(&b, alices),
        "{} {}",
        prio(&b, bobs),
        prio(&b, alices)
    );
    b.run_to_end(blocker, 0).await;
    assert!(allocated(&b, bobs));
    assert!(!allocated(&b, alices));
    // The usage survives a restart and shows per user.
    let rows = b.core.account_rows();
    let alice = rows.iter().find(|r| r.userid == ALICE).unwrap();
    assert!((alice.usage - 4.0 * 3600.0).abs() < 1.0, "{alice:?}");
    assert!(alice.fairshare < 1.0);
    let store = Arc::clone(&b.store);
    drop(b);
    let mut again = Bench::over(store, 1, with(&[("accounting.enabled", "true")]), true).await;
    let rows = again.core.account_rows();
    assert!(
        rows.iter().any(|r| r.userid == ALICE && r.usage > 0.0),
        "{rows:?}"
    );
}

#[tokio::test]
async fn hold_and_expedite_keep_their_meaning_with_accounting() {
    let cfg = with(&[("accounting.enabled", "true")]);
    let mut b = Bench::over(Arc::new(MemoryStore::new()), 1, cfg, true).await;
    let blocker = b.submit(&spec(1, 0.0, "")).await;
    let held = b.submit_as(&spec(1, 0.0, ""), 0, ALICE).await.unwrap();
    let fast = b.submit_as(&spec(1, 0.0, ""), 31, ALICE).await.unwrap();
    let plain = b.submit_as(&spec(1, 0.0, ""), 16, BOB).await.unwrap();
    let prio = |b: &Bench, id| b.core.jobs[&id].job.priority().unwrap();
    assert_eq!(prio(&b, held), 0);
    assert_eq!(prio(&b, fast), u32::MAX);
    // Nobody has used anything: fair share 1 for all, urgency 16.
    assert_eq!(prio(&b, plain), 100_000);
    b.run_to_end(blocker, 0).await;
    assert!(allocated(&b, fast));
    assert!(!allocated(&b, held));
}

#[tokio::test]
async fn pending_priorities_are_recomputed_on_the_tick_after_a_job_ends() {
    let cfg = with(&[("accounting.enabled", "true")]);
    let mut b = Bench::over(Arc::new(MemoryStore::new()), 1, cfg, true).await;
    let used = b.submit_as(&spec(1, 0.0, ""), 16, ALICE).await.unwrap();
    b.exec(ExecMsg::Started { id: used }).await;
    let waiting = b.submit_as(&spec(1, 0.0, ""), 16, ALICE).await.unwrap();
    let before = b.core.jobs[&waiting].job.priority();
    b.advance(600.0).await;
    let blocker_end = b.core.jobs[&used].job.state();
    assert_eq!(blocker_end, JobState::Run);
    // A second user's job keeps the first waiting after Alice's job ends.
    let other = b.submit_as(&spec(1, 0.0, ""), 31, BOB).await.unwrap();
    b.finish(used, 0).await;
    assert!(allocated(&b, other));
    b.core.accounting_tick();
    b.flush().await;
    let after = b.core.jobs[&waiting].job.priority();
    assert!(after < before, "{before:?} -> {after:?}");
    assert_eq!(
        b.events(waiting)
            .iter()
            .filter(|e| *e == "priority")
            .count(),
        2
    );
}
