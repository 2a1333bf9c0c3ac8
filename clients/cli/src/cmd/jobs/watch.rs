//! `fluxgate watch`: follow the output of many jobs until all have ended,
//! as flux-watch(1), and exit with the largest of their exit codes. Jobs
//! are given by id, or chosen with `--active`, `--all`, `--filter` or
//! `--since`, at most `--count` of them.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;
use fluxgate_shared::job::StateMask;
use tokio::task::JoinSet;

use crate::client::{self, Instance};
use crate::cmd::jobs::attach::{self, Outcome};
use crate::cmd::jobs::submit::copies::progress_bar;

/// Jobs followed at once: each holds two streams open on the job manager.
const MAX_FOLLOWED: usize = 64;

/// Arguments of `fluxgate watch`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Watch all of your active jobs.
    #[arg(short = 'a', long, conflicts_with_all = ["all", "filter"])]
    active: bool,
    /// Watch all of your jobs, inactive ones too.
    #[arg(short = 'A', long, conflicts_with = "filter")]
    all: bool,
    /// Watch your jobs with these states or results (comma separated).
    #[arg(short = 'f', long, value_name = "STATE|RESULT", value_delimiter = ',')]
    filter: Vec<String>,
    /// Watch at most N jobs (0: no limit).
    #[arg(short = 'c', long, value_name = "N", default_value_t = 1000)]
    count: u32,
    /// Only jobs active since WHEN (seconds since the epoch or -FSD ago);
    /// implies --all unless --filter is given.
    #[arg(long, value_name = "WHEN", allow_hyphen_values = true)]
    since: Option<String>,
    /// Show a progress bar of jobs that have ended.
    #[arg(long)]
    progress: bool,
    /// Job ids.
    ids: Vec<String>,
}

/// Which of the caller's jobs to watch, when no ids are given.
#[derive(Debug, PartialEq)]
struct Selection {
    states: StateMask,
    results: Vec<String>,
    since: Option<f64>,
}

/// The jobs to select, or `None` when ids are given.
fn selection(args: &Args, now: f64) -> anyhow::Result<Option<Selection>> {
    let chosen = args.active || args.all || !args.filter.is_empty() || args.since.is_some();
    match (chosen, args.ids.is_empty()) {
        (true, false) => {
            bail!("job ids cannot be combined with --active, --all, --filter or --since")
        }
        (false, true) => bail!("give job ids or one of --active, --all, --filter, --since"),
        (false, false) => Ok(None),
        (true, true) => {
            let since = args
                .since
                .as_deref()
                .map(|w| crate::cmd::jobs::list::parse_since(w, now))
                .transpose()?;
            let (mut states, results) = crate::cmd::jobs::list::parse_filters(&args.filter)?;
            if args.active {
                states = StateMask::ACTIVE;
            } else if args.all || (since.is_some() && args.filter.is_empty()) {
                states = StateMask::ALL;
            }
            Ok(Some(Selection {
                states,
                results,
                since,
            }))
        }
    }
}

/// Run `fluxgate watch`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let now = client::now();
    let select = selection(&args, now)?;
    let given = client::parse_jobids(&args.ids)?;
    client::block_on(async {
        let mut inst = client::connect().await?;
        let mut ids = match select {
            None => given,
            Some(sel) => {
                let request = pb::ListRequest {
                    states: sel.states.bits(),
                    userid: Some(client::my_uid()),
                    results: sel.results,
                    since: sel.since,
                    max_entries: args.count,
                    ..Default::default()
                };
                crate::cmd::jobs::list_all(&mut inst, request)
                    .await?
                    .iter()
                    .map(|j| JobId::from(j.id))
                    .collect()
            }
        };
        // Oldest first, so output of earlier jobs tends to come first.
        ids.sort();
        let code = follow_all(&inst, ids, args.progress).await?;
        Ok(ExitCode::from(code.clamp(0, 255) as u8))
    })?
}

/// Follow every job, at most [`MAX_FOLLOWED`] at a time; the largest code.
async fn follow_all(inst: &Instance, ids: Vec<JobId>, progress: bool) -> anyhow::Result<i32> {
    let bar = progress_bar(progress, ids.len() as u64, "watching");
    let mut pending = ids.into_iter();
    let mut running: JoinSet<anyhow::Result<(JobId, Outcome)>> = JoinSet::new();
    let mut code = 0;
    loop {
        while running.len() < MAX_FOLLOWED {
            let Some(id) = pending.next() else { break };
            let mut inst = inst.clone();
            running.spawn(async move { Ok((id, follow(&mut inst, id).await?)) });
        }
        let Some(done) = running.join_next().await else {
            break;
        };
        let (id, outcome) = done.context("a job watcher failed")??;
        if let Some(msg) = &outcome.message {
            bar.suspend(|| eprintln!("{}: {msg}", client::f58(id)));
        }
        code = code.max(outcome.exit_code);
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(code)
}

/// Copy one job's output to ours until the job is clean; how it ended.
async fn follow(inst: &mut Instance, id: JobId) -> anyhow::Result<Outcome> {
    let mut out_inst = inst.clone();
    let output = tokio::spawn(async move {
        if let Ok(mut s) = attach::watch_output(&mut out_inst, id).await {
            while let Ok(Some(line)) = s.message().await {
                if let Ok(ev) = client::parse_event(&line.line) {
                    attach::show_output(&ev);
                }
            }
        }
    });
    let outcome = attach::outcome(inst, id).await?;
    // The output log is final once the job is clean; a job that never
    // started may have none, so do not wait for ever.
    let mut output = output;
    if tokio::time::timeout(Duration::from_secs(5), &mut output)
        .await
        .is_err()
    {
        output.abort();
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use fluxgate_shared::JobState;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn select(argv: &[&str]) -> anyhow::Result<Option<StateMask>> {
        Ok(selected(argv)?.map(|s| s.states))
    }

    fn selected(argv: &[&str]) -> anyhow::Result<Option<Selection>> {
        let cli = Cli::try_parse_from(std::iter::once("watch").chain(argv.iter().copied()))?;
        selection(&cli.args, 1000.0)
    }

    #[test]
    fn ids_or_one_selection() {
        assert_eq!(select(&["f1"]).unwrap(), None);
        assert_eq!(select(&["--active"]).unwrap(), Some(StateMask::ACTIVE));
        assert_eq!(select(&["-A"]).unwrap(), Some(StateMask::ALL));
        assert_eq!(
            select(&["-f", "running"]).unwrap(),
            Some(StateMask::RUNNING)
        );
        assert!(select(&[]).is_err());
        assert!(select(&["--all", "f1"]).is_err());
        assert!(select(&["--all", "--active"]).is_err());
    }

    #[test]
    fn results_and_since_select_as_flux_jobs() {
        let s = selected(&["-f", "failed,running"]).unwrap().unwrap();
        assert_eq!(s.results, ["F"]);
        assert!(s.states.contains(JobState::Run));
        assert!(s.states.contains(JobState::Inactive));
        let s = selected(&["--since=-100"]).unwrap().unwrap();
        assert_eq!((s.states, s.since), (StateMask::ALL, Some(900.0)));
        assert!(selected(&["--since=2000"]).is_err(), "in the future");
        assert!(selected(&["--since=-1m", "f1"]).is_err());
    }
}
