//! The job manager restarts (gracefully and by SIGKILL) with pending, running
//! and inactive jobs: nothing acknowledged is lost, running jobs are
//! re-attached and finish, ids keep increasing, no event is written twice.

use std::collections::HashSet;

use fluxgate_integration_tests::{Instance, cmd, names};
use fluxgate_proto::v1 as pb;

async fn restart_keeps_jobs(graceful: bool) {
    let mut inst = Instance::start(1, 1).await;
    let done = inst.submit(&cmd(&["true"]), None).await;
    inst.wait_clean(done).await;
    let running = inst
        .submit(&cmd(&["sh", "-c", "sleep 2; echo survived"]), None)
        .await;
    // Started, as the main eventlog says, before the restart.
    inst.events_until(running, "eventlog", "start").await;
    let held = inst.submit(&cmd(&["true"]), Some(0)).await;
    inst.events_until(held, "eventlog", "priority").await;

    inst.restart_jm(graceful).await;

    // The running job was re-attached and finished normally.
    let ev = inst.wait_clean(running).await;
    let n = names(&ev);
    assert_eq!(
        n,
        [
            "submit",
            "validate",
            "depend",
            "priority",
            "alloc",
            "start",
            "flux-restart",
            "finish",
            "release",
            "free",
            "clean"
        ]
    );
    assert_eq!(
        ev.iter()
            .find(|e| e.name == "finish")
            .unwrap()
            .context
            .as_ref()
            .unwrap()["status"],
        0
    );
    let exec = inst.log(running, "exec.eventlog").await;
    let en = names(&exec);
    assert!(
        en.contains(&"reattach") && en.contains(&"re-starting"),
        "{en:?}"
    );
    let out = inst.log(running, "output").await;
    assert!(
        out.iter().any(|e| e
            .context
            .as_ref()
            .is_some_and(|c| c.get("data").is_some_and(|d| d == "survived\n"))),
        "{out:?}"
    );
    // No event written twice.
    let lines: HashSet<String> = ev.iter().map(|e| e.to_json()).collect();
    assert_eq!(lines.len(), ev.len());

    // The held job is still pending and runs once released.
    let mut jobs = inst.jobs().await;
    jobs.set_urgency(pb::SetUrgencyRequest {
        id: held.into(),
        urgency: 16,
    })
    .await
    .unwrap();
    let ev = inst.wait_clean(held).await;
    assert!(names(&ev).contains(&"flux-restart"), "{:?}", names(&ev));

    // The inactive job is still readable and unchanged.
    let ev = inst.log(done, "eventlog").await;
    assert_eq!(ev.last().unwrap().name, "clean");
    assert!(!names(&ev).contains(&"flux-restart"));

    // New ids come after the old ones.
    let next = inst.submit(&cmd(&["true"]), None).await;
    assert!(next > held && held > running && running > done);
    inst.wait_clean(next).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_restart_keeps_every_job() {
    restart_keeps_jobs(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_restart_keeps_every_job() {
    restart_keeps_jobs(false).await;
}
