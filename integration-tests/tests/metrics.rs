//! The job manager's Prometheus endpoint, scraped over HTTP from the real binary.

use std::time::Duration;

use fluxgate_integration_tests::{Instance, eventually};
use fluxgate_shared::jobspec::JobspecBuilder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The body of `GET /metrics` at `addr`.
async fn scrape(addr: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect to the metrics endpoint");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let (head, body) = out.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    body.to_string()
}

/// The value of one series (`name{labels}`), if present.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_and_gauges_follow_jobs() {
    // A port picked here rather than 0, so the test knows where to scrape.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let addr = format!("127.0.0.1:{port}");
    let inst = Instance::start_with(
        1,
        2,
        &[
            "--set",
            &format!("metrics.listen={addr}"),
            // Gauges are counted on each tick: a short one keeps the test short.
            "--set",
            "resource.heartbeat_interval=0.1",
        ],
    )
    .await;
    let ok = inst.submit(&JobspecBuilder::new(["true"]), None).await;
    inst.wait_clean(ok).await;
    let bad = inst
        .submit(&JobspecBuilder::new(["/nonexistent/command"]), None)
        .await;
    inst.wait_clean(bad).await;

    let text = eventually(Duration::from_secs(10), async || {
        let text = scrape(&addr).await;
        if value(&text, "fluxgate_jobs{state=\"INACTIVE\"}") == Some(2.0) {
            Ok(text)
        } else {
            Err(format!("no INACTIVE jobs counted:\n{text}"))
        }
    })
    .await;
    let at_least = |series: &str, n: f64| {
        let v = value(&text, series).unwrap_or_else(|| panic!("{series} missing:\n{text}"));
        assert!(v >= n, "{series} = {v}, expected at least {n}");
    };
    at_least("fluxgate_jobs_submitted_total", 2.0);
    // submit .. clean is ten events per job.
    at_least("fluxgate_events_committed_total{log=\"eventlog\"}", 20.0);
    at_least(
        "fluxgate_events_committed_total{log=\"exec.eventlog\"}",
        1.0,
    );
    at_least("fluxgate_store_commits_total", 1.0);
    at_least("fluxgate_exec_starts_total{reattach=\"false\"}", 2.0);
    at_least("fluxgate_exec_exceptions_total{severity=\"0\"}", 1.0);
    at_least("fluxgate_sched_alloc_latency_seconds_count", 2.0);
    at_least(
        "fluxgate_sched_alloc_latency_seconds_bucket{le=\"+Inf\"}",
        2.0,
    );
    at_least("fluxgate_sched_pass_seconds_count", 1.0);
    assert_eq!(value(&text, "fluxgate_jobs{state=\"RUN\"}"), Some(0.0));
    assert_eq!(value(&text, "fluxgate_jobs{state=\"SCHED\"}"), Some(0.0));
    assert_eq!(value(&text, "fluxgate_nodes{state=\"online\"}"), Some(1.0));
    assert_eq!(value(&text, "fluxgate_nodes{state=\"offline\"}"), Some(0.0));
    assert_eq!(
        value(&text, "fluxgate_nodes{state=\"schedulable\"}"),
        Some(1.0)
    );
    assert!(
        text.contains("# HELP fluxgate_jobs Jobs held by the job manager"),
        "{text}"
    );
    assert!(text.contains("# TYPE fluxgate_jobs gauge"), "{text}");
}
