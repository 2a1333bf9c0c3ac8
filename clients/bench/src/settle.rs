//! Waiting for a run's jobs without loading the instance, then reading
//! their summaries (the job manager's own timestamps) in one listing.
//!
//! To wait for completion the bench follows the last submitted job's
//! eventlog to `clean` (one stream, fed by the job manager as it goes),
//! then lists what is still active, a single entry per poll, until nothing
//! is: jobs are scheduled in submission order, so few remain by then.

use std::time::Duration;

use anyhow::bail;
use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;

use fluxgate_cli::client::{self, Instance};
use fluxgate_cli::cmd::jobs::attach;

/// RFC 21 states before SCHED: a held job is settled once past them.
const BEFORE_SCHED: u32 = 1 | 2 | 4;
/// Every active state.
const ACTIVE: u32 = 1 | 2 | 4 | 8 | 16 | 32;
/// INACTIVE.
const INACTIVE: u32 = 64;
/// Pause between listings.
const POLL: Duration = Duration::from_millis(100);

/// Whether any job named `name` is in one of the `states`.
async fn any_in(inst: &mut Instance, name: &str, states: u32) -> anyhow::Result<bool> {
    let jobs = inst
        .jobs
        .list(pb::ListRequest {
            states,
            name: Some(name.to_string()),
            max_entries: 1,
            ..Default::default()
        })
        .await
        .map_err(client::status_error)?
        .into_inner()
        .jobs;
    Ok(!jobs.is_empty())
}

/// Wait until no job named `name` is in one of the `states`.
async fn wait_none_in(inst: &mut Instance, name: &str, states: u32) -> anyhow::Result<()> {
    while any_in(inst, name, states).await? {
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}

/// Wait until every job named `name` is inactive (`last` is the last one
/// submitted); their summaries, of which there must be `count`.
pub async fn wait_inactive(
    inst: &mut Instance,
    name: &str,
    last: u64,
    count: usize,
) -> anyhow::Result<Vec<pb::JobSummary>> {
    wait_ended(inst, name, last).await?;
    summaries(inst, name, count).await
}

/// Wait until every job named `name` is inactive (`last` is the last one
/// submitted).
pub async fn wait_ended(inst: &mut Instance, name: &str, last: u64) -> anyhow::Result<()> {
    attach::outcome(inst, JobId::from(last)).await?;
    wait_none_in(inst, name, ACTIVE).await
}

/// The summaries of the inactive jobs named `name`, of which there must be
/// `count`.
pub async fn summaries(
    inst: &mut Instance,
    name: &str,
    count: usize,
) -> anyhow::Result<Vec<pb::JobSummary>> {
    let request = pb::ListRequest {
        states: INACTIVE,
        name: Some(name.to_string()),
        ..Default::default()
    };
    // Every page: a listing reply is bounded in bytes.
    let jobs = fluxgate_cli::cmd::jobs::list_all(inst, request).await?;
    if jobs.len() != count {
        bail!(
            "{} jobs named {name} are inactive, {count} were submitted",
            jobs.len()
        );
    }
    Ok(jobs)
}

/// Wait until every job named `name` is past priority (held jobs wait in SCHED).
pub async fn wait_held(inst: &mut Instance, name: &str) -> anyhow::Result<()> {
    wait_none_in(inst, name, BEFORE_SCHED).await
}
