//! Bad input never takes the service down or changes what is stored: each
//! request gets a gRPC status with a message a person can act on.

use std::process::Command;

use fluxgate_integration_tests::{Instance, binary};
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
                ..Default::default()
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
                ..Default::default()
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
            ..Default::default()
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
            ..Default::default()
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
            ..Default::default()
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
            ..Default::default()
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

/// YAML alias bombs of the classic shapes, each a few hundred bytes.
fn alias_bombs() -> Vec<String> {
    let levels = |first: &str, line: &dyn Fn(usize) -> String| {
        let mut s = format!("{first}\n");
        for i in 1..9 {
            s.push_str(&line(i));
            s.push('\n');
        }
        s
    };
    let seq = levels("a0: &a0 [lol]", &|i| {
        format!(
            "a{i}: &a{i} [{}]",
            vec![format!("*a{}", i - 1); 9].join(",")
        )
    });
    let map = levels("a0: &a0 {k: lol}", &|i| {
        let kv: Vec<String> = (0..9).map(|j| format!("k{j}: *a{}", i - 1)).collect();
        format!("a{i}: &a{i} {{{}}}", kv.join(", "))
    });
    let merge = levels("a0: &a0 {k0: v, k1: v, k2: v}", &|i| {
        let merged = vec![format!("*a{}", i - 1); 9].join(", ");
        format!("a{i}: &a{i} {{<<: [{merged}], x: *a{}}}", i - 1)
    });
    let long = format!(
        "s: &s \"{}\"\nl: [{}]\n",
        "x".repeat(2000),
        vec!["*s"; 400].join(",")
    );
    vec![seq, map, merge, long]
}

fn submit_request(jobspec: String) -> pb::SubmitRequest {
    pb::SubmitRequest {
        jobspec,
        urgency: None,
        flags: 0,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alias_bombs_are_refused_while_other_callers_are_answered() {
    let inst = Instance::start_auth(1, 1).await;
    let guest = inst.token("guest", 60_001, None);
    let mut owner = inst.jobs().await;
    let held = owner
        .submit(pb::SubmitRequest {
            jobspec: JobspecBuilder::new(["true"]).build().unwrap().to_json(),
            urgency: Some(0),
            flags: 0,
            ..Default::default()
        })
        .await
        .expect("the owner submits")
        .into_inner()
        .id;

    // One guest: four SubmitMany of 60 bombs and a few single bombs at once.
    let bombs = alias_bombs();
    let mut attacks = tokio::task::JoinSet::new();
    for batch in 0..4 {
        let mut client = inst.jobs_as(Some(&guest)).await;
        let jobs: Vec<_> = (0..60)
            .map(|i| submit_request(bombs[(batch + i) % bombs.len()].clone()))
            .collect();
        attacks.spawn(async move {
            let results = client
                .submit_many(pb::SubmitManyRequest { jobs })
                .await
                .expect("SubmitMany answers")
                .into_inner()
                .results;
            assert_eq!(results.len(), 60);
            for r in results {
                match r.result {
                    Some(pb::submit_result::Result::Error(e)) => {
                        assert!(e.contains("expands aliases past"), "{e}");
                    }
                    other => panic!("a bomb was not refused: {other:?}"),
                }
            }
        });
    }
    for bomb in bombs.clone() {
        let mut client = inst.jobs_as(Some(&guest)).await;
        attacks.spawn(async move {
            let err = client.submit(submit_request(bomb)).await.unwrap_err();
            assert_eq!(err.code(), Code::InvalidArgument, "{err}");
            assert!(err.message().contains("expands aliases past"), "{err}");
        });
    }

    // Meanwhile the owner lists and reads: every call answers.
    let attacking = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let watcher = {
        let attacking = std::sync::Arc::clone(&attacking);
        let mut owner = inst.jobs().await;
        tokio::spawn(async move {
            let mut during = 0;
            for _ in 0..20 {
                let listed = owner
                    .list(pb::ListRequest::default())
                    .await
                    .expect("ListJobs answers")
                    .into_inner();
                assert!(listed.jobs.iter().any(|j| j.id == held));
                let info = owner
                    .info(pb::InfoRequest {
                        id: held,
                        keys: vec!["jobspec".into()],
                        ..Default::default()
                    })
                    .await
                    .expect("Info answers")
                    .into_inner();
                assert!(info.values["jobspec"].contains("\"true\""));
                if attacking.load(std::sync::atomic::Ordering::SeqCst) {
                    during += 1;
                }
            }
            during
        })
    };
    while let Some(done) = attacks.join_next().await {
        done.expect("an attack task failed");
    }
    attacking.store(false, std::sync::atomic::Ordering::SeqCst);
    let during = watcher.await.expect("the owner's calls");
    eprintln!("owner calls answered while the bombs were parsed: {during} of 20");
    // Nothing of the guest's was stored.
    let all = inst.list(127).await;
    assert_eq!(all.len(), 1, "{all:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_in_the_environment_is_not_stored() {
    let inst = Instance::start_auth(1, 1).await;
    let Some(owner_token) = inst.owner_token.clone() else {
        panic!("an instance with auth has an owner token");
    };
    let secret = "not-a-real-token-but-secret";
    let mut jobs = inst.jobs().await;
    // As any client might send it (JSON, read in place; YAML, read in the pool).
    let json = JobspecBuilder::new(["true"])
        .environment(
            [("KEEP", "kept"), ("FLUXGATE_TOKEN", secret)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
        .build()
        .unwrap()
        .to_json();
    let yaml = format!(
        "version: 1\nresources: [{{type: slot, count: 1, label: task, with: [{{type: core, count: 1}}]}}]\n\
         tasks: [{{command: [\"true\"], slot: task, count: {{per_slot: 1}}}}]\n\
         attributes:\n  system:\n    duration: 0\n    environment: {{KEEP: kept, FLUXGATE_TOKEN: {secret}}}\n"
    );
    let cli = |args: &[&str]| {
        Command::new(binary("fluxgate"))
            .args(args)
            .env("FLUXGATE_URI", &inst.uri)
            .env("FLUXGATE_TOKEN", &owner_token)
            .output()
            .expect("fluxgate")
    };
    let mut ids = Vec::new();
    for jobspec in [json, yaml] {
        let id = jobs
            .submit(pb::SubmitRequest {
                jobspec,
                urgency: Some(0),
                flags: 0,
                ..Default::default()
            })
            .await
            .expect("submit")
            .into_inner()
            .id;
        ids.push(id.to_string());
    }
    // The command line copies its environment, token included, as flux does.
    let out = cli(&["submit", "--urgency", "0", "--env=KEEP=kept", "true"]);
    assert!(out.status.success(), "{out:?}");
    ids.push(String::from_utf8_lossy(&out.stdout).trim().to_string());
    for id in &ids {
        let out = cli(&["job", "info", id, "jobspec"]);
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        let spec: serde_json::Value = serde_json::from_str(&text).expect("jobspec JSON");
        let env = &spec["attributes"]["system"]["environment"];
        assert_eq!(env["KEEP"], "kept", "{id}: {text}");
        assert!(env.get("FLUXGATE_TOKEN").is_none(), "{id}: {text}");
        assert!(
            !text.contains(secret) && !text.contains(&owner_token),
            "{id}"
        );
    }
}
