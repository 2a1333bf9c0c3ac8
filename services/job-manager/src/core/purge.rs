//! Purging inactive jobs (flux-core's job-manager purge): the oldest first,
//! by age and by count, from memory and from the store in one batch, so the
//! instance does not grow without bound.

use fluxgate_shared::JobId;

use super::Core;
use crate::clock;
use crate::store::Write;

/// Most jobs purged per tick by the configured limits.
const TICK_BATCH: usize = 1000;

impl Core {
    /// Jobs to purge, oldest first: older than `age_limit`, or beyond the newest
    /// `num_limit`. With `force` they are purged (at most `batch`, 0 = all);
    /// either way the count is returned.
    pub(super) fn purge(
        &mut self,
        age_limit: Option<f64>,
        num_limit: Option<u64>,
        force: bool,
        batch: usize,
    ) -> u64 {
        if age_limit.is_none() && num_limit.is_none() {
            return 0;
        }
        let cutoff = age_limit.map(|a| clock::now() - a);
        let excess = num_limit.map_or(0, |n| self.inactive.len().saturating_sub(n as usize));
        // Both limits choose a prefix of the jobs ordered by age.
        let chosen: Vec<JobId> = self
            .inactive
            .oldest()
            .enumerate()
            .take_while(|(i, (t, _))| *i < excess || cutoff.is_some_and(|c| *t < c))
            .map(|(_, (_, id))| id)
            .collect();
        if !force {
            return chosen.len() as u64;
        }
        let take = if batch == 0 {
            chosen.len()
        } else {
            batch.min(chosen.len())
        };
        for id in &chosen[..take] {
            self.inactive.remove(id);
            self.out.writes.push(Write::Purge { id: (*id).into() });
        }
        if take > 0 {
            tracing::info!(jobs = take, "purged inactive jobs");
        }
        take as u64
    }

    /// Apply the configured age and count limits.
    pub(super) fn purge_by_config(&mut self) {
        let (age, num) = (
            self.config.limits.inactive_age_limit,
            self.config.limits.inactive_num_limit,
        );
        if age.is_some() || num.is_some() {
            self.purge(age, num, true, TICK_BATCH);
        }
    }
}
