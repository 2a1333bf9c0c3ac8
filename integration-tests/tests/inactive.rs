//! Inactive jobs are kept in the store, not in the job manager's memory:
//! after a restart (which reads only active jobs) they are still listed with
//! their results, filters apply, dependencies on them are decided, a
//! waitable one is reaped exactly once, and requests on them say they are
//! inactive.

use fluxgate_integration_tests::{Instance, cmd, names};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;
use fluxgate_shared::job::StateMask;
use fluxgate_shared::jobspec::JobspecBuilder;
use tonic::Code;

const WAITABLE: u32 = pb::SubmitFlag::Waitable as u32;

async fn submit_flags(inst: &Instance, js: &JobspecBuilder, flags: u32) -> JobId {
    let text = js.build().expect("valid jobspec").to_json();
    inst.submit_json(text, None, flags)
        .await
        .expect("submit accepted")
}

async fn wait(inst: &Instance, id: Option<JobId>) -> Result<pb::WaitResponse, tonic::Status> {
    let id = id.map_or(0, u64::from);
    inst.jobs()
        .await
        .wait(pb::WaitRequest { id })
        .await
        .map(|r| r.into_inner())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inactive_jobs_are_served_from_the_store_across_a_restart() {
    let mut inst = Instance::start(1, 1).await;
    let ok = inst.submit(&cmd(&["true"]), None).await;
    inst.wait_clean(ok).await;
    let failed = inst.submit(&cmd(&["false"]), None).await;
    inst.wait_clean(failed).await;
    let reap_me = submit_flags(&inst, &cmd(&["true"]), WAITABLE).await;
    inst.wait_clean(reap_me).await;
    let reap_any = submit_flags(&inst, &cmd(&["false"]), WAITABLE).await;
    inst.wait_clean(reap_any).await;

    inst.restart_jm(false).await;

    // Listed, newest first, with what they ended as.
    let all = inst.list(StateMask::ALL.bits()).await;
    let rows: Vec<(u64, &str)> = all.iter().map(|j| (j.id, j.result.as_str())).collect();
    assert_eq!(
        rows,
        [
            (u64::from(reap_any), "FAILED"),
            (u64::from(reap_me), "COMPLETED"),
            (u64::from(failed), "FAILED"),
            (u64::from(ok), "COMPLETED"),
        ]
    );
    assert!(
        all.iter()
            .all(|j| j.state == "INACTIVE" && j.t_inactive > 0.0)
    );
    let mut jobs = inst.jobs().await;
    let completed = jobs
        .list(pb::ListRequest {
            states: StateMask::ALL.bits(),
            results: vec!["COMPLETED".into()],
            max_entries: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .jobs;
    let ids: Vec<u64> = completed.iter().map(|j| j.id).collect();
    assert_eq!(ids, [u64::from(reap_me)]);
    // Active listings do not show them.
    assert!(inst.list(StateMask::ACTIVE.bits()).await.is_empty());

    // Dependencies on them are decided from the store.
    let after_ok = inst
        .submit(
            &cmd(&["true"]).dependency(format!("afterok:{ok}").parse().unwrap()),
            None,
        )
        .await;
    let ev = inst.wait_clean(after_ok).await;
    assert!(names(&ev).contains(&"start"), "{:?}", names(&ev));
    let never = inst
        .submit_json(
            cmd(&["true"])
                .dependency(format!("afterok:{failed}").parse().unwrap())
                .build()
                .unwrap()
                .to_json(),
            None,
            0,
        )
        .await
        .unwrap_err();
    assert_eq!(never.code(), Code::InvalidArgument);
    assert!(
        never.message().contains("can never be satisfied"),
        "{}",
        never.message()
    );

    // A waitable job is reaped once, by id or by any.
    let r = wait(&inst, Some(reap_me)).await.unwrap();
    assert!(r.success, "{r:?}");
    let again = wait(&inst, Some(reap_me)).await.unwrap_err();
    assert_eq!(again.code(), Code::FailedPrecondition);
    let r = wait(&inst, None).await.unwrap();
    assert_eq!(r.id, u64::from(reap_any));
    assert!(!r.success && r.error.contains("exit code 1"), "{r:?}");
    let none = wait(&inst, None).await.unwrap_err();
    assert_eq!(none.code(), Code::FailedPrecondition);
    let not_waitable = wait(&inst, Some(ok)).await.unwrap_err();
    assert!(
        not_waitable.message().contains("not waitable"),
        "{}",
        not_waitable.message()
    );

    // Requests on inactive jobs say so; unknown ids are not found.
    let e = jobs
        .set_urgency(pb::SetUrgencyRequest {
            id: ok.into(),
            urgency: 20,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{}", e.message());
    assert!(e.message().contains("inactive"), "{}", e.message());
    let e = jobs
        .set_urgency(pb::SetUrgencyRequest {
            id: u64::from(ok) + 1,
            urgency: 20,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{}", e.message());

    // Reaping survives a restart: nothing is waitable any more.
    inst.restart_jm(true).await;
    let none = wait(&inst, None).await.unwrap_err();
    assert_eq!(none.code(), Code::FailedPrecondition);
    assert_eq!(inst.list(StateMask::ALL.bits()).await.len(), 5);
}
