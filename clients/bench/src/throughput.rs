//! The `sim` and `real` workloads: N jobs through the whole pipeline.
//!
//! The figures come from the job manager's own timestamps (`t_submit`,
//! `t_run` at the exec `start`, `t_inactive`), read in one listing at the
//! end, so how often the bench looks does not change them:
//! jobs_per_sec = N / (last t_inactive - first t_submit),
//! sched_per_sec = N / (last t_run - first t_run), p50/p99 of
//! t_run - t_submit. submit_per_sec is the client's: N / time from the
//! first SubmitMany sent until the last was answered.

use std::collections::HashMap;
use std::time::Instant;

use anyhow::Context;
use fluxgate_proto::v1 as pb;

use super::figures::{Figures, percentile, rate};
use super::target::Target;
use super::{Run, Workload, settle, submit};

/// Run `sim` or `real` once.
pub async fn run(run: &Run<'_>, target: &mut Target, fig: &mut Figures) -> anyhow::Result<()> {
    let jobspec = match run.args.workload {
        Workload::Real => submit::true_jobspec(&run.name)?,
        _ => submit::sim_jobspec(&run.name)?,
    };
    let mut inst = target.connect().await?;
    let before = target.counters().await;
    let cpu_before = target.cpu();
    let started = Instant::now();
    let sent = submit::submit(
        &inst,
        &jobspec,
        None,
        run.jobs,
        run.args.batch,
        run.args.inflight,
    )
    .await?;
    let last = *sent.ids.last().context("no job was submitted")?;
    settle::wait_ended(&mut inst, &run.name, last).await?;
    fig.elapsed_s = Some(started.elapsed().as_secs_f64());
    // Before the listing: reading every summary back is the bench's cost.
    fig.set_cpu(cpu_before, target.cpu());
    let jobs = settle::summaries(&mut inst, &run.name, sent.ids.len()).await?;
    fig.set_counters(before, target.counters().await);
    fig.submit_per_sec = rate(run.jobs, sent.elapsed.as_secs_f64());
    from_summaries(&jobs, fig);
    // The figures stand (the jobs went through the pipeline), but a run
    // whose jobs failed says why, so that it is not taken for a clean one.
    for line in failures(&jobs) {
        eprintln!("fluxgate-bench: {}: {line}", fig.title());
    }
    Ok(())
}

/// How many jobs ended how, for those that did not complete; the most
/// common first, at most five kinds.
pub fn failures(jobs: &[pb::JobSummary]) -> Vec<String> {
    let mut kinds: HashMap<(&str, &str, &str), u64> = HashMap::new();
    for j in jobs.iter().filter(|j| j.result != "COMPLETED") {
        *kinds
            .entry((&j.result, &j.exception_type, &j.exception_note))
            .or_default() += 1;
    }
    let mut kinds: Vec<_> = kinds.into_iter().collect();
    kinds.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    kinds
        .into_iter()
        .take(5)
        .map(|((result, ty, note), n)| match ty {
            "" => format!("{n} job(s) {result}"),
            _ => format!("{n} job(s) {result}: exception type={ty} {note}")
                .trim_end()
                .to_string(),
        })
        .collect()
}

/// The figures the job manager's timestamps give.
pub fn from_summaries(jobs: &[pb::JobSummary], fig: &mut Figures) {
    let n = jobs.len() as u64;
    let first_submit = jobs
        .iter()
        .map(|j| j.t_submit)
        .fold(f64::INFINITY, f64::min);
    let last_inactive = jobs.iter().map(|j| j.t_inactive).fold(0.0, f64::max);
    // t_run is 0 for a job that never started (it ended on an exception).
    let runs: Vec<&pb::JobSummary> = jobs.iter().filter(|j| j.t_run > 0.0).collect();
    let first_run = runs.iter().map(|j| j.t_run).fold(f64::INFINITY, f64::min);
    let last_run = runs.iter().map(|j| j.t_run).fold(0.0, f64::max);
    fig.jobs_per_sec = rate(n, last_inactive - first_submit);
    fig.sched_per_sec = rate(runs.len() as u64, last_run - first_run);
    let mut latency: Vec<f64> = runs
        .iter()
        .map(|j| (j.t_run - j.t_submit) * 1000.0)
        .collect();
    latency.sort_by(f64::total_cmp);
    fig.p50_ms = percentile(&latency, 50.0);
    fig.p99_ms = percentile(&latency, 99.0);
    fig.failed = Some(jobs.iter().filter(|j| j.result != "COMPLETED").count() as u64);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(t_submit: f64, t_run: f64, t_inactive: f64) -> pb::JobSummary {
        pb::JobSummary {
            t_submit,
            t_run,
            t_inactive,
            result: "COMPLETED".into(),
            ..Default::default()
        }
    }

    #[test]
    fn figures_come_from_the_timestamps() {
        let jobs = [job(10.0, 10.5, 11.0), job(10.0, 11.5, 12.0)];
        let mut fig = Figures::default();
        from_summaries(&jobs, &mut fig);
        assert_eq!(fig.jobs_per_sec, Some(1.0));
        assert_eq!(fig.sched_per_sec, Some(2.0));
        assert_eq!(fig.p50_ms, Some(500.0));
        assert_eq!(fig.p99_ms, Some(1500.0));
        assert_eq!(fig.failed, Some(0));
    }

    #[test]
    fn failures_are_grouped_by_how_they_ended() {
        let mut bad = job(1.0, 0.0, 2.0);
        bad.result = "FAILED".into();
        bad.exception_type = "exec".into();
        bad.exception_note = "lost".into();
        let jobs = [bad.clone(), job(1.0, 1.5, 2.0), bad];
        assert_eq!(
            failures(&jobs),
            ["2 job(s) FAILED: exception type=exec lost"]
        );
        assert!(failures(&[job(1.0, 1.5, 2.0)]).is_empty());
    }

    #[test]
    fn one_job_has_no_start_rate() {
        let mut fig = Figures::default();
        from_summaries(&[job(1.0, 1.5, 2.0)], &mut fig);
        assert_eq!(fig.sched_per_sec, None);
        assert_eq!(fig.jobs_per_sec, Some(1.0));
    }
}
