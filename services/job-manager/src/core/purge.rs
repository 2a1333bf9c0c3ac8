//! Purging inactive jobs (flux-core's job-manager purge): the oldest first,
//! by age and by count, from the store in one batch, so the
//! instance does not grow without bound.
//!
//! Which jobs are oldest is the store's to say, and the core does not read
//! the store on its task: a purge reads on the blocking pool (`reads.rs`)
//! and is decided when the answer comes back. One purge is decided at a
//! time, each reading only after the one before it is durable, so no job is
//! chosen twice.

use std::collections::VecDeque;

use tokio::sync::oneshot;

use super::Core;
use crate::clock;
use crate::error::Error;
use crate::store::{Store, StoreError, Write};

/// Most jobs purged per tick by the configured limits.
const TICK_BATCH: usize = 1000;

/// Where the count of a requested purge goes; none for the tick's.
type PurgeReply = oneshot::Sender<Result<u64, Error>>;

/// One purge asked for.
#[derive(Debug)]
pub(super) struct PurgeAsk {
    /// Older than this many seconds.
    pub age_limit: Option<f64>,
    /// Beyond the newest this many.
    pub num_limit: Option<u64>,
    /// Purge; else only count.
    pub force: bool,
    /// Most jobs purged (0 = all).
    pub batch: usize,
    /// Who is told how many.
    pub reply: Option<PurgeReply>,
}

/// Purges asked for: one is being decided, the rest wait their turn.
#[derive(Debug, Default)]
pub(super) struct Purges {
    busy: bool,
    waiting: VecDeque<PurgeAsk>,
}

/// What the store says for one purge.
#[derive(Debug)]
pub(super) struct Stored {
    /// Stored inactive jobs older than the cutoff.
    before: u64,
    /// The stored oldest, as `(t_inactive, id)`.
    oldest: Vec<(f64, u64)>,
}

/// Read what `ask` chooses from: the stored inactive jobs older than
/// `cutoff`, and with `force` the oldest (the `excess` over the count limit,
/// or those before the cutoff, at most `batch`, and `margin` more for the
/// jobs memory knows better than the store).
pub(super) fn read_stored<S: Store>(
    store: &S,
    ask: &PurgeAsk,
    cutoff: Option<f64>,
    excess: u64,
    margin: u64,
) -> Result<Stored, StoreError> {
    let before = match cutoff {
        Some(t) => store.inactive_before(t)?,
        None => 0,
    };
    let oldest = if ask.force {
        let batch = ask.batch as u64;
        let most = excess.max(before.saturating_add(margin));
        let most = if batch == 0 { most } else { most.min(batch) };
        let rows = most.saturating_add(margin);
        store.oldest_inactive(usize::try_from(rows).unwrap_or(usize::MAX))?
    } else {
        Vec::new()
    };
    Ok(Stored { before, oldest })
}

impl<S: Store> Core<S> {
    /// Purge, or count, the jobs `ask` chooses; the count is answered.
    pub(super) fn purge(&mut self, ask: PurgeAsk) {
        if ask.age_limit.is_none() && ask.num_limit.is_none() {
            if let Some(reply) = ask.reply {
                self.reply(reply, Ok(0));
            }
            return;
        }
        if self.purges.busy {
            self.purges.waiting.push_back(ask);
            return;
        }
        self.purges.busy = true;
        let cutoff = ask.age_limit.map(|a| clock::now() - a);
        let excess = ask
            .num_limit
            .map_or(0, |n| self.inactive.count().saturating_sub(n));
        // Jobs memory knows better than the store take rows of the read or
        // places in the order: read that many more.
        let margin = self.inactive.read_margin() as u64;
        self.read_purge(ask, cutoff, excess, margin);
    }

    /// Decide a purge once the store has said which jobs it holds, answer
    /// it, and start the next one waiting.
    pub(super) fn purge_read(
        &mut self,
        ask: PurgeAsk,
        cutoff: Option<f64>,
        stored: Result<Stored, StoreError>,
    ) {
        let n = stored
            .map_err(Error::from)
            .map(|s| self.purge_chosen(&ask, cutoff, s));
        if let Some(reply) = ask.reply {
            self.reply(reply, n);
        } else if let Err(e) = n {
            tracing::error!(error = %e, "purge by the configured limits failed");
        }
        self.purges.busy = false;
        if let Some(next) = self.purges.waiting.pop_front() {
            self.purge(next);
        }
    }

    /// Decide a purge from what the store said: the count chosen, and
    /// with `force` the purge of (at most `batch` of) them.
    fn purge_chosen(&mut self, ask: &PurgeAsk, cutoff: Option<f64>, stored: Stored) -> u64 {
        let excess = ask
            .num_limit
            .map_or(0, |n| self.inactive.count().saturating_sub(n));
        // Both limits choose a prefix of the jobs ordered by age.
        let older = match cutoff {
            Some(t) => self.inactive.count_before(stored.before, t),
            None => 0,
        };
        let chosen = excess.max(older);
        if !ask.force {
            return chosen;
        }
        let take = match ask.batch {
            0 => chosen,
            n => chosen.min(n as u64),
        };
        let take = usize::try_from(take).unwrap_or(usize::MAX);
        let ids = self.inactive.oldest(stored.oldest, take);
        let excess = usize::try_from(excess).unwrap_or(usize::MAX);
        let mut purged = 0u64;
        for (i, (t, id)) in ids.into_iter().enumerate() {
            if i >= excess && cutoff.is_none_or(|c| t >= c) {
                break;
            }
            self.inactive.purged(id);
            self.out.writes.push(Write::Purge { id: id.into() });
            purged += 1;
        }
        if purged > 0 {
            tracing::info!(jobs = purged, "purged inactive jobs");
        }
        purged
    }

    /// Apply the configured age and count limits, unless a purge is
    /// already under way (the next tick tries again).
    pub(super) fn purge_by_config(&mut self) {
        let (age, num) = (
            self.config.limits.inactive_age_limit,
            self.config.limits.inactive_num_limit,
        );
        if (age.is_some() || num.is_some()) && !self.purges.busy {
            self.purge(PurgeAsk {
                age_limit: age,
                num_limit: num,
                force: true,
                batch: TICK_BATCH,
                reply: None,
            });
        }
    }
}
