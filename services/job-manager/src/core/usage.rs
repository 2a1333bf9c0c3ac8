//! What a job used: the CPU time and peak memory its exec services read
//! from its cgroups and report with `finish` (`Finish.usage`; the exec
//! eventlog's `complete` keeps flux's context). Kept durably beside the
//! job's eventlogs (the store's `usage` log, per node), its total with
//! the job for listings, and counted in the metrics.

use fluxgate_shared::JobId;
use fluxgate_shared::job::usage::JobUsage;

use super::Core;
use crate::store::{Log, Store, StoreError, Write};
use crate::telemetry;

impl<S: Store> Core<S> {
    /// Keep what job `id` used, as its exec services reported at its end:
    /// written in the batch of its `finish` event.
    pub(super) fn record_usage(&mut self, id: JobId, usage: &JobUsage) {
        let Some(active) = self.jobs.get_mut(&id) else {
            return;
        };
        let line = match serde_json::to_string(usage) {
            Ok(line) => line,
            Err(e) => {
                tracing::warn!(job = %id, error = %e, "usage not kept");
                return;
            }
        };
        active.usage = Some(usage.total);
        self.out.writes.push(Write::Append {
            id: id.into(),
            log: Log::Usage,
            line,
        });
        let t = usage.total;
        metrics::counter!(telemetry::JOB_CPU, "mode" => "user").increment(micros(t.user));
        metrics::counter!(telemetry::JOB_CPU, "mode" => "system").increment(micros(t.system));
        metrics::histogram!(telemetry::JOB_MAX_RSS).record(t.max_rss as f64);
    }

    /// The usage stored for job `id` (an unreadable store is no usage).
    pub(super) fn stored_usage(&self, id: JobId) -> Option<JobUsage> {
        stored(&*self.store, id)
            .inspect_err(|e| tracing::warn!(job = %id, error = %e, "stored usage unreadable"))
            .ok()
            .flatten()
    }
}

/// The usage stored for job `id`: the last readable document of its usage
/// log; `None` when it has none (not ended, or its nodes do not contain
/// jobs in cgroups).
pub fn stored(store: &impl Store, id: JobId) -> Result<Option<JobUsage>, StoreError> {
    let lines = store.read_log(id.into(), Log::Usage)?.unwrap_or_default();
    Ok(lines
        .iter()
        .rev()
        .find_map(|l| serde_json::from_str::<JobUsage>(l).ok()))
}

/// Seconds as whole microseconds (the counter's unit).
fn micros(s: f64) -> u64 {
    (s.max(0.0) * 1e6).round() as u64
}
