//! Every user-supplied size is bounded, and big things are served in pages:
//! output per job, notes, memos and reasons, listings, and each user's
//! number of active jobs, against the real binaries.

use fluxgate_integration_tests::{Instance, Setup, output_data, stored_text};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::jobspec::JobspecBuilder;
use fluxgate_shared::{Event, JobId};
use serde_json::json;
use tonic::Code;

/// The most bytes of jobs or lines the server puts in one reply.
const REPLY_MAX: usize = (4 << 20) - (64 << 10);

/// A guest uid with no account: its held jobs never run.
const GUEST: u32 = 4242;

/// A job that writes `bytes` bytes of `x` to stdout, in long lines.
fn writer(bytes: u64) -> JobspecBuilder {
    JobspecBuilder::new([
        "sh",
        "-c",
        &format!("head -c {bytes} /dev/zero | tr '\\0' x"),
    ])
}

fn exceptions<'a>(events: &'a [Event], kind: &str) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|e| {
            e.name == "exception"
                && e.context
                    .as_ref()
                    .and_then(|c| c.get("type"))
                    .and_then(|t| t.as_str())
                    == Some(kind)
        })
        .collect()
}

fn log_messages(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.name == "log")
        .filter_map(|e| {
            e.context
                .as_ref()?
                .get("message")?
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

#[track_caller]
fn refused<T: std::fmt::Debug>(r: Result<T, tonic::Status>, code: Code, says: &str) {
    match r {
        Ok(v) => panic!("expected {code:?} saying {says:?}, got {v:?}"),
        Err(s) => {
            assert_eq!(s.code(), code, "{s:?}");
            assert!(s.message().contains(says), "{s:?} should say {says:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn output_past_the_limit_is_dropped_with_one_exception_and_bounded_memory() {
    let inst = Instance::start_with(1, 2, &["--set", "output.limit=10M"]).await;
    // Warm up: the first job's allocations are not the ones measured.
    let warm = inst.submit(&writer(1 << 20), None).await;
    inst.wait_clean(warm).await;
    let before = inst.jm_rss();
    let id = inst.submit(&writer(200 << 20), None).await;
    let events = inst.wait_clean(id).await;
    let after = inst.jm_rss();
    let growth = after.saturating_sub(before);
    assert!(
        growth < 64 << 20,
        "job manager grew by {} MiB for 200 MB of output",
        growth >> 20
    );
    let raised = exceptions(&events, "output");
    assert_eq!(raised.len(), 1, "one output exception: {events:?}");
    let ctx = raised[0].context.as_ref().expect("context");
    assert_eq!(ctx.get("severity").and_then(|s| s.as_u64()), Some(1));
    assert_eq!(
        ctx.get("note").and_then(|n| n.as_str()),
        Some("output limit of 10 MiB exceeded; further output is discarded")
    );
    // Not fatal: the job ran to its end and completed.
    let finish = events.iter().find(|e| e.name == "finish").expect("finish");
    assert_eq!(
        finish
            .context
            .as_ref()
            .and_then(|c| c.get("status"))
            .and_then(|s| s.as_i64()),
        Some(0)
    );
    let output = inst.log(id, "output").await;
    let kept: usize = output_data(&output).iter().map(String::len).sum();
    assert!(kept <= 10 << 20, "kept {kept} bytes past the 10 MiB limit");
    assert!(kept > (10 << 20) - (64 << 10), "kept only {kept} bytes");
    let dropped = (200u64 << 20) - kept as u64;
    let messages = log_messages(&output);
    assert!(
        messages.contains(&format!(
            "stdout: {dropped} of {} bytes truncated",
            200u64 << 20
        )),
        "{messages:?}"
    );
    // The end of the stream is still recorded.
    assert!(
        output
            .iter()
            .any(|e| e.name == "data" && e.context.as_ref().and_then(|c| c.get("eof")).is_some()),
        "no eof kept"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_lowers_its_own_limit_and_a_bad_one_is_refused() {
    let inst = Instance::start(1, 2).await;
    let id = inst
        .submit(&writer(1 << 20).setopt("output.limit", json!("64k")), None)
        .await;
    let events = inst.wait_clean(id).await;
    let raised = exceptions(&events, "output");
    assert_eq!(raised.len(), 1, "{events:?}");
    let note = raised[0]
        .context
        .as_ref()
        .and_then(|c| c.get("note"))
        .cloned();
    assert_eq!(
        note,
        Some(json!(
            "output limit of 64 KiB exceeded; further output is discarded"
        ))
    );
    let kept: usize = output_data(&inst.log(id, "output").await)
        .iter()
        .map(String::len)
        .sum();
    assert!(kept <= 64 << 10, "kept {kept}");
    let bad = writer(10)
        .setopt("output.limit", json!("lots"))
        .build()
        .expect("jobspec")
        .to_json();
    refused(
        inst.submit_json(bad, None, 0).await,
        Code::InvalidArgument,
        "output.limit",
    );
    // Nothing was stored for the refused job.
    assert_eq!(inst.list(127).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn info_of_a_large_output_comes_in_pages_under_the_cap() {
    let inst = Instance::start(1, 2).await;
    let id = inst.submit(&writer(20 << 20), None).await;
    inst.wait_clean(id).await;
    // A client with gRPC's default 4 MiB limit reads every page.
    let mut jobs = inst.jobs().await;
    let mut offset = 0;
    let mut pages = Vec::new();
    loop {
        let reply = jobs
            .info(pb::InfoRequest {
                id: id.into(),
                keys: vec!["output".into()],
                offset,
                max_bytes: 0,
            })
            .await
            .expect("info page")
            .into_inner();
        let text = reply.values["output"].clone();
        assert!(text.len() <= REPLY_MAX, "page of {} bytes", text.len());
        assert!(text.ends_with('\n'));
        pages.push(text);
        if !reply.more {
            assert!(reply.next_offset.is_empty());
            break;
        }
        let next = reply.next_offset["output"];
        assert!(next > offset);
        offset = next;
    }
    assert!(pages.len() >= 5, "{} pages for 20 MB", pages.len());
    let whole = pages.concat();
    assert_eq!(whole, stored_text(&mut jobs, id, "output").await);
    let events = fluxgate_shared::eventlog::parse_eventlog(&whole).expect("pages join to RFC 18");
    let data: usize = output_data(&events).iter().map(String::len).sum();
    assert_eq!(data, 20 << 20);
    // A small log is one reply, as before.
    let small = jobs
        .info(pb::InfoRequest {
            id: id.into(),
            keys: vec!["eventlog".into(), "jobspec".into()],
            ..Default::default()
        })
        .await
        .expect("info")
        .into_inner();
    assert!(!small.more);
    assert!(small.values["eventlog"].contains("\"clean\""));
    // A caller may ask for smaller pages.
    let one = jobs
        .info(pb::InfoRequest {
            id: id.into(),
            keys: vec!["eventlog".into()],
            offset: 0,
            max_bytes: 1,
        })
        .await
        .expect("info")
        .into_inner();
    assert_eq!(one.values["eventlog"].lines().count(), 1);
    assert_eq!(one.next_offset.get("eventlog"), Some(&1));
}

#[tokio::test(flavor = "multi_thread")]
async fn long_notes_memos_and_reasons_are_refused_with_the_limit() {
    let inst = Instance::start(1, 2).await;
    let id = inst.submit(&JobspecBuilder::new(["true"]), Some(0)).await;
    let mut jobs = inst.jobs().await;
    let long = "n".repeat(5000);
    refused(
        jobs.cancel(pb::CancelRequest {
            id: id.into(),
            note: long.clone(),
        })
        .await,
        Code::InvalidArgument,
        "cancel note is 5000 bytes, over the limit of 4096 bytes",
    );
    refused(
        jobs.raise_exception(pb::RaiseExceptionRequest {
            id: id.into(),
            r#type: "test".into(),
            severity: 1,
            note: long.clone(),
        })
        .await,
        Code::InvalidArgument,
        "over the limit of 4096 bytes",
    );
    refused(
        jobs.memo(pb::MemoRequest {
            id: id.into(),
            memo: json!({ "k": "m".repeat(70_000) }).to_string(),
            volatile: false,
        })
        .await,
        Code::InvalidArgument,
        "over the limit of 65536 bytes",
    );
    // Each memo fits; together they would not.
    for key in ["a", "b"] {
        let r = jobs
            .memo(pb::MemoRequest {
                id: id.into(),
                memo: json!({ key: "m".repeat(40_000) }).to_string(),
                volatile: false,
            })
            .await;
        if key == "a" {
            r.expect("first memo fits");
        } else {
            refused(r, Code::InvalidArgument, "the job's memo would be");
        }
    }
    refused(
        jobs.queue(pb::QueueRequest {
            action: pb::QueueAction::Stop as i32,
            reason: long.clone(),
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
        "queue stop reason",
    );
    refused(
        inst.resource()
            .await
            .drain(pb::DrainRequest {
                targets: "0".into(),
                reason: long.clone(),
                mode: 0,
            })
            .await,
        Code::InvalidArgument,
        "drain reason",
    );
    // A note at the bound is taken and shows in the listing.
    let note = "n".repeat(4096);
    jobs.cancel(pb::CancelRequest {
        id: id.into(),
        note: note.clone(),
    })
    .await
    .expect("cancel with a note at the bound");
    let events = inst.wait_clean(id).await;
    assert_eq!(exceptions(&events, "cancel").len(), 1);
    let listed = inst.list(127).await;
    assert_eq!(listed[0].exception_note, note);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_listing_of_jobs_with_large_memos_comes_in_pages_each_job_once() {
    let inst = Instance::start(1, 2).await;
    let mut jobs = inst.jobs().await;
    let memo = json!({ "big": "m".repeat(60_000) }).to_string();
    let mut ids = Vec::new();
    for _ in 0..100 {
        let id = inst.submit(&JobspecBuilder::new(["true"]), Some(0)).await;
        jobs.memo(pb::MemoRequest {
            id: id.into(),
            memo: memo.clone(),
            volatile: false,
        })
        .await
        .expect("memo");
        ids.push(u64::from(id));
    }
    // A client with gRPC's default 4 MiB limit follows the pages.
    let mut seen = Vec::new();
    let mut before = 0;
    let mut pages = 0;
    loop {
        let page = jobs
            .list(pb::ListRequest {
                before,
                ..Default::default()
            })
            .await
            .expect("list page")
            .into_inner();
        pages += 1;
        assert!(!page.jobs.is_empty());
        assert!(
            page.jobs.iter().all(|j| j.annotations.contains("\"user\"")),
            "memos are listed"
        );
        seen.extend(page.jobs.iter().map(|j| j.id));
        if page.next == 0 {
            break;
        }
        before = page.next;
    }
    assert!(pages >= 2, "6 MB of memos in {pages} page(s)");
    let mut sorted = seen.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), seen.len(), "a job listed twice");
    ids.sort_unstable();
    assert_eq!(sorted, ids, "every job listed");
    // max_entries still limits, across the cut.
    let few = jobs
        .list(pb::ListRequest {
            max_entries: 3,
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner();
    assert_eq!(few.jobs.len(), 3);
    assert_eq!(few.next, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_guest_past_max_active_jobs_is_refused_and_the_owner_is_not() {
    let setup = Setup {
        auth: true,
        jm_args: vec!["--set".into(), "policy.limits.max_active_jobs=3".into()],
        ..Setup::default()
    };
    let mut inst = Instance::start_setup(1, 2, setup).await;
    let token = inst.token("guest", GUEST, None);
    let held = || pb::SubmitRequest {
        jobspec: JobspecBuilder::new(["true"])
            .build()
            .expect("jobspec")
            .to_json(),
        urgency: Some(0),
        flags: 0,
        ..Default::default()
    };
    let mut guest = inst.jobs_as(Some(&token)).await;
    let mut mine = Vec::new();
    for _ in 0..3 {
        let r = guest.submit(held()).await.expect("under the limit");
        mine.push(JobId::from(r.into_inner().id));
    }
    refused(
        guest.submit(held()).await,
        Code::ResourceExhausted,
        &format!("user {GUEST} has reached the limit of 3 active jobs"),
    );
    // SubmitMany answers each job past the limit alone.
    let many = guest
        .submit_many(pb::SubmitManyRequest {
            jobs: vec![held(), held()],
        })
        .await
        .expect("submit many")
        .into_inner();
    for r in &many.results {
        match &r.result {
            Some(pb::submit_result::Result::Error(e)) => {
                assert!(e.contains("limit of 3 active jobs"), "{e}")
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
    // Nothing was stored for the refused jobs.
    assert_eq!(inst.list(127).await.len(), 3);
    // The owner is not limited.
    let mut owner = inst.jobs().await;
    for _ in 0..5 {
        owner.submit(held()).await.expect("owner submit");
    }
    // The count is rebuilt after a restart.
    inst.restart_jm(true).await;
    let mut guest = inst.jobs_as(Some(&token)).await;
    refused(
        guest.submit(held()).await,
        Code::ResourceExhausted,
        "limit of 3 active jobs",
    );
    // A job that ends makes room.
    guest
        .cancel(pb::CancelRequest {
            id: mine[0].into(),
            note: String::new(),
        })
        .await
        .expect("cancel own job");
    inst.wait_clean(mine[0]).await;
    guest
        .submit(held())
        .await
        .expect("room again after a job ended");
}
