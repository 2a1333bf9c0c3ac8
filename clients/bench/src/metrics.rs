//! Reading the job manager's Prometheus counters (docs/CONFIG.md, Metrics):
//! `fluxgate_events_committed_total{log}` and `fluxgate_store_commits_total`,
//! differenced over a run to give events per store transaction.
//!
//! The endpoint answers one plain HTTP/1.0 `GET /metrics` per connection
//! with the text exposition format, so a few lines on tokio read it without
//! an HTTP client. A counter never incremented is not in the text yet: it
//! counts as 0 when the endpoint answered.

use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Events made durable, by log.
const EVENTS: &str = "fluxgate_events_committed_total";
/// Store transactions.
const COMMITS: &str = "fluxgate_store_commits_total";
/// Longest a scrape may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest answer read.
const MAX_BODY: u64 = 16 << 20;

/// The counters read at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Counters {
    /// Events committed, all logs together.
    pub events: u64,
    /// Store transactions.
    pub commits: u64,
}

impl Counters {
    /// What was counted between `before` and `self`.
    pub fn since(self, before: Counters) -> Counters {
        Counters {
            events: self.events.saturating_sub(before.events),
            commits: self.commits.saturating_sub(before.commits),
        }
    }
}

/// `host:port` of an endpoint given as `ADDR`, `http://ADDR` or `http://ADDR/metrics`.
pub fn endpoint(given: &str) -> String {
    let rest = given.strip_prefix("http://").unwrap_or(given);
    rest.split('/').next().unwrap_or(rest).to_string()
}

/// Scrape the endpoint at `addr` (`host:port`).
pub async fn scrape(addr: &str) -> anyhow::Result<Counters> {
    let text = tokio::time::timeout(SCRAPE_TIMEOUT, get(addr))
        .await
        .with_context(|| format!("metrics at {addr}: no answer in {SCRAPE_TIMEOUT:?}"))??;
    Ok(Counters {
        events: sum(&text, EVENTS) as u64,
        commits: sum(&text, COMMITS) as u64,
    })
}

async fn get(addr: &str) -> anyhow::Result<String> {
    let mut stream = TcpStream::connect(addr)
        .await
        .with_context(|| format!("cannot connect to the metrics endpoint {addr}"))?;
    let request = format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut reply = Vec::new();
    stream.take(MAX_BODY).read_to_end(&mut reply).await?;
    let reply = String::from_utf8_lossy(&reply);
    let Some((head, body)) = reply.split_once("\r\n\r\n") else {
        bail!("metrics at {addr}: not an HTTP answer");
    };
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        bail!("metrics at {addr}: {status}");
    }
    Ok(body.to_string())
}

/// The sum of every series of the metric `name` (all label sets).
fn sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            // Exactly this metric: its labels or the value follow the name.
            let value = if let Some(labelled) = rest.strip_prefix('{') {
                labelled.rsplit_once('}')?.1
            } else if rest.starts_with(' ') {
                rest
            } else {
                return None;
            };
            value.split_whitespace().next()?.parse::<f64>().ok()
        })
        .filter(|v| v.is_finite())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
# TYPE fluxgate_events_committed_total counter
fluxgate_events_committed_total{log=\"eventlog\"} 120
fluxgate_events_committed_total{log=\"exec.eventlog\"} 30
fluxgate_events_committed_total_other 5
# TYPE fluxgate_store_commits_total counter
fluxgate_store_commits_total 12
";

    #[test]
    fn counters_add_up_over_labels() {
        assert_eq!(sum(TEXT, EVENTS), 150.0);
        assert_eq!(sum(TEXT, COMMITS), 12.0);
        assert_eq!(sum(TEXT, "fluxgate_jobs"), 0.0);
    }

    #[test]
    fn endpoints_in_any_spelling() {
        assert_eq!(endpoint("127.0.0.1:9"), "127.0.0.1:9");
        assert_eq!(endpoint("http://127.0.0.1:9/metrics"), "127.0.0.1:9");
        assert_eq!(endpoint("http://h:9"), "h:9");
    }
}
