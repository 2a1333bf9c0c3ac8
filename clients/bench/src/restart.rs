//! The `restart` workload: how long a job manager takes to serve again on a
//! full store.
//!
//! The store is filled through the service: N simulated jobs run to
//! INACTIVE, then N/10 jobs are submitted held and stay pending. The job
//! manager is then stopped with SIGTERM and a new one started on the same
//! statedir and address, three times; then the same with SIGKILL (the
//! store recovers from its write-ahead log). Each restart is timed from the
//! exec of the new job manager to its health check answering SERVING
//! (`fluxgate start` waits for the same: the URI it prints once ready);
//! the next one waits until the node has rejoined. The figures are the
//! medians. events_per_commit is of the filling; rss_bytes is the last job
//! manager's, after recovery.

use std::time::Instant;

use anyhow::Context;
use nix::sys::signal::Signal;

use super::figures::{Figures, median};
use super::target::Target;
use super::{Run, settle, submit};

/// Restarts of each kind.
const RESTARTS: usize = 3;

/// Run `restart` once.
pub async fn run(run: &Run<'_>, target: &mut Target, fig: &mut Figures) -> anyhow::Result<()> {
    let jobspec = submit::sim_jobspec(&run.name)?;
    let mut inst = target.connect().await?;
    let before = target.counters().await;
    let started = Instant::now();
    let (batch, inflight) = (run.args.batch, run.args.inflight);
    let done = submit::submit(&inst, &jobspec, None, run.jobs, batch, inflight).await?;
    let last = *done.ids.last().context("no job was submitted")?;
    settle::wait_inactive(&mut inst, &run.name, last, done.ids.len()).await?;
    let held = (run.jobs / 10).max(1);
    submit::submit(&inst, &jobspec, Some(0), held, batch, inflight).await?;
    settle::wait_held(&mut inst, &run.name).await?;
    fig.set_counters(before, target.counters().await);
    drop(inst);

    let local = target.local()?;
    let mut stop = Vec::new();
    let mut term = Vec::new();
    let mut kill = Vec::new();
    for (signal, times) in [(Signal::SIGTERM, &mut term), (Signal::SIGKILL, &mut kill)] {
        for _ in 0..RESTARTS {
            let r = local.restart_jm(signal).await.with_context(|| {
                format!(
                    "restart after {signal}; logs in {}",
                    local.statedir().display()
                )
            })?;
            times.push(r.serving.as_secs_f64() * 1000.0);
            if signal == Signal::SIGTERM {
                stop.push(r.stop.as_secs_f64() * 1000.0);
            }
        }
    }
    fig.elapsed_s = Some(started.elapsed().as_secs_f64());
    fig.restart_ms = median(&term);
    fig.restart_sigkill_ms = median(&kill);
    fig.stop_ms = median(&stop);
    Ok(())
}
