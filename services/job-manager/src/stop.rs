//! How a lead ends: at shutdown or when the store fails, the job manager
//! stops (flushing what the core holds); when the lead is lost, it steps
//! down to standby in the same process (docs/HA.md, "Failure cases").
//!
//! A leader that steps down must not act beside the new one: its health
//! goes NOT_SERVING first, then nothing of its core runs again (the
//! committer carries no effect, not even of a batch that commits late;
//! the store waits for no database), and last every long-lived stream
//! ends, so that its nodes rejoin the new leader.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use fluxgate_proto::v1::job_manager_server::JobManagerServer;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic_health::server::HealthReporter;

use crate::grpc::jobs::JobManagerService;
use crate::ha::lead::{Lead, Shutdown};
use crate::store::{AnyStore, StoreError};

/// Why the running core must stop before it is told to.
#[derive(Debug, Clone, PartialEq)]
pub enum Stopping {
    /// The store failed: the process ends, so that a restart replays what
    /// is durable.
    StoreFailed(String),
    /// Another job manager may lead: this one goes back to standby.
    LeadLost(String),
}

impl Stopping {
    /// What a failed commit means: a writer that was deposed lost the lead.
    pub fn of_store(e: StoreError) -> Stopping {
        match e {
            StoreError::Deposed(why) => Stopping::LeadLost(why),
            e => Stopping::StoreFailed(e.to_string()),
        }
    }
}

/// Where the reasons to stop are said; the first one said is the one acted on.
#[derive(Debug, Clone)]
pub struct StopTx(Arc<watch::Sender<Option<Stopping>>>);

impl StopTx {
    /// A sender and the receiver [`stop_when`] waits on.
    pub fn new() -> (StopTx, watch::Receiver<Option<Stopping>>) {
        let (tx, rx) = watch::channel(None);
        (StopTx(Arc::new(tx)), rx)
    }

    /// Say why the core must stop, unless a reason was said already (a
    /// commit that fails because the lead was lost says nothing new).
    pub fn send(&self, why: Stopping) {
        self.0.send_if_modified(|slot| {
            let first = slot.is_none();
            if first {
                *slot = Some(why);
            }
            first
        });
    }
}

/// The background store check's interrupt, and the flag that tells it
/// the job manager is stopping.
pub type StoreCheck = Option<(rusqlite::InterruptHandle, Arc<AtomicBool>)>;

/// How a lead ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    /// Told to stop.
    Shutdown,
    /// The store failed (see [`Stopping::StoreFailed`]).
    Failed(String),
    /// The lead was lost: this job manager stood down to standby.
    LeadLost(String),
}

/// What stops when a lead ends, in the order [`stop_when`] stops it.
pub struct Stop {
    pub lead: Option<Lead>,
    pub health: HealthReporter,
    pub check: StoreCheck,
    pub store: Arc<AnyStore>,
    /// Stops the core's loop (which flushes what it holds).
    pub core_stop: CancellationToken,
    pub core_task: JoinHandle<()>,
    /// Stops the committer from carrying any effect again.
    pub halt: CancellationToken,
    /// Ends every long-lived stream.
    pub cancel: CancellationToken,
}

/// Wait for `shutdown` or a reason to stop, then stop (see [`Stop::stop`]
/// and [`Stop::step_down`]); how the lead ended. `shutdown` is borrowed: it
/// still ends the standby that follows a step down.
pub async fn stop_when(
    shutdown: &mut Shutdown,
    mut stopping: watch::Receiver<Option<Stopping>>,
    stop: Stop,
) -> Ended {
    let ended = tokio::select! {
        _ = shutdown.as_mut() => Ended::Shutdown,
        why = stopping.wait_for(Option::is_some) => match why.map(|w| w.clone()) {
            Ok(Some(Stopping::LeadLost(why))) => Ended::LeadLost(why),
            Ok(Some(Stopping::StoreFailed(e))) => Ended::Failed(e),
            Ok(None) | Err(_) => Ended::Failed("the core stopped".into()),
        },
    };
    match ended {
        Ended::LeadLost(_) => stop.step_down().await,
        Ended::Shutdown | Ended::Failed(_) => stop.stop().await,
    }
    ended
}

impl Stop {
    /// Stop in order: the lease, health, the store check, the core
    /// (flushing what it holds, so that the join streams ending next are
    /// not taken for lost nodes), and last every long-lived stream, so
    /// that the server can stop.
    async fn stop(self) {
        if let Some(lead) = &self.lead {
            lead.stop.store(true, Ordering::Release);
        }
        self.not_serving().await;
        if let Some((interrupt, stopping)) = &self.check {
            stopping.store(true, Ordering::Release);
            interrupt.interrupt();
        }
        self.core_stop.cancel();
        let mut core_task = self.core_task;
        let _ = (&mut core_task).await;
        self.cancel.cancel();
    }

    /// Step down: NOT_SERVING, no effect carried and no commit waited for
    /// again, the lease let go, the core dropped without a flush (nothing
    /// it holds could commit: the epoch fences it), and every stream ended,
    /// the nodes' join streams with them.
    async fn step_down(self) {
        self.not_serving().await;
        self.halt.cancel();
        self.store.abandon();
        if let Some(lead) = &self.lead {
            lead.stop.store(true, Ordering::Release);
        }
        self.core_task.abort();
        let _ = self.core_task.await;
        self.cancel.cancel();
    }

    async fn not_serving(&self) {
        self.health
            .set_not_serving::<JobManagerServer<JobManagerService<AnyStore>>>()
            .await;
    }
}
