//! The committer: waits for each batch to be durable, in order, then carries
//! out the effects that were waiting for it.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::Msg;
use super::effect::Effect;
use super::store_read::ReadCarrier;
use crate::exec_link::ExecLink;
use crate::hub::{Hub, Published};
use crate::journal::Journal;
use crate::store::{Ack, Store, StoreError, Urgency, Write};

/// Everything outside the core that effects reach.
#[derive(Debug)]
pub struct Carrier<E, S> {
    /// Watchers of eventlogs.
    pub hub: Hub,
    /// The resource journal.
    pub journal: Journal,
    /// The exec services.
    pub exec: E,
    /// The core's inbox, for what a prolog or epilog says when it ends.
    pub inbox: mpsc::Sender<Msg>,
    /// The store, read for the core.
    pub reads: ReadCarrier<S>,
}

impl<E: ExecLink, S: Store> Carrier<E, S> {
    /// Carry out one effect.
    pub fn carry(&self, effect: Effect) {
        match effect {
            Effect::Reply(reply) => reply.send(),
            Effect::Publish(p) => self.hub.publish(p),
            Effect::Live { id, line } => self.hub.publish_live(id, line),
            Effect::Journal(e) => self.journal.push(&e),
            Effect::Acquire { to, msg } => {
                if let Err(mpsc::error::TrySendError::Full(_)) = to.try_send(msg) {
                    // The bounded buffer protects the service; the acquirer must
                    // re-acquire to resynchronise.
                    tracing::error!("acquirer too slow: an acquire response was dropped");
                }
            }
            Effect::Perilog(run) => {
                tokio::spawn(super::perilog::run(*run, self.inbox.clone()));
            }
            Effect::ExecStart(job) => self.exec.start(*job),
            Effect::ExecKill {
                addr,
                id,
                kind,
                note,
            } => self.exec.exception(addr, id, kind, note),
            Effect::ExecSignal { addr, id, signum } => self.exec.signal(addr, id, signum),
            Effect::ExecConfirmGone { addr, id, rank } => self.exec.confirm_gone(addr, id, rank),
            Effect::ExecExpiration {
                addr,
                id,
                expiration,
            } => self.exec.expiration(addr, id, expiration),
            Effect::JobSpan(span) => crate::otlp::job_ended(span.id, &span.job, &span.inactive),
            Effect::InactiveDurable { mark, flush } => {
                mark.fetch_max(flush, Ordering::Release);
            }
            Effect::Read(read) => self.reads.carry(read),
        }
    }
}

/// Batches handed to the store but not yet acknowledged, bounded.
const IN_FLIGHT: usize = 256;

/// Bytes of writes handed to the store but not yet acknowledged. A batch
/// count alone does not bound memory: one batch may hold every output line
/// that arrived during a pass of the core, and lines wait here (and in the
/// effects that publish them) until they are durable.
const BYTES_IN_FLIGHT: usize = 16 << 20;

/// What waits for one batch: its ack, its effects, its share of the byte budget.
type Pending = (Option<Ack>, Vec<Effect>, Option<OwnedSemaphorePermit>);

/// The core's side of the committer.
#[derive(Debug, Clone)]
pub struct Committer {
    tx: mpsc::Sender<Pending>,
    budget: Arc<Semaphore>,
    /// Who follows which job, for the urgency of its lines.
    hub: Hub,
}

impl Committer {
    /// Start the committer task. If the store fails, `on_fatal` is called once and
    /// no further effect runs: what was not acknowledged was never promised.
    /// Once `halt` is cancelled (the job manager stepped down) no effect
    /// runs either, even of a batch that commits late: another job manager
    /// may lead by then, and it alone acts on what is stored.
    pub fn spawn<E: ExecLink, S: Store>(
        carrier: Carrier<E, S>,
        on_fatal: impl FnOnce(StoreError) + Send + 'static,
        halt: CancellationToken,
    ) -> Self {
        let (tx, mut rx) = mpsc::channel::<Pending>(IN_FLIGHT);
        let hub = carrier.hub.clone();
        tokio::spawn(async move {
            let mut on_fatal = Some(on_fatal);
            while let Some((ack, effects, _bytes)) = rx.recv().await {
                let durable = match ack {
                    Some(ack) => tokio::select! {
                        biased;
                        () = halt.cancelled() => return,
                        durable = ack.wait() => durable,
                    },
                    None => Ok(()),
                };
                if let Err(e) = durable {
                    tracing::error!(error = %e, "store commit failed; stopping");
                    if let Some(f) = on_fatal.take() {
                        f(e);
                    }
                    // Drain without acting: nothing after a failed commit is durable.
                    while rx.recv().await.is_some() {}
                    return;
                }
                if halt.is_cancelled() {
                    return;
                }
                for effect in effects {
                    carrier.carry(effect);
                }
            }
        });
        Committer {
            tx,
            budget: Arc::new(Semaphore::new(BYTES_IN_FLIGHT)),
            hub,
        }
    }

    /// Whether anyone waits for these effects: a reply, a task's start or
    /// signal, a follower of one of the jobs. Lines nobody follows, and the
    /// end of jobs nobody waits for, may ride a later group commit.
    fn urgency(&self, effects: &[Effect]) -> Urgency {
        let mut jobs = Vec::new();
        for effect in effects {
            match effect {
                Effect::Publish(
                    Published::Line { id, .. }
                    | Published::Live { id, .. }
                    | Published::Inactive { id },
                )
                | Effect::Live { id, .. } => jobs.push(*id),
                Effect::InactiveDurable { .. } | Effect::JobSpan(_) => {}
                _ => return Urgency::Now,
            }
        }
        if self.hub.followed(jobs.into_iter()) {
            Urgency::Now
        } else {
            Urgency::Lazy
        }
    }

    /// Enqueue `writes` (in call order) and schedule `effects` after them.
    pub async fn send<S: Store>(&self, store: &S, writes: Vec<Write>, effects: Vec<Effect>) {
        // A batch larger than the whole budget waits for everything before it.
        let bytes = writes
            .iter()
            .map(Write::size)
            .sum::<usize>()
            .min(BYTES_IN_FLIGHT);
        let permit = match u32::try_from(bytes) {
            Ok(n) if n > 0 => Arc::clone(&self.budget).acquire_many_owned(n).await.ok(),
            _ => None,
        };
        let ack = if writes.is_empty() {
            None
        } else {
            match store.enqueue_with(writes, self.urgency(&effects)).await {
                Ok(ack) => Some(ack),
                Err(e) => {
                    tracing::error!(error = %e, "store closed; dropping effects");
                    return;
                }
            }
        };
        if self.tx.send((ack, effects, permit)).await.is_err() {
            tracing::error!("committer stopped; dropping effects");
        }
    }
}
