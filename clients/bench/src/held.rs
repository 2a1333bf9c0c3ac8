//! The `held` workload: N jobs submitted held (urgency 0), so that they stay
//! in the job manager, and what they cost it in memory.
//!
//! The job manager's VmRSS is read before submitting and once every job is
//! past its priority step (held jobs wait in SCHED); rss_per_job_bytes is
//! the growth divided by N. Freed memory an allocator keeps counts as used,
//! as it does for the machine. On a remote instance RSS cannot be read
//! (null) and the held jobs are cancelled at the end.

use std::time::Instant;

use anyhow::Context;
use fluxgate_proto::v1 as pb;
use tokio::task::JoinSet;

use fluxgate_cli::client::{self, Instance};

use super::figures::{Figures, rate};
use super::target::Target;
use super::{Run, settle, submit};

/// Cancel requests in flight at once when cleaning up a remote instance.
const CANCEL_INFLIGHT: usize = 64;

/// Run `held` once.
pub async fn run(run: &Run<'_>, target: &mut Target, fig: &mut Figures) -> anyhow::Result<()> {
    let jobspec = submit::sim_jobspec(&run.name)?;
    let mut inst = target.connect().await?;
    let before = target.counters().await;
    fig.rss_before_bytes = target.jm_rss();
    let started = Instant::now();
    let sent = submit::submit(
        &inst,
        &jobspec,
        Some(0),
        run.jobs,
        run.args.batch,
        run.args.inflight,
    )
    .await?;
    settle::wait_held(&mut inst, &run.name).await?;
    fig.elapsed_s = Some(started.elapsed().as_secs_f64());
    fig.submit_per_sec = rate(run.jobs, sent.elapsed.as_secs_f64());
    let after = target.jm_rss();
    if let (Some(b), Some(a)) = (fig.rss_before_bytes, after) {
        fig.rss_per_job_bytes = Some((a as f64 - b as f64) / run.jobs as f64);
    }
    fig.set_counters(before, target.counters().await);
    if !target.is_local() {
        cancel_all(&inst, &sent.ids).await?;
    }
    Ok(())
}

/// Cancel `ids`, a few requests at a time.
async fn cancel_all(inst: &Instance, ids: &[u64]) -> anyhow::Result<()> {
    let mut pending = JoinSet::new();
    for &id in ids {
        if pending.len() >= CANCEL_INFLIGHT
            && let Some(done) = pending.join_next().await
        {
            done.context("a cancel task failed")??;
        }
        let mut jobs = inst.jobs.clone();
        pending.spawn(async move {
            jobs.cancel(pb::CancelRequest {
                id,
                note: "fluxgate bench cleanup".into(),
            })
            .await
            .map(|_| ())
            .map_err(client::status_error)
        });
    }
    while let Some(done) = pending.join_next().await {
        done.context("a cancel task failed")??;
    }
    Ok(())
}
