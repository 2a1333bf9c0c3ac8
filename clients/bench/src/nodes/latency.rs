//! How long the core takes to answer while a big job starts and ends: a
//! status request (answered by the core's loop) every few milliseconds on
//! one connection, the longest round trip kept.

use std::time::{Duration, Instant};

use fluxgate_proto::v1 as pb;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::super::target::Target;

/// Between two requests.
const EVERY: Duration = Duration::from_millis(5);

/// A running probe.
pub struct Probe {
    stop: oneshot::Sender<()>,
    task: JoinHandle<f64>,
}

impl Probe {
    /// Start probing `target`.
    pub async fn start(target: &Target) -> anyhow::Result<Probe> {
        let mut inst = target.connect().await?;
        let (stop, mut stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            let mut longest = Duration::ZERO;
            loop {
                let t = Instant::now();
                if inst.resource.status(pb::StatusRequest {}).await.is_err() {
                    break;
                }
                longest = longest.max(t.elapsed());
                tokio::select! {
                    _ = tokio::time::sleep(EVERY) => {}
                    _ = &mut stopped => break,
                }
            }
            longest.as_secs_f64() * 1000.0
        });
        Ok(Probe { stop, task })
    }

    /// Stop: the longest answer time seen, milliseconds.
    pub async fn stop(self) -> f64 {
        let _ = self.stop.send(());
        self.task.await.unwrap_or(f64::NAN)
    }
}
