//! SIGKILL of the job manager in the middle of a heavy submit load: every
//! submit that was acknowledged exists after the restart with a valid eventlog
//! and reaches INACTIVE; nothing is half-written.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fluxgate_integration_tests::poll::poll_until;
use fluxgate_integration_tests::{Instance, eventually, stored_log};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;
use fluxgate_shared::job::{JobState, replay};
use fluxgate_shared::jobspec::JobspecBuilder;
use tokio::sync::Mutex;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_submits_survive_sigkill_under_load() {
    let mut inst = Instance::start(1, 4).await;
    let jobspec = JobspecBuilder::new(["true"])
        .setattr_kv("system.exec.test.run_duration=0")
        .build()
        .unwrap()
        .to_json();
    let acked = Arc::new(Mutex::new(Vec::<JobId>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let mut jobs = inst.jobs().await;
        let (acked, stop, jobspec) = (Arc::clone(&acked), Arc::clone(&stop), jobspec.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let req = pb::SubmitManyRequest {
                    jobs: (0..20)
                        .map(|_| pb::SubmitRequest {
                            jobspec: jobspec.clone(),
                            urgency: None,
                            flags: 0,
                            ..Default::default()
                        })
                        .collect(),
                };
                // The job manager dies under us: the first failure ends the loop.
                let Ok(r) = jobs.submit_many(req).await else {
                    return;
                };
                let mut a = acked.lock().await;
                for res in r.into_inner().results {
                    if let Some(pb::submit_result::Result::Id(id)) = res.result {
                        a.push(JobId::from(id));
                    }
                }
            }
        }));
    }
    // Let the load build, then kill the job manager without warning.
    // Past the wait, the kill comes anyway: the count is asserted below.
    let _ = poll_until(Duration::from_secs(20), async || {
        let n = acked.lock().await.len();
        (n >= 300).then_some(()).ok_or(format!("{n} acknowledged"))
    })
    .await;
    eprintln!("acknowledged before the kill: {}", acked.lock().await.len());
    inst.restart_jm(false).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let acked = acked.lock().await.clone();
    assert!(
        acked.len() >= 300,
        "only {} submits acknowledged",
        acked.len()
    );

    // Every acknowledged job is there and ends.
    let mut jobs = inst.jobs().await;
    eventually(Duration::from_secs(120), async || {
        let list = inst.list(127).await;
        let inactive: std::collections::HashSet<u64> = list
            .iter()
            .filter(|j| j.state == "INACTIVE")
            .map(|j| j.id)
            .collect();
        let missing = acked
            .iter()
            .filter(|id| !inactive.contains(&u64::from(**id)))
            .count();
        if missing == 0 {
            return Ok(());
        }
        Err(format!(
            "{missing} of {} acknowledged jobs not inactive after restart",
            acked.len()
        ))
    })
    .await;
    // Each stored eventlog is whole: it parses strictly and replays to INACTIVE.
    for id in &acked {
        let events = stored_log(&mut jobs, *id, "eventlog").await;
        let job = replay(&events).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(job.state(), JobState::Inactive, "{id}");
    }
    // Ids issued after the restart come after every acknowledged one.
    let next = inst.submit(&JobspecBuilder::new(["true"]), None).await;
    assert!(acked.iter().all(|id| *id < next));
}
