//! Bad input never takes the service down or changes what is stored: each
//! request gets a gRPC status with a message a person can act on.

use fluxgate_integration_tests::Instance;
use fluxgate_proto::v1 as pb;
use fluxgate_shared::jobspec::JobspecBuilder;
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_clear_statuses_and_change_nothing() {
    let inst = Instance::start(2, 1).await;
    let mut jobs = inst.jobs().await;
    let mut res = inst.resource().await;
    let good = JobspecBuilder::new(["true"]).build().unwrap().to_json();

    // Oversized and deeply nested jobspecs.
    let huge = format!(
        "{},\"pad\":\"{}\"}}",
        &good[..good.len() - 1],
        "x".repeat(2 << 20)
    );
    let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
    for (what, jobspec) in [("oversized", huge), ("deep", deep)] {
        let err = jobs
            .submit(pb::SubmitRequest {
                jobspec,
                urgency: None,
                flags: 0,
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{what}: {err}");
        assert!(!err.message().is_empty(), "{what}");
    }
    // Too many jobs in one request, unknown flags, bad urgency.
    let many = pb::SubmitManyRequest {
        jobs: (0..10_001)
            .map(|_| pb::SubmitRequest {
                jobspec: String::new(),
                urgency: None,
                flags: 0,
            })
            .collect(),
    };
    let err = jobs.submit_many(many).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    assert!(err.message().contains("limit"), "{err}");
    let err = jobs
        .submit(pb::SubmitRequest {
            jobspec: good.clone(),
            urgency: None,
            flags: 1 << 20,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");

    // Malformed drain targets, unknown hosts and ranks.
    for targets in ["0-", "node[", "9", "nosuchhost", "1-1"] {
        let err = res
            .drain(pb::DrainRequest {
                targets: targets.into(),
                reason: "x".into(),
                mode: 0,
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{targets}: {err}");
    }
    let err = res
        .undrain(pb::UndrainRequest {
            targets: "0".into(),
            force: false,
            reason: String::new(),
        })
        .await
        .unwrap_err();
    assert!(err.message().contains("not drained"), "{err}");
    let st = inst.status().await;
    assert_eq!(st["drained"], "", "{st}");

    // Unknown job ids.
    let ghost = 123_456_789u64;
    let e = jobs
        .cancel(pb::CancelRequest {
            id: ghost,
            note: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    let e = jobs
        .info(pb::InfoRequest {
            id: ghost,
            keys: vec!["eventlog".into()],
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    let e = jobs
        .watch_eventlog(pb::WatchEventlogRequest {
            id: ghost,
            name: "eventlog".into(),
            follow: true,
            wait_create: true,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    let e = jobs
        .set_urgency(pb::SetUrgencyRequest {
            id: ghost,
            urgency: 40,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");

    // A follower that hangs up mid-stream costs nothing: the service goes on.
    let id = inst
        .submit(&JobspecBuilder::new(["sleep", "0.5"]), None)
        .await;
    let stream = jobs
        .watch_eventlog(pb::WatchEventlogRequest {
            id: id.into(),
            name: "eventlog".into(),
            follow: true,
            wait_create: false,
        })
        .await
        .unwrap();
    drop(stream);
    let ev = inst.wait_clean(id).await;
    assert_eq!(ev.last().unwrap().name, "clean");
    // Nothing bad was stored: the only job listed is the good one.
    let all = inst.list(127).await;
    assert_eq!(all.len(), 1, "{all:?}");
}

/// A message whose field 1 is raw bytes, to send text fields that are not UTF-8.
#[derive(Clone, PartialEq, prost::Message)]
struct RawField1 {
    #[prost(bytes = "vec", tag = "1")]
    field: Vec<u8>,
}

async fn call_raw<R>(uri: &str, path: &'static str, bytes: &[u8]) -> Result<R, tonic::Status>
where
    R: prost::Message + Default + Send + 'static,
{
    let channel = tonic::transport::Endpoint::from_shared(uri.to_string())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let codec = fluxgate_proto::codec::Codec::<RawField1, R>::default();
    grpc.unary(
        tonic::Request::new(RawField1 {
            field: bytes.to_vec(),
        }),
        tonic::codegen::http::uri::PathAndQuery::from_static(path),
        codec,
    )
    .await
    .map(tonic::Response::into_inner)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_that_is_not_utf8_is_refused_as_invalid() {
    let inst = Instance::start(1, 1).await;
    let not_utf8: &[u8] = b"{\"version\":1,\"x\":\"\xff\xfe\"}";
    let err = call_raw::<pb::SubmitResponse>(&inst.uri, "/fluxgate.v1.JobManager/Submit", not_utf8)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    assert!(err.message().contains("UTF-8"), "{err}");
    let err = call_raw::<pb::DrainResponse>(&inst.uri, "/fluxgate.v1.Resource/Drain", b"node\xc0")
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");

    // Nothing was stored or drained, and the service goes on.
    let listed = inst.list(127).await;
    assert!(listed.is_empty());
    assert_eq!(inst.status().await["drained"], "");
    let id = inst.submit(&JobspecBuilder::new(["true"]), None).await;
    inst.wait_clean(id).await;
}
