//! The Prometheus `/metrics` endpoint of a fluxgate service.
//!
//! [`serve`] installs the process-wide `metrics` recorder (the Prometheus
//! exporter's, without its HTTP listener) and answers `GET /metrics` with the
//! text exposition format (version 0.0.4) on its own address. The services
//! record with the `metrics` macros; when no endpoint is configured no
//! recorder is installed and those macros cost next to nothing.
//!
//! Protocol (HTTP/1.0 and 1.1, as Prometheus scrapes): one request per
//! connection, answered with `Connection: close`. `GET` or `HEAD` of
//! `/metrics` -> 200; other paths -> 404; other methods -> 405; a request head
//! over 8 KiB -> 431; a client that sends nothing usable in 10 s is dropped.
//! At most 32 connections are served at once; more wait in the backlog.
//!
//! Why not the exporter's `http-listener`: it brings hyper's client and HTTP/1
//! server on top of what tonic uses, it cannot tell the bound port when asked
//! for port 0, and it runs outside the service's shutdown. This is a few dozen
//! lines on tokio, which every service already runs.

mod http;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Connections served at once.
const MAX_CONNECTIONS: usize = 32;
/// Longest request head read.
const MAX_HEAD: usize = 8 * 1024;
/// Time a client has to send its request and read the answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How often histogram samples are folded even when nobody scrapes.
const UPKEEP: Duration = Duration::from_secs(5);

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The listen address could not be bound.
    #[error("cannot serve metrics on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The exporter refused the configuration or another recorder is installed.
    #[error("metrics recorder: {0}")]
    Recorder(String),
}

/// Histogram bucket bounds for one metric name (others are summaries).
pub type Buckets<'a> = (&'a str, &'a [f64]);

/// Serve `/metrics` on `listen` until `stop` is cancelled; answers the bound
/// address (port 0 picks a free port). `buckets` applies to the first call in
/// a process, which installs the recorder; later calls share it.
pub async fn serve(
    listen: &str,
    buckets: &[Buckets<'_>],
    stop: CancellationToken,
) -> Result<SocketAddr, MetricsError> {
    let bind_error = |source| MetricsError::Bind {
        addr: listen.to_string(),
        source,
    };
    let listener = TcpListener::bind(listen).await.map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    let handle = recorder(buckets)?;
    let upkeep = handle.clone();
    let upkeep_stop = stop.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(UPKEEP);
        loop {
            tokio::select! {
                _ = tick.tick() => upkeep.run_upkeep(),
                _ = upkeep_stop.cancelled() => return,
            }
        }
    });
    tokio::spawn(accept_loop(listener, handle, stop));
    Ok(addr)
}

/// The process's recorder, installed on first use.
fn recorder(buckets: &[Buckets<'_>]) -> Result<PrometheusHandle, MetricsError> {
    static HANDLE: Mutex<Option<PrometheusHandle>> = Mutex::new(None);
    let mut slot = HANDLE
        .lock()
        .map_err(|_| MetricsError::Recorder("recorder lock poisoned".into()))?;
    if let Some(h) = slot.as_ref() {
        return Ok(h.clone());
    }
    let mut builder = PrometheusBuilder::new();
    for (name, bounds) in buckets {
        builder = builder
            .set_buckets_for_metric(Matcher::Full((*name).to_string()), bounds)
            .map_err(|e| MetricsError::Recorder(e.to_string()))?;
    }
    let handle = builder
        .install_recorder()
        .map_err(|e| MetricsError::Recorder(e.to_string()))?;
    *slot = Some(handle.clone());
    Ok(handle)
}

async fn accept_loop(listener: TcpListener, handle: PrometheusHandle, stop: CancellationToken) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let permit = tokio::select! {
            p = Arc::clone(&permits).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
            _ = stop.cancelled() => return,
        };
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    // Out of descriptors, most likely: back off instead of spinning.
                    tracing::warn!(error = %e, "metrics: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => return,
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            let _permit = permit;
            if let Ok(Err(e)) = tokio::time::timeout(REQUEST_TIMEOUT, answer(stream, &handle)).await
            {
                tracing::debug!(error = %e, "metrics: request failed");
            }
        });
    }
}

/// Read one request head and write the answer.
async fn answer(mut stream: TcpStream, handle: &PrometheusHandle) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    let route = loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&chunk[..n]);
        if let Some(end) = http::head_end(&head) {
            break http::route(&head[..end]);
        }
        if head.len() > MAX_HEAD {
            break http::Route::TooLarge;
        }
    };
    let reply = match route {
        http::Route::Metrics { head_only } => {
            let body = handle.render();
            http::response(200, http::EXPOSITION, body.as_bytes(), head_only)
        }
        other => {
            let (status, text) = other.error();
            http::response(status, "text/plain; charset=utf-8", text.as_bytes(), false)
        }
    };
    stream.write_all(&reply).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(addr: SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn scrape_shows_what_was_recorded() {
        let stop = CancellationToken::new();
        let addr = serve(
            "127.0.0.1:0",
            &[("test_seconds", &[0.1, 1.0])],
            stop.clone(),
        )
        .await
        .unwrap();
        assert_ne!(addr.port(), 0);
        metrics::counter!("test_things_total").increment(3);
        metrics::gauge!("test_level", "state" => "run").set(2.0);
        metrics::histogram!("test_seconds").record(0.5);

        let out = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(
            out.contains("Content-Type: text/plain; version=0.0.4"),
            "{out}"
        );
        assert!(out.contains("\ntest_things_total 3\n"), "{out}");
        assert!(out.contains("\ntest_level{state=\"run\"} 2\n"), "{out}");
        assert!(out.contains("test_seconds_bucket{le=\"1\"} 1"), "{out}");

        // A second endpoint in the same process shares the recorder.
        let again = serve("127.0.0.1:0", &[], stop.clone()).await.unwrap();
        let out = get(again, "GET /metrics?x=1 HTTP/1.0\r\n\r\n").await;
        assert!(out.contains("\ntest_things_total 3\n"), "{out}");

        let out = get(addr, "GET / HTTP/1.1\r\n\r\n").await;
        assert!(out.starts_with("HTTP/1.1 404"), "{out}");
        let out = get(addr, "POST /metrics HTTP/1.1\r\n\r\n").await;
        assert!(out.starts_with("HTTP/1.1 405"), "{out}");
        let huge = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20_000));
        let out = get(addr, &huge).await;
        assert!(out.starts_with("HTTP/1.1 431"), "{out}");

        stop.cancel();
        // The listener closes once the accept loop has seen the cancellation.
        let mut refused = false;
        for _ in 0..100 {
            if TcpStream::connect(addr).await.is_err() {
                refused = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(refused, "the endpoint still accepts after stop");
    }

    #[tokio::test]
    async fn a_bad_address_is_reported() {
        let e = serve("not an address", &[], CancellationToken::new())
            .await
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot serve metrics on not an address"),
            "{e}"
        );
    }
}
