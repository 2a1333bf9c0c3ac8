//! Watchers that read slowly or hang up cost the job manager bounded memory
//! and nothing else: a job writes 20 MB of output while sixteen followers
//! never read; the job manager's memory stays bounded, other clients are
//! served, a reader that starts late still gets every line, and hanging up
//! mid-stream leaves the service as it was.

use fluxgate_integration_tests::{Instance, output_data};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::Event;
use fluxgate_shared::jobspec::JobspecBuilder;

const LINES: usize = 10_000;
const LINE_BYTES: usize = 2000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_vanishing_readers_cost_bounded_memory() {
    let inst = Instance::start(1, 2).await;
    let before = inst.jm_rss();
    let script = format!(
        "head -c {} /dev/zero | tr '\\0' x | fold -w {LINE_BYTES}",
        LINES * LINE_BYTES
    );
    let id = inst
        .submit(&JobspecBuilder::new(["sh", "-c", &script]), None)
        .await;

    // Sixteen followers that never read a line (eight on the output, eight
    // on the eventlog), each on its own connection.
    let mut idle = Vec::new();
    for i in 0..16 {
        let mut jobs = inst.jobs().await;
        let stream = jobs
            .watch_eventlog(pb::WatchEventlogRequest {
                id: id.into(),
                name: if i % 2 == 0 { "output" } else { "eventlog" }.into(),
                follow: true,
                wait_create: true,
                ..Default::default()
            })
            .await
            .expect("watch")
            .into_inner();
        idle.push((jobs, stream));
    }
    let events = inst.wait_clean(id).await;
    assert!(
        events.iter().any(|e| e.name == "finish"),
        "the job ran to its end"
    );
    let during = inst.jm_rss();
    eprintln!(
        "job manager RSS: {} MiB before, {} MiB with 16 idle followers of {} MiB of output",
        before >> 20,
        during >> 20,
        (LINES * LINE_BYTES) >> 20
    );
    // Unbounded buffering would hold the output once per follower (320 MiB).
    assert!(
        during < before + (96 << 20),
        "RSS grew from {before} to {during} bytes"
    );

    // Others are served meanwhile, and a late reader gets every line in order.
    let other = inst.submit(&JobspecBuilder::new(["true"]), None).await;
    inst.wait_clean(other).await;
    let mut late = inst
        .jobs()
        .await
        .watch_eventlog(pb::WatchEventlogRequest {
            id: id.into(),
            name: "output".into(),
            follow: false,
            wait_create: false,
            ..Default::default()
        })
        .await
        .expect("watch")
        .into_inner();
    let mut bytes = 0;
    while let Some(line) = late.message().await.expect("stream") {
        let e = Event::parse_json(&line.line).expect("RFC 18 line");
        if e.name == "data" {
            let ctx = e.context.as_ref().expect("data has a context");
            bytes += ctx.get("data").and_then(|d| d.as_str()).map_or(0, str::len);
        }
    }
    // fold ends every line but the last with a newline.
    assert_eq!(bytes, LINES * (LINE_BYTES + 1) - 1, "every byte of stdout");

    // Read a little from some followers, then hang up on all of them.
    for (_, stream) in idle.iter_mut().take(4) {
        let first = stream.message().await.expect("stream").expect("a line");
        assert!(!first.line.is_empty());
    }
    drop(idle);
    let after = inst.submit(&JobspecBuilder::new(["true"]), None).await;
    inst.wait_clean(after).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_gets_lines_too_long_for_the_hub_in_order() {
    let inst = Instance::start(1, 2).await;
    // Lines of 20,000 bytes between short ones, slowly enough that the
    // follower is caught up: the long ones reach it from the store, the
    // short ones through the hub.
    let script = "for i in 1 2 3 4 5; do echo short$i; head -c 20000 /dev/zero | tr '\\0' $i; echo; sleep 0.1; done";
    let id = inst
        .submit(&JobspecBuilder::new(["sh", "-c", script]), None)
        .await;
    let mut follower = inst
        .jobs()
        .await
        .watch_eventlog(pb::WatchEventlogRequest {
            id: id.into(),
            name: "output".into(),
            follow: true,
            wait_create: true,
            ..Default::default()
        })
        .await
        .expect("watch")
        .into_inner();
    let mut lines = Vec::new();
    while let Some(line) = follower.message().await.expect("stream") {
        lines.push(line.line);
    }
    let stored = inst.log(id, "output").await;
    let followed: Vec<Event> = lines
        .iter()
        .map(|l| Event::parse_json(l).expect("RFC 18 line"))
        .collect();
    assert_eq!(
        followed, stored,
        "the follower saw the stored log, line for line"
    );
    let text = output_data(&stored).concat();
    let want: String = (1..=5)
        .map(|i| format!("short{i}\n{}\n", i.to_string().repeat(20_000)))
        .collect();
    assert_eq!(text, want);
    assert!(lines.iter().any(|l| l.len() > 4096), "some lines were long");
}
