//! The `latency` workload: N `fluxgate run true`, one after the other, each
//! a whole process (the `fluxgate` beside this executable, else the one on
//! PATH) as a user would type it, so each
//! time includes process start, connecting, submitting, following the job
//! to `clean` and exiting. p50/p99 are of those wall times;
//! jobs_per_sec = N / their total.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Instant;

use anyhow::{Context, bail};

use fluxgate_cli::client;

use super::Run;
use super::figures::{Figures, percentile};
use super::target::Target;

/// The `fluxgate` command line beside this executable (as cargo builds
/// them), else `fluxgate` on PATH.
fn fluxgate_exe() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("fluxgate")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("fluxgate"))
}

/// Run `latency` once.
pub async fn run(run: &Run<'_>, target: &mut Target, fig: &mut Figures) -> anyhow::Result<()> {
    let exe = fluxgate_exe();
    let before = target.counters().await;
    let cpu_before = target.cpu();
    let mut times = Vec::with_capacity(usize::try_from(run.jobs).unwrap_or(0));
    let started = Instant::now();
    for _ in 0..run.jobs {
        let t0 = Instant::now();
        let out = tokio::process::Command::new(&exe)
            .args(["run", "--job-name", &run.name, "true"])
            .env(client::URI_ENV, target.uri())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            // An interrupted bench leaves no run behind.
            .kill_on_drop(true)
            .output()
            .await
            .with_context(|| format!("cannot run {}", exe.display()))?;
        times.push(t0.elapsed().as_secs_f64() * 1000.0);
        if !out.status.success() {
            bail!(
                "`fluxgate run true` failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    let total = started.elapsed().as_secs_f64();
    fig.set_cpu(cpu_before, target.cpu());
    fig.elapsed_s = Some(total);
    fig.jobs_per_sec = super::figures::rate(run.jobs, total);
    times.sort_by(f64::total_cmp);
    fig.p50_ms = percentile(&times, 50.0);
    fig.p99_ms = percentile(&times, 99.0);
    fig.failed = Some(0);
    fig.set_counters(before, target.counters().await);
    Ok(())
}
