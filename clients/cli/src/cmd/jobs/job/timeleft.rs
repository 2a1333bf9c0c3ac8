//! `fluxgate job timeleft`: seconds a running job has left before its
//! expiration, as `flux job timeleft`. Without an id it names the job it
//! runs in (FLUXGATE_JOB_ID, else FLUX_JOB_ID, which the exec service sets
//! in every task's environment).

use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;
use fluxgate_shared::policy::format_fsd_py;
use fluxgate_shared::rset::ResourceSet;

use crate::client::{self, Instance};

/// Arguments of `fluxgate job timeleft`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the time as a Flux Standard Duration (e.g. 1.5m).
    #[arg(short = 'H', long)]
    human: bool,
    /// Job id (default: the job this runs in).
    id: Option<String>,
}

/// What is left: `None` when the job has no expiration.
fn remaining(expiration: Option<f64>, ended: bool, now: f64) -> Option<f64> {
    if ended {
        return Some(0.0);
    }
    expiration.map(|e| (e - now).max(0.0))
}

/// How flux prints it: whole seconds, or an FSD with -H; "infinity".
fn render(left: Option<f64>, human: bool) -> String {
    match (left, human) {
        (None, _) => "infinity".to_string(),
        (Some(s), true) => format_fsd_py(s),
        (Some(s), false) => format!("{}", s.floor() as u64),
    }
}

/// Run `fluxgate job timeleft`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let text = match &args.id {
        Some(t) => t.clone(),
        None => std::env::var("FLUXGATE_JOB_ID")
            .or_else(|_| std::env::var("FLUX_JOB_ID"))
            .map_err(|_| anyhow!("not running in a job: give a job id"))?,
    };
    let id = client::parse_jobid(&text)?;
    client::block_on(async {
        let mut inst = client::connect().await?;
        let eventlog = info(&mut inst, id, "eventlog").await?;
        let started = has_event(&eventlog, "alloc");
        if !started {
            bail!("job {text} has not started");
        }
        let ended = has_event(&eventlog, "finish") || has_event(&eventlog, "clean");
        let r = info(&mut inst, id, "R").await?;
        let r = ResourceSet::parse(&r).context("the instance sent an unreadable R")?;
        let now = jiff::Timestamp::now().as_millisecond() as f64 / 1000.0;
        println!(
            "{}",
            render(remaining(r.expiration(), ended, now), args.human)
        );
        Ok(ExitCode::SUCCESS)
    })?
}

/// Does the eventlog text hold an event named `name`?
fn has_event(eventlog: &str, name: &str) -> bool {
    eventlog
        .lines()
        .filter_map(|l| client::parse_event(l).ok())
        .any(|e| e.name == name)
}

/// One stored key of the job.
async fn info(inst: &mut Instance, id: JobId, key: &str) -> anyhow::Result<String> {
    let mut resp = inst
        .jobs
        .info(pb::InfoRequest {
            id: id.as_u64(),
            keys: vec![key.to_string()],
            offset: 0,
            max_bytes: 0,
        })
        .await
        .map_err(client::status_error)?
        .into_inner();
    resp.values
        .remove(key)
        .ok_or_else(|| anyhow!("job has no {key}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_left_as_flux_prints_it() {
        assert_eq!(render(remaining(Some(100.0), false, 40.5), false), "59");
        assert_eq!(render(remaining(Some(130.0), false, 40.0), true), "1.5m");
        assert_eq!(render(remaining(Some(10.0), false, 40.0), false), "0");
        assert_eq!(render(remaining(Some(100.0), true, 40.0), false), "0");
        assert_eq!(render(remaining(None, false, 40.0), false), "infinity");
        assert_eq!(render(remaining(None, true, 40.0), true), "0s");
    }
}
