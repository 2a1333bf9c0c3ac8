//! Purging inactive jobs (flux-core's job-manager purge): the oldest first,
//! by age and by count, from the store in one batch, so the
//! instance does not grow without bound.

use super::Core;
use crate::clock;
use crate::error::Error;
use crate::store::{Store, Write};

/// Most jobs purged per tick by the configured limits.
const TICK_BATCH: usize = 1000;

impl<S: Store> Core<S> {
    /// Jobs to purge, oldest first: older than `age_limit`, or beyond the newest
    /// `num_limit`. With `force` they are purged (at most `batch`, 0 = all);
    /// either way the count is returned.
    pub(super) fn purge(
        &mut self,
        age_limit: Option<f64>,
        num_limit: Option<u64>,
        force: bool,
        batch: usize,
    ) -> Result<u64, Error> {
        if age_limit.is_none() && num_limit.is_none() {
            return Ok(0);
        }
        let cutoff = age_limit.map(|a| clock::now() - a);
        let excess = num_limit.map_or(0, |n| self.inactive.count().saturating_sub(n));
        // Both limits choose a prefix of the jobs ordered by age.
        let older = match cutoff {
            Some(t) => self.inactive.count_before(&*self.store, t)?,
            None => 0,
        };
        let chosen = excess.max(older);
        if !force {
            return Ok(chosen);
        }
        let take = match batch {
            0 => chosen,
            n => chosen.min(n as u64),
        };
        let take = usize::try_from(take).unwrap_or(usize::MAX);
        let ids = self.inactive.oldest(&*self.store, take)?;
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
        Ok(purged)
    }

    /// Apply the configured age and count limits.
    pub(super) fn purge_by_config(&mut self) {
        let (age, num) = (
            self.config.limits.inactive_age_limit,
            self.config.limits.inactive_num_limit,
        );
        if (age.is_some() || num.is_some())
            && let Err(e) = self.purge(age, num, true, TICK_BATCH)
        {
            tracing::error!(error = %e, "purge by the configured limits failed");
        }
    }
}
