//! Purging inactive jobs removes them from memory and from the store, oldest
//! first, and the purge survives a restart.

use fluxgate_integration_tests::Instance;
use fluxgate_proto::v1 as pb;
use fluxgate_shared::jobspec::JobspecBuilder;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_removes_the_oldest_inactive_jobs_for_good() {
    let mut inst = Instance::start(1, 1).await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        let id = inst.submit(&JobspecBuilder::new(["true"]), None).await;
        inst.wait_clean(id).await;
        ids.push(id);
    }
    let mut jobs = inst.jobs().await;
    let dry = jobs
        .purge(pb::PurgeRequest {
            age_limit: None,
            num_limit: Some(2),
            force: false,
            batch: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(dry.count, 3);
    let done = jobs
        .purge(pb::PurgeRequest {
            age_limit: None,
            num_limit: Some(2),
            force: true,
            batch: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(done.count, 3);
    let remaining = |list: Vec<pb::JobSummary>| {
        let mut v: Vec<u64> = list.into_iter().map(|j| j.id).collect();
        v.sort();
        v
    };
    let list = jobs
        .list(pb::ListRequest {
            states: 64,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .jobs;
    let kept: Vec<u64> = ids[3..].iter().map(|id| u64::from(*id)).collect();
    assert_eq!(remaining(list), kept);
    let gone = jobs
        .info(pb::InfoRequest {
            id: ids[0].into(),
            keys: vec!["eventlog".into()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(gone.code(), tonic::Code::NotFound, "{gone}");

    inst.restart_jm(false).await;
    let mut jobs = inst.jobs().await;
    let list = jobs
        .list(pb::ListRequest {
            states: 64,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .jobs;
    assert_eq!(remaining(list), kept);
    // An age limit of zero takes the rest.
    let all = jobs
        .purge(pb::PurgeRequest {
            age_limit: Some(0.0),
            num_limit: None,
            force: true,
            batch: 1,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(all.count, 1, "batch limits one request");
}
